//! **kind**: each side names a thing of one kind that the other side
//! does not name (`data/names-of-a-kind.txt`: "Android" / "iOS", "Gmail"
//! / "Outlook", "July" / "August"), however else the two are worded.
//!
//! Why: the same step for another platform, vendor, store, language or
//! month is other work, and a reworded request for it reads close to the
//! first. A side that names both is no such contrast (it moves from one
//! to the other), and a month after "before", "by" or "until" is a
//! deadline, which is written in more ways than one.
//!
//! Vetoed: "Fix the blank screen after login in the Android app." / "The
//! iOS app shows a blank screen after login as well; look into it."
//! (different platforms, Android vs iOS).
//!
//! Not vetoed: "Port the rate limiter to Redis." / "Move the rate limiter
//! off Memcached and onto Redis.": the second names both stores.

use super::{Compared, Notes, Veto};
use crate::text::{IdentifierClass, Tokens};
use crate::words::NAMES_OF_A_KIND;

/// The words before a month that make it a deadline.
const DEADLINE_MARKERS: [&str; 4] = ["before", "by", "until", "till"];

/// The kind and name of a lowercase form of `data/names-of-a-kind.txt`.
pub(crate) fn kind_of(form: &str) -> Option<(&'static str, &'static str)> {
    NAMES_OF_A_KIND.get(form).copied()
}

/// The names of `data/names-of-a-kind.txt` a text writes: its content
/// words as written and its acronyms and references ("AWS", "neo4j"), each
/// once, deadlines aside. Read once per text, when it is tokenized.
pub(crate) fn named_kinds(tokens: &Tokens) -> Vec<(&'static str, &'static str)> {
    let forms = tokens.written.iter().chain(
        tokens
            .identifiers
            .iter()
            .filter(|(class, _)| {
                matches!(class, IdentifierClass::Acronym | IdentifierClass::Reference)
            })
            .map(|(_, key)| key),
    );
    let mut kinds: Vec<(&'static str, &'static str)> = Vec::new();
    for found in forms.filter_map(|form| kind_of(form)) {
        if !kinds.contains(&found) {
            kinds.push(found);
        }
    }
    // A month after "before", "by" or "until" is a deadline, and one
    // deadline is written in more ways than one ("before October" / "by
    // the end of September"): no thing of its kind.
    let deadline = |month: &str| {
        tokens.raw.windows(2).any(|pair| {
            DEADLINE_MARKERS.contains(&pair[0].as_str())
                && kind_of(&pair[1]).is_some_and(|(_, name)| name == month)
        })
    };
    kinds.retain(|(kind, name)| *kind != "months" || !deadline(name));
    kinds
}

/// The first thing the first text names that the second lacks, with a
/// thing of its kind the second names and the first lacks.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    let (a, b) = (compared.a, compared.b);
    let lacks = |tokens: &Tokens, name: &str| !tokens.kinds.iter().any(|(_, n)| *n == name);
    a.kinds
        .iter()
        .filter(|(_, name)| lacks(b, name))
        .find_map(|(kind, name_a)| {
            let (_, name_b) = b
                .kinds
                .iter()
                .find(|(k, name)| k == kind && lacks(a, name))?;
            Some(Veto::Kind {
                kind,
                a: name_a,
                b: name_b,
            })
        })
}
