//! What the calibrated judge weighs for one pair: the cosine of the two
//! texts, their [`Contrast`], the cosines of the words they differ in
//! ([`Residuals`]) and, with a tuned encoder, that encoder's cosine; as
//! the vector of [`FEATURE_NAMES`] the weights multiply.

use ndarray::ArrayView1;

use crate::compare::Contrast;
use crate::error::{JudgeError, Result};

/// The features of the calibrated judge, in the order of
/// [`JudgeWeights::weights`](crate::JudgeWeights::weights).
pub const FEATURE_NAMES: [&str; FEATURES] = [
    "cosine",
    "veto",
    "residual_cosine",
    "residual_missing",
    "intent_mismatch",
    "word_jaccard",
    "one_sided",
    "cosine_x_residual",
    "report_vs_request",
    "cross_min",
    "cross_max",
    "related_cover",
    "adds_on_one_side",
    "template_cosine",
    "tuned_cosine",
];

/// How many features the calibrated judge weighs.
pub const FEATURES: usize = 15;

/// The index of `tuned_cosine` in [`FEATURE_NAMES`].
pub const TUNED_FEATURE: usize = 14;

/// Texts that share at least this share of their content words
/// (`word_jaccard`) are not compared by their templates, and their
/// template cosine counts as 1: such a template is mostly placeholders,
/// and its cosine weighs the filler around them ("... so it's yours" /
/// "... back to you") more than what each text does. Without this ceiling
/// the template cosine takes reworded pushbacks in team traces for
/// different requests (`docs/tuning.md`).
pub const TEMPLATE_JACCARD_CEILING: f32 = 0.5;

/// The cosines of the residual texts: with each other, and each with the
/// other side's whole text (do one side's own words say something the
/// other text means?); and the cosine of the two texts' templates (what
/// each does with what both name, [`templates`](crate::templates)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Residuals {
    /// The two residual texts' cosine.
    pub between: f32,
    /// The first side's residual against the second text.
    pub a_to_b: f32,
    /// The second side's residual against the first text.
    pub b_to_a: f32,
    /// The two templates' cosine; 1 when the texts share too many of
    /// their words for templates to tell anything
    /// ([`TEMPLATE_JACCARD_CEILING`]).
    pub templates: f32,
}

impl Residuals {
    /// Every cosine 1: nothing differs.
    pub const SAME: Residuals = Residuals {
        between: 1.0,
        a_to_b: 1.0,
        b_to_a: 1.0,
        templates: 1.0,
    };

    /// From the unit vectors of the residual texts, the two whole texts
    /// and, when they were compared, the two templates.
    pub fn of(
        (residual_a, residual_b): (&[f32], &[f32]),
        (a, b): (&[f32], &[f32]),
        templates: Option<(&[f32], &[f32])>,
    ) -> Result<Residuals> {
        Ok(Residuals {
            between: cosine(residual_a, residual_b)?,
            a_to_b: cosine(residual_a, b)?,
            b_to_a: cosine(residual_b, a)?,
            templates: match templates {
                Some((template_a, template_b)) => cosine(template_a, template_b)?,
                None => 1.0,
            },
        })
    }
}

/// The cosine of two unit vectors: their dot product, summed as
/// `loopguard_semantic::cosine` sums it.
fn cosine(a: &[f32], b: &[f32]) -> Result<f32> {
    if a.len() != b.len() {
        return Err(JudgeError::DimensionMismatch {
            expected: a.len(),
            actual: b.len(),
        });
    }
    Ok(ArrayView1::from(a).dot(&ArrayView1::from(b)))
}

/// What the judge looked at for one pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// The embeddings' cosine.
    pub cosine: f32,
    /// What the texts differ in, word by word.
    pub contrast: Contrast,
    /// The cosines of the two sides' differing words (see [`Residuals`]);
    /// `None` when not computed (a veto, or a cosine below 0.3).
    pub residuals: Option<Residuals>,
    /// The two texts' cosine by the tuned encoder; `None` when not
    /// computed (the weights do not use it, or the pair was decided
    /// without it).
    pub tuned_cosine: Option<f32>,
}

impl Features {
    /// The nearer of the two readings of the pair: the higher of the
    /// pinned model's cosine and the tuned encoder's, when read.
    pub fn nearest_cosine(&self) -> f32 {
        self.tuned_cosine
            .map_or(self.cosine, |tuned| self.cosine.max(tuned))
    }

    /// The numeric features, in the order of [`FEATURE_NAMES`].
    pub fn vector(&self) -> [f32; FEATURES] {
        let flag = |on: bool| f32::from(u8::from(on));
        let residual = self.residuals.map_or(0.0, |r| r.between);
        let (cross_min, cross_max) = self.residuals.map_or((0.0, 0.0), |r| {
            (r.a_to_b.min(r.b_to_a), r.a_to_b.max(r.b_to_a))
        });
        let one_sided = self.contrast.only_a.is_empty() != self.contrast.only_b.is_empty();
        [
            self.cosine,
            flag(self.contrast.veto.is_some()),
            residual,
            flag(self.residuals.is_none()),
            flag(self.contrast.intent_mismatch),
            self.contrast.word_jaccard,
            flag(one_sided),
            self.cosine * residual,
            flag(self.contrast.report_vs_request),
            cross_min,
            cross_max,
            self.contrast.related_cover,
            flag(self.contrast.adds_on_one_side),
            self.residuals.map_or(0.0, |r| r.templates),
            self.tuned_cosine.unwrap_or(0.0),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residuals_of_vectors_of_two_lengths_are_an_error() {
        let (unit, longer) = ([1.0f32, 0.0], [1.0f32, 0.0, 0.0]);
        let err = Residuals::of((&unit, &longer), (&unit, &unit), None).expect_err("lengths");
        assert!(
            err.to_string().contains("2") && err.to_string().contains("3"),
            "{err}"
        );
        let residuals = Residuals::of((&unit, &unit), (&unit, &unit), None).expect("cosines");
        assert_eq!(residuals, Residuals::SAME);
    }
}
