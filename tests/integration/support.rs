//! Running the binary and reading what it prints.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// What one run of `loopguard` gave.
#[derive(Debug)]
pub(crate) struct Run {
    /// The exit code (`None` if killed by a signal).
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// A trace fixture from `tests/traces/`.
pub(crate) fn trace(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/traces")
        .join(name)
}

/// A config fixture from `tests/configs/`.
pub(crate) fn config(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/configs")
        .join(name)
}

/// `tests/configs/count_every.toml` as an argument: exchanges counted as
/// trace format 1.1 counts them (`cycles.count = "every"`).
pub(crate) fn count_every() -> String {
    config("count_every.toml")
        .to_str()
        .expect("a UTF-8 path")
        .to_owned()
}

/// The pinned model files, fetched once per test binary before any command
/// runs: on a fresh machine the first `loopguard` would fetch them itself
/// and say so on stderr, and several tests at once would each fetch.
fn provision_the_model_once() {
    static PROVISIONED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    PROVISIONED.get_or_init(|| {
        if let Err(err) = loopguard_semantic::ModelFiles::ensure_with(
            &loopguard_semantic::ProvisionOptions::new(),
        ) {
            panic!("cannot provision the embedding model for the tests: {err}");
        }
    });
}

/// The command with a clean environment for what it reads.
pub(crate) fn loopguard() -> Command {
    provision_the_model_once();
    let mut command = Command::new(env!("CARGO_BIN_EXE_loopguard"));
    command
        .env_remove("LOOPGUARD_LOG")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG");
    command
}

/// Runs `loopguard ARGS` with `stdin` as its standard input.
pub(crate) fn run_with_stdin<I, S>(args: I, stdin: &[u8]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_command(loopguard().args(args), stdin)
}

/// Runs `loopguard ARGS` with an empty standard input.
pub(crate) fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_with_stdin(args, b"")
}

/// Runs a prepared command with `stdin` as its standard input.
pub(crate) fn run_command(command: &mut Command, stdin: &[u8]) -> Run {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the loopguard binary starts");
    {
        let mut input = child.stdin.take().expect("stdin is piped");
        // The command may stop reading early (a bad config); that is fine.
        let _ = input.write_all(stdin);
    }
    let output = child.wait_with_output().expect("loopguard finishes");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// `loopguard replay TRACE --format jsonl [EXTRA]`: exit 0 and one JSON
/// object per line.
pub(crate) fn replay_jsonl(trace_name: &str, extra: &[&str]) -> Vec<Value> {
    let path = trace(trace_name);
    let mut args = vec![
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("jsonl"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    let run = run(args);
    assert_eq!(run.code, Some(0), "{trace_name}: {run:?}");
    parse_jsonl(&run.stdout)
}

/// Every line of `text` as JSON.
pub(crate) fn parse_jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).expect("every output line is JSON"))
        .collect()
}

/// `loopguard replay TRACE --format json [EXTRA]`: exit 0 and one report.
pub(crate) fn replay_report(trace_name: &str, extra: &[&str]) -> Value {
    let path = trace(trace_name);
    let mut args = vec![
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("json"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    let run = run(args);
    assert_eq!(run.code, Some(0), "{trace_name}: {run:?}");
    serde_json::from_str(&run.stdout).expect("the report is JSON")
}

/// The decision for input line `line`.
pub(crate) fn at(decisions: &[Value], line: u64) -> &Value {
    decisions
        .iter()
        .find(|decision| decision["line"] == line)
        .unwrap_or_else(|| panic!("no output for line {line}"))
}

/// The detections of `kind` in a decision.
pub(crate) fn of_kind<'a>(decision: &'a Value, kind: &str) -> Vec<&'a Value> {
    decision["detections"]
        .as_array()
        .map(|all| all.iter().filter(|d| d["kind"] == kind).collect())
        .unwrap_or_default()
}

/// The one detection of `kind` on input line `line`.
pub(crate) fn detection<'a>(decisions: &'a [Value], line: u64, kind: &str) -> &'a Value {
    let found = of_kind(at(decisions, line), kind);
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} detection on line {line}, got {:?}",
        at(decisions, line)
    );
    found[0]
}

