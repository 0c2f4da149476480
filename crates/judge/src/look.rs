//! The calibrated judge's first look at a pair: what the words and the
//! cosine settle before any other embedding, and what they leave to
//! embed (the residual texts and the templates).
//!
//! The same words (case, spacing and end punctuation aside) are the same
//! request; a veto, or a cosine too low for the differing words to tell
//! anything, settles the residual cosines as not computed; texts with no
//! differing word have residuals that are "the same". Any other pair
//! wants the cosines of its residual texts ([`WordLook::residual_texts`])
//! and, when the texts share less than half their words, of their
//! templates.

use crate::compare::{Contrast, compare_read_with};
use crate::cutoffs::Cutoffs;
use crate::features::Residuals;
use crate::templates::templates;
use crate::text::ReadText;

/// The shipped residual floor ([`Cutoffs::residual_floor`]): below this
/// cosine no residual is computed, the texts are about different things
/// whatever their differing words are.
pub const RESIDUAL_FLOOR: f32 = 0.3;

/// Whether `a` and `b` are the same words, case, spacing and end
/// punctuation aside.
pub fn same_text(a: &str, b: &str) -> bool {
    fn words(text: &str) -> impl Iterator<Item = String> + '_ {
        text.trim_end_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
            .split_whitespace()
            .map(str::to_lowercase)
    }
    words(a).eq(words(b))
}

/// What the words of a pair (and its cosine) settle.
#[derive(Debug, Clone, PartialEq)]
pub struct WordLook {
    /// What the two texts differ in.
    pub contrast: Contrast,
    /// The same words ([`same_text`]): the same request at any threshold
    /// below 1, whatever the weights.
    pub same_words: bool,
    /// The residual cosines when the words settled them (`None` inside:
    /// not computed); `None` when they are wanted.
    pub known_residuals: Option<Option<Residuals>>,
    /// The two texts' templates ([`templates`]) when the residuals are
    /// wanted and the texts share less than
    /// [`TEMPLATE_JACCARD_CEILING`](crate::TEMPLATE_JACCARD_CEILING)
    /// of their words (or the share of the cut-offs it was looked with).
    pub templates: Option<(String, String)>,
}

impl WordLook {
    /// The first look at `texts`, read as `read`, whose embeddings'
    /// cosine is `cosine`, with the shipped cut-offs
    /// ([`Cutoffs::SHIPPED`]).
    pub fn new(read: (&ReadText, &ReadText), texts: (&str, &str), cosine: f32) -> WordLook {
        WordLook::with_cutoffs(read, texts, cosine, &Cutoffs::SHIPPED)
    }

    /// The first look at `texts`, read as `read`, whose embeddings'
    /// cosine is `cosine`, with `cutoffs`: the share of shared words the
    /// word vetoes need, the residual floor and the templates' ceiling.
    pub fn with_cutoffs(
        (read_a, read_b): (&ReadText, &ReadText),
        (a, b): (&str, &str),
        cosine: f32,
        cutoffs: &Cutoffs,
    ) -> WordLook {
        let contrast = compare_read_with(read_a, read_b, cutoffs);
        if same_text(a, b) {
            return WordLook {
                contrast,
                same_words: true,
                known_residuals: Some(Some(Residuals::SAME)),
                templates: None,
            };
        }
        let known_residuals = if contrast.veto.is_some() || cosine < cutoffs.residual_floor {
            Some(None)
        } else if contrast.only_a.is_empty() && contrast.only_b.is_empty() {
            // Neither side adds a word of its own: the residual is "the
            // same".
            Some(Some(Residuals::SAME))
        } else {
            None
        };
        let templates = (known_residuals.is_none()
            && contrast.word_jaccard < cutoffs.template_jaccard_ceiling)
            .then(|| templates(read_a, read_b));
        WordLook {
            contrast,
            same_words: false,
            known_residuals,
            templates,
        }
    }

    /// The two sides' differing words, each joined in order. A side with
    /// none of its own is its whole text (of `texts`): the other side's
    /// extra words are then compared with everything it asked ("the
    /// review comments" against "merge PR #233").
    pub fn residual_texts(&self, texts: (&str, &str)) -> (String, String) {
        residual_texts(&self.contrast, texts)
    }
}

/// The two sides' differing words of `contrast`, each joined in order; a
/// side with none of its own is its whole text ([`WordLook::residual_texts`]).
pub fn residual_texts(contrast: &Contrast, (a, b): (&str, &str)) -> (String, String) {
    let side = |only: &[String], whole: &str| {
        if only.is_empty() {
            whole.to_owned()
        } else {
            only.join(" ")
        }
    };
    (side(&contrast.only_a, a), side(&contrast.only_b, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::TEMPLATE_JACCARD_CEILING;

    fn look(a: &str, b: &str, cosine: f32) -> WordLook {
        WordLook::new((&ReadText::new(a), &ReadText::new(b)), (a, b), cosine)
    }

    #[test]
    fn the_same_words_are_settled_at_once() {
        let same = look("Merge the  docs branch.", "merge the docs branch", 0.99);
        assert!(same.same_words);
        assert_eq!(same.known_residuals, Some(Some(Residuals::SAME)));
        assert!(!look("Merge the docs branch", "Merge the docs branch now", 0.97).same_words);
    }

    #[test]
    fn a_veto_or_a_low_cosine_settles_the_residuals_as_not_computed() {
        let vetoed = look("Merge PR #233", "Merge PR #238", 0.95);
        assert_eq!(vetoed.known_residuals, Some(None));
        let far = look("Rotate the keys", "Plan the offsite", RESIDUAL_FLOOR - 0.01);
        assert_eq!(far.known_residuals, Some(None));
    }

    #[test]
    fn templates_are_compared_only_for_texts_that_share_less_than_half_their_words() {
        let apart = look(
            "Draft the Q3 board deck.",
            "Present the Q3 board deck once the numbers are final.",
            0.83,
        );
        assert_eq!(apart.known_residuals, None);
        assert!(apart.contrast.word_jaccard < TEMPLATE_JACCARD_CEILING);
        assert!(apart.templates.is_some());
        let close = look(
            "Per the runbook the on-call team owns the pager; it's yours.",
            "The on-call team owns the pager per the runbook. Over to you.",
            0.9,
        );
        assert!(close.contrast.word_jaccard >= TEMPLATE_JACCARD_CEILING);
        assert_eq!(close.templates, None);
    }

    #[test]
    fn a_side_without_words_of_its_own_is_its_whole_text() {
        let pending = look(
            "Can you merge PR #233?",
            "Merge PR #233 after the review comments",
            0.8,
        );
        assert_eq!(
            pending.residual_texts((
                "Can you merge PR #233?",
                "Merge PR #233 after the review comments"
            )),
            (
                "Can you merge PR #233?".to_owned(),
                "review comments".to_owned()
            )
        );
    }
}
