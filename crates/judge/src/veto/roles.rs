//! **roles**: the same words, with two parties trading places across a
//! word that relates them ("Dana should mentor Omar" / "Omar should
//! mentor Dana", "make cache-3 the leader and retire cache-1" / the other
//! way round).
//!
//! Why: who does what to whom is the work, and the two texts have the
//! very same words. Parties joined only by "and", "or", "vs" or a comma
//! ("compare X and Y") may trade places; only texts with no differing
//! word are asked.
//!
//! Vetoed: "Dana should mentor Omar on the release process." / "Omar
//! should mentor Dana on the release process." (swapped roles, dana and
//! omar).
//!
//! Not vetoed: "Compare Qdrant and Milvus for the embedding store." /
//! "Compare Milvus and Qdrant for the embedding store.": listed, not
//! related.

use super::{Compared, Notes, Veto};
use crate::normalize::is_stop_word;
use crate::text::Tokens;

/// The first two parties, each written once on each side, that stand in
/// the other order on the second side with a relating word between them.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    if !compared.same_words() {
        return None;
    }
    let (a, b) = (compared.a, compared.b);
    let surely = |key: &str| {
        a.parties
            .iter()
            .chain(&b.parties)
            .any(|(_, k, sure)| k == key && *sure)
    };
    let parties: Vec<&str> = a
        .parties
        .iter()
        .map(|(_, key, _)| key.as_str())
        .filter(|key| surely(key))
        .collect();
    for (i, x) in parties.iter().enumerate() {
        for y in &parties[i + 1..] {
            if x != y && traded(a, b, (*x, *y)) {
                return Some(Veto::Roles {
                    a: (*x).to_owned(),
                    b: (*y).to_owned(),
                });
            }
        }
    }
    None
}

/// Whether parties `x` and `y`, each written once in each text, stand in
/// the other order in `b`, with a word that relates them between them in
/// `a`.
fn traded(a: &Tokens, b: &Tokens, (x, y): (&str, &str)) -> bool {
    let (Some(ax), Some(ay), Some(bx), Some(by)) = (once(a, x), once(a, y), once(b, x), once(b, y))
    else {
        return false;
    };
    if (ax < ay) == (bx < by) {
        return false;
    }
    let (from, to) = (ax.min(ay), ax.max(ay));
    a.keys[from + 1..to]
        .iter()
        .any(|key| !is_stop_word(key) && !matches!(key.as_str(), "and" | "or" | "vs" | "versus"))
}

/// Where `key` stands among `tokens`' parties, when it stands there once.
fn once(tokens: &Tokens, key: &str) -> Option<usize> {
    let mut at = tokens
        .parties
        .iter()
        .filter(|(_, k, _)| k == key)
        .map(|(at, _, _)| *at);
    match (at.next(), at.next()) {
        (Some(at), None) => Some(at),
        _ => None,
    }
}
