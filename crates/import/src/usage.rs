//! What the importers read of a step's spend: the `usage` of an event
//! (trace format 1.2), summed when several model calls fall on one event.

use loopguard_core_types::Usage;
use serde_json::Value;

/// A count of tokens as a log writes it: a whole number of at least 0, as
/// a number or as text (OTLP/JSON writes 64-bit integers as strings);
/// anything else is no count.
pub(crate) fn tokens(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64().or_else(|| {
            number
                .as_f64()
                .filter(|float| float.fract() == 0.0 && *float >= 0.0 && *float < 2f64.powi(53))
                .map(|float| float as u64)
        }),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// A cost in US dollars: a finite number of at least 0.
pub(crate) fn dollars(value: &Value) -> Option<f64> {
    let cost = match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }?;
    (cost.is_finite() && cost >= 0.0).then_some(cost)
}

/// The usage of two calls on one event: tokens and costs summed (a field
/// either gives is given), the model the one of the call with more tokens
/// (the first's on a tie, or the only one named).
pub(crate) fn sum(first: &Usage, second: &Usage) -> Usage {
    fn add<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        }
    }
    let weight = |usage: &Usage| {
        usage
            .input_tokens
            .unwrap_or(0)
            .saturating_add(usage.output_tokens.unwrap_or(0))
    };
    let model = match (&first.model, &second.model) {
        (Some(_), Some(model)) if weight(second) > weight(first) => Some(model.clone()),
        (a, b) => a.clone().or_else(|| b.clone()),
    };
    Usage {
        input_tokens: add(first.input_tokens, second.input_tokens),
        output_tokens: add(first.output_tokens, second.output_tokens),
        cost_usd: add(first.cost_usd, second.cost_usd).map(nano_round),
        model,
    }
}

/// Adds `usage` to the event `event` describes: summed with the `usage` it
/// already has. Empty usage changes nothing.
pub(crate) fn add_to(event: &mut Value, usage: &Usage) {
    if usage.is_empty() {
        return;
    }
    let Some(fields) = event.as_object_mut() else {
        return;
    };
    let before = fields
        .get("usage")
        .and_then(|value| Usage::from_value(value).ok())
        .unwrap_or_default();
    let total = sum(&before, usage);
    if let Ok(value) = serde_json::to_value(&total) {
        fields.insert("usage".to_owned(), value);
    }
}

/// A running total a log gives at each step (tokens and cost so far),
/// turned into what each step spent.
#[derive(Debug, Default)]
pub(crate) struct Accumulation {
    /// The last total seen.
    last: Option<Usage>,
    /// What was spent since the last event that took it.
    pending: Option<Usage>,
}

impl Accumulation {
    /// Reads the step's total `now`: what it adds to the last is spent,
    /// never less than nothing; a total lower than the last in any count
    /// (a reset) starts a new accumulation, all of it spent.
    pub(crate) fn observe(&mut self, now: Usage) {
        let spent = match &self.last {
            Some(last) if !is_reset(last, &now) => Usage {
                input_tokens: minus(now.input_tokens, last.input_tokens),
                output_tokens: minus(now.output_tokens, last.output_tokens),
                cost_usd: match (now.cost_usd, last.cost_usd) {
                    (Some(now), Some(last)) => Some(nano_round(now - last)),
                    (now, _) => now,
                },
                model: now.model.clone(),
            },
            _ => now.clone(),
        };
        self.last = Some(now);
        if spends(&spent) {
            self.pending = Some(match self.pending.take() {
                Some(pending) => sum(&pending, &spent),
                None => spent,
            });
        }
    }

    /// What was spent since the last take, for the event that carries it.
    pub(crate) fn take(&mut self) -> Option<Usage> {
        self.pending.take()
    }
}

/// Whether `now` is lower than `last` in a count or the cost.
fn is_reset(last: &Usage, now: &Usage) -> bool {
    let lower =
        |now: Option<u64>, last: Option<u64>| matches!((now, last), (Some(n), Some(l)) if n < l);
    lower(now.input_tokens, last.input_tokens)
        || lower(now.output_tokens, last.output_tokens)
        || matches!((now.cost_usd, last.cost_usd), (Some(n), Some(l)) if n < l)
}

fn minus(now: Option<u64>, last: Option<u64>) -> Option<u64> {
    now.map(|now| now.saturating_sub(last.unwrap_or(0)))
}

/// A difference of two costs, to the nano-dollar the engine sums in (no
/// floating-point dust such as `0.019999999999999997`).
fn nano_round(cost: f64) -> f64 {
    ((cost * 1e9).round() / 1e9).max(0.0)
}

/// Whether a step's usage spent anything (a token or a cost above 0).
fn spends(usage: &Usage) -> bool {
    usage.input_tokens.unwrap_or(0) > 0
        || usage.output_tokens.unwrap_or(0) > 0
        || usage.cost_usd.unwrap_or(0.0) > 0.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_are_whole_numbers_as_numbers_or_text() {
        assert_eq!(tokens(&json!(12)), Some(12));
        assert_eq!(tokens(&json!("812")), Some(812));
        assert_eq!(tokens(&json!(3.0)), Some(3));
        for bad in [json!(-1), json!(2.5), json!("x"), json!(null), json!([1])] {
            assert_eq!(tokens(&bad), None, "{bad}");
        }
        assert_eq!(dollars(&json!(0.25)), Some(0.25));
        assert_eq!(dollars(&json!(-0.1)), None);
    }

    fn total(input: u64, output: u64, cost: f64) -> Usage {
        Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cost_usd: Some(cost),
            model: Some("m".to_owned()),
        }
    }

    #[test]
    fn an_accumulation_spends_its_differences_and_restarts_on_a_reset() {
        let mut acc = Accumulation::default();
        acc.observe(total(100, 10, 0.01));
        assert_eq!(acc.take(), Some(total(100, 10, 0.01)));
        acc.observe(total(100, 10, 0.01));
        assert_eq!(acc.take(), None, "nothing spent since");
        acc.observe(total(250, 30, 0.03));
        acc.observe(total(300, 35, 0.04));
        assert_eq!(acc.take(), Some(total(200, 25, 0.03)), "kept until taken");
        acc.observe(total(40, 4, 0.001));
        assert_eq!(acc.take(), Some(total(40, 4, 0.001)), "a reset");
    }

    #[test]
    fn two_calls_sum_and_the_bigger_names_the_model() {
        let small = Usage {
            input_tokens: Some(10),
            model: Some("mini".to_owned()),
            ..Usage::default()
        };
        let big = Usage {
            input_tokens: Some(100),
            output_tokens: Some(5),
            cost_usd: Some(0.5),
            model: Some("large".to_owned()),
        };
        let total = sum(&small, &big);
        assert_eq!(total.input_tokens, Some(110));
        assert_eq!(total.output_tokens, Some(5));
        assert_eq!(total.cost_usd, Some(0.5));
        assert_eq!(total.model.as_deref(), Some("large"));
        let mut event = json!({"type": "completed", "task": "T"});
        add_to(&mut event, &small);
        add_to(&mut event, &small);
        assert_eq!(event["usage"], json!({"input_tokens": 20, "model": "mini"}));
        add_to(&mut event, &Usage::default());
        assert_eq!(event["usage"]["input_tokens"], json!(20));
    }
}
