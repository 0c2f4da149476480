//! What two texts share and where they differ, word by word.
//!
//! Cosine similarity of sentence embeddings cannot see that one word
//! changes the work: two texts a word apart ("turn the volume up" / "turn
//! the volume down") score as high as a true rewording, or higher. The
//! comparison finds such contrasts without a model, in three stages:
//!
//! 1. **differences**: the content words (stop words out, stemmed) and the
//!    identifiers each side has that the other lacks, less those the other
//!    side writes another way ([`explained`]: "sign up" for "signup",
//!    "pull request" for "PR", "90 days" for "3 months");
//! 2. **vetoes**: the rules of [`VETOES`](crate::VETOES), in order, each a
//!    reason the two are different requests; the first that finds one
//!    decides;
//! 3. **readings**: the differing words as written (for the residual
//!    embedding), their WordNet cover, and whether the texts' intents,
//!    reports and additions differ.

mod explained;

use std::collections::{BTreeMap, BTreeSet};

use crate::cutoffs::Cutoffs;
use crate::intents;
use crate::related;
use crate::text::{IdentifierClass, ReadText, Tokens};
use crate::veto::{self, Compared, Notes, Veto};

/// What two texts share and where they differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Contrast {
    /// The first veto found, if any.
    pub veto: Option<Veto>,
    /// The first text's differing words, in order, as written (for the
    /// residual embedding).
    pub only_a: Vec<String>,
    /// The second text's.
    pub only_b: Vec<String>,
    /// Jaccard similarity of the two content-word sets (1 when both have
    /// none).
    pub word_jaccard: f32,
    /// Both texts ask for something recognizable and share no intent.
    pub intent_mismatch: bool,
    /// One text reads as a report of work done or found ("the import
    /// failed because the token expired; I renewed it") and the other as
    /// a request: an answer is not a repeat of its question. Two
    /// statements are never that ("I ran the export: 3,412 records" /
    /// "The export gives 3,412 records"): two replies, however each is
    /// phrased.
    pub report_vs_request: bool,
    /// The share of the differing words (of those WordNet knows) that
    /// have a related word on the other side ([`related::related_cover`]).
    pub related_cover: f32,
    /// The swapped words WordNet calls synonyms, one of each side, as
    /// written ("clean", "tidy"), when a words veto was weighed: they
    /// lifted it, or were left out of the swap it weighed.
    pub synonyms: Vec<(String, String)>,
    /// One text asks for the same work somewhere else and says so ("the
    /// Windows build hangs too", "the June run is due as well", "the
    /// Lisbon shop is also seeing timeouts") and the other does not
    /// ([`adds_to_earlier_work`](crate::adds_to_earlier_work)): the work
    /// of the other text, for another target.
    pub adds_on_one_side: bool,
}

/// Compares two texts: their vetoes, differing words and intents.
pub fn compare(a: &str, b: &str) -> Contrast {
    compare_read(&ReadText::new(a), &ReadText::new(b))
}

/// Compares two texts read already ([`ReadText`]): what [`compare`] does
/// after reading them.
pub fn compare_read(a: &ReadText, b: &ReadText) -> Contrast {
    compare_with_rule(a, b).0
}

/// [`compare_read`] with `cutoffs`: the share of their words two texts
/// need for a word swapped, an opposite word or a period placed otherwise
/// to veto ([`Cutoffs::words_veto_jaccard`]).
pub fn compare_read_with(a: &ReadText, b: &ReadText, cutoffs: &Cutoffs) -> Contrast {
    contrast_of(a, b, cutoffs.words_veto_jaccard).0
}

/// [`compare_read`], and the name of the rule of
/// [`VETOES`](crate::VETOES) that found the veto, when one did.
pub fn compare_with_rule(a: &ReadText, b: &ReadText) -> (Contrast, Option<&'static str>) {
    contrast_of(a, b, Cutoffs::SHIPPED.words_veto_jaccard)
}

