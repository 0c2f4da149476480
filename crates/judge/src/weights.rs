//! The calibrated judge's weights: a logistic model over the
//! [`Features`] vector, fitted on labelled pairs (`loopguard tune --judge
//! calibrated`) and read from a small JSON file; the ones shipped are
//! compiled in ([`JudgeWeights::shipped`]).
//!
//! A weights file is written in format 2: a JSON object naming the model
//! the weights were fitted with (and the tuned encoder, when they weigh
//! its cosine), where they were fitted, the threshold, each weight by the
//! name of its feature ([`FEATURE_NAMES`], the intercept `intercept`) and
//! the cut-offs the features were computed with ([`CUTOFFS`]). The
//! shipped `judge-weights.json`, with three of its sixteen weights:
//!
//! ```json
//! {
//!   "format": 2,
//!   "model": "all-MiniLM-L6-v2-int8",
//!   "fitted_on": "data/pairs/requests.jsonl (train split)",
//!   "threshold": 0.54,
//!   "weights": {
//!     "intercept": -3.039635,
//!     "cosine": 2.2842927,
//!     "tuned_cosine": 0.0
//!   },
//!   "cutoffs": {
//!     "candidate_floor": 0.5,
//!     "tuned_candidate_floor": 0.3,
//!     "residual_floor": 0.3,
//!     "template_jaccard_ceiling": 0.5,
//!     "words_veto_jaccard": 0.3
//!   }
//! }
//! ```
//!
//! Every feature and every cut-off is named once; a name this loopguard
//! does not know, or one it needs and the file lacks, is refused by name.
//! The judge reads and scores pairs with the file's cut-offs
//! ([`JudgeWeights::cutoffs`]). Files of format 1 read too: the intercept
//! is `bias`, the weights a list in the order of [`FEATURE_NAMES`] (11, 12
//! or 14 of them are the first features, the others taken as 0), and the
//! cut-offs are the shipped ones ([`Cutoffs::SHIPPED`]).

use serde::ser::{Error as _, SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::cutoffs::Cutoffs;
use crate::error::{JudgeError, Result};
use crate::features::{FEATURE_NAMES, FEATURES, Features, TUNED_FEATURE};
use crate::look::WordLook;
use crate::text::ReadText;

/// The weights shipped with loopguard, fitted on the train split of
/// `data/pairs/requests.jsonl` with the pinned model.
pub const DEFAULT_WEIGHTS_JSON: &str = include_str!("../judge-weights.json");

/// The weights shipped for the calibrated judge with the tuned encoder
/// (`[similarity] tuned_encoder = true`): the same features plus
/// `tuned_cosine`, fitted with `loopguard tune judge fit
/// --tuned-encoder --tuned-cosines data/pairs/tuned-oof-cosines.jsonl` on
/// every train pair, each with the cosine of an encoder not tuned on it
/// (out of fold).
pub const TUNED_WEIGHTS_JSON: &str = include_str!("../judge-weights-tuned.json");

/// The weights shipped for the calibrated judge with the larger tuned
/// encoder (`[similarity] tuned_encoder = "mpnet"`,
/// [`MPNET_TUNED_ENCODER`]): the same features, `tuned_cosine` read from
/// it, fitted with `loopguard tune judge fit --tuned-encoder
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

/// The shipped candidate floor ([`Cutoffs::candidate_floor`]): below this
/// cosine the calibrated judge is not asked, and scores 0: texts that far
/// apart are not one request, whatever their words. Twelve of the
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

/// The shipped tuned candidate floor ([`Cutoffs::tuned_candidate_floor`]):
/// with weights that weigh `tuned_cosine`, the pinned model's cosine below
/// which a pair is not asked about, whatever the tuned encoder would say:
/// it bounds how many of a detector's earlier texts the tuned encoder's
/// cosine is read for.
pub const TUNED_CANDIDATE_FLOOR: f32 = 0.3;

/// The shipped cut-offs by their names in a weights file (its `cutoffs`):
/// [`Cutoffs::SHIPPED`], which says what each is. Weights read from a file
/// of format 2 carry the file's own ([`JudgeWeights::cutoffs`]).
pub const CUTOFFS: [(&str, f32); 5] = Cutoffs::SHIPPED.named();

/// The format of the weights files this loopguard writes.
const FORMAT: u32 = 2;

/// The name of the intercept among the weights of a file of format 2.
const INTERCEPT: &str = "intercept";

/// How many weights a file of format 1 may list short of [`FEATURES`]:
/// 11 (without `related_cover` and what follows it), 12 (without
/// `adds_on_one_side`, `template_cosine` and `tuned_cosine`) or 14
/// (without `tuned_cosine`). The missing weights are taken as 0, so such
/// a file scores every pair as its features weigh.
const EARLIER_FEATURES: [usize; 3] = [11, 12, 14];

/// The calibrated judge's weights: a logistic model over the features of
/// [`Features::vector`], and the score above which two texts are the same
/// request. They serialize as a weights file of format 2 (see the
/// module's documentation); [`JudgeWeights::from_json`] reads one.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeWeights {
    /// The format of the file they were read from: 2 (the weights and
    /// cut-offs by name) or 1 (the weights a list). They are written in
    /// format 2 whatever this says.
    pub format: u32,
    /// The embedding model the weights were fitted with.
    pub model: String,
    /// Where they were fitted (a pairs file and split).
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
    pub tuned_encoder: Option<String>,
    /// The cut-offs the features were computed with when the weights were
    /// fitted, and that the judge reads and scores pairs with: the file's
    /// (format 2), or [`Cutoffs::SHIPPED`] (format 1).
    pub cutoffs: Cutoffs,
}

