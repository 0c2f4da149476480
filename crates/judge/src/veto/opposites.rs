//! **opposites**: a word on one side and its opposite on the other
//! (`data/opposites.txt`: "up" / "down", "enable" / "disable", "jump" /
//! "drop"), whatever else differs; or a stop word against its opposite
//! ("with" / "without", "give" / "remove").
//!
//! Why: opposite words ask for opposite work, and the embedding model
//! reads "turn it up" and "turn it down" as nearly one text. In texts
//! that share few words an "up" and a "down" are as likely parts of other
//! phrases, so the texts must share as many words as a words swap asks
//! ([`WORDS_VETO_JACCARD`](super::WORDS_VETO_JACCARD)); and a word the
//! other text has too is no contrast with its opposite.
//!
//! Vetoed: "Lock the guest wifi settings." / "Unlock the guest wifi
//! settings." (opposite words, lock vs unlock).
//!
//! Not vetoed: "The migration lock has been held since the crashed job;
//! release the lock." / "The migration lock is stuck after the job
//! crashed; force-unlock it.": "lock" is on both sides.

use super::{Compared, Notes, Veto};
use crate::text::Tokens;
use crate::words::OPPOSITES;

/// A stop word (or stop stem) and its opposite, which is a content word
/// (stem).
const STOP_WORD_OPPOSITES: [(&str, &str); 3] =
    [("with", "without"), ("give", "remov"), ("give", "revok")];

/// The first pair of opposites with one word on each side, or a stop
/// word against its opposite.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    if compared.too_few_shared_words() {
        return None;
    }
    opposite_words(compared)
        .or_else(|| against_stop_word(compared))
        .map(|(a, b)| Veto::Opposites { a, b })
}

/// Whether `stem` is among `words`.
fn has(words: &[String], stem: &str) -> bool {
    words.iter().any(|word| word == stem)
}

/// The first pair of [`OPPOSITES`] with one word only on each side, and
/// neither word on the other side at all.
fn opposite_words(compared: &Compared<'_>) -> Option<(String, String)> {
    let Compared {
        a,
        b,
        only_a,
        only_b,
        ..
    } = *compared;
    let contrast = |x: &str, y: &str| {
        has(only_a, x) && has(only_b, y) && !has(&b.words, x) && !has(&a.words, y)
    };
    OPPOSITES.iter().find_map(|(x, y)| {
        if contrast(x, y) {
            Some(((*x).to_owned(), (*y).to_owned()))
        } else if contrast(y, x) {
            Some(((*y).to_owned(), (*x).to_owned()))
        } else {
            None
        }
    })
}

/// A stop word against its opposite, which is none ("retrain with the
/// new features" / "without"; "giving the contractors access" /
/// "removing"): the stop word is among the other text's keys, not among
/// this one's.
fn against_stop_word(compared: &Compared<'_>) -> Option<(String, String)> {
    let Compared {
        a,
        b,
        only_a,
        only_b,
        ..
    } = *compared;
    STOP_WORD_OPPOSITES.iter().find_map(|(stop, opposite)| {
        let stands = |only: &[String], mine: &Tokens, other: &Tokens| {
            has(only, opposite)
                && other.keys.iter().any(|key| key == stop)
                && !mine.keys.iter().any(|key| key == stop)
                && !has(&other.words, opposite)
        };
        if stands(only_b, b, a) {
            Some(((*stop).to_owned(), (*opposite).to_owned()))
        } else if stands(only_a, a, b) {
            Some(((*opposite).to_owned(), (*stop).to_owned()))
        } else {
            None
        }
    })
}
