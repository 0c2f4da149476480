//! **swapped_ends**: each text moves something from where the other
//! moves it to ("from Consul into the env file" / "from the env file
//! into Consul"), whatever else differs.
//!
//! Why: a move the other way undoes the first, and a reworded text that
//! moves the same things reads close to it. The ends are read once per
//! text: the first word after "from", and the first after a "to", "into"
//! or "onto" that follows it.
//!
//! Vetoed: "Shift the rate limits of the search page from Consul into the
//! env file and remove the client." / "Shift the search page's rate limits
//! from the env file into Consul, then clean out the old keys." (opposite
//! direction, from consul vs from environ).
//!
//! Not vetoed: "Port the cart cache from Memcached to Valkey." / "Get the
//! cart cache off Memcached: from Memcached into Valkey, thanks.": the
//! same move in other words.

use super::{Compared, Notes, Veto};
use crate::normalize::same_or_shortened;
use crate::text::word_after;

/// Where a text moves something: the first word after "from" and the
/// first after a "to", "into" or "onto" that follows it, when the two
/// differ. Read once per text, when it is tokenized.
pub(crate) fn ends(keys: &[String]) -> Option<(String, String)> {
    let from = keys.iter().position(|key| key == "from")?;
    let to = keys[from + 1..]
        .iter()
        .position(|key| matches!(key.as_str(), "to" | "into" | "onto"))?
        + from
        + 1;
    let (source, destination) = (word_after(keys, from)?, word_after(keys, to)?);
    (!same_or_shortened(source, destination)).then(|| (source.clone(), destination.clone()))
}

/// The two texts' moves, when each starts where the other ends.
pub(super) fn check(compared: &Compared<'_>, _: &mut Notes) -> Option<Veto> {
    let ((source_a, destination_a), (source_b, destination_b)) =
        (compared.a.ends.as_ref()?, compared.b.ends.as_ref()?);
    (same_or_shortened(source_a, destination_b) && same_or_shortened(destination_a, source_b)).then(
        || Veto::Direction {
            marker: "from",
            a: source_a.clone(),
            b: source_b.clone(),
        },
    )
}
