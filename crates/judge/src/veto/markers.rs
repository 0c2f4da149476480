//! **markers**: each text has a direction marker the other lacks ("before"
//! / "after", "to" / "from"), in texts with no differing word.
//!
//! Why: the markers are stop words, so two texts that differ only in them
//! have the same content words; but warming a cache before a launch and
//! after it are different steps.
//!
//! Vetoed: "Warm the caches before the launch" / "Warm the caches after
//! the launch" (different words, before vs after).
//!
//! Not vetoed: "Can you look into the slow export job?" / "Could you
//! investigate the slow export job?": "into" stands on one side only, and
//! "look into" is "investigate".

use super::direction::DIRECTION_MARKERS;
use super::{Compared, Notes, Veto};
use crate::compare::multiset_difference;
use crate::text::Tokens;

/// The direction markers each text has that the other lacks, when both
/// have some and neither has a differing word.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    if !compared.same_words() {
        return None;
    }
    let markers = |tokens: &Tokens| -> Vec<String> {
        tokens
            .keys
            .iter()
            .filter(|key| DIRECTION_MARKERS.contains(&key.as_str()))
            .cloned()
            .collect()
    };
    let (only_a, only_b) = multiset_difference(&markers(compared.a), &markers(compared.b));
    (!only_a.is_empty() && !only_b.is_empty()).then_some(Veto::Words {
        a: only_a,
        b: only_b,
    })
}
