//! Detector plugins for a command: the config's `[[plugins]]` and the
//! `--plugin` flags, loaded at start-up; and `loopguard plugins`, which
//! describes libraries without running a trace.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use loopguard_core_types::{Config, PluginConfig};
use loopguard_host::{AbiVersion, LoopGuardBuilder, Plugin, PluginInfo, load_plugins};
use serde_json::json;

use crate::Outcome;
use crate::cli::{ListFormat, PluginsArgs};

/// `config` with its plugin paths made relative to the config file's
/// directory, and the `--plugin` libraries added (with no config of their
/// own; one the config already names is not added twice).
pub(crate) fn resolve(mut config: Config, config_file: Option<&Path>, flags: &[PathBuf]) -> Config {
    if let Some(dir) = config_file.and_then(Path::parent) {
        for plugin in &mut config.plugins {
            if plugin.path.is_relative() {
                plugin.path = dir.join(&plugin.path);
            }
        }
    }
    for path in flags {
        let named = config
            .plugins
            .iter()
            .any(|plugin| same_file(&plugin.path, path));
        if !named {
            config.plugins.push(PluginConfig::new(path));
        }
    }
    config
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// `builder` with every plugin of `config` loaded and started. A plugin
/// that cannot be loaded or refuses its config stops the command here.
pub(crate) fn install(
    mut builder: LoopGuardBuilder,
    config: &Config,
) -> anyhow::Result<LoopGuardBuilder> {
    for detector in load_plugins(config)? {
        builder = builder.extension(detector);
    }
    Ok(builder)
}

/// Runs `loopguard plugins`: loads each library (and, with `--config`,
/// each configured plugin, started with its config) and describes it.
/// Exit 2 when any was refused; the others are still described.
pub(crate) fn run(args: &PluginsArgs) -> anyhow::Result<Outcome> {
    let config = match &args.config {
        Some(path) => crate::replay::load_config(path)?,
        None => Config::default(),
    };
    let config = resolve(config, args.config.as_deref(), &args.paths);
    if config.plugins.is_empty() {
        return Err(anyhow!(
            "no plugins to describe: name libraries (loopguard plugins PATH...) or a config \
             with [[plugins]]"
        ));
    }
    let mut described = Vec::new();
    let mut refused = Vec::new();
    for entry in &config.plugins {
        let loaded = Plugin::load(&entry.path).and_then(|plugin| {
            // Starting an instance checks the plugin's own config.
            plugin.instantiate(&entry.config)?;
            Ok(plugin.info().clone())
        });
        match loaded {
            Ok(info) => described.push(info),
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

fn write_text(
    mut out: impl Write,
    described: &[PluginInfo],
    refused: &[(PathBuf, String)],
) -> io::Result<()> {
    for info in described {
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
    }
    for (path, _) in refused {
        writeln!(out, "{}: refused (see stderr)", path.display())?;
    }
    out.flush()
}

fn write_json(
    mut out: impl Write,
    described: &[PluginInfo],
    refused: &[(PathBuf, String)],
) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_paths_are_relative_to_the_config_and_flags_are_added_once() {
        let mut config = Config::default();
        config.plugins.push(PluginConfig::new("lib/a.so"));
        config.plugins.push(PluginConfig::new("/abs/b.so"));
        let config = resolve(
            config,
            Some(Path::new("/etc/loopguard/loopguard.toml")),
            &[
                PathBuf::from("/etc/loopguard/lib/a.so"),
                PathBuf::from("c.so"),
            ],
        );
        let paths: Vec<&Path> = config.plugins.iter().map(|p| p.path.as_path()).collect();
        assert_eq!(
            paths,
            [
                Path::new("/etc/loopguard/lib/a.so"),
                Path::new("/abs/b.so"),
                Path::new("c.so")
            ]
        );
    }
}
