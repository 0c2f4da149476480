//! What a step spent (trace format 1.2, ruling 18): the optional `usage`
//! object of any event.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::EventError;

/// An event's `usage`: the tokens and money the step it reports spent.
/// Every field is optional.
///
/// ```
/// use loopguard_core_types::{Event, Usage};
/// let event = Event::from_json(
///     r#"{"type":"turn","task":"T","agent":"coder","output":"done","success":true,
///         "usage":{"input_tokens":1200,"output_tokens":80,"model":"gpt-4o-mini"}}"#,
/// )?;
/// let usage = event.usage()?.expect("the line has usage");
/// assert_eq!((usage.input_tokens, usage.output_tokens), (Some(1200), Some(80)));
/// assert_eq!(usage.model.as_deref(), Some("gpt-4o-mini"));
///
/// let err = Event::from_json(r#"{"type":"completed","task":"T","usage":{"input_tokens":-3}}"#)
///     .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "field \"usage.input_tokens\" must be a whole number of tokens, at least 0; got -3"
/// );
/// # Ok::<(), loopguard_core_types::EventError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens the model read (the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Tokens the model wrote (the completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// What the step cost in US dollars, when the orchestrator knows it. It
    /// wins over a price configured for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The model that was called, matched against `[pricing.MODEL]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Usage {
    /// Reads a `usage` value: an object whose fields are each optional
    /// (`null` is absent; keys it does not know are ignored). A bad field
    /// is an error naming it: tokens must be whole numbers of at least 0,
    /// the cost a finite number of at least 0, the model a string.
    pub fn from_value(value: &Value) -> Result<Usage, EventError> {
        let Value::Object(fields) = value else {
            return Err(EventError::BadValue {
                field: "usage",
                problem: format!("must be an object, got {value}"),
            });
        };
        let field = |name: &str| fields.get(name).filter(|value| !value.is_null());
        Ok(Usage {
            input_tokens: field("input_tokens")
                .map(|value| tokens("usage.input_tokens", value))
                .transpose()?,
            output_tokens: field("output_tokens")
                .map(|value| tokens("usage.output_tokens", value))
                .transpose()?,
            cost_usd: field("cost_usd").map(cost).transpose()?,
            model: field("model").map(model).transpose()?,
        })
    }

    /// Whether no field is given.
    pub fn is_empty(&self) -> bool {
        self.input_tokens.is_none()
            && self.output_tokens.is_none()
            && self.cost_usd.is_none()
            && self.model.is_none()
    }
}

fn tokens(field: &'static str, value: &Value) -> Result<u64, EventError> {
    value.as_u64().ok_or_else(|| EventError::BadValue {
        field,
        problem: format!("must be a whole number of tokens, at least 0; got {value}"),
    })
}

fn cost(value: &Value) -> Result<f64, EventError> {
    value
        .as_f64()
        .filter(|cost| cost.is_finite() && *cost >= 0.0)
        .ok_or_else(|| EventError::BadValue {
            field: "usage.cost_usd",
            problem: format!("must be a number of US dollars, at least 0; got {value}"),
        })
}

fn model(value: &Value) -> Result<String, EventError> {
    match value {
        Value::String(model) => Ok(model.clone()),
        other => Err(EventError::BadValue {
            field: "usage.model",
            problem: format!("must be a string, got {other}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problem(value: Value) -> String {
        match Usage::from_value(&value) {
            Err(err) => err.to_string(),
            Ok(usage) => panic!("{value} read as {usage:?}"),
        }
    }

    #[test]
    fn every_field_is_optional_and_null_is_absent() {
        assert_eq!(Usage::from_value(&json!({})), Ok(Usage::default()));
        let usage = Usage::from_value(&json!({"input_tokens": null, "cost_usd": 0.25, "x": 1}));
        assert_eq!(
            usage,
            Ok(Usage {
                cost_usd: Some(0.25),
                ..Usage::default()
            })
        );
    }

    #[test]
    fn a_bad_value_names_its_field() {
        for (value, expected) in [
            (
                json!({"input_tokens": -1}),
                "\"usage.input_tokens\" must be a whole number of tokens, at least 0; got -1",
            ),
            (
                json!({"output_tokens": 2.5}),
                "\"usage.output_tokens\" must be a whole number of tokens, at least 0; got 2.5",
            ),
            (
                json!({"output_tokens": "12"}),
                "\"usage.output_tokens\" must be a whole number of tokens, at least 0; got \"12\"",
            ),
            (
                json!({"cost_usd": -0.5}),
                "\"usage.cost_usd\" must be a number of US dollars, at least 0; got -0.5",
            ),
            (
                json!({"cost_usd": "NaN"}),
                "\"usage.cost_usd\" must be a number of US dollars, at least 0; got \"NaN\"",
            ),
            (
                json!({"model": 4}),
                "\"usage.model\" must be a string, got 4",
            ),
            (json!([1, 2]), "\"usage\" must be an object, got [1,2]"),
        ] {
            assert_eq!(problem(value), format!("field {expected}"));
        }
    }
}
