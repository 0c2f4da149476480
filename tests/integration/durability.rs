//! The SQLite store under stress (issue 18): a full disk, a second writer,
//! read-only commands, resuming after the last committed line, and what a
//! replay says (and exits with) when commits fail.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// A failure line of task `task` whose message repeats every third line.
fn failure(index: usize, task: &str) -> String {
    format!(
        "{{\"type\":\"failure\",\"task\":\"{task}\",\"agent\":\"coder\",\"error\":\"error {} {}\"}}\n",
        index % 3,
        "x".repeat(300)
    )
}

/// `count` failure lines over seven tasks.
fn failures(count: usize) -> Vec<String> {
    (0..count)
        .map(|index| failure(index, &format!("T{}", index % 7)))
        .collect()
}

/// The tasks of a report with their counts and detection lines: what two
/// runs must agree on.
fn outcome(report: &Value) -> Vec<(String, String, u64, Vec<u64>)> {
    report["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .map(|task| {
                    let lines = task["detections"]
                        .as_array()
                        .map(|all| all.iter().filter_map(|d| d["line"].as_u64()).collect())
                        .unwrap_or_default();
                    (
                        task["task"].as_str().unwrap_or_default().to_owned(),
                        task["status"].as_str().unwrap_or_default().to_owned(),
                        task["loop_count"].as_u64().unwrap_or_default(),
                        lines,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A replay reading standard input, for a test to feed line by line.
fn replay_from_stdin(url: &str, first_line: u64) -> Child {
    replay_stdin_command(url)
        .args(["--first-line", &first_line.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("the loopguard binary starts")
}

/// Feeds `lines` to a replay and reads one answer per line, each within
/// `limit` (a replay that stalls fails the test instead of hanging it).
fn feed(
    child: &mut Child,
    output: &mut impl BufRead,
    lines: &[String],
    limit: Duration,
) -> Vec<Value> {
    let mut answers = Vec::new();
    for line in lines {
        let input = child.stdin.as_mut().expect("stdin is piped");
        input.write_all(line.as_bytes()).expect("the replay reads");
        input.flush().expect("the replay reads");
        let started = Instant::now();
        let mut answer = String::new();
        output.read_line(&mut answer).expect("an answer");
        assert!(
            started.elapsed() < limit,
            "an answer took {:?} (a stall)",
            started.elapsed()
        );
        answers.push(serde_json::from_str(&answer).expect("a JSON answer"));
    }
    answers
}

fn finish(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    drop(child.stdin.take());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut stderr = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
            }
            return (status.code(), stderr);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("the replay did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn store_errors(answers: &[Value]) -> usize {
    answers
        .iter()
        .filter(|answer| {
            answer["errors"].as_array().is_some_and(|errors| {
                errors
                    .iter()
                    .any(|e| e.as_str().is_some_and(|e| e.starts_with("store:")))
            })
        })
        .count()
}

/// A small tmpfs, unmounted on drop; `None` (with a notice) where this
/// process may not mount one.
struct SmallDisk {
    folder: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let folder = tempfile::tempdir().expect("a temp folder");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(folder.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            println!(
                "NOTICE: skipped: cannot mount a tmpfs here (not root, or no mount permission)"
            );
            return None;
        }
        Some(SmallDisk { folder })
    }

    fn path(&self) -> &Path {
        self.folder.path()
    }

    /// Fills the disk with a file `fill`.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.path().join("fill")).expect("a fill file");
        let block = vec![0u8; 16 * 1024];
        while file.write_all(&block).is_ok() {}
        let _ = file.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.path().join("fill")).expect("the fill file goes");
    }

    fn remount_read_only(&self) -> bool {
        Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.path())
            .status()
            .is_ok_and(|status| status.success())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

/// How long a replay may take to answer one fed line before the test calls
/// it a stall: a guard against hanging, not a speed check. An event may
/// wait out the busy timeout (10 s) twice (a backlog retry and its own
/// commit); the defect stalled for minutes.
const FEED_LIMIT: Duration = Duration::from_secs(25);

/// A replay into a store on a small disk that filled under it.
struct FilledDisk {
    disk: SmallDisk,
    url: String,
    /// The second replay, still running, its output taken.
    child: Child,
    output: BufReader<ChildStdout>,
}

impl FilledDisk {
    /// On a disk of `size`: the first 50 of `lines` replayed in one run,
    /// line 51 fed to a second (its store open, its WAL index allocated),
    /// then the disk is filled and the rest fed, which must report store
    /// errors. `None` where no disk can be mounted.
    fn replay(size: &str, lines: &[String]) -> Option<FilledDisk> {
        let disk = SmallDisk::mount(size)?;
        let url = sqlite_url(&disk.path().join("state.db"));
        let first = replay_stdin_into(&url, &[], lines[..50].concat().as_bytes());
        assert_eq!(first.code, Some(0), "{first:?}");
        let mut child = replay_from_stdin(&url, 51);
        let mut output = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let opened = feed(&mut child, &mut output, &lines[50..51], FEED_LIMIT);
        assert_eq!(store_errors(&opened), 0, "{opened:?}");
        disk.fill();
        let full = feed(&mut child, &mut output, &lines[51..], FEED_LIMIT);
        assert!(
            store_errors(&full) > 0,
            "the full disk is reported: {full:?}"
        );
        Some(FilledDisk {
            disk,
            url,
            child,
            output,
        })
    }
}

/// `lines` replayed in one run into a fresh store must end with the
/// outcome of the report `stored`.
fn assert_like_one_run(stored: &Value, lines: &[String]) {
    let folder = tempfile::tempdir().expect("a temp folder");
    let url = sqlite_url(&folder.path().join("one.db"));
    let one = replay_stdin_into(&url, &[], lines.concat().as_bytes());
    assert_eq!(one.code, Some(0), "{one:?}");
    assert_eq!(outcome(stored), outcome(&store_report(&url)));
}

#[test]
fn a_full_disk_loses_nothing_decided_and_never_stalls() {
    // Room for the 150 events' WAL (about 3.5 MB) once the disk is freed.
    let lines = failures(150);
    // Room for the 150 events' WAL (about 3.5 MB) once the disk is freed.
    let Some(FilledDisk {
        disk,
        url,
        mut child,
        mut output,
    }) = FilledDisk::replay("8m", &lines[..100])
    else {
        return;
    };
    disk.free();
    // An idle writer retries its backlog within a quarter of a second.
    std::thread::sleep(Duration::from_millis(1000));
    let after = feed(&mut child, &mut output, &lines[100..], FEED_LIMIT);
    let (code, stderr) = finish(child, Duration::from_secs(30));
    // Everything decided was written once space returned: nothing lost.
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("failed") && stderr.contains("full"),
        "the failures are summarized: {stderr}"
    );
    assert_eq!(store_errors(&after), 0, "{after:?}");

    let stored = store_report(&url);
    assert_eq!(stored["events"], 150, "{stored}");
    assert_like_one_run(&stored, &lines);
}

#[test]
fn a_disk_that_stays_full_fails_the_replay_loudly() {
    let Some(FilledDisk {
        disk,
        url,
        child,
        output: _output,
    }) = FilledDisk::replay("3m", &failures(100))
    else {
        return;
    };
    let (code, stderr) = finish(child, Duration::from_secs(60));
    assert_eq!(code, Some(1), "lost commits fail the replay: {stderr}");
    assert!(
        stderr.contains("not written") && stderr.contains("full"),
        "{stderr}"
    );
    disk.free();
    // What was committed is intact and readable: the first 51 events.
    assert_eq!(store_report(&url)["events"], 51);
}

/// Waits until `path` exists (a writer has opened its store).
fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_writer_is_refused_and_readers_still_read() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let db = folder.path().join("one.db");
    let url = sqlite_url(&db);
    let lines = failures(30);
    let mut first = replay_from_stdin(&url, 1);
    let mut output = BufReader::new(first.stdout.take().expect("stdout is piped"));
    let answers = feed(
        &mut first,
        &mut output,
        &lines[..20],
        Duration::from_secs(30),
    );
    assert_eq!(store_errors(&answers), 0, "{answers:?}");
    wait_for(&db);

    let second = replay_stdin_into(&url, &[], lines.concat().as_bytes());
    assert_eq!(second.code, Some(2), "{second:?}");
    assert!(
        second.stderr.contains(&db.display().to_string())
            && second.stderr.contains("another loopguard"),
        "{second:?}"
    );

    // A reader works while the writer holds the file.
    let tasks = run(["tasks", "--store", &url, "--format", "json"]);
    assert_eq!(tasks.code, Some(0), "{tasks:?}");
    assert!(tasks.stdout.contains("\"T0\""), "{tasks:?}");

    let rest = feed(
        &mut first,
        &mut output,
        &lines[20..],
        Duration::from_secs(30),
    );
    assert_eq!(store_errors(&rest), 0, "{rest:?}");
    let (code, stderr) = finish(first, Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
    // The first writer's results are intact: one run of 30 events.
    let stored = store_report(&url);
    assert_eq!(stored["events"], 30, "{stored}");
    assert_like_one_run(&stored, &lines);
}

#[test]
fn two_processes_migrating_a_fresh_file_at_once_both_succeed() {
    let lines = failures(3).concat();
    for attempt in 0..6 {
        let folder = tempfile::tempdir().expect("a temp folder");
        let url = sqlite_url(&folder.path().join("fresh.db"));
        let spawn = || {
            let mut child = replay_stdin_command(&url)
                .stderr(Stdio::piped())
                .spawn()
                .expect("the loopguard binary starts");
            let _ = child
                .stdin
                .take()
                .expect("stdin is piped")
                .write_all(lines.as_bytes());
            child
        };
        let (a, b) = (spawn(), spawn());
        for child in [a, b] {
            let output = child.wait_with_output().expect("loopguard finishes");
            assert_eq!(
                output.status.code(),
                Some(0),
                "attempt {attempt}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert_eq!(store_report(&url)["events"], 6, "attempt {attempt}");
    }
}

#[test]
fn read_only_commands_work_on_a_read_only_copy_and_never_migrate() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let db = folder.path().join("source.db");
    let url = sqlite_url(&db);
    let trace: Vec<String> = (0..10).map(|index| failure(index, "T0")).collect();
    let written = replay_stdin_into(&url, &[], trace.concat().as_bytes());
    assert_eq!(written.code, Some(0), "{written:?}");

    // A chmod 0444 copy (of the file and its WAL, if any).
    let copy_folder = tempfile::tempdir().expect("a temp folder");
    let copy = copy_store(&db, copy_folder.path());
    let before = snapshot(copy_folder.path());
    for args in [
        vec!["tasks", "--format", "json"],
        vec!["log", "--format", "json"],
        vec!["report", "--format", "json"],
    ] {
        let copy_url = sqlite_url(&copy);
        let run = run(args.iter().copied().chain(["--store", copy_url.as_str()]));
        assert_eq!(run.code, Some(0), "{args:?}: {run:?}");
        assert!(run.stdout.contains("T0"), "{args:?}: {run:?}");
    }
    assert_eq!(
        before,
        snapshot(copy_folder.path()),
        "a reader changed the files"
    );

    // A missing file is not created by a reader.
    let missing = folder.path().join("missing.db");
    let run_missing = run(["tasks", "--store", &sqlite_url(&missing)]);
    assert_eq!(run_missing.code, Some(2), "{run_missing:?}");
    assert!(!missing.exists());

    // On a read-only file system (root ignores chmod 0444).
    let Some(disk) = SmallDisk::mount("8m") else {
        return;
    };
    let on_disk = copy_store(&db, disk.path());
    assert!(disk.remount_read_only(), "remount read-only");
    let run_ro = run([
        "tasks",
        "--store",
        &sqlite_url(&on_disk),
        "--format",
        "json",
    ]);
    assert_eq!(run_ro.code, Some(0), "{run_ro:?}");
    assert!(run_ro.stdout.contains("T0"), "{run_ro:?}");
}

/// Copies a store's file (and WAL) into `folder`, read-only (0444).
fn copy_store(db: &Path, folder: &Path) -> PathBuf {
    let copy = folder.join("copy.db");
    for suffix in ["", "-wal"] {
        let from = PathBuf::from(format!("{}{suffix}", db.display()));
        if from.exists() {
            let to = PathBuf::from(format!("{}{suffix}", copy.display()));
            std::fs::copy(&from, &to).expect("copy");
            let mut permissions = std::fs::metadata(&to).expect("metadata").permissions();
            permissions.set_readonly(true);
            std::fs::set_permissions(&to, permissions).expect("chmod 0444");
        }
    }
    copy
}

/// Every file in `folder` with its bytes' length and contents.
fn snapshot(folder: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(folder)
        .expect("read the folder")
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            // A reader of a WAL database may create its shared-memory index
            // and an empty WAL.
            let empty_wal = name.ends_with("-wal") && entry.metadata().is_ok_and(|m| m.len() == 0);
            !(name.ends_with("-shm") || empty_wal)
        })
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap_or_default(),
            )
        })
        .collect();
    files.sort();
    files
}

