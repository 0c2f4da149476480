//! **words**: one or two content words swapped for one or two others, in
//! texts that otherwise share much the same words in the same order
//! ("stale" / "blocked", "staging" / "production", "unit" / "e2e").
//!
//! Why: a text edited in one place to change its object or qualifier is
//! other work, and such an edit barely moves the embedding. A word may
//! stand against an identifier of any class ("unit" tests, "e2e" tests).
//! Three things lift the veto: the swapped words ask for the same thing
//! (one intent: "review" / "audit"); WordNet calls them synonyms ("clean
//! up" / "tidy up"), which can lift the veto but never make one; and the
//! shared words stand in another order (a text written anew, whose
//! differing words are weighed instead).
//!
//! Vetoed: "Count the stale P2 tickets" / "Count the blocked P2 tickets"
//! (different words, stale vs block).
//!
//! Not vetoed: "Clean up the changelog of the api crate." / "Tidy up the
//! api crate's changelog.": "clean up" and "tidy up" are synonyms.

use std::collections::{BTreeMap, VecDeque};

use super::{Compared, Notes, Veto};
use crate::compare::multiset_difference;
use crate::intents::intents_of;
use crate::normalize::is_stop_word;
use crate::related::{Reading, synonym_swaps};
use crate::text::Tokens;

/// A swap of the differing words and unmatched identifiers, weighed again
/// without the WordNet synonyms among them, when the shared words stand
/// in the same order. Notes the synonyms when the first swap is one.
pub(super) fn check(compared: &Compared<'_>, notes: &mut Notes) -> Option<Veto> {
    let Compared {
        a,
        b,
        only_a,
        only_b,
        extra_a,
        extra_b,
        ..
    } = *compared;
    let shares_words = !compared.too_few_shared_words();
    let joined = |words: &[String], extra: &[String]| -> Vec<String> {
        words.iter().chain(extra).cloned().collect()
    };
    swap(
        &joined(only_a, extra_a),
        &joined(only_b, extra_b),
        shares_words,
    )?;
    // Cancelling synonyms out of a longer rewording would leave a short
    // swap behind: the synonyms are taken out of the differing words only
    // after those were found a swap.
    let (kept_a, kept_b, synonyms) = without_synonyms(compared.wordnet, (a, b), only_a, only_b);
    notes.synonyms = synonyms;
    swap(
        &joined(&kept_a, extra_a),
        &joined(&kept_b, extra_b),
        shares_words,
    )
    .filter(|_| shared_words_in_order(a, b))
}

/// One or two words swapped for one or two others in much the same words
/// (`shares_words`: as many as
/// [`WORDS_VETO_JACCARD`](super::WORDS_VETO_JACCARD) asks, or a weights
/// file's share), unless the swapped words ask for the same thing (both in
/// one intent: "review" and "audit").
fn swap(only_a: &[String], only_b: &[String], shares_words: bool) -> Option<Veto> {
    let swapped = (1..=2).contains(&only_a.len()) && (1..=2).contains(&only_b.len());
    let synonyms = intents_of(only_a) & intents_of(only_b) != 0;
    (swapped && shares_words && !synonyms).then(|| Veto::Words {
        a: only_a.to_vec(),
        b: only_b.to_vec(),
    })
}

/// The differing words (stems) of each side, less those with a WordNet
/// synonym among the other side's ([`synonym_swaps`]: "clean up" / "tidy
/// up", "twice" / "double"); and the synonym pairs, as written.
fn without_synonyms(
    (reading_a, reading_b): (&Reading, &Reading),
    (ta, tb): (&Tokens, &Tokens),
    only_a: &[String],
    only_b: &[String],
) -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
    let written = |tokens: &Tokens, stems: &[String]| -> Vec<String> {
        stems
            .iter()
            .map(|stem| tokens.written_as(stem).unwrap_or(stem).clone())
            .collect()
    };
    let (written_a, written_b) = (written(ta, only_a), written(tb, only_b));
    let pairs = synonym_swaps(reading_a, reading_b, &written_a, &written_b);
    let (mut matched_a, mut matched_b) = (vec![false; only_a.len()], vec![false; only_b.len()]);
    for &(a, b) in &pairs {
        matched_a[a] = true;
        matched_b[b] = true;
    }
    let keep = |stems: &[String], matched: &[bool]| -> Vec<String> {
        stems
            .iter()
            .zip(matched)
            .filter(|(_, matched)| !**matched)
            .map(|(stem, _)| stem.clone())
            .collect()
    };
    let synonyms = pairs
        .iter()
        .map(|&(a, b)| (written_a[a].clone(), written_b[b].clone()))
        .collect();
    (keep(only_a, &matched_a), keep(only_b, &matched_b), synonyms)
}

/// Whether the content words and identifiers two texts share stand in
/// the same order in both: a text edited in one place keeps them so
/// ("Ship release 4.7.1 to staging" / "... to production"), a text
/// written anew moves some ("making the build cache for the web app
/// faster" / "speeding up the web app's build cache").
fn shared_words_in_order(a: &Tokens, b: &Tokens) -> bool {
    let content = |tokens: &Tokens| -> Vec<String> {
        tokens
            .keys
            .iter()
            .filter(|key| !is_stop_word(key))
            .cloned()
            .collect()
    };
    moved_words(&content(a), &content(b)) == 0
}

/// How many of the words two sequences share stand out of order: the
/// shared words less the most of them that both have in one order (the
/// longest common subsequence of the shared words). The k-th time a word
/// is shared in `b` stands for the k-th in `a`, so that subsequence is
/// the longest increasing one of `a`'s places read in `b`'s order, found
/// by patience sorting in O(n log n).
fn moved_words(a: &[String], b: &[String]) -> usize {
    let (only_a, only_b) = multiset_difference(a, b);
    let (shared_a, shared_b) = (shared(a, &only_a), shared(b, &only_b));
    let mut places: BTreeMap<&str, VecDeque<usize>> = BTreeMap::new();
    for (at, word) in shared_a.iter().enumerate() {
        places.entry(word.as_str()).or_default().push_back(at);
    }
    let positions: Vec<usize> = shared_b
        .iter()
        .filter_map(|word| places.get_mut(word.as_str())?.pop_front())
        .collect();
    // The smallest last place of an increasing run of each length.
    let mut tails: Vec<usize> = Vec::new();
    for &place in &positions {
        let at = tails.partition_point(|&tail| tail < place);
        if at == tails.len() {
            tails.push(place);
        } else {
            tails[at] = place;
        }
    }
    positions.len() - tails.len()
}

/// `seq` without its own words `only` (their first occurrences).
fn shared(seq: &[String], only: &[String]) -> Vec<String> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for word in only {
        *left.entry(word.as_str()).or_default() += 1;
    }
    seq.iter()
        .filter(|word| match left.get_mut(word.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_words_counts_the_shared_words_out_of_order() {
        let words = |text: &str| -> Vec<String> { text.split(' ').map(str::to_owned).collect() };
        assert_eq!(moved_words(&words("a b c"), &words("a b c")), 0);
        assert_eq!(moved_words(&words("a b c x"), &words("a y b c")), 0);
        assert_eq!(moved_words(&words("a b c"), &words("c a b")), 1);
        assert_eq!(moved_words(&words("a b c d"), &words("d c b a")), 3);
        // The k-th "a" of one side stands for the k-th of the other.
        assert_eq!(moved_words(&words("a b a"), &words("a a b")), 1);
        assert_eq!(moved_words(&words("a"), &words("b")), 0);
    }
}
