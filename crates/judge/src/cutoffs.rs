//! The cut-offs the calibrated judge computes its features and scores
//! with: the cosines below which a pair is not scored, the tuned encoder
//! not asked or the residuals not computed, and the shares of shared words
//! from which two texts' templates are not compared or a word swapped
//! vetoes. A weights file of format 2 names each (its `cutoffs`), and the
//! judge reads pairs with the file's own; a file of format 1 names none,
//! and is read with [`Cutoffs::SHIPPED`].

use crate::error::{JudgeError, Result};
use crate::features::TEMPLATE_JACCARD_CEILING;
use crate::look::RESIDUAL_FLOOR;
use crate::veto::WORDS_VETO_JACCARD;
use crate::weights::{CANDIDATE_FLOOR, TUNED_CANDIDATE_FLOOR};

/// The cut-offs a judge reads and scores pairs with (see the module's
/// documentation). Each is a number from 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cutoffs {
    /// The cosine below which a pair scores 0 (`candidate_floor`,
    /// shipped: [`CANDIDATE_FLOOR`]).
    pub candidate_floor: f32,
    /// With weights that weigh `tuned_cosine`, the pinned model's cosine
    /// below which the tuned encoder is not asked (`tuned_candidate_floor`,
    /// shipped: [`TUNED_CANDIDATE_FLOOR`]).
    pub tuned_candidate_floor: f32,
    /// The cosine below which the residual cosines are not computed
    /// (`residual_missing`; `residual_floor`, shipped: [`RESIDUAL_FLOOR`]).
    pub residual_floor: f32,
    /// The share of their content words (`word_jaccard`) from which two
    /// texts' templates are not compared, their `template_cosine` 1
    /// (`template_jaccard_ceiling`, shipped: [`TEMPLATE_JACCARD_CEILING`]).
    pub template_jaccard_ceiling: f32,
    /// The share of their content words two texts need for a swap of one
    /// or two words, an opposite word or a period placed otherwise to veto
    /// (`words_veto_jaccard`, shipped: 0.3).
    pub words_veto_jaccard: f32,
}

impl Cutoffs {
    /// The cut-offs of the shipped weights, and of a weights file of
    /// format 1.
    pub const SHIPPED: Cutoffs = Cutoffs {
        candidate_floor: CANDIDATE_FLOOR,
        tuned_candidate_floor: TUNED_CANDIDATE_FLOOR,
        residual_floor: RESIDUAL_FLOOR,
        template_jaccard_ceiling: TEMPLATE_JACCARD_CEILING,
        words_veto_jaccard: WORDS_VETO_JACCARD,
    };

    /// The cut-offs' names in a weights file, in the order a file of
    /// format 2 lists them.
    pub const NAMES: [&'static str; 5] = [
        "candidate_floor",
        "tuned_candidate_floor",
        "residual_floor",
        "template_jaccard_ceiling",
        "words_veto_jaccard",
    ];

    /// Each cut-off with its name ([`Cutoffs::NAMES`]), in order.
    pub const fn named(&self) -> [(&'static str, f32); 5] {
        let [candidate, tuned, residual, template, words] = Cutoffs::NAMES;
        [
            (candidate, self.candidate_floor),
            (tuned, self.tuned_candidate_floor),
            (residual, self.residual_floor),
            (template, self.template_jaccard_ceiling),
            (words, self.words_veto_jaccard),
        ]
    }

    /// The cut-offs of `values`, given in the order of [`Cutoffs::NAMES`];
    /// an error names the first that is not a number from 0 to 1.
    pub(crate) fn from_values(values: &[f32]) -> Result<Cutoffs> {
        let &[candidate, tuned, residual, template, words] = values else {
            return Err(JudgeError::Weights(format!(
                "{} cut-offs where the judge reads {}",
                values.len(),
                Cutoffs::NAMES.len()
            )));
        };
        let cutoffs = Cutoffs {
            candidate_floor: candidate,
            tuned_candidate_floor: tuned,
            residual_floor: residual,
            template_jaccard_ceiling: template,
            words_veto_jaccard: words,
        };
        match cutoffs
            .named()
            .into_iter()
            .find(|(_, value)| !(0.0..=1.0).contains(value))
        {
            Some((name, value)) => Err(JudgeError::Weights(format!(
                "the cutoffs give {name} {value}: a cut-off is a number from 0 to 1"
            ))),
            None => Ok(cutoffs),
        }
    }
}

impl Default for Cutoffs {
    /// [`Cutoffs::SHIPPED`].
    fn default() -> Cutoffs {
        Cutoffs::SHIPPED
    }
}
