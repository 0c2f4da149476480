//! `loopguard replay`: a trace through the engine, answers to an output.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, anyhow};
use loopguard_host::{Durability, HostError, LoopGuard};

use crate::cli::{Format, ReplayArgs};
use crate::outcome::Outcome;
use crate::output::{Json, Jsonl, Output, Text};
use crate::setup::{self, ConfigSource, Setup};
use crate::store::{self, Recorder, StoreFailures};
use crate::summary::Summary;

/// Runs `loopguard replay`: config first (a bad one stops before any work),
/// then the semantic model (a model that cannot start stops here too),
/// then the input, then every line.
pub(crate) async fn run(args: &ReplayArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    let config = setup::config(ConfigSource {
        file: args.config.as_deref(),
        no_semantic,
        plugins: &args.plugins,
        isolation: args.plugin_isolation.map(Into::into),
    })?;
    let setup = Setup::start(config)?;
    let mut notes = setup.semantic_notes();
    notes.extend(setup.judge_notes()?);
    let store = setup::open_store(&args.store).await?;
    let engine = setup.engine(Some(Arc::clone(&store)))?;
    let (input, name) = match &args.from {
        Some(format) => crate::import::open_imported(format, &args.input)?,
        None => open_input(&args.input)?,
    };
    // The store's run: where it resumes, and the line each commit covers.
    let (input, first_line) =
        store::begin_run(store.as_ref(), input, args.first_line, args.resume).await?;
    let mut failures = StoreFailures::default();
    let out = stdout_for(&args.input, store.durability());
    let summary = match Format::or_default_for_stdout(args.format) {
        Format::Jsonl => {
            let mut output = Jsonl::new(out);
            let mut output = Recorder::new(store.as_ref(), &mut output, &mut failures);
            replay_into_from(&engine, input, first_line, &name, &mut output).await?
        }
        Format::Json => {
            let mut output = Json::new(out).with_notes(notes);
            let mut output = Recorder::new(store.as_ref(), &mut output, &mut failures);
            replay_into_from(&engine, input, first_line, &name, &mut output).await?
        }
        Format::Text => {
            // Colors only where stdout can show them (and as NO_COLOR /
            // CLICOLOR_FORCE say).
            let choice = anstream::AutoStream::choice(&io::stdout());
            let out = anstream::AutoStream::new(out, choice);
            let mut output = Text::new(out, anstream::stderr()).with_notes(notes);
            let mut output = Recorder::new(store.as_ref(), &mut output, &mut failures);
            replay_into_from(&engine, input, first_line, &name, &mut output).await?
        }
    };
    // A shared store's commits that failed wait in the engine: written now,
    // as the database allows, within the settle time.
    let waiting = store::write_pending(&engine, store.as_ref()).await;
    // Dropping the engine stops the store's writer once it has written (or
    // given up) what it holds; then the failures are summed up.
    drop(engine);
    let lost = store::settle(store.as_ref(), &failures, waiting).await;
    Ok(if lost {
        Outcome::LostWrites
    } else if args.strict && summary.errors > 0 {
        Outcome::LineErrors
    } else {
        Outcome::Clean
    })
}

/// Replays `input` (called `name` in messages) through `engine`, handing
/// every answer and then the trace's summary to `output`.
pub(crate) async fn replay_into(
    engine: &LoopGuard,
    input: impl BufRead,
    name: &str,
    output: &mut dyn Output,
) -> anyhow::Result<Summary> {
    replay_into_from(engine, input, 1, name, output).await
}

/// [`replay_into`] for a piece of a longer trace whose first line is line
/// `first_line` of the whole.
pub(crate) async fn replay_into_from(
    engine: &LoopGuard,
    input: impl BufRead,
    first_line: u64,
    name: &str,
    output: &mut dyn Output,
) -> anyhow::Result<Summary> {
    // The sink cannot fail, so the first write error is kept and returned
    // once the replay is done, and the input ends there: no one reads the
    // answers to the lines after it (`loopguard replay big.jsonl | head`).
    let mut write_error = None;
    let mut summary = Summary::default();
    let stop = Cell::new(false);
    let input = UntilStopped {
        inner: input,
        stop: &stop,
    };
    let replayed = loopguard_host::replay_each_from(engine, input, first_line, |item| {
        summary.add(item);
        if write_error.is_none()
            && let Err(err) = output.item(item)
        {
            write_error = Some(err);
            stop.set(true);
        }
    })
    .await;
    match replayed {
        Ok(_lines) => {}
        Err(HostError::Read(err)) => {
            return Err(anyhow!(err).context(format!("cannot read the trace {name}")));
        }
        Err(err) => return Err(anyhow!(err)),
    }
    if let Some(err) = write_error {
        return Err(anyhow!(err).context("cannot write the output"));
    }
    output.finish(&summary).context("cannot write the output")?;
    Ok(summary)
}

/// Standard output for answers to the lines of `input`: line by line when
/// the trace comes from standard input (it may be a live stream, and each
/// answer is wanted as soon as it is decided) or the store is durable (each
/// decision is written out once its event is committed, so a crash of
/// anything afterwards loses no printed decision that the store holds; a
/// write costs far less than the commit before it), in large blocks for a
/// file replayed into memory (nothing is committed there).
fn stdout_for(input: &Path, durability: Durability) -> Box<dyn Write> {
    if input == Path::new("-") || durability != Durability::Memory {
        Box::new(io::stdout().lock())
    } else {
        Box::new(BufWriter::with_capacity(64 * 1024, io::stdout().lock()))
    }
}

/// A reader that reports the end of its input once `stop` is set.
struct UntilStopped<'a, R> {
    inner: R,
    stop: &'a Cell<bool>,
}

impl<R: Read> Read for UntilStopped<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.stop.get() {
            return Ok(0);
        }
        self.inner.read(buf)
    }
}

impl<R: BufRead> BufRead for UntilStopped<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.stop.get() {
            return Ok(&[]);
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
    }
}

/// Opens the trace: a file, or standard input for `-`. Returns the reader
/// and the name to use in messages.
fn open_input(path: &Path) -> anyhow::Result<(Box<dyn BufRead>, String)> {
    if path == Path::new("-") {
        return Ok((Box::new(io::stdin().lock()), "<stdin>".to_owned()));
    }
    let name = path.display().to_string();
    let file = File::open(path).with_context(|| format!("cannot read the trace {name}"))?;
    Ok((Box::new(BufReader::with_capacity(64 * 1024, file)), name))
}
