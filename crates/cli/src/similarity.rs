//! `loopguard similarity`: how similar two texts are to the detectors, and
//! which thresholds that similarity exceeds.

use std::io::{self, Write};

use anyhow::Context;
use loopguard_core_types::Threshold;

use crate::cli::SimilarityArgs;
use crate::outcome::Outcome;
use crate::setup::{self, ConfigSource, Setup};

/// Runs `loopguard similarity A B`.
pub(crate) async fn run(args: &SimilarityArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    let config = setup::config(ConfigSource {
        file: args.config.as_deref(),
        no_semantic,
        plugins: &[],
    })?;
    let setup = Setup::start(config)?;
    let config = &setup.config;
    let detectors = setup.detectors();
    let similarity = detectors
        .similarity(&args.a, &args.b)
        .await
        .context("cannot compare the texts")?;
    let task_type = args.task_type.as_deref();
    let mut out = io::stdout().lock();
    match detectors.service() {
        Some(service) => writeln!(
            out,
            "cosine {similarity:.3} ({}, {} dimensions)",
            service.model_id(),
            service.dimension()
        )?,
        None => writeln!(
            out,
            "similarity {similarity:.3} (exact normalized text: semantic matching is off)"
        )?,
    }
    let request = config.similarity.request_threshold_for(task_type);
    let topic = config.similarity.topic_threshold_for(task_type);
    writeln!(out, "{}", verdict("same request", similarity, &request))?;
    writeln!(out, "{}", verdict("same topic", similarity, &topic))?;
    out.flush()?;
    Ok(Outcome::Clean)
}

/// "same request: yes, 0.889 > 0.85 (similarity.request_threshold)".
fn verdict(what: &str, similarity: f32, threshold: &Threshold) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_strictly_above_and_name_the_key() {
        let threshold = Threshold {
            value: 0.85,
            key: "similarity.request_threshold".into(),
        };
        assert_eq!(
            verdict("same request", 0.889, &threshold),
            "same request: yes, 0.889 > 0.85 (similarity.request_threshold)"
        );
        assert_eq!(
            verdict("same request", 0.85, &threshold),
            "same request: no, 0.850 <= 0.85 (similarity.request_threshold)"
        );
    }
}
