//! Diagnostics: `tracing` events written to stderr.
//!
//! The engine logs every detection (INFO), intervention (WARN) and
//! escalation (ERROR). Off by default, so stdout and stderr carry only the
//! command's own output.

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

use crate::cli::LogLevel;

/// The environment variable read when `--log-level` is not given.
pub(crate) const LOG_ENV: &str = "LOOPGUARD_LOG";

/// Installs the subscriber: `--log-level` if given, else `LOOPGUARD_LOG`
/// (a level or any `tracing` filter directive), else nothing.
pub(crate) fn init(level: Option<LogLevel>) -> anyhow::Result<()> {
    let filter = match level {
        Some(level) => EnvFilter::default().add_directive(level_filter(level).into()),
        None => match std::env::var(LOG_ENV) {
            Ok(directives) if !directives.trim().is_empty() => EnvFilter::builder()
                .parse(directives.trim())
                .with_context(|| format!("{LOG_ENV}={directives:?} is not a log level"))?,
            _ => return Ok(()),
        },
    };
    if filter.max_level_hint() == Some(LevelFilter::OFF) {
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|err| anyhow::anyhow!("cannot set up logging: {err}"))
}

fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Off => LevelFilter::OFF,
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
    }
}
