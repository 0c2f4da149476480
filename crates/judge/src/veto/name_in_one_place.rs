//! **name_in_one_place**: a name on each side that the other lacks,
//! standing in the same place: beside the same content word ("the Bristol
//! office" / "the Glasgow office", "Umbrella's security team" / "Hooli's
//! security folks").
//!
//! Why: two names where one would do are the same step for another
//! office, customer or vendor, however else the texts are worded. Only
//! names surely so count (capitalized inside a sentence, or an
//! identifier), not a sentence's first word, and names in different
//! places may well be one request's.
//!
//! Vetoed: "Replace the badge readers at the front desk of the Bristol
//! office." / "Over in the Glasgow office, the front desk badge readers
//! need replacing as well." (different things named, bristol vs glasgow).
//!
//! Not vetoed: "Order chairs for the Bristol office meeting rooms." /
//! "Dana asked for new chairs for the office meeting rooms.": "Dana"
//! stands where no office name does.

use super::{Compared, Notes, Veto};
use crate::normalize::{is_stop_stem, is_stop_word};
use crate::text::Tokens;

/// The content words right before and after a word, where there are.
type Neighbours<'t> = (Option<&'t String>, Option<&'t String>);

/// The first name of the first text with a name of the second beside the
/// same word, before or after.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    let (a, b) = (compared.a, compared.b);
    let names_b = names_and_neighbours(b, a);
    names_and_neighbours(a, b)
        .into_iter()
        .find_map(|(name_a, neighbours_a)| {
            names_b.iter().find_map(|(name_b, neighbours_b)| {
                let beside = |x: &Option<&String>, y: &Option<&String>| x.is_some() && x == y;
                (beside(&neighbours_a.0, &neighbours_b.0)
                    || beside(&neighbours_a.1, &neighbours_b.1))
                .then(|| Veto::Named {
                    a: shown(a, name_a),
                    b: shown(b, name_b),
                })
            })
        })
}

/// A name's key as the text writes it (its stem's word, lowercase), or
/// the key itself for an identifier.
fn shown(tokens: &Tokens, key: &str) -> String {
    tokens
        .as_written(&[key.to_owned()])
        .pop()
        .unwrap_or_else(|| key.to_owned())
}

/// The names `tokens` surely writes that `other` lacks, each with the
/// content words right before and after it (`None` where a stop word or
/// nothing stands).
fn names_and_neighbours<'t>(
    tokens: &'t Tokens,
    other: &Tokens,
) -> Vec<(&'t String, Neighbours<'t>)> {
    let content = |key: &&String| {
        !is_stop_word(key) && !is_stop_stem(key) && key.chars().any(char::is_alphabetic)
    };
    tokens
        .parties
        .iter()
        .filter(|(_, key, surely)| *surely && !other.keys.contains(key))
        .map(|(at, key, _)| {
            let before = at.checked_sub(1).and_then(|place| tokens.keys.get(place));
            let after = tokens.keys.get(at + 1);
            (key, (before.filter(content), after.filter(content)))
        })
        .collect()
}
