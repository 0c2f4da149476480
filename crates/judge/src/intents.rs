//! What a request asks for (review, fix, test, deploy, ...), read from
//! its stems by `data/intents.txt`: two requests that both ask for
//! something recognizable and share no intent ask for different work.

use crate::words::INTENTS;

/// The intents of some stems, as a bit set over `data/intents.txt` (an
/// intent's place in the file is its bit).
pub(crate) fn intents_of(stems: &[String]) -> u32 {
    let mut bits = 0;
    for (bit, (_, intent_stems)) in INTENTS.iter().enumerate() {
        if stems
            .iter()
            .any(|word| intent_stems.contains(&word.as_str()))
        {
            bits |= 1 << bit;
        }
    }
    bits
}

/// Whether two texts' intents (bit sets of [`intents_of`]) mismatch: both
/// ask for something recognizable, and they share no intent.
pub(crate) fn mismatch(a: u32, b: u32) -> bool {
    a != 0 && b != 0 && a & b == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stems(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_owned()).collect()
    }

    #[test]
    fn synonyms_of_one_intent_share_it_and_no_intent_mismatches_nothing() {
        let review = intents_of(&stems(&["review", "queri"]));
        let audit = intents_of(&stems(&["audit", "queri"]));
        let speed = intents_of(&stems(&["speed", "up", "queri"]));
        let none = intents_of(&stems(&["queri"]));
        assert!(!mismatch(review, audit));
        assert!(mismatch(review, speed));
        assert!(!mismatch(none, speed));
        // Drafting is writing.
        assert!(!mismatch(
            intents_of(&stems(&["write"])),
            intents_of(&stems(&["draft"]))
        ));
    }
}
