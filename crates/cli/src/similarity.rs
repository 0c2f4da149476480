//! `loopguard similarity`: how similar two texts are to the detectors, and
//! what the configured same-request judge and the topic threshold make of
//! them.

use std::io::{self, Write};

use anyhow::Context;
use loopguard_config::Threshold;
use loopguard_semantic::{
    FEATURE_NAMES, FirstLook, JudgeKind, SameRequestJudge, SecondOpinionOutcome, Verdict,
};
use serde_json::{Map, Value, json};

use crate::cli::{SimilarityArgs, SimilarityFormat};
use crate::outcome::Outcome;
use crate::setup::{self, ConfigSource, Setup};

/// Runs `loopguard similarity A B`.
pub(crate) async fn run(args: &SimilarityArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    let config = setup::config(ConfigSource {
        file: args.config.as_deref(),
        no_semantic,
        plugins: &[],
        isolation: None,
    })?;
    let setup = Setup::start(config)?;
    let config = &setup.config;
    let detectors = setup.detectors();
    let similarity = detectors
        .similarity(&args.a, &args.b)
        .await
        .context("cannot compare the texts")?;
    let task_type = args.task_type.as_deref();
    // The configured judge, with its second opinion when one is enabled.
    let judge = setup.judge.clone();
    let topic = config.similarity.topic_threshold_for(task_type);
    let request = config.similarity.request_threshold_for(task_type);

    let Some(service) = detectors.service() else {
        // No embeddings: exact normalized text decides, as in the
        // detectors; the calibrated judge has nothing to weigh.
        let needs = (judge.kind() == JudgeKind::Calibrated).then_some(
            "the calibrated judge needs embeddings: semantic matching is off, so exact text \
             decides",
        );
        return print_exact(args.format, similarity, &request, &topic, needs);
    };

    let header = format!(
        "cosine {similarity:.3} ({}, {} dimensions)",
        service.model_id(),
        service.dimension()
    );
    let threshold = judge.threshold_for(&config.similarity, task_type);
    let residual_texts = match judge.first_look(&args.a, &args.b, similarity, threshold.value) {
        FirstLook::Pending(pending) if pending.needs_residuals() => {
            let templates = pending
                .templates()
                .map(|(ta, tb)| (ta.to_owned(), tb.to_owned()));
            Some((pending.residual_texts(), templates))
        }
        FirstLook::Pending(_) | FirstLook::Decided(_) => None,
    };
    let verdict = judge
        .judge(service, &args.a, &args.b, similarity, threshold.value)
        .await
        .context("cannot judge the texts")?;

    let mut out = io::stdout().lock();
    match args.format {
        SimilarityFormat::Json => {
            let mut document = judged_json(&verdict, &threshold, residual_texts.as_ref());
            document["second_opinion"] = second_opinion_json(&judge, &verdict);
            document["model"] = json!(service.model_id());
            if let Some(id) = judge.tuned_encoder_needed() {
                document["tuned_encoder"] = json!(id);
            }
            document["same_topic"] = json!(similarity > topic.value);
            document["topic_threshold"] = json!(rounded(topic.value));
            document["topic_threshold_key"] = json!(topic.key);
            serde_json::to_writer_pretty(&mut out, &document)?;
            writeln!(out)?;
        }
        SimilarityFormat::Text => {
            writeln!(out, "{header}")?;
            match verdict.judge {
                // Today's line, exactly.
                JudgeKind::Cosine => {
                    writeln!(
                        out,
                        "{}",
                        cosine_verdict("same request", similarity, &threshold)
                    )?;
                }
                JudgeKind::Calibrated => {
                    writeln!(out, "{}", judged_line(&verdict, &threshold))?;
                }
            }
            writeln!(out, "{}", cosine_verdict("same topic", similarity, &topic))?;
            if verdict.judge == JudgeKind::Calibrated {
                if let Some(line) = second_opinion_line(&judge, &verdict) {
                    writeln!(out, "{line}")?;
                }
                for line in details(
                    &verdict,
                    judge.tuned_encoder_needed(),
                    residual_texts.as_ref(),
                ) {
                    writeln!(out, "{line}")?;
                }
            }
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// Without embeddings: the exact-text similarity (1 or 0) against the
/// thresholds, and, when the calibrated judge is configured, why it did
/// not answer.
fn print_exact(
    format: SimilarityFormat,
    similarity: f32,
    request: &Threshold,
    topic: &Threshold,
    needs: Option<&str>,
) -> anyhow::Result<Outcome> {
    let mut out = io::stdout().lock();
    match format {
        SimilarityFormat::Text => {
            writeln!(
                out,
                "similarity {similarity:.3} (exact normalized text: semantic matching is off)"
            )?;
            writeln!(
                out,
                "{}",
                cosine_verdict("same request", similarity, request)
            )?;
            writeln!(out, "{}", cosine_verdict("same topic", similarity, topic))?;
            if let Some(needs) = needs {
                writeln!(out, "({needs})")?;
            }
        }
        SimilarityFormat::Json => {
            let document = json!({
                "cosine": Value::Null,
                "similarity": rounded(similarity),
                "judge": "exact",
                "same": similarity > request.value,
                "score": rounded(similarity),
                "threshold": rounded(request.value),
                "threshold_key": request.key,
                "reason": needs.unwrap_or("exact normalized text: semantic matching is off"),
                "features": {},
                "same_topic": similarity > topic.value,
                "topic_threshold": rounded(topic.value),
                "topic_threshold_key": topic.key,
            });
            serde_json::to_writer_pretty(&mut out, &document)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(Outcome::Clean)
}

/// "same request: yes, 0.889 > 0.85 (similarity.request_threshold)".
fn cosine_verdict(what: &str, similarity: f32, threshold: &Threshold) -> String {
    // Compared exactly as the detectors compare: strictly above.
    let (answer, relation) = if similarity > threshold.value {
        ("yes", ">")
    } else {
        ("no", "<=")
    };
    format!(
        "{what}: {answer}, {similarity:.3} {relation} {} ({})",
        threshold.value, threshold.key
    )
}

/// What the judge's second opinion did, when it has one: "second opinion:
/// LLM m says the same request (a rewording), overruling the judge", or
/// why it was not asked.
fn second_opinion_line(judge: &SameRequestJudge, verdict: &Verdict) -> Option<String> {
    let (by, policy) = judge.second_opinion()?;
    Some(match &verdict.second_opinion {
        None => format!(
            "second opinion ({by}): not asked (score {:.3} outside {:.2}-{:.2}, and no veto at a \
             cosine above {:.2})",
            verdict.score, policy.band_low, policy.band_high, policy.vetoed_cosine
        ),
        Some(SecondOpinionOutcome::Failed { error, .. }) => {
            format!("second opinion ({by}): no answer, the judge's verdict stands: {error}")
        }
        Some(SecondOpinionOutcome::Answered {
            opinion,
            judge_same,
            cached,
            ..
        }) => format!(
            "second opinion ({by}): {}{}{}, {} the judge",
            if opinion.same {
                "the same request"
            } else {
                "a different request"
            },
            if opinion.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", opinion.reason)
            },
            if *cached { ", as before" } else { "" },
            if opinion.same == *judge_same {
                "agreeing with"
            } else {
                "overruling"
            }
        ),
    })
}

/// `{"by", "asked", "same", "reason", "judge_same", "cached", "error"}`, or
/// null when the judge has no second opinion.
fn second_opinion_json(judge: &SameRequestJudge, verdict: &Verdict) -> Value {
    let Some((by, _)) = judge.second_opinion() else {
        return Value::Null;
    };
    match &verdict.second_opinion {
        None => json!({"by": by, "asked": false}),
        Some(SecondOpinionOutcome::Failed { error, .. }) => {
            json!({"by": by, "asked": true, "error": error})
        }
        Some(SecondOpinionOutcome::Answered {
            opinion,
            judge_same,
            cached,
            ..
        }) => json!({
            "by": by,
            "asked": true,
            "same": opinion.same,
            "reason": opinion.reason,
            "judge_same": judge_same,
            "cached": cached,
        }),
    }
}

/// "same request: no (calibrated judge, score 0.031 <= 0.74 from the
/// shipped judge weights): different numbers (412 vs 418) (score 0.03,
/// cosine 0.95)".
fn judged_line(verdict: &Verdict, threshold: &Threshold) -> String {
    let answer = if verdict.same { "yes" } else { "no" };
    // The score against the threshold; a second opinion may decide
    // otherwise, and the reason then says so.
    let relation = if verdict.score > threshold.value {
        ">"
    } else {
        "<="
    };
    format!(
        "same request: {answer} ({} judge, score {:.3} {relation} {} from {}): {}",
        verdict.judge,
        verdict.score,
        threshold.value,
        threshold.key,
        verdict.reason()
    )
}

/// The residual texts and the templates (when compared) of a pair the
/// judge embedded them for.
type Embedded = ((String, String), Option<(String, String)>);

/// What the calibrated judge looked at: every feature with its value, the
/// differing words, the synonyms among them that WordNet knows, and the
/// residual texts and templates when they were embedded.
fn details(
    verdict: &Verdict,
    tuned_encoder: Option<&str>,
    residual_texts: Option<&Embedded>,
) -> Vec<String> {
    let features: Vec<String> = FEATURE_NAMES
        .iter()
        .zip(verdict.features.vector())
        .map(|(name, value)| format!("{name} {}", compact(value)))
        .collect();
    let contrast = &verdict.features.contrast;
    let mut lines = vec![format!("features: {}", features.join(", "))];
    if let Some(tuned) = verdict.features.tuned_cosine {
        lines.push(format!(
            "tuned encoder: cosine {tuned:.3} ({})",
            tuned_encoder.unwrap_or(loopguard_semantic::TUNED_MODEL_ID)
        ));
    }
    lines.extend([format!(
        "differing words: a-only {:?}, b-only {:?}",
        contrast.only_a, contrast.only_b
    )]);
    if !contrast.synonyms.is_empty() {
        let pairs: Vec<String> = contrast
            .synonyms
            .iter()
            .map(|(a, b)| format!("{a} ~ {b}"))
            .collect();
        lines.push(format!("synonyms (WordNet), no swap: {}", pairs.join(", ")));
    }
    if let (Some(((a, b), templates)), Some(residuals)) =
        (residual_texts, verdict.features.residuals)
    {
        lines.push(format!(
            "residual texts: {a:?} / {b:?} (cosine {:.3}; each against the other text {:.3}, {:.3})",
            residuals.between, residuals.a_to_b, residuals.b_to_a
        ));
        lines.push(match templates {
            Some((ta, tb)) => format!(
                "templates: {ta:?} / {tb:?} (cosine {:.3})",
                residuals.templates
            ),
            None => "templates: not compared (the texts share at least half their content words)"
                .to_owned(),
        });
    }
    lines
}

/// The verdict as JSON: `{"cosine", "judge", "same", "score", "threshold",
/// "threshold_key", "reason", "features": {name: value}, "only_a",
/// "only_b", "synonyms": [[a, b]], "residual_texts", "templates"}`.
fn judged_json(
    verdict: &Verdict,
    threshold: &Threshold,
    residual_texts: Option<&Embedded>,
) -> Value {
    let features: Map<String, Value> = FEATURE_NAMES
        .iter()
        .zip(verdict.features.vector())
        .map(|(name, value)| ((*name).to_owned(), json!(rounded(value))))
        .collect();
    let (residual_texts, templates) = match (residual_texts, verdict.features.residuals) {
        (Some(((a, b), templates)), Some(_)) => (json!([a, b]), json!(templates)),
        _ => (Value::Null, Value::Null),
    };
    json!({
        "cosine": rounded(verdict.features.cosine),
        "judge": verdict.judge.to_string(),
        "same": verdict.same,
        "score": rounded(verdict.score),
        "threshold": rounded(threshold.value),
        "threshold_key": threshold.key,
        "reason": verdict.reason(),
        "features": features,
        "tuned_cosine": verdict.features.tuned_cosine.map(rounded),
        "only_a": verdict.features.contrast.only_a,
        "only_b": verdict.features.contrast.only_b,
        "synonyms": verdict.features.contrast.synonyms,
        "residual_texts": residual_texts,
        "templates": templates,
    })
}

/// An f32 as the f64 it reads as (0.85, not 0.8500000238418579).
fn rounded(value: f32) -> f64 {
    format!("{value}").parse().unwrap_or_default()
}

/// "1", "0", "0.949": three decimals without trailing zeros.
fn compact(value: f32) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "" | "-" | "-0" => "0".to_owned(),
        text => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_semantic::{JudgeWeights, Residuals};

    #[test]
    fn verdicts_are_strictly_above_and_name_the_key() {
        let threshold = Threshold {
            value: 0.85,
            key: "similarity.request_threshold".into(),
        };
        assert_eq!(
            cosine_verdict("same request", 0.889, &threshold),
            "same request: yes, 0.889 > 0.85 (similarity.request_threshold)"
        );
        assert_eq!(
            cosine_verdict("same request", 0.85, &threshold),
            "same request: no, 0.850 <= 0.85 (similarity.request_threshold)"
        );
    }

    #[test]
    fn compact_numbers_drop_trailing_zeros() {
        assert_eq!(compact(1.0), "1");
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(-0.0001), "0");
        assert_eq!(compact(0.9491), "0.949");
        assert_eq!(compact(0.25), "0.25");
    }

    #[test]
    fn synonyms_that_lift_a_veto_are_named() {
        let judge = SameRequestJudge::calibrated(JudgeWeights::shipped());
        let (a, b) = (
            "Clean up the cli crate's README.",
            "Tidy up the README for the cli crate.",
        );
        let verdict = match judge.first_look(a, b, 0.95, 0.5) {
            FirstLook::Decided(verdict) => verdict,
            FirstLook::Pending(pending) => pending.finish(Some(Residuals::SAME)),
        };
        assert!(verdict.features.contrast.veto.is_none(), "{verdict:?}");
        let details = details(&verdict, None, None);
        assert!(
            details.contains(&"synonyms (WordNet), no swap: clean ~ tidy".to_owned()),
            "{details:?}"
        );
        let threshold = Threshold {
            value: 0.5,
            key: "test".into(),
        };
        let document = judged_json(&verdict, &threshold, None);
        assert_eq!(document["synonyms"], json!([["clean", "tidy"]]));
    }

    #[test]
    fn a_vetoed_pair_reads_as_its_reason_with_every_feature() {
        let judge = SameRequestJudge::calibrated(JudgeWeights::shipped());
        let threshold = Threshold {
            value: judge.weights().threshold,
            key: "the shipped judge weights".into(),
        };
        let FirstLook::Decided(verdict) = judge.first_look(
            "Review PR #412 for security issues",
            "Review PR #418 for security issues",
            0.95,
            threshold.value,
        ) else {
            panic!("a veto decides at once");
        };
        let line = judged_line(&verdict, &threshold);
        assert!(
            line.starts_with("same request: no (calibrated judge, score ")
                && line.contains(" from the shipped judge weights): different numbers"),
            "{line}"
        );
        let details = details(&verdict, None, None);
        for name in FEATURE_NAMES {
            assert!(
                details[0].contains(&format!("{name} ")),
                "{name}: {details:?}"
            );
        }
        assert!(line.contains("412") && line.contains("418"), "{line}");
        assert!(
            details[1].starts_with("differing words: a-only "),
            "{details:?}"
        );
        let document = judged_json(&verdict, &threshold, None);
        assert_eq!(document["same"], false);
        assert_eq!(
            document["features"].as_object().map(Map::len),
            Some(FEATURE_NAMES.len())
        );
    }
}