/// What `a` and `b` differ in, with `words_veto_jaccard` as the share of
/// shared words the word vetoes need; and the name of the rule that found
/// the veto, when one did.
fn contrast_of(
    a: &ReadText,
    b: &ReadText,
    words_veto_jaccard: f32,
) -> (Contrast, Option<&'static str>) {
    let (ta, tb) = (&a.tokens, &b.tokens);
    let differences = explained::differences(ta, tb);
    let word_jaccard = jaccard(&ta.words, &tb.words);
    let compared = Compared {
        a: ta,
        b: tb,
        wordnet: (&a.wordnet, &b.wordnet),
        only_a: &differences.words.0,
        only_b: &differences.words.1,
        extra_a: &differences.identifiers.0,
        extra_b: &differences.identifiers.1,
        word_jaccard,
        words_veto_jaccard,
    };
    let mut notes = Notes::default();
    let found = veto::first(&compared, &mut notes);
    let (rule, veto) = match found {
        Some((rule, veto)) => (Some(rule), Some(veto)),
        None => (None, None),
    };
    let contrast = Contrast {
        veto,
        only_a: ta.as_written(&differences.words.0),
        only_b: tb.as_written(&differences.words.1),
        word_jaccard,
        intent_mismatch: intents::mismatch(a.intents, b.intents),
        report_vs_request: a.report != b.report && !(a.statement && b.statement),
        related_cover: related::cover(&a.wordnet, &b.wordnet),
        synonyms: notes.synonyms,
        adds_on_one_side: a.adds_on != b.adds_on,
    };
    (contrast, rule)
}

/// What each of the two multisets has that the other lacks, each in its
/// own order.
pub(crate) fn multiset_difference(a: &[String], b: &[String]) -> (Vec<String>, Vec<String>) {
    fn count(words: &[String]) -> BTreeMap<&str, i32> {
        let mut counts: BTreeMap<&str, i32> = BTreeMap::new();
        for word in words {
            *counts.entry(word.as_str()).or_default() += 1;
        }
        counts
    }
    let (ca, cb) = (count(a), count(b));
    let only = |words: &[String], mine: &BTreeMap<&str, i32>, theirs: &BTreeMap<&str, i32>| {
        let mut left: BTreeMap<&str, i32> = mine
            .iter()
            .map(|(word, n)| (*word, n - theirs.get(word).copied().unwrap_or(0)))
            .collect();
        let mut out = Vec::new();
        for word in words {
            if let Some(n) = left.get_mut(word.as_str())
                && *n > 0
            {
                *n -= 1;
                out.push(word.clone());
            }
        }
        out
    };
    (only(a, &ca, &cb), only(b, &cb, &ca))
}

/// The Jaccard similarity of two word sets: 1 when both are empty.
fn jaccard(a: &[String], b: &[String]) -> f32 {
    let (sa, sb): (BTreeSet<&str>, BTreeSet<&str>) = (
        a.iter().map(String::as_str).collect(),
        b.iter().map(String::as_str).collect(),
    );
    let union = sa.union(&sb).count();
    if union == 0 {
        return 1.0;
    }
    sa.intersection(&sb).count() as f32 / union as f32
}

/// The identifier classes, in the order a veto names them and
/// [`unmatched_identifiers`] lists them.
pub(crate) const IDENTIFIER_CLASSES: [IdentifierClass; 5] = [
    IdentifierClass::Reference,
    IdentifierClass::Number,
    IdentifierClass::Path,
    IdentifierClass::Code,
    IdentifierClass::Acronym,
];

/// The identifier keys each side has that the other lacks, class by
/// class.
fn unmatched_identifiers(a: &Tokens, b: &Tokens) -> (Vec<String>, Vec<String>) {
    let keys = |tokens: &Tokens, class: IdentifierClass| -> Vec<String> {
        tokens
            .identifiers
            .iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, key)| key.clone())
            .collect()
    };
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    for class in IDENTIFIER_CLASSES {
        let (a_only, b_only) = multiset_difference(&keys(a, class), &keys(b, class));
        only_a.extend(a_only);
        only_b.extend(b_only);
    }
    (only_a, only_b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{model_input, tokenize};

    #[test]
    fn only_what_the_model_reads_of_a_text_is_compared() {
        let filler = "look over the cache settings ".repeat(200);
        let (a, b) = (
            format!("{filler} then merge PR #207"),
            format!("{filler} then merge PR #209"),
        );
        assert!(model_input(&a).len() < a.len());
        // Past the model's input the texts differ; within it they do not.
        let contrast = compare(&a, &b);
        assert_eq!(contrast.veto, None);
        assert!(contrast.only_a.is_empty() && contrast.only_b.is_empty());
        assert_eq!(tokenize(&a).words, tokenize(&filler).words[..]);
        // Within it, the same texts differ as they should.
        let short = compare("then merge PR #207", "then merge PR #209").veto;
        assert_eq!(
            short.map(|veto| veto.to_string()).as_deref(),
            Some("different numbers (207 vs 209)")
        );
    }
}
