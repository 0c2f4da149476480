//! **period**: the same period placed differently relative to now ("this
//! year's" / "next year's", "the coming quarter" / "the current
//! quarter").
//!
//! Why: the work for another year, quarter or sprint is other work, and
//! the place words ("this", "next", "current") are stop words or too
//! small a difference for the embedding model. The texts must otherwise
//! share their words as a words swap asks
//! ([`WORDS_VETO_JACCARD`](super::WORDS_VETO_JACCARD)).
//!
//! Vetoed: "budgeting the GPU fleet for this year's training runs" /
//! "budgeting the GPU fleet for next year's training runs" (different
//! words, this year vs next year).
//!
//! Not vetoed by this rule: "List the outages of the past month." / "List
//! the outages of the last month.": "past" and "last" place a month alike
//! (the words veto weighs the two words apart).

use super::{Compared, Notes, Veto};

/// Words that place a period in time relative to now, each with the
/// one it means ("coming" week is the "next").
const PERIOD_PLACES: [(&str, &str); 8] = [
    ("this", "this"),
    ("current", "this"),
    ("next", "next"),
    ("come", "next"),
    ("upcom", "next"),
    ("last", "last"),
    ("previous", "last"),
    ("past", "last"),
];

/// Periods that [`PERIOD_PLACES`] place, as stems.
const PERIODS: [&str; 7] = [
    "day", "week", "month", "quarter", "year", "sprint", "releas",
];

/// The periods a text's keys place relative to now: a word of
/// [`PERIOD_PLACES`] right before one of [`PERIODS`] ("next year's").
/// Read once per text, when it is tokenized.
pub(crate) fn placed_periods(keys: &[String]) -> Vec<(&'static str, String)> {
    keys.windows(2)
        .filter_map(|pair| {
            let (_, place) = PERIOD_PLACES.iter().find(|(word, _)| *word == pair[0])?;
            PERIODS
                .contains(&pair[1].as_str())
                .then(|| (*place, pair[1].clone()))
        })
        .collect()
}

/// The first period the first text places that the second places only
/// elsewhere, and the first only elsewhere than the second.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    if compared.too_few_shared_words() {
        return None;
    }
    let (placed_a, placed_b) = (&compared.a.periods, &compared.b.periods);
    placed_a.iter().find_map(|(place_a, period)| {
        let differs = |placed: &[(&str, String)], place: &str| {
            placed.iter().any(|(p, q)| q == period && *p != place)
                && !placed.iter().any(|(p, q)| q == period && *p == place)
        };
        let (place_b, _) = placed_b.iter().find(|(_, q)| q == period)?;
        (differs(placed_b, place_a) && differs(placed_a, place_b)).then(|| Veto::Words {
            a: vec![format!("{place_a} {period}")],
            b: vec![format!("{place_b} {period}")],
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::tokenize;

    #[test]
    fn past_and_last_place_a_period_alike() {
        let periods = |text: &str| -> Vec<(&str, String)> { placed_periods(&tokenize(text).keys) };
        assert_eq!(
            periods("List the outages of the past month."),
            periods("List the outages of the last month.")
        );
        assert_eq!(
            periods("Set the hiring targets for the coming quarter."),
            [("next", "quarter".to_owned())]
        );
    }
}
