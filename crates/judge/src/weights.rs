//! The calibrated judge's weights: a logistic model over the
//! [`Features`] vector, fitted on labelled pairs (`loopguard tune --judge
//! calibrated`) and read from a small JSON file; the ones shipped are
//! compiled in ([`JudgeWeights::shipped`]).

use serde::{Deserialize, Serialize};

use crate::error::{JudgeError, Result};
use crate::features::{FEATURE_NAMES, FEATURES, Features, TUNED_FEATURE};

/// The weights shipped with loopguard, fitted on the train split of
/// `data/pairs/requests.jsonl` with the pinned model.
pub const DEFAULT_WEIGHTS_JSON: &str = include_str!("../judge-weights.json");

/// The weights shipped for the calibrated judge with the tuned encoder
/// (`[similarity] tuned_encoder = true`): the same features plus
/// `tuned_cosine`, fitted with `loopguard tune --judge calibrated
/// --tuned-encoder --tuned-cosines data/pairs/tuned-oof-cosines.jsonl` on
/// every train pair, each with the cosine of an encoder not tuned on it
/// (out of fold).
pub const TUNED_WEIGHTS_JSON: &str = include_str!("../judge-weights-tuned.json");

/// The weights shipped for the calibrated judge with the larger tuned
/// encoder (`[similarity] tuned_encoder = "mpnet"`,
/// [`MPNET_TUNED_ENCODER`]): the same features, `tuned_cosine` read from
/// it, fitted with `loopguard tune --judge calibrated --tuned-encoder
/// mpnet --tuned-cosines data/pairs/tuned-oof-cosines-mpnet.jsonl` on
/// every train pair, each with the cosine of an update not tuned on it
/// (out of fold).
pub const MPNET_WEIGHTS_JSON: &str = include_str!("../judge-weights-mpnet.json");

/// The tuned encoder (all-MiniLM-L6-v2 tuned for "the same request?")
/// whose cosine weights may weigh: `loopguard_semantic::TUNED_MODEL_ID`,
/// which a test of that crate checks this is.
pub const MINILM_TUNED_ENCODER: &str = "all-MiniLM-L6-v2-int8-tuned-b2001b1a59ae";

/// The larger tuned encoder (all-mpnet-base-v2 with a low-rank update):
/// `loopguard_semantic::MPNET_TUNED_MODEL_ID`, checked there too.
pub const MPNET_TUNED_ENCODER: &str = "all-mpnet-base-v2-lora16-tuned-54c45583a1c1";

/// Below this cosine the calibrated judge is not asked, and scores 0: texts
/// that far apart are not one request, whatever their words. Twelve of the
/// 261 labelled pairs of one request reworded (lines 1-628 of
/// `data/pairs/requests.jsonl`) score lower with the pinned model. A floor
/// of 0.4 or 0.3 measured better on the labelled pairs' train folds (0.907
/// and 0.910 against 0.898), but flagged two normal runs of the team
/// traces when only repeats counted: a real task has far fewer rewordings
/// at a low cosine than the labelled pairs, and far more different steps
/// (`docs/tuning.md`).
///
/// With weights that weigh `tuned_cosine`, the floor is on the nearer of
/// the two cosines, the pinned model's and the tuned encoder's: a
/// rewording only the tuned encoder reads as one (0.40 by the pinned
/// model, 0.68 by the larger tuned encoder) is judged (`docs/tuning.md`).
/// The pairs asked about are then those above [`TUNED_CANDIDATE_FLOOR`].
pub const CANDIDATE_FLOOR: f32 = 0.5;

/// With weights that weigh `tuned_cosine`, the pinned model's cosine below
/// which a pair is not asked about, whatever the tuned encoder would say:
/// it bounds how many of a detector's earlier texts the tuned encoder's
/// cosine is read for.
pub const TUNED_CANDIDATE_FLOOR: f32 = 0.3;

/// How many features the weights files of earlier loopguards have: 11
/// before `related_cover`, 12 before `adds_on_one_side` and
/// `template_cosine`, 14 before `tuned_cosine`. Such a file
/// still reads, its missing weights taken as 0, so it scores every pair
/// as it did.
const EARLIER_FEATURES: [usize; 3] = [11, 12, 14];