/// A weights file of format 2, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FormatTwo {
    format: u32,
    model: String,
    #[serde(default)]
    fitted_on: String,
    #[serde(default)]
    tuned_encoder: Option<String>,
    threshold: f32,
    weights: ByName,
    cutoffs: ByName,
}

/// A weights file of format 1, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FormatOne {
    format: u32,
    model: String,
    #[serde(default)]
    fitted_on: String,
    bias: f32,
    weights: Vec<f32>,
    threshold: f32,
    #[serde(default)]
    tuned_encoder: Option<String>,
}

/// Numbers by name, as a file of format 2 gives its weights and its
/// cut-offs: every entry of the object in the file's order, a name given
/// twice kept twice (to be refused).
#[derive(Debug)]
struct ByName(Vec<(String, f32)>);

impl<'de> Deserialize<'de> for ByName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByName, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = ByName;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of numbers by name")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ByName, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, f32>()? {
                    entries.push(entry);
                }
                Ok(ByName(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

impl ByName {
    /// The values of `names`, in their order: each named once in this
    /// object of the file (`field`), and no other name. An error names
    /// the `kind` (feature, cut-off) unknown, given twice or missing.
    fn in_order(self, field: &str, kind: &str, names: &[&str]) -> Result<Vec<f32>> {
        let known = || names.join(", ");
        let mut values: Vec<Option<f32>> = vec![None; names.len()];
        for (name, value) in self.0 {
            let Some(at) = names.iter().position(|known| *known == name) else {
                return Err(JudgeError::Weights(format!(
                    "the {field} name the {kind} {name:?}, which this loopguard does not know \
                     (it reads {})",
                    known()
                )));
            };
            if values[at].replace(value).is_some() {
                return Err(JudgeError::Weights(format!(
                    "the {field} name the {kind} {name:?} twice"
                )));
            }
        }
        let missing: Vec<String> = names
            .iter()
            .zip(&values)
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| format!("{name:?}"))
            .collect();
        if !missing.is_empty() {
            return Err(JudgeError::Weights(format!(
                "the {field} lack the {kind}{} {} (a file of format 2 names each of {})",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", "),
                known()
            )));
        }
        Ok(values.into_iter().flatten().collect())
    }
}

impl FormatTwo {
    /// The weights and the cut-offs of the file, each read by name.
    fn read(self) -> Result<JudgeWeights> {
        let names: Vec<&str> = std::iter::once(INTERCEPT).chain(FEATURE_NAMES).collect();
        let mut weights = self.weights.in_order("weights", "feature", &names)?;
        let cutoffs = self
            .cutoffs
            .in_order("cutoffs", "cut-off", &Cutoffs::NAMES)?;
        let bias = weights.remove(0);
        Ok(JudgeWeights {
            format: self.format,
            model: self.model,
            fitted_on: self.fitted_on,
            bias,
            weights,
            threshold: self.threshold,
            tuned_encoder: self.tuned_encoder,
            cutoffs: Cutoffs::from_values(&cutoffs)?,
        })
    }
}

