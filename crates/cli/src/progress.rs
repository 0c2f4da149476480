//! The progress evaluator for a command: always on, with the LLM judge
//! when `[llm]` (or `LOOPGUARD_LLM_BASE_URL` and `LOOPGUARD_LLM_MODEL`)
//! names a server and a model.

use std::sync::Arc;

use loopguard_core_types::Config;
use loopguard_host::LoopGuardBuilder;
use loopguard_progress_evaluator::{OpenAiJudge, OpenAiSettings, ProgressEvaluator};

/// `builder` with the progress evaluator added. A judge that is configured
/// but cannot be built (a bad URL in the environment) stops the command
/// here, naming the variable; a judge that is unreachable later never does.
pub(crate) fn install(
    builder: LoopGuardBuilder,
    config: &Config,
) -> anyhow::Result<LoopGuardBuilder> {
    let mut evaluator = ProgressEvaluator::new(config);
    if let Some(judge) = OpenAiJudge::from_config(&config.llm)? {
        tracing::info!(
            base_url = %judge.settings().base_url,
            model = %judge.settings().model,
            "LLM judge configured: asked only when metrics cannot decide"
        );
        evaluator = evaluator.with_judge(Arc::new(judge));
    }
    Ok(builder.extension(Arc::new(evaluator)))
}

/// What a report should say about the judge: who is asked, and when.
pub(crate) fn notes(config: &Config) -> anyhow::Result<Vec<String>> {
    let settings =
        OpenAiSettings::from_config_with_env(&config.llm, |name| std::env::var(name).ok())?;
    Ok(settings
        .map(|settings| {
            format!(
                "LLM judge: model {} at {}, asked only about failures that test metrics and \
                 completion signals cannot decide (if it fails, the metrics-only verdict \
                 applies and the detection says so)",
                settings.model, settings.base_url
            )
        })
        .into_iter()
        .collect())
}
