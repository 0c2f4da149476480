//! **named_things**: each side names something the other lacks, of
//! different classes of identifier ("PR #77" against
//! "sha256(session_id)"), numbers aside.
//!
//! Why: two texts that each name a thing of their own are about different
//! things, even when no class has one on both sides for the identifiers
//! veto to compare. Numbers are left out: "one hour" against "the hour in
//! UTC" names no thing on its first side.
//!
//! Vetoed: "PR #77 merged: the token is the session id" / "The token is
//! now sha256(session_id)" (different things named, pr vs
//! sha256(session_id)).
//!
//! Not vetoed: "Fix the signup crash" / "Fix the signup crash in
//! billing_api": a name on one side only.

use super::{Compared, Notes, Veto};

/// The first unmatched identifier of each side that is not a number,
/// when both have one.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    let named = |extra: &[String]| {
        extra
            .iter()
            .find(|key| !key.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .cloned()
    };
    match (named(compared.extra_a), named(compared.extra_b)) {
        (Some(a), Some(b)) => Some(Veto::Named { a, b }),
        _ => None,
    }
}
