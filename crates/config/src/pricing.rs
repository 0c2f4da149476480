//! `[pricing.MODEL]`: what a model's tokens cost, for events whose `usage`
//! gives tokens but no `cost_usd` (ruling 18). No prices are built in:
//! they change, and a stale price is worse than none.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// `[pricing]`: prices by model name. A `usage.model` is matched exactly,
/// else by the longest configured name it starts with (`"gpt-4o"` prices
/// `"gpt-4o-2024-08-06"`).
///
/// ```
/// use loopguard_config::Config;
/// let config = Config::from_toml_str(
///     "[pricing.gpt-4o]\ninput_per_mtok = 2.5\noutput_per_mtok = 10.0\n\
///      [pricing.gpt-4o-mini]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n",
/// )?;
/// let price = config.pricing.price_for("gpt-4o-mini-2024-07-18").expect("a prefix");
/// assert_eq!(price.input_per_mtok, 0.15);
/// assert_eq!(price.cost_usd(1_000_000, 500_000), 0.45);
/// assert!(config.pricing.price_for("claude-3-5-sonnet").is_none());
/// # Ok::<(), loopguard_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PricingConfig {
    /// The price of each configured model name (or name prefix).
    pub models: BTreeMap<String, Price>,
}

/// `[pricing.MODEL]`: one model's price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Dollars per million input (prompt) tokens.
    pub input_per_mtok: f64,
    /// Dollars per million output (completion) tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// What `input` and `output` tokens cost at this price, in dollars.
    pub fn cost_usd(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}

impl PricingConfig {
    /// The price of `model`: its own, else that of the longest configured
    /// name it starts with.
    pub fn price_for(&self, model: &str) -> Option<&Price> {
        if let Some(price) = self.models.get(model) {
            return Some(price);
        }
        self.models
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    }

    /// Checks every price: a named model, and finite prices of at least 0.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        for (model, price) in &self.models {
            if model.trim().is_empty() {
                return Err(invalid(
                    "pricing.\"\"",
                    "a table",
                    "a price names its model, e.g. [pricing.gpt-4o-mini]",
                ));
            }
            for (name, value) in [
                ("input_per_mtok", price.input_per_mtok),
                ("output_per_mtok", price.output_per_mtok),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(invalid(
                        &format!("pricing.{}.{name}", quoted_key(model)),
                        value,
                        "must be a number of US dollars per million tokens, at least 0",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A model name as a TOML key: bare when it can be, else quoted.
fn quoted_key(model: &str) -> String {
    let bare = model
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        model.to_owned()
    } else {
        format!("{model:?}")
    }
}
