//! `loopguard models`: where the embedding model's files are looked for
//! (and which rule chose that directory), and fetching them ahead of the
//! first run. With a config whose judge reads the larger tuned encoder
//! (`[similarity] tuned_encoder = "mpnet"`), its base and update too.

use std::io::{self, Write};

use loopguard_config::Config;
use loopguard_semantic::{
    MPNET_TUNED_MODEL_ID, ModelFiles, MpnetBase, ProvisionOptions, Resolved, SameRequestJudge,
};

use crate::cli::{ModelsArgs, ModelsCommand};
use crate::outcome::Outcome;
use crate::setup;

/// Runs `loopguard models fetch|where`.
pub(crate) fn run(command: &ModelsCommand) -> anyhow::Result<Outcome> {
    match command {
        ModelsCommand::Fetch(args) => fetch(args),
        ModelsCommand::Where(args) => locate(args),
    }
}

/// Which rule chose the directory, in words: `--dir` names itself.
fn rule(args: &ModelsArgs, resolved: &Resolved) -> &'static str {
    if args.dir.is_some() {
        "set by --dir"
    } else {
        resolved.model_dir_rule()
    }
}

/// The config of `args` and its lookup: `--dir`, else the config's
/// `[semantic]`, else the environment and the defaults.
fn resolve(args: &ModelsArgs) -> anyhow::Result<(Config, Resolved)> {
    let config = setup::load_config(args.config.as_deref())?;
    let mut options: ProvisionOptions = loopguard_semantic::provision_options(&config.semantic);
    if let Some(dir) = &args.dir {
        options = options.model_dir(dir);
    }
    Ok((config, options.resolve()))
}

/// Whether the config's same-request judge reads the larger tuned
/// encoder (its setting, or the weights file it names).
fn needs_mpnet(config: &Config) -> anyhow::Result<bool> {
    let judge = SameRequestJudge::from_config(&config.similarity)?;
    Ok(judge.tuned_encoder_needed() == Some(MPNET_TUNED_MODEL_ID))
}

/// `loopguard models fetch`: the files in place, fetched when missing.
fn fetch(args: &ModelsArgs) -> anyhow::Result<Outcome> {
    let (config, resolved) = resolve(args)?;
    let rule = rule(args, &resolved);
    let announce = |plan: &loopguard_semantic::FetchPlan| {
        let mut plan = plan.clone();
        plan.rule = rule;
        setup::announce_fetch(&plan);
    };
    let files = ModelFiles::ensure_resolved_notify(&resolved, announce)?;
    let larger = if needs_mpnet(&config)? {
        Some(MpnetBase::ensure_resolved_notify(&resolved, announce)?)
    } else {
        None
    };
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "model files ready in {} ({rule})",
        files.dir().display()
    )?;
    if let Some(larger) = larger {
        writeln!(
            out,
            "the larger tuned encoder ready in {} and {}",
            larger.dir().display(),
            larger.update_dir().display()
        )?;
    }
    Ok(Outcome::Clean)
}

/// `loopguard models where`: the directory, its rule, and whether the
/// files are there and intact (checked, never fetched).
fn locate(args: &ModelsArgs) -> anyhow::Result<Outcome> {
    let (_, resolved) = resolve(args)?;
    let mut checked = resolved.clone();
    checked.offline = true;
    let state = ModelFiles::ensure_resolved(&checked);
    let mut out = io::stdout().lock();
    writeln!(out, "{}", resolved.model_dir.display())?;
    writeln!(out, "  chosen by: {}", rule(args, &resolved))?;
    match state {
        Ok(_) => {
            writeln!(out, "  files: all there and intact")?;
            Ok(Outcome::Clean)
        }
        Err(_) => {
            writeln!(
                out,
                "  files: not all there or not intact; `loopguard models fetch` puts them in place"
            )?;
            anyhow::bail!(
                "the model files in {} are not ready: run `loopguard models fetch`",
                resolved.model_dir.display()
            )
        }
    }
}
