//! The command line: subcommands, their arguments and help texts.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Detects unproductive loops in multi-agent LLM traces.
///
/// Reads agent events as JSON Lines (one object per line, see the trace
/// format) and answers each one with a decision: what loops, why, and what
/// the orchestrator should do about it.
#[derive(Debug, Parser)]
#[command(name = "loopguard", version, propagate_version = true)]
pub(crate) struct Cli {
    /// Diagnostics on stderr: off, error, warn, info or debug [default: off].
    /// Without this flag, the environment variable LOOPGUARD_LOG is read (a
    /// level, or a tracing filter such as `loopguard_host=debug`).
    #[arg(long, global = true, value_enum, value_name = "LEVEL")]
    pub(crate) log_level: Option<LogLevel>,

    /// Compare requests and topics by exact normalized text instead of
    /// embeddings (the same as `semantic.enabled = false` in the config):
    /// no model is loaded, and every report says semantic matching is off.
    #[arg(long, global = true)]
    pub(crate) no_semantic: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Replay a recorded trace and print a decision per event, or a report.
    ///
    /// Every non-blank line gets an answer; a line that is not a valid event
    /// is reported with its line number and the others go on. Exit status: 0
    /// when the input could be read, 1 with --strict when any line had an
    /// error, 2 when the trace or the config cannot be read.
    Replay(ReplayArgs),
    /// Replay bundled example traces that show every built-in loop kind.
    ///
    /// Each scenario is explained in plain words, then replayed and reported
    /// like `loopguard replay` would. Needs no files.
    Demo(DemoArgs),
    /// How similar two texts are to loopguard: their cosine, and whether it
    /// is above the same-request and same-topic thresholds.
    ///
    /// Uses the local embedding model, like the detectors (with
    /// --no-semantic: exact normalized text, 1 or 0). Handy to choose
    /// thresholds for your own traces: a pair counts as "the same" only
    /// when its cosine is strictly above the threshold.
    Similarity(SimilarityArgs),
    /// Load detector plugins and describe them: name, version, kinds, ABI,
    /// SDK and rustc versions. Runs no trace.
    ///
    /// A plugin is a cdylib built against loopguard-plugin-api. With
    /// --config, the config's `[[plugins]]` are described too, each started
    /// with its own config table. Exit status 2 when any library is refused
    /// (the others are still described).
    Plugins(PluginsArgs),
    /// List the tasks a store keeps: status, loop count, pivots, last seen,
    /// and how many cycle-log episodes each has.
    ///
    /// The store is one `replay --store URL` (or an embedding engine)
    /// wrote: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    Tasks(TasksArgs),
    /// Print a store's cycle log (the audit trail): one line per detection
    /// episode, oldest first, for every task or one.
    Log(LogArgs),
}

/// `loopguard tasks`.
#[derive(Debug, Args)]
pub(crate) struct TasksArgs {
    /// The store: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,

    /// Output format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// `loopguard log`.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// The store: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,

    /// Only this task's episodes.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,

    /// Output format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// `loopguard plugins`.
#[derive(Debug, Args)]
pub(crate) struct PluginsArgs {
    /// Plugin libraries (.so, .dylib, .dll).
    #[arg(value_name = "PATH")]
    pub(crate) paths: Vec<PathBuf>,

    /// Also describe the plugins this config names (`[[plugins]]`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// How `loopguard plugins` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ListFormat {
    /// For people.
    Text,
    /// One JSON document: {"host_abi", "oldest_abi", "plugins", "refused"}.
    Json,
}

/// `loopguard similarity`.
#[derive(Debug, Args)]
pub(crate) struct SimilarityArgs {
    /// The first text.
    #[arg(value_name = "TEXT_A")]
    pub(crate) a: String,

    /// The second text.
    #[arg(value_name = "TEXT_B")]
    pub(crate) b: String,

    /// Settings as TOML: the thresholds (`[similarity]`) and where the model
    /// is (`[semantic]`). Without it, the built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Use the thresholds of this task type
    /// (`[similarity.task_types.NAME]`), as an event with this
    /// `task_type` would.
    #[arg(long, value_name = "NAME")]
    pub(crate) task_type: Option<String>,
}

/// `loopguard replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The trace: a JSON Lines file, or `-` for standard input.
    #[arg(value_name = "FILE|-")]
    pub(crate) input: PathBuf,

    /// Settings as TOML (keys as in config/default.toml; unknown keys are
    /// errors). Without it, the built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Output format [default: text when stdout is a terminal, jsonl
    /// otherwise].
    ///
    /// jsonl: one JSON decision per event line, or {"line":N,"error":"..."}
    /// for a line that is not a valid event.
    /// json: one report for the whole trace.
    /// text: for people: one line per detection, then a summary per task.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub(crate) format: Option<Format>,

    /// Exit with status 1 when any line is not a valid event.
    #[arg(long)]
    pub(crate) strict: bool,

    /// Load a detector plugin (a cdylib built against loopguard-plugin-api),
    /// with no config of its own; repeat for more. Plugins that need a
    /// config go in the config file's `[[plugins]]`.
    #[arg(long = "plugin", value_name = "PATH")]
    pub(crate) plugins: Vec<PathBuf>,

    /// Where task snapshots and the cycle log go: `memory` (gone when the
    /// command ends), `sqlite://PATH` (created on first use) or
    /// `postgres://USER@HOST/DATABASE`. `loopguard tasks` and `loopguard
    /// log` read them back.
    #[arg(long, value_name = "URL", default_value = "memory")]
    pub(crate) store: String,
}

/// `loopguard demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Output format [default: text].
    ///
    /// text: each scenario explained, then its text report.
    /// json: one object {"scenarios": [{"kind", "title", "report"}]}.
    /// jsonl: every decision of every scenario, each with a "scenario" field.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::Text)]
    pub(crate) format: Format,
}

/// How decisions and reports are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// One JSON decision per input line.
    Jsonl,
    /// One JSON report for the whole trace.
    Json,
    /// For people: detections, then a summary per task.
    Text,
}

impl Format {
    /// `--format` if given; otherwise text for a terminal and JSON Lines
    /// for a pipe or a file.
    pub(crate) fn or_default_for_stdout(format: Option<Format>) -> Format {
        format.unwrap_or_else(|| {
            if std::io::stdout().is_terminal() {
                Format::Text
            } else {
                Format::Jsonl
            }
        })
    }
}

/// `--log-level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogLevel {
    /// No diagnostics.
    Off,
    /// Escalations and failures.
    Error,
    /// Interventions too.
    Warn,
    /// Every detection.
    Info,
    /// Everything.
    Debug,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