/// The calibrated judge's weights: a logistic model over the features of
/// [`Features::vector`], and the score above which two texts are the same
/// request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeWeights {
    /// The format of this file (1).
    pub format: u32,
    /// The embedding model the weights were fitted with.
    pub model: String,
    /// Where they were fitted (a pairs file and split).
    #[serde(default)]
    pub fitted_on: String,
    /// The intercept.
    pub bias: f32,
    /// One weight per feature, in the order of [`FEATURE_NAMES`].
    pub weights: Vec<f32>,
    /// The operating threshold on the score (strictly exceeded).
    pub threshold: f32,
    /// The tuned encoder whose cosine the `tuned_cosine` weight was
    /// fitted on ([`MINILM_TUNED_ENCODER`] or [`MPNET_TUNED_ENCODER`]);
    /// absent when that weight is 0 (the judge then never loads the tuned
    /// encoder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_encoder: Option<String>,
}

impl JudgeWeights {
    /// The weights shipped with loopguard.
    pub fn shipped() -> JudgeWeights {
        // The shipped file is checked by a test; a broken one is a build
        // error of ours, not an input error.
        JudgeWeights::from_json(DEFAULT_WEIGHTS_JSON).unwrap_or_else(|_| JudgeWeights {
            format: 1,
            model: String::new(),
            fitted_on: String::new(),
            bias: 0.0,
            weights: vec![0.0; FEATURES],
            threshold: 0.5,
            tuned_encoder: None,
        })
    }

    /// The weights shipped for the judge with the tuned encoder
    /// ([`TUNED_WEIGHTS_JSON`]).
    pub fn shipped_tuned() -> JudgeWeights {
        // Checked by a test, like the shipped weights.
        JudgeWeights::from_json(TUNED_WEIGHTS_JSON).unwrap_or_else(|_| JudgeWeights::shipped())
    }

    /// The weights shipped for the judge with the larger tuned encoder
    /// ([`MPNET_WEIGHTS_JSON`]).
    pub fn shipped_mpnet() -> JudgeWeights {
        // Checked by a test, like the shipped weights.
        JudgeWeights::from_json(MPNET_WEIGHTS_JSON).unwrap_or_else(|_| JudgeWeights::shipped())
    }

    /// The tuned encoder whose cosine scoring needs
    /// ([`MINILM_TUNED_ENCODER`] or [`MPNET_TUNED_ENCODER`]), when it needs
    /// one.
    pub fn tuned_encoder_needed(&self) -> Option<&str> {
        self.tuned_encoder
            .as_deref()
            .filter(|_| self.needs_tuned_encoder())
    }

    /// Whether scoring needs the tuned encoder's cosine: its weight is
    /// not 0.
    pub fn needs_tuned_encoder(&self) -> bool {
        self.weights.get(TUNED_FEATURE).is_some_and(|w| *w != 0.0)
    }

    /// The cosine [`CANDIDATE_FLOOR`] is compared with: the pinned model's,
    /// or, when these weights weigh `tuned_cosine` and it was read, the
    /// higher of it and the tuned encoder's.
    pub fn floored_cosine(&self, features: &Features) -> f32 {
        match features.tuned_cosine {
            Some(_) if self.needs_tuned_encoder() => features.nearest_cosine(),
            _ => features.cosine,
        }
    }

    /// Reads weights from their JSON text, checking their shape.
    pub fn from_json(text: &str) -> Result<JudgeWeights> {
        let mut weights: JudgeWeights =
            serde_json::from_str(text).map_err(|err| JudgeError::Weights(err.to_string()))?;
        if weights.format != 1 {
            return Err(JudgeError::Weights(format!(
                "judge weights of format {}, this loopguard reads 1",
                weights.format
            )));
        }
        if EARLIER_FEATURES.contains(&weights.weights.len()) {
            weights.weights.resize(FEATURES, 0.0);
        }
        if weights.weights.len() != FEATURE_NAMES.len() {
            return Err(JudgeError::Weights(format!(
                "judge weights have {} weights, the features are {} ({})",
                weights.weights.len(),
                FEATURE_NAMES.len(),
                FEATURE_NAMES.join(", ")
            )));
        }
        weights.check_tuned_encoder()?;
        if !(weights.bias.is_finite()
            && weights.weights.iter().all(|w| w.is_finite())
            && (0.0..1.0).contains(&weights.threshold))
        {
            return Err(JudgeError::Weights(
                "judge weights must be finite and the threshold between 0 and 1".into(),
            ));
        }
        Ok(weights)
    }

