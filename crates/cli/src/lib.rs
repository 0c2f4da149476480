//! The `loopguard` command line, as a library: [`run`] is the whole
//! command (the `loopguard` binary is one call of it, and so is the Python
//! package's `loopguard` command). Replay a recorded multi-agent trace and
//! see its loops.
//!
//! The command speaks the trace format of `docs/spec/trace-format.md`:
//! JSON Lines of agent events in, one decision per event and one report per
//! trace out.
//!
//! ```text
//! loopguard replay trace.jsonl                  # text for a terminal, JSON Lines in a pipe
//! loopguard replay - --format json < trace.jsonl
//! loopguard replay trace.jsonl --config loopguard.toml --strict
//! loopguard demo                                # every built-in loop kind, explained
//! loopguard similarity "text a" "text b"        # the cosine, against the thresholds
//! loopguard tune threshold --pairs data/pairs/requests.jsonl --out tune-out   # choose a threshold
//! loopguard replay trace.jsonl --no-semantic    # exact text only: no model
//! loopguard replay trace.jsonl --plugin target/release/libmy_plugin.so
//! loopguard plugins target/release/libmy_plugin.so   # name, kinds, ABI, versions
//! loopguard replay trace.jsonl --store sqlite://loopguard.db   # keep tasks and the cycle log
//! loopguard tasks --store sqlite://loopguard.db      # each task: status and counts
//! loopguard log --store sqlite://loopguard.db --task T-1042   # the audit trail
//! loopguard report --store sqlite://loopguard.db     # the report of all a store keeps
//! loopguard serve --listen 127.0.0.1:7878           # the engine over HTTP
//! loopguard models fetch                             # the model files, ahead of the first run
//! ```
//!
//! Exit codes: 0 when the input could be read (bad lines are listed, not
//! fatal), 1 with `--strict` when any line had an error, or when an event's
//! writes never reached its store (`--store`), 2 when the trace
//! or the config could not be read, or the embedding model could not start
//! (one message on stderr naming the file, the config key, or what to do).
//!
//! The modules: `cli` declares the arguments and `outcome` what a
//! command returns; `setup` loads the config and builds what every
//! command runs on (the model or the exact-text fallback, the plugins, the
//! progress evaluator and its LLM judge, the store, the engine). The
//! commands: `replay` runs a trace through the engine, `demo` holds the
//! bundled scenarios, `similarity` compares two texts, `tune` sweeps
//! the similarity threshold over labelled pairs or traces, `serve` serves
//! the engine over HTTP, `plugins`
//! describes detector plugins, `models` locates and fetches the model
//! files, `store` prints what a store keeps. Below
//! them, `output` writes decisions and reports in each format and
//! `summary` counts what a streamed replay keeps; `logging` sets up
//! `tracing`. Imports go one way: `main` -> commands -> `setup`, `output`
//! -> `summary`, and `cli` / `outcome` at the bottom; no module imports
//! one that imports it.

use std::ffi::OsString;
use std::io;

use clap::Parser;

mod cli;
mod demo;
mod eval;
mod import;
mod logging;
mod models;
mod outcome;
mod output;
mod plugins;
mod replay;
mod score;
mod serve;
mod setup;
mod similarity;
mod store;
mod summary;
mod tune;

use cli::{Cli, Command};
use outcome::Outcome;

/// Exit code when `--strict` is given and some line was not a valid event.
const EXIT_LINE_ERRORS: u8 = 1;
/// Exit code when some event's writes never reached the store (its commit
/// failed and no retry wrote it by the end of the replay).
const EXIT_LOST_WRITES: u8 = 1;
/// Exit code when the trace or the config could not be read, or the
/// embedding model could not start.
const EXIT_UNREADABLE: u8 = 2;

/// Runs the command line `args` (the program's name first, as
/// `std::env::args_os` gives it) and returns its exit status: what the
/// `loopguard` binary does, and what the Python package's `loopguard`
/// command calls. Help, a version or a usage error is printed as clap
/// prints it (status 0 or 2).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(EXIT_UNREADABLE);
        }
    };
    if let Err(err) = logging::init(cli.log_level) {
        return fail(&err);
    }
    // A plugin worker answers its host on stdin and stdout, one request at
    // a time: no runtime.
    if let Command::PluginWorker(args) = &cli.command {
        return match loopguard_host::run_worker(&args.library, args.memory_limit_mb) {
            Ok(()) => 0,
            Err(err) => fail(
                &anyhow::Error::new(err)
                    .context(format!("plugin worker for {}", args.library.display())),
            ),
        };
    }
    // The server answers requests on every core; the other commands read
    // one input in order.
    let mut builder = if matches!(cli.command, Command::Serve(_)) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&anyhow::Error::new(err).context("cannot start the runtime")),
    };
    let no_semantic = cli.no_semantic;
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Replay(args) => replay::run(&args, no_semantic).await,
            Command::Demo(args) => demo::run(&args, no_semantic).await,
            Command::Similarity(args) => similarity::run(&args, no_semantic).await,
            Command::Tune(args) => tune::run(&args, no_semantic).await,
            Command::Score(args) => score::run(&args, no_semantic).await,
            Command::Eval(args) => eval::run(&args, no_semantic).await,
            Command::Import(args) => import::run(&args),
            Command::Plugins(args) => plugins::run(&args),
            Command::Models(command) => models::run(&command),
            Command::Tasks(args) => store::tasks(&args).await,
            Command::Log(args) => store::log(&args).await,
            Command::Report(args) => store::report(&args).await,
            Command::Opinions(args) => store::opinions(&args).await,
            Command::Serve(args) => serve::run(&args, no_semantic).await,
            Command::PluginWorker(_) => Ok(Outcome::Clean),
        }
    });
    match outcome {
        Ok(Outcome::Clean) => 0,
        Ok(Outcome::LineErrors) => EXIT_LINE_ERRORS,
        Ok(Outcome::LostWrites) => EXIT_LOST_WRITES,
        Err(err) if is_broken_pipe(&err) => 0,
        Err(err) => fail(&err),
    }
}

/// Prints one message for an error that stops the command; its exit
/// status is 2.
fn fail(err: &anyhow::Error) -> u8 {
    // `{:#}` joins the context chain on one line: "cannot read the trace
    // t.jsonl: No such file or directory (os error 2)".
    eprintln!("loopguard: {err:#}");
    EXIT_UNREADABLE
}

/// Whoever read our output went away (`loopguard replay t | head`): not an
/// error worth a message.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