/// A trace of task R: four identical failures around a bad line 2. One
/// run over it ends at loop count 3.
fn resume_trace() -> Vec<String> {
    vec![
        failure(0, "R"),
        "not json\n".to_owned(),
        failure(3, "R"),
        failure(6, "R"),
        failure(9, "R"),
    ]
}

/// `loopguard --no-semantic replay INPUT --format jsonl --store URL`.
fn replay_file_into(url: &str, input: &[&OsStr]) -> Run {
    let mut args: Vec<&OsStr> = vec!["--no-semantic".as_ref(), "replay".as_ref()];
    args.extend_from_slice(input);
    args.extend::<[&OsStr; 4]>([
        "--format".as_ref(),
        "jsonl".as_ref(),
        "--store".as_ref(),
        url.as_ref(),
    ]);
    run(args)
}

/// Replays the first three lines into `url`, then resumes from `file`:
/// the store's report must equal `whole`'s.
fn replay_half_then_resume(url: &str, file: &Path, whole: &Value) {
    let trace = resume_trace();
    let half = replay_stdin_into(url, &[], trace[..3].concat().as_bytes());
    assert_eq!(half.code, Some(0), "{half:?}");
    let stored = store_report(url);
    // Two events, but the last committed line is 3: resuming at
    // events + 1 = 3 would apply line 3 twice.
    assert_eq!(stored["events"], 2, "{stored}");
    assert_eq!(stored["last_committed_line"], 3, "{stored}");
    assert_eq!(stored["errors"][0]["line"], 2, "{stored}");

    let resumed = replay_file_into(url, &["--resume".as_ref(), file.as_os_str()]);
    assert_eq!(resumed.code, Some(0), "{resumed:?}");
    let decisions = parse_jsonl(&resumed.stdout);
    assert_eq!(decisions.first().map(|d| d["line"].clone()), Some(4.into()));
    let resumed_report = store_report(url);
    assert_eq!(
        task(&resumed_report, "R")["loop_count"],
        3,
        "{resumed_report}"
    );
    assert_eq!(outcome(&resumed_report), outcome(whole));
    assert_eq!(resumed_report["last_committed_line"], 5);
    assert_eq!(resumed_report["errors"], whole["errors"]);
}