impl FormatOne {
    /// The weights of the file, a list of [`FEATURES`] or of one of
    /// [`EARLIER_FEATURES`] (completed with zeros).
    fn read(self) -> Result<JudgeWeights> {
        let mut weights = self.weights;
        if EARLIER_FEATURES.contains(&weights.len()) {
            weights.resize(FEATURES, 0.0);
        }
        if weights.len() != FEATURE_NAMES.len() {
            return Err(JudgeError::Weights(format!(
                "judge weights have {} weights, the features are {} ({})",
                weights.len(),
                FEATURE_NAMES.len(),
                FEATURE_NAMES.join(", ")
            )));
        }
        Ok(JudgeWeights {
            format: self.format,
            model: self.model,
            fitted_on: self.fitted_on,
            bias: self.bias,
            weights,
            threshold: self.threshold,
            tuned_encoder: self.tuned_encoder,
            cutoffs: Cutoffs::SHIPPED,
        })
    }
}

/// Numbers by name, serialized as an object in their order.
struct NamedValues<'a>(&'a [(&'a str, f32)]);

impl Serialize for NamedValues<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// A weights file of format 2: the weights by name, the intercept first,
/// and the cut-offs by name.
impl Serialize for JudgeWeights {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.weights.len() != FEATURES {
            return Err(S::Error::custom(format!(
                "judge weights have {} weights, the features are {} ({})",
                self.weights.len(),
                FEATURES,
                FEATURE_NAMES.join(", ")
            )));
        }
        let weights: Vec<(&str, f32)> = std::iter::once((INTERCEPT, self.bias))
            .chain(FEATURE_NAMES.into_iter().zip(self.weights.iter().copied()))
            .collect();
        let fields = if self.tuned_encoder.is_some() { 7 } else { 6 };
        let mut file = serializer.serialize_struct("JudgeWeights", fields)?;
        file.serialize_field("format", &FORMAT)?;
        file.serialize_field("model", &self.model)?;
        match &self.tuned_encoder {
            Some(encoder) => file.serialize_field("tuned_encoder", encoder)?,
            None => file.skip_field("tuned_encoder")?,
        }
        file.serialize_field("fitted_on", &self.fitted_on)?;
        file.serialize_field("threshold", &self.threshold)?;
        file.serialize_field("weights", &NamedValues(&weights))?;
        file.serialize_field("cutoffs", &NamedValues(&self.cutoffs.named()))?;
        file.end()
    }
}

impl JudgeWeights {
    /// The weights shipped with loopguard.
    pub fn shipped() -> JudgeWeights {
        // The shipped file is checked by a test; a broken one is a build
        // error of ours, not an input error.
        JudgeWeights::from_json(DEFAULT_WEIGHTS_JSON).unwrap_or_else(|_| JudgeWeights {
            format: FORMAT,
            model: String::new(),
            fitted_on: String::new(),
            bias: 0.0,
            weights: vec![0.0; FEATURES],
            threshold: 0.5,
            tuned_encoder: None,
            cutoffs: Cutoffs::SHIPPED,
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

    /// The pinned model's cosine below which a pair is never the same
    /// request, so need not be judged: the candidate floor, or with weights
    /// that weigh `tuned_cosine` the tuned candidate floor (the tuned
    /// encoder may lift a pair over the candidate floor) ([`Cutoffs`]).
    pub fn candidate_floor(&self) -> f32 {
        if self.needs_tuned_encoder() {
            self.cutoffs.tuned_candidate_floor
        } else {
            self.cutoffs.candidate_floor
        }
    }

    /// Whether a pair of this cosine is over the candidate floor, so is
    /// scored ([`Cutoffs::candidate_floor`]).
    pub fn is_candidate(&self, cosine: f32) -> bool {
        cosine >= self.cutoffs.candidate_floor
    }

    /// Whether scoring a pair of this pinned cosine needs the tuned
    /// encoder's cosine of it: these weights weigh `tuned_cosine`, and the
    /// pinned cosine is at the tuned candidate floor or over
    /// ([`Cutoffs::tuned_candidate_floor`]).
    pub fn wants_tuned_cosine(&self, cosine: f32) -> bool {
        self.needs_tuned_encoder() && cosine >= self.cutoffs.tuned_candidate_floor
    }

    /// The first look at `texts`, read as `read`, whose embeddings' cosine
    /// is `cosine`, with these weights' cut-offs
    /// ([`WordLook::with_cutoffs`]).
    pub fn look(&self, read: (&ReadText, &ReadText), texts: (&str, &str), cosine: f32) -> WordLook {
        WordLook::with_cutoffs(read, texts, cosine, &self.cutoffs)
    }

    /// The cosine the candidate floor is compared with: the pinned model's,
    /// or, when these weights weigh `tuned_cosine` and it was read, the
    /// higher of it and the tuned encoder's.
    pub fn floored_cosine(&self, features: &Features) -> f32 {
        match features.tuned_cosine {
            Some(_) if self.needs_tuned_encoder() => features.nearest_cosine(),
            _ => features.cosine,
        }
    }

    /// Reads weights from the JSON text of a weights file of format 2 or
    /// 1, checking their shape: every feature and cut-off named, the
    /// numbers finite, the threshold in 0..1, each cut-off from 0 to 1 and
    /// the tuned encoder, when they weigh its cosine, one of this
    /// loopguard's. Any other format is refused.
    pub fn from_json(text: &str) -> Result<JudgeWeights> {
        let invalid = |err: serde_json::Error| JudgeError::Weights(err.to_string());
        let file: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(invalid)?;
        let format = file.get("format");
        let weights = match format.and_then(serde_json::Value::as_u64) {
            Some(2) => serde_json::from_str::<FormatTwo>(text)
                .map_err(invalid)?
                .read()?,
            Some(1) => serde_json::from_str::<FormatOne>(text)
                .map_err(invalid)?
                .read()?,
            _ => {
                let format =
                    format.map_or_else(|| "without a format".into(), |f| format!("format {f}"));
                return Err(JudgeError::Weights(format!(
                    "weights file {format}: this loopguard reads formats 1 and 2"
                )));
            }
        };
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

    /// Reads weights from a file ([`JudgeWeights::from_json`]); an error
    /// names the file.
    pub fn from_file(path: &std::path::Path) -> Result<JudgeWeights> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| JudgeError::Weights(format!("cannot read {}: {err}", path.display())))?;
        JudgeWeights::from_json(&text).map_err(|err| match err {
            JudgeError::Weights(message) => {
                JudgeError::Weights(format!("{}: {message}", path.display()))
            }
            other => other,
        })
    }

    /// The score of `features`: the logistic of the weighted sum; 0 when
    /// their cosine is below the candidate floor
    /// ([`Cutoffs::candidate_floor`]: texts that far apart are never one
    /// request, whatever their words). With weights that weigh
    /// `tuned_cosine`, the floor is on the nearer of the two cosines
    /// ([`JudgeWeights::floored_cosine`]).
    pub fn score(&self, features: &Features) -> f32 {
        if self.floored_cosine(features) < self.cutoffs.candidate_floor {
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
    use crate::veto::Veto;

    /// Each shipped weights file, and the same weights as a file of
    /// format 1 (`tests/fixtures/weights-format-1/`).
    const SHIPPED_AND_FORMAT_1: [(&str, &str); 3] = [
        (
            DEFAULT_WEIGHTS_JSON,
            include_str!("../tests/fixtures/weights-format-1/judge-weights.json"),
        ),
        (
            TUNED_WEIGHTS_JSON,
            include_str!("../tests/fixtures/weights-format-1/judge-weights-tuned.json"),
        ),
        (
            MPNET_WEIGHTS_JSON,
            include_str!("../tests/fixtures/weights-format-1/judge-weights-mpnet.json"),
        ),
    ];

    /// The weights of the default shipped file, `edit`ed: what reading
    /// them says.
    fn read_edited(edit: impl Fn(&str) -> String) -> Result<JudgeWeights> {
        let edited = edit(DEFAULT_WEIGHTS_JSON);
        assert_ne!(edited, DEFAULT_WEIGHTS_JSON, "the edit changes the file");
        JudgeWeights::from_json(&edited)
    }

    /// Reads `text` as the file `name` ([`JudgeWeights::from_file`]).
    fn read_as_file(name: &str, text: &str) -> Result<JudgeWeights> {
        let path =
            std::env::temp_dir().join(format!("loopguard-judge-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("a temporary file");
        let read = JudgeWeights::from_file(&path);
        std::fs::remove_file(&path).expect("removed");
        read
    }

    #[test]
    fn the_shipped_weights_read() {
        for json in [DEFAULT_WEIGHTS_JSON, TUNED_WEIGHTS_JSON, MPNET_WEIGHTS_JSON] {
            let weights = JudgeWeights::from_json(json).expect("the shipped weights");
            assert_eq!(weights.weights.len(), FEATURE_NAMES.len());
            assert_eq!(weights.format, 2);
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
            r#"{"format":3,"model":"m","bias":0,"weights":[0,0,0,0,0,0,0,0,0,0,0],"threshold":0.5}"#,
        )
        .expect_err("format 3");
        assert_eq!(
            err.to_string(),
            "judge: weights file format 3: this loopguard reads formats 1 and 2"
        );
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
            cutoffs: Cutoffs::SHIPPED,
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
        // Fourteen weights (without tuned_cosine) read, and need nothing.
        let old = JudgeWeights::from_json(SHIPPED_AND_FORMAT_1[0].1).expect("format 1");
        assert_eq!(old.weights.len(), FEATURES);
        assert!(!old.needs_tuned_encoder());
    }

    #[test]
    fn weights_round_trip_through_a_file_of_format_2() {
        for weights in [tuned_weights(), JudgeWeights::shipped_mpnet()] {
            let text = serde_json::to_string_pretty(&weights).expect("json");
            let read = JudgeWeights::from_json(&text).expect("reads");
            assert_eq!(
                read,
                JudgeWeights {
                    format: 2,
                    ..weights.clone()
                }
            );
            assert_eq!(serde_json::to_string_pretty(&read).expect("json"), text);
            let file: serde_json::Value = serde_json::from_str(&text).expect("json");
            let number = |value: &serde_json::Value| value.as_f64().map(|x| x as f32);
            assert_eq!(file["format"], 2);
            assert_eq!(number(&file["weights"]["intercept"]), Some(weights.bias));
            for (name, weight) in FEATURE_NAMES.iter().zip(&weights.weights) {
                assert_eq!(number(&file["weights"][name]), Some(*weight), "{name}");
            }
            for (name, value) in CUTOFFS {
                assert_eq!(number(&file["cutoffs"][name]), Some(value), "{name}");
            }
        }
        // Weights of another length are not written as a file.
        let short = JudgeWeights {
            weights: vec![0.0; FEATURES - 1],
            ..tuned_weights()
        };
        let err = serde_json::to_string(&short).expect_err("14 weights");
        assert!(err.to_string().contains("14 weights"), "{err}");
    }

    #[test]
    fn the_shipped_files_are_their_format_1_weights_as_written() {
        for (shipped, format_1) in SHIPPED_AND_FORMAT_1 {
            let old = JudgeWeights::from_json(format_1).expect("format 1 reads");
            assert_eq!(old.format, 1);
            // What `loopguard tune --weights-out` writes.
            let written = format!("{}\n", serde_json::to_string_pretty(&old).expect("json"));
            assert_eq!(written, shipped);
            let new = JudgeWeights::from_json(shipped).expect("format 2 reads");
            assert_eq!(new, JudgeWeights { format: 2, ..old });
        }
    }

    #[test]
    fn a_file_of_format_1_scores_as_its_format_2_conversion() {
        let pairs = [
            ("merge the docs branch", "merge the docs branch too", 0.93),
            (
                "Merge PR #233 after the review",
                "Merge PR #238 after the review",
                0.97,
            ),
            (
                "Can you check the retry handling in net/client.go?",
                "Would you go over the way net/client.go retries failed calls?",
                0.71,
            ),
            (
                "Draft the Q3 board deck.",
                "Present the Q3 board deck.",
                0.52,
            ),
            ("Rotate the keys", "Plan the offsite", 0.45),
        ];
        let residuals = [
            None,
            Some(Residuals::SAME),
            Some(Residuals {
                between: 0.42,
                a_to_b: 0.31,
                b_to_a: 0.57,
                templates: 0.66,
            }),
        ];
        for (shipped, format_1) in SHIPPED_AND_FORMAT_1 {
            let old = JudgeWeights::from_json(format_1).expect("format 1 reads");
            let new = JudgeWeights::from_json(shipped).expect("format 2 reads");
            let converted =
                JudgeWeights::from_json(&serde_json::to_string(&old).expect("written as format 2"))
                    .expect("the conversion reads");
            for (a, b, cosine) in pairs {
                for residuals in residuals {
                    for tuned_cosine in [None, Some(0.38), Some(0.88)] {
                        let features = Features {
                            cosine,
                            contrast: compare(a, b),
                            residuals,
                            tuned_cosine,
                        };
                        let score = old.score(&features).to_bits();
                        assert_eq!(new.score(&features).to_bits(), score, "{a} / {b}");
                        assert_eq!(converted.score(&features).to_bits(), score, "{a} / {b}");
                    }
                }
            }
            assert_eq!(new.threshold.to_bits(), old.threshold.to_bits());
            assert_eq!(new.tuned_encoder_needed(), old.tuned_encoder_needed());
        }
    }

    #[test]
    fn a_feature_unknown_missing_or_named_twice_is_refused_by_name() {
        let err = read_edited(|text| text.replace("\"cross_min\"", "\"cross_minimum\""))
            .expect_err("an unknown feature");
        let message = err.to_string();
        assert!(
            message.contains(
                "the weights name the feature \"cross_minimum\", which this loopguard does not know"
            ),
            "{message}"
        );
        assert!(
            message.contains("cosine, veto, residual_cosine"),
            "{message}"
        );
        let err = read_edited(|text| text.replace("    \"template_cosine\": 3.2331448,\n", ""))
            .expect_err("a missing feature");
        assert!(
            err.to_string()
                .contains("the weights lack the feature \"template_cosine\""),
            "{err}"
        );
        let err = read_edited(|text| text.replace("\"intercept\"", "\"bias\""))
            .expect_err("the intercept named otherwise");
        assert!(err.to_string().contains("the feature \"bias\""), "{err}");
        let err = read_edited(|text| text.replace("\"veto\"", "\"cosine\""))
            .expect_err("a feature named twice");
        assert!(
            err.to_string()
                .contains("the weights name the feature \"cosine\" twice"),
            "{err}"
        );
        // Read from a file, the error names the file too.
        let edited = DEFAULT_WEIGHTS_JSON.replace("\"cross_min\"", "\"cross_minimum\"");
        let err = read_as_file("unknown-feature.json", &edited).expect_err("unknown");
        let message = err.to_string();
        assert!(
            message
                .contains("unknown-feature.json: the weights name the feature \"cross_minimum\""),
            "{message}"
        );
    }

    #[test]
    fn the_cutoffs_are_each_named_and_each_from_0_to_1() {
        let err = read_edited(|text| text.replace("\"residual_floor\"", "\"residue_floor\""))
            .expect_err("an unknown cut-off");
        assert!(
            err.to_string().contains(
                "the cutoffs name the cut-off \"residue_floor\", which this loopguard does not know"
            ),
            "{err}"
        );
        let err = read_edited(|text| {
            text.replace("    \"words_veto_jaccard\": 0.3\n", "")
                .replace(
                    "\"template_jaccard_ceiling\": 0.5,",
                    "\"template_jaccard_ceiling\": 0.5",
                )
        })
        .expect_err("a missing cut-off");
        assert!(
            err.to_string()
                .contains("the cutoffs lack the cut-off \"words_veto_jaccard\""),
            "{err}"
        );
        let err =
            read_edited(|text| text.replace("\"residual_floor\": 0.3", "\"residual_floor\": 1.5"))
                .expect_err("a floor over 1");
        assert!(
            err.to_string()
                .contains("the cutoffs give residual_floor 1.5: a cut-off is a number from 0 to 1"),
            "{err}"
        );
        let err = read_edited(|text| {
            let at = text.find(",\n  \"cutoffs\"").expect("the cutoffs");
            format!("{}\n}}\n", &text[..at])
        })
        .expect_err("no cutoffs");
        assert!(err.to_string().contains("missing field `cutoffs`"), "{err}");
    }

    /// The shipped weights with the cut-off `name` at `value` instead.
    fn with_cutoff(name: &str, value: f32) -> JudgeWeights {
        let (_, shipped) = CUTOFFS
            .into_iter()
            .find(|(known, _)| *known == name)
            .expect("a cut-off");
        read_edited(|text| {
            text.replace(
                &format!("\"{name}\": {shipped}"),
                &format!("\"{name}\": {value}"),
            )
        })
        .expect("the edited weights read")
    }

    #[test]
    fn a_file_s_cutoffs_are_read_kept_and_scored_with() {
        let shipped = JudgeWeights::shipped();
        assert_eq!(shipped.cutoffs, Cutoffs::SHIPPED);
        let lower = with_cutoff("candidate_floor", 0.4);
        assert_eq!(
            lower.cutoffs,
            Cutoffs {
                candidate_floor: 0.4,
                ..Cutoffs::SHIPPED
            }
        );
        // Written again, the file keeps its own cut-offs.
        let text = serde_json::to_string(&lower).expect("json");
        assert_eq!(JudgeWeights::from_json(&text).expect("reads"), lower);
        // A pair between the two floors: 0 with the shipped floor, scored
        // with the file's.
        let features = Features {
            cosine: 0.45,
            contrast: compare("merge the docs branch", "merge the docs branch too"),
            residuals: Some(Residuals::SAME),
            tuned_cosine: None,
        };
        assert_eq!(shipped.score(&features), 0.0);
        assert!(lower.score(&features) > 0.0, "{}", lower.score(&features));
        assert!(!shipped.is_candidate(0.45) && lower.is_candidate(0.45));
        assert_eq!(lower.candidate_floor(), 0.4);
    }

    #[test]
    fn a_file_s_cutoffs_are_what_the_first_look_reads_pairs_with() {
        let look = |weights: &JudgeWeights, (a, b): (&str, &str), cosine: f32| {
            weights.look((&ReadText::new(a), &ReadText::new(b)), (a, b), cosine)
        };
        let shipped = JudgeWeights::shipped();
        // The residual floor: below a file's, the residuals are not computed.
        let reworded = (
            "Can you check the retry handling in net/client.go?",
            "Would you go over the way net/client.go retries failed calls?",
        );
        assert_eq!(look(&shipped, reworded, 0.35).known_residuals, None);
        let higher = with_cutoff("residual_floor", 0.4);
        assert_eq!(look(&higher, reworded, 0.35).known_residuals, Some(None));
        // The templates' ceiling: from a file's share, templates are not
        // compared.
        let apart = (
            "Draft the Q3 board deck.",
            "Present the Q3 board deck once the numbers are final.",
        );
        assert!(look(&shipped, apart, 0.83).templates.is_some());
        let lower = with_cutoff("template_jaccard_ceiling", 0.1);
        assert_eq!(look(&lower, apart, 0.83).templates, None);
        // The words vetoes: texts that share fewer words than a file asks
        // are not vetoed for an opposite word.
        let opposites = (
            "Lock the guest wifi settings.",
            "Unlock the guest wifi settings.",
        );
        assert!(matches!(
            look(&shipped, opposites, 0.95).contrast.veto,
            Some(Veto::Opposites { .. })
        ));
        let stricter = with_cutoff("words_veto_jaccard", 1.0);
        assert_eq!(look(&stricter, opposites, 0.95).contrast.veto, None);
        // The tuned floor: the tuned encoder is asked from a file's floor.
        let tuned = JudgeWeights {
            cutoffs: Cutoffs {
                tuned_candidate_floor: 0.2,
                ..Cutoffs::SHIPPED
            },
            ..tuned_weights()
        };
        assert!(!tuned_weights().wants_tuned_cosine(0.25));
        assert!(tuned.wants_tuned_cosine(0.25));
        assert_eq!(tuned.candidate_floor(), 0.2);
    }

    #[test]
    fn formats_other_than_1_and_2_are_refused_naming_theirs() {
        let err = read_edited(|text| text.replace("\"format\": 2", "\"format\": 3"))
            .expect_err("format 3");
        assert_eq!(
            err.to_string(),
            "judge: weights file format 3: this loopguard reads formats 1 and 2"
        );
        let third = DEFAULT_WEIGHTS_JSON.replace("\"format\": 2", "\"format\": 3");
        let err = read_as_file("third.json", &third).expect_err("format 3");
        let message = err.to_string();
        assert!(
            message.ends_with(
                "third.json: weights file format 3: this loopguard reads formats 1 and 2"
            ),
            "{message}"
        );
        let err =
            read_edited(|text| text.replace("  \"format\": 2,\n", "")).expect_err("no format");
        assert!(err.to_string().contains("without a format"), "{err}");
        // A file of format 2 names its weights; a list is format 1's.
        let err = JudgeWeights::from_json(
            r#"{"format":2,"model":"m","weights":[0,0],"threshold":0.5,"cutoffs":{}}"#,
        )
        .expect_err("a list in format 2");
        assert!(
            err.to_string()
                .contains("expected an object of numbers by name"),
            "{err}"
        );
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
