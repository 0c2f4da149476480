//! **identifiers**: one class of identifier has one on each side that the
//! other side lacks.
//!
//! Why: a ticket, a PR, a number, a path or a code name names the thing
//! the work is about; another one is another piece of work, however alike
//! the words around it are, and the embeddings of two such texts are
//! nearly the same. The identifiers compared are those the other side
//! does not write another way ("GC" / "garbage collection", "INC-5120" /
//! "incident 5120", "orders.created_at" / "created_at of orders").
//!
//! Vetoed: "Look over PR #233 for the cache leak." / "Look over PR #238
//! for the cache leak." (different numbers, 233 vs 238).
//!
//! Not vetoed: "Merge PR 655 please" / "Can you merge #655?": a
//! reference's digits are its number, written either way.

use super::{Compared, Notes, Veto};
use crate::compare::IDENTIFIER_CLASSES;
use crate::text::{IdentifierClass, Tokens};

/// The first identifier class, in the order of [`IDENTIFIER_CLASSES`],
/// with an unmatched identifier on both sides.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    let first_of = |tokens: &Tokens, unmatched: &[String], class: IdentifierClass| {
        unmatched
            .iter()
            .find(|key| {
                tokens
                    .identifiers
                    .iter()
                    .any(|(c, k)| *c == class && k == *key)
            })
            .cloned()
    };
    IDENTIFIER_CLASSES.into_iter().find_map(|class| {
        match (
            first_of(compared.a, compared.extra_a, class),
            first_of(compared.b, compared.extra_b, class),
        ) {
            (Some(a), Some(b)) => Some(Veto::Identifiers { class, a, b }),
            _ => None,
        }
    })
}
