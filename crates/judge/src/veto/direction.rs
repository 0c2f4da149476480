//! **direction**: the same words, with a direction marker (`to`, `from`,
//! `into`, `onto`, `before`, `after`, `than`) pointing at different ones
//! ("from EUR to local currency" / "from local currency to EUR").
//!
//! Why: a conversion, a copy or a comparison the other way round is other
//! work, with exactly the same words, and the embeddings cannot tell the
//! two apart. Two numbers that are one length in other units ("after 90
//! mins" / "after 1.5 hours") point at the same.
//!
//! Vetoed: "Translate the prices from EUR to local currency" / "Translate
//! the prices from local currency to EUR" (opposite direction, to local
//! vs to eur).
//!
//! Not vetoed: "Expire the link after 90 mins." / "Expire the link after
//! 1.5 hours.": one length of time.

use super::{Compared, Notes, Veto};
use crate::normalize::same_or_shortened;
use crate::text::{Tokens, same_length, word_after};

/// Words that point from one thing to another.
pub(crate) const DIRECTION_MARKERS: [&str; 7] =
    ["to", "from", "into", "onto", "before", "after", "than"];

/// The first marker of [`DIRECTION_MARKERS`] whose first use points at
/// different words in the two texts, when neither has a differing word.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    if !compared.same_words() {
        return None;
    }
    let (a, b) = (compared.a, compared.b);
    DIRECTION_MARKERS.into_iter().find_map(|marker| {
        let target = |tokens: &Tokens| {
            let at = tokens.keys.iter().position(|key| key == marker)?;
            word_after(&tokens.keys, at).cloned()
        };
        let (ta, tb) = (target(a)?, target(b)?);
        let differ = !same_or_shortened(&ta, &tb) && !same_duration(a, b, (&ta, &tb));
        differ.then_some(Veto::Direction {
            marker,
            a: ta,
            b: tb,
        })
    })
}

/// Whether the numbers `ta` and `tb` are one length in other units ("after
/// 90 mins" / "after 1.5 hours").
fn same_duration(a: &Tokens, b: &Tokens, (ta, tb): (&str, &str)) -> bool {
    a.durations.iter().any(|da| {
        da.number.as_deref() == Some(ta)
            && b.durations
                .iter()
                .any(|db| db.number.as_deref() == Some(tb) && same_length(da.seconds, db.seconds))
    })
}