/// Lines of all decisions of `task` that carry a detection of `kind`.
pub(crate) fn lines_with(decisions: &[Value], task: &str, kind: &str) -> Vec<u64> {
    decisions
        .iter()
        .filter(|decision| decision["task"] == task && !of_kind(decision, kind).is_empty())
        .filter_map(|decision| decision["line"].as_u64())
        .collect()
}

/// A JSON array of numbers as a vector.
pub(crate) fn numbers(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|n| n.as_u64().expect("a line number"))
        .collect()
}

/// The task `task` of a report.
pub(crate) fn task<'a>(report: &'a Value, task: &str) -> &'a Value {
    report["tasks"]
        .as_array()
        .and_then(|tasks| tasks.iter().find(|t| t["task"] == task))
        .unwrap_or_else(|| panic!("no task {task} in {report}"))
}

/// The URL of a SQLite store in the file `path`.
pub(crate) fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// `loopguard report --store URL --format json`: exit 0 and the report.
pub(crate) fn store_report(url: &str) -> Value {
    let run = run(["report", "--store", url, "--format", "json"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    serde_json::from_str(&run.stdout).unwrap_or_else(|err| panic!("not JSON ({err}): {run:?}"))
}

/// The arguments of a replay of standard input into the store at `url`,
/// JSON Lines out, exact text only.
fn replay_stdin_args(url: &str) -> [&str; 7] {
    [
        "--no-semantic",
        "replay",
        "-",
        "--format",
        "jsonl",
        "--store",
        url,
    ]
}

/// Runs a replay of `stdin` into the store at `url` (JSON Lines out, exact
/// text only), with `extra` arguments after the store.
pub(crate) fn replay_stdin_into(url: &str, extra: &[&str], stdin: &[u8]) -> Run {
    run_with_stdin(replay_stdin_args(url).iter().chain(extra), stdin)
}

/// That replay as a command to spawn, its standard input and output piped
/// (its standard error as the caller sets it).
pub(crate) fn replay_stdin_command(url: &str) -> Command {
    let mut command = loopguard();
    command
        .args(replay_stdin_args(url))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    command
}

/// A schema of its own on the server `LOOPGUARD_TEST_POSTGRES_URL` names,
/// dropped at the end; `None` (with a notice) when the variable is unset.
pub(crate) struct PgSchema {
    runtime: tokio::runtime::Runtime,
    admin: sqlx::PgPool,
    name: String,
    /// The server's URL, with the schema as its search path.
    pub(crate) url: String,
}

impl PgSchema {
    /// Creates the schema; `test` names it and the skip notice.
    pub(crate) fn create(test: &str) -> Option<PgSchema> {
        let Ok(base) = std::env::var("LOOPGUARD_TEST_POSTGRES_URL") else {
            eprintln!("{test}: skipped: LOOPGUARD_TEST_POSTGRES_URL is not set");
            return None;
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.as_nanos())
            .unwrap_or_default();
        let name = format!("loopguard_cli_{test}_{}_{nanos}", std::process::id());
        let admin = runtime
            .block_on(async {
                let admin = sqlx::PgPool::connect(&base).await?;
                sqlx::query(&format!("CREATE SCHEMA \"{name}\""))
                    .execute(&admin)
                    .await?;
                Ok::<_, sqlx::Error>(admin)
            })
            .unwrap_or_else(|err| panic!("LOOPGUARD_TEST_POSTGRES_URL is set but {base}: {err}"));
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options=-c%20search_path%3D{name}");
        Some(PgSchema {
            runtime,
            admin,
            name,
            url,
        })
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = self.runtime.block_on(
            sqlx::query(&format!("DROP SCHEMA \"{}\" CASCADE", self.name)).execute(&self.admin),
        );
    }
}

/// One HTTP/1.1 request to `addr` (`connection: close`): the status and
/// the body.
pub(crate) fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("the server accepts");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: {content_type}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("sent");
    stream.write_all(body).expect("sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status");
    (status, body.to_owned())
}