    /// Weights that weigh `tuned_cosine` name a tuned encoder of this
    /// loopguard's.
    fn check_tuned_encoder(&self) -> Result<()> {
        if !self.needs_tuned_encoder() {
            return Ok(());
        }
        match &self.tuned_encoder {
            Some(id) if id == MINILM_TUNED_ENCODER || id == MPNET_TUNED_ENCODER => Ok(()),
            Some(id) => Err(JudgeError::Weights(format!(
                "judge weights fitted with the tuned encoder {id}, but this loopguard's are \
                 {MINILM_TUNED_ENCODER} and {MPNET_TUNED_ENCODER}: refit them (loopguard tune \
                 --judge calibrated --tuned-encoder [mpnet])"
            ))),
            None => Err(JudgeError::Weights(
                "judge weights weigh tuned_cosine but do not name their tuned_encoder".into(),
            )),
        }
    }

    /// Reads weights from a file.
    pub fn from_file(path: &std::path::Path) -> Result<JudgeWeights> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| JudgeError::Weights(format!("cannot read {}: {err}", path.display())))?;
        JudgeWeights::from_json(&text)
            .map_err(|err| JudgeError::Weights(format!("{}: {err}", path.display())))
    }

    /// The score of `features`: the logistic of the weighted sum; 0 when
    /// their cosine is below [`CANDIDATE_FLOOR`] (texts that far apart are
    /// never one request, whatever their words). With weights that weigh
    /// `tuned_cosine`, the floor is on the nearer of the two cosines
    /// ([`JudgeWeights::floored_cosine`]).
    pub fn score(&self, features: &Features) -> f32 {
        if self.floored_cosine(features) < CANDIDATE_FLOOR {
            return 0.0;
        }
        let sum: f32 = self.bias
            + self
                .weights
                .iter()
                .zip(features.vector())
                .map(|(w, x)| w * x)
                .sum::<f32>();
        1.0 / (1.0 + (-sum).exp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare;
    use crate::features::Residuals;

    #[test]
    fn the_shipped_weights_read() {
        for json in [DEFAULT_WEIGHTS_JSON, TUNED_WEIGHTS_JSON, MPNET_WEIGHTS_JSON] {
            let weights = JudgeWeights::from_json(json).expect("the shipped weights");
            assert_eq!(weights.weights.len(), FEATURE_NAMES.len());
        }
        assert_eq!(
            JudgeWeights::shipped_tuned().tuned_encoder_needed(),
            Some(MINILM_TUNED_ENCODER)
        );
        assert_eq!(
            JudgeWeights::shipped_mpnet().tuned_encoder_needed(),
            Some(MPNET_TUNED_ENCODER)
        );
        assert_eq!(JudgeWeights::shipped().tuned_encoder_needed(), None);
    }

    #[test]
    fn bad_weights_are_refused_by_what_is_wrong() {
        let err = JudgeWeights::from_json(
            r#"{"format":1,"model":"m","bias":0,"weights":[1,2],"threshold":0.5}"#,
        )
        .expect_err("two weights");
        assert!(err.to_string().contains("2 weights"), "{err}");
        let err = JudgeWeights::from_json(
            r#"{"format":2,"model":"m","bias":0,"weights":[0,0,0,0,0,0,0,0,0,0,0],"threshold":0.5}"#,
        )
        .expect_err("format 2");
        assert!(err.to_string().contains("format 2"), "{err}");
        // Thirteen weights were never written by any loopguard.
        let err = JudgeWeights::from_json(
            r#"{"format":1,"model":"m","bias":0,"weights":[0,0,0,0,0,0,0,0,0,0,0,0,0],"threshold":0.5}"#,
        )
        .expect_err("13 weights");
        assert!(err.to_string().contains("13 weights"), "{err}");
    }

    /// Weights that weigh only the cosine and the tuned encoder's cosine.
    fn tuned_weights() -> JudgeWeights {
        let mut weights = vec![0.0; FEATURES];
        weights[0] = 1.0;
        weights[TUNED_FEATURE] = 8.0;
        JudgeWeights {
            format: 1,
            model: "m".into(),
            fitted_on: String::new(),
            bias: -8.0,
            weights,
            threshold: 0.5,
            tuned_encoder: Some(MINILM_TUNED_ENCODER.to_owned()),
        }
    }

    #[test]
    fn weights_that_weigh_the_tuned_cosine_name_its_encoder() {
        let text = serde_json::to_string(&tuned_weights()).expect("json");
        let read = JudgeWeights::from_json(&text).expect("reads");
        assert!(read.needs_tuned_encoder());
        let unnamed = text.replace(
            &format!(",\"tuned_encoder\":\"{MINILM_TUNED_ENCODER}\""),
            "",
        );
        let err = JudgeWeights::from_json(&unnamed).expect_err("no encoder named");
        assert!(
            err.to_string().contains("do not name their tuned_encoder"),
            "{err}"
        );
        let other = text.replace(
            MINILM_TUNED_ENCODER,
            "all-MiniLM-L6-v2-int8-tuned-0123456789ab",
        );
        let err = JudgeWeights::from_json(&other).expect_err("another encoder");
        assert!(err.to_string().contains("refit them"), "{err}");
        // Fourteen weights (before tuned_cosine) read, and need nothing.
        let old = JudgeWeights::from_json(DEFAULT_WEIGHTS_JSON).expect("shipped");
        assert_eq!(old.weights.len(), FEATURES);
        assert!(!old.needs_tuned_encoder());
    }

    #[test]
    fn with_the_tuned_encoder_the_floor_is_on_the_nearer_cosine() {
        let features = Features {
            cosine: 0.4,
            contrast: compare("x", "y"),
            residuals: None,
            tuned_cosine: Some(0.99),
        };
        // Weights that do not weigh the tuned cosine keep the floor on the
        // pinned model's cosine, whatever tuned cosine a pair carries.
        assert_eq!(JudgeWeights::shipped().floored_cosine(&features), 0.4);
        assert_eq!(JudgeWeights::shipped().score(&features), 0.0);
        assert_eq!(tuned_weights().floored_cosine(&features), 0.99);
        assert!(tuned_weights().score(&features) > 0.5);
    }

    #[test]
    fn weights_fitted_before_the_templates_still_read_and_score_as_before() {
        let old = JudgeWeights::from_json(
            r#"{"format":1,"model":"m","bias":-1,"weights":[2,0,0,0,0,0,0,0,0,0,0,1],"threshold":0.5}"#,
        )
        .expect("a 12-weight file");
        assert_eq!(old.weights.len(), FEATURES);
        assert_eq!(old.weights[FEATURES - 3..], [0.0, 0.0, 0.0]);
        let features = Features {
            cosine: 0.9,
            contrast: compare("merge the docs branch", "merge the docs branch too"),
            residuals: Some(Residuals {
                templates: 0.2,
                ..Residuals::SAME
            }),
            tuned_cosine: None,
        };
        // Neither the word "too" on one side nor the templates' cosine moves it.
        assert!(features.contrast.adds_on_one_side);
        let related_cover = features.contrast.related_cover;
        let expected = 1.0 / (1.0 + (-(-1.0f32 + 2.0 * 0.9 + related_cover)).exp());
        assert!((old.score(&features) - expected).abs() < 1e-6);
    }

    #[test]
    fn weights_fitted_before_related_cover_still_read_and_score_as_before() {
        let old = JudgeWeights::from_json(
            r#"{"format":1,"model":"m","bias":-1,"weights":[2,0,0,0,0,0,0,0,0,0,1],"threshold":0.5}"#,
        )
        .expect("an 11-weight file");
        assert_eq!(old.weights.len(), FEATURES);
        assert_eq!(old.weights[FEATURES - 1], 0.0);
        let mut features = Features {
            cosine: 0.9,
            contrast: compare("merge the docs branch", "combine the docs branch"),
            residuals: Some(Residuals::SAME),
            tuned_cosine: None,
        };
        features.contrast.related_cover = 1.0;
        let expected = 1.0 / (1.0 + (-(-1.0f32 + 2.0 * 0.9 + 1.0)).exp());
        assert!((old.score(&features) - expected).abs() < 1e-6);
        features.contrast.related_cover = 0.0;
        assert!((old.score(&features) - expected).abs() < 1e-6);
    }
}