#[test]
fn resume_continues_after_the_last_committed_line() {
    let folder = tempfile::tempdir().expect("a temp folder");
    let file = folder.path().join("trace.jsonl");
    std::fs::write(&file, resume_trace().concat()).expect("write the trace");
    let whole_url = sqlite_url(&folder.path().join("whole.db"));
    let whole = replay_file_into(&whole_url, &[file.as_os_str()]);
    assert_eq!(whole.code, Some(0), "{whole:?}");
    let whole_report = store_report(&whole_url);
    assert_eq!(task(&whole_report, "R")["loop_count"], 3, "{whole_report}");
    assert_eq!(whole_report["errors"][0]["line"], 2, "{whole_report}");

    // What resuming at "events + 1" did: line 3 twice, loop count 4.
    let naive_url = sqlite_url(&folder.path().join("naive.db"));
    let trace = resume_trace();
    for (piece, first) in [(&trace[..3], "1"), (&trace[2..], "3")] {
        let run = replay_stdin_into(
            &naive_url,
            &["--first-line", first],
            piece.concat().as_bytes(),
        );
        assert_eq!(run.code, Some(0), "{run:?}");
    }
    assert_eq!(task(&store_report(&naive_url), "R")["loop_count"], 4);

    replay_half_then_resume(
        &sqlite_url(&folder.path().join("halves.db")),
        &file,
        &whole_report,
    );
    if let Some(schema) = PgSchema::create("resume") {
        replay_half_then_resume(&schema.url, &file, &whole_report);
    }

    // Without a durable store there is nothing to resume.
    let memory = run([
        "--no-semantic".as_ref(),
        "replay".as_ref(),
        "--resume".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(memory.code, Some(2), "{memory:?}");
    assert!(memory.stderr.contains("--resume"), "{memory:?}");
}

#[test]
fn store_commands_help_does_not_describe_plugins() {
    for command in ["tasks", "log", "report"] {
        let help = run([command, "--help"]);
        assert_eq!(help.code, Some(0), "{help:?}");
        assert!(
            !help.stdout.contains("plugins") && !help.stdout.contains("host_abi"),
            "{command} --help: {}",
            help.stdout
        );
    }
}
