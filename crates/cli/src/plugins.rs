//! `loopguard plugins`: describes detector plugin libraries without running
//! a trace. (The plugins a command runs with are loaded by [`setup`].)

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, anyhow};
use loopguard_config::Isolation;
use loopguard_host::{AbiVersion, PluginHost, PluginInfo};
use serde_json::json;

use crate::cli::{ListFormat, PluginsArgs};
use crate::outcome::Outcome;
use crate::setup;

/// Runs `loopguard plugins`: starts each library (and, with `--config`,
/// each configured plugin, with its config) as a run would, in a worker
/// process or in process, and describes it.
/// Exit 2 when any was refused; the others are still described.
pub(crate) fn run(args: &PluginsArgs) -> anyhow::Result<Outcome> {
    // Not `setup::config`: a library named here that is not a valid plugin
    // is described as refused, not rejected with the config.
    let config = setup::load_config(args.config.as_deref())?;
    let config = setup::resolve_plugins(config, args.config.as_deref(), &args.paths);
    let config = setup::apply_isolation(config, args.plugin_isolation.map(Into::into));
    if config.plugins.is_empty() {
        return Err(anyhow!(
            "no plugins to describe: name libraries (loopguard plugins PATH...) or a config \
             with [[plugins]]"
        ));
    }
    let mut described = Vec::new();
    let mut refused = Vec::new();
    // Started as a run starts them (in a worker process unless the config
    // says otherwise), so a plugin that crashes while it starts is refused
    // here too instead of ending the command; starting an instance checks
    // the plugin's own config.
    let host = PluginHost::new(&config.plugin_host);
    for entry in &config.plugins {
        let loaded = host.start(entry).map(|detector| detector.info().clone());
        match loaded {
            Ok(info) => described.push((info, entry.isolation(&config.plugin_host))),
            Err(err) => refused.push((entry.path.clone(), err.to_string())),
        }
    }
    let out = io::stdout().lock();
    match args.format {
        ListFormat::Json => write_json(out, &described, &refused),
        ListFormat::Text => write_text(out, &described, &refused),
    }
    .context("cannot write the output")?;
    match refused.len() {
        0 => Ok(Outcome::Clean),
        count => {
            let messages: Vec<&str> = refused.iter().map(|(_, err)| err.as_str()).collect();
            Err(anyhow!(
                "{count} of {} plugins refused: {}",
                config.plugins.len(),
                messages.join("; ")
            ))
        }
    }
}

/// Where a plugin ran, in words.
fn runs_in(isolation: Isolation) -> &'static str {
    match isolation {
        Isolation::Process => "a worker process",
        Isolation::InProcess => "loopguard's own process",
    }
}

fn write_text(
    mut out: impl Write,
    described: &[(PluginInfo, Isolation)],
    refused: &[(PathBuf, String)],
) -> io::Result<()> {
    for (info, isolation) in described {
        writeln!(out, "{} {}", info.name, info.version)?;
        if !info.description.is_empty() {
            writeln!(out, "  {}", info.description)?;
        }
        writeln!(out, "  path:   {}", info.path.display())?;
        writeln!(out, "  kinds:  {}", info.kinds.join(", "))?;
        writeln!(
            out,
            "  ABI:    {} (this loopguard speaks {}, loads {} to {})",
            info.abi,
            AbiVersion::HOST,
            AbiVersion::OLDEST,
            AbiVersion::HOST
        )?;
        writeln!(out, "  SDK:    loopguard-plugin-api {}", info.sdk_version)?;
        writeln!(out, "  rustc:  {}", info.rustc_version)?;
        writeln!(out, "  runs:   in {} ({isolation})", runs_in(*isolation))?;
    }
    for (path, _) in refused {
        writeln!(out, "{}: refused (see stderr)", path.display())?;
    }
    out.flush()
}

fn write_json(
    mut out: impl Write,
    described: &[(PluginInfo, Isolation)],
    refused: &[(PathBuf, String)],
) -> io::Result<()> {
    /// A plugin's info, with where it ran (`isolation`: "process" or
    /// "in-process").
    #[derive(serde::Serialize)]
    struct Listed<'a> {
        #[serde(flatten)]
        info: &'a PluginInfo,
        isolation: Isolation,
    }
    let described: Vec<Listed<'_>> = described
        .iter()
        .map(|(info, isolation)| Listed {
            info,
            isolation: *isolation,
        })
        .collect();
    let refused: Vec<_> = refused
        .iter()
        .map(|(path, error)| json!({"path": path, "error": error}))
        .collect();
    let document = json!({
        "host_abi": AbiVersion::HOST,
        "oldest_abi": AbiVersion::OLDEST,
        "plugins": described,
        "refused": refused,
    });
    serde_json::to_writer_pretty(&mut out, &document)?;
    writeln!(out)?;
    out.flush()
}
