//! The host's side of process isolation: a [`ProcessInstance`] is a
//! plugin running in a worker process of its own (`loopguard
//! plugin-worker LIBRARY`), called over its stdin and stdout with
//! [`protocol`](super::protocol) frames. It is driven by the same worker
//! thread as an in-process instance, so its calls are blocking.
//!
//! A crash is a fault, not an outage: when the worker dies (a signal, an
//! exit, a broken pipe), sends something that is not a frame, or overruns
//! the call's deadline (then it is killed), that call fails with a
//! [`PluginFault`] saying what happened, and the next call starts a new
//! worker (after a backoff: 0, 50 ms, 200 ms, 1 s, then 2 s for each
//! crash in a row), creates the instance with its config again and hands
//! it the task states this side keeps: for a plugin with the ABI 1.2 state
//! functions, each observe and reset answers with the task's state after
//! it, and the last [`MAX_KEPT_STATES`] tasks' states are kept (least
//! recently used dropped first). Safe code.
#![forbid(unsafe_code)]

use std::io::{self, BufReader, Read, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use loopguard_core_types::Detection;
use loopguard_plugin_api::wire;
use lru::LruCache;
use parking_lot::Mutex;

use super::error::PluginFault;
use super::protocol::{self, Hello, answer, op};
use super::worker::{Calls, watchdog};

/// The most tasks whose state is kept for a restart of the worker.
pub(super) const MAX_KEPT_STATES: usize = 65_536;

/// Waits before restarting a worker that crashed `n` times in a row.
const BACKOFF_MS: [u64; 5] = [0, 50, 200, 1000, 2000];

/// How long a worker whose pipe broke may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The environment variable naming the worker program.
pub(super) const WORKER_ENV: &str = "LOOPGUARD_PLUGIN_WORKER";

/// The environment variable that tells a worker its host's process id: the
/// worker ends itself when its parent is no longer that process.
pub(super) const HOST_PID_ENV: &str = "LOOPGUARD_PLUGIN_HOST_PID";

/// The name of the stand-alone worker program (`crates/host`'s bin).
const WORKER_PROGRAM: &str = "loopguard-plugin-worker";

/// The program that runs plugin workers: `configured`
/// (`plugin_host.worker`), else `LOOPGUARD_PLUGIN_WORKER`, else the running
/// executable when it is `loopguard`, else a `loopguard-plugin-worker`
/// beside the running executable (or one directory up, where cargo puts a
/// test's binaries), else one on the `PATH`.
pub(super) fn worker_program(configured: Option<&Path>) -> Result<PathBuf, String> {
    find_worker(
        configured,
        std::env::var_os(WORKER_ENV).as_deref(),
        std::env::current_exe().ok().as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
}

/// [`worker_program`] with the environment it reads handed in: the
/// variable's value, the running executable and the `PATH`.
fn find_worker(
    configured: Option<&Path>,
    variable: Option<&std::ffi::OsStr>,
    exe: Option<&Path>,
    path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    if let Some(program) = configured {
        return Ok(program.to_owned());
    }
    if let Some(program) = variable.filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(program));
    }
    if let Some(exe) = exe
        && exe.file_stem().is_some_and(|stem| stem == "loopguard")
    {
        return Ok(exe.to_owned());
    }
    let file_name = format!("{WORKER_PROGRAM}{}", std::env::consts::EXE_SUFFIX);
    let beside = exe
        .into_iter()
        .flat_map(|exe| exe.ancestors().skip(1).take(2))
        .map(Path::to_path_buf);
    let on_path = path
        .map(|path| std::env::split_paths(path).collect::<Vec<_>>())
        .unwrap_or_default();
    beside
        .chain(on_path)
        .map(|dir| dir.join(&file_name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            format!(
                "process isolation (the default) needs the program that runs plugin workers, \
                 and none was found: this is not the loopguard binary, and there is no \
                 {WORKER_PROGRAM} beside it or on the PATH; set plugin_host.worker in the \
                 config, or the environment variable {WORKER_ENV}, to the loopguard binary \
                 (or {WORKER_PROGRAM}), or run the plugin in process with \
                 isolation = \"in-process\""
            )
        })
}

/// A live worker process and its pipes.
struct Live {
    child: Arc<Mutex<Child>>,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Set when the call deadline killed it.
    killed: Arc<AtomicBool>,
}

impl Live {
    /// Starts `program plugin-worker library` and reads its first frame
    /// (within `timeout`): the plugin's [`Hello`], or why it did not load.
    fn start(
        program: &Path,
        library: &Path,
        timeout: Duration,
        memory_limit_mb: Option<u64>,
    ) -> Result<(Live, Hello), String> {
        let mut command = Command::new(program);
        command
            .arg("plugin-worker")
            .arg(library)
            .env(HOST_PID_ENV, std::process::id().to_string());
        if let Some(megabytes) = memory_limit_mb {
            command.arg("--memory-limit-mb").arg(megabytes.to_string());
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|err| {
                format!(
                    "cannot start its worker {} (plugin_host.worker, or {WORKER_ENV}): {err}",
                    program.display()
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("its worker has no pipes".to_owned());
        };
        let mut live = Live {
            child: Arc::new(Mutex::new(child)),
            stdin,
            stdout: BufReader::new(stdout),
            killed: Arc::new(AtomicBool::new(false)),
        };
        let mut body = Vec::new();
        let read = live.deadline(timeout, |live| read_frame(&mut live.stdout, &mut body));
        let hello = match read {
            Ok(()) => match body.split_first() {
                Some((&answer::OK, hello)) => serde_json::from_slice::<Hello>(hello)
                    .map_err(|err| format!("its worker's hello is not valid: {err}")),
                Some((&answer::LOAD_ERROR, message)) => {
                    // The loader's message names the library already.
                    let message = String::from_utf8_lossy(message);
                    let named = format!("plugin {}: ", library.display());
                    Err(message.strip_prefix(&named).unwrap_or(&message).to_owned())
                }
                _ => Err("its worker's first frame is not a hello".to_owned()),
            },
            Err(err) => Err(live.bury(&err.to_string())),
        };
        match hello {
            Ok(hello) => Ok((live, hello)),
            Err(reason) => {
                live.stop();
                Err(reason)
            }
        }
    }

    /// Runs `io` with the worker killed should it not be done by `timeout`.
    fn deadline<T>(&mut self, timeout: Duration, io: impl FnOnce(&mut Live) -> T) -> T {
        let child = Arc::clone(&self.child);
        let killed = Arc::clone(&self.killed);
        let key = Instant::now().checked_add(timeout).map(|deadline| {
            watchdog().arm(
                deadline,
                Box::new(move || {
                    killed.store(true, Ordering::SeqCst);
                    let _ = child.lock().kill();
                }),
            )
        });
        let result = io(self);
        if let Some(key) = key {
            watchdog().disarm(key);
        }
        result
    }

    /// Waits for a worker whose pipe failed with `error` (killing it after
    /// [`EXIT_GRACE`]) and says what happened to it.
    fn bury(&self, error: &str) -> String {
        let status = self.reap();
        match status {
            Some(status) => describe_exit(status),
            None => format!("its worker's pipe failed: {error}"),
        }
    }

    /// The worker's exit status, killing it after [`EXIT_GRACE`].
    fn reap(&self) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            let mut child = self.child.lock();
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if start.elapsed() < EXIT_GRACE => {}
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    return child.wait().ok();
                }
            }
            drop(child);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kills the worker and waits for it.
    fn stop(&self) {
        let mut child = self.child.lock();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// What an exit status says about a worker that should not have exited.
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("its worker was killed by {}", signal_name(signal));
        }
    }
    match status.code() {
        Some(code) => format!("its worker exited with status {code}"),
        None => format!("its worker ended: {status}"),
    }
}

/// The usual name of a signal.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        other => return format!("signal {other}"),
    };
    name.to_owned()
}

/// Reads one frame's body into `body`.
fn read_frame(input: &mut impl Read, body: &mut Vec<u8>) -> io::Result<()> {
    let mut header = [0u8; 4];
    input.read_exact(&mut header)?;
    let len = protocol::checked_len(header).map_err(|reason| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("its worker wrote something that is not a frame: {reason}"),
        )
    })?;
    body.resize(len, 0);
    input.read_exact(body)
}

/// A plugin in a worker process of its own.
pub(super) struct ProcessInstance {
    name: String,
    library: PathBuf,
    program: PathBuf,
    /// The plugin's config, as JSON.
    config: Vec<u8>,
    timeout: Duration,
    memory_limit_mb: Option<u64>,
    supports_state: bool,
    live: Option<Live>,
    /// Crashes in a row: how long the next restart waits.
    crashes: usize,
    /// When the last worker was lost (the backoff counts from there).
    lost_at: Option<Instant>,
    /// The last state of each task, as the plugin exported it (JSON).
    states: LruCache<String, Vec<u8>>,
    frame: Vec<u8>,
    body: Vec<u8>,
}

impl ProcessInstance {
    /// Starts a worker for the library at `library` with `program` (its
    /// address space limited to `memory_limit_mb`), and creates the
    /// instance with `config`: the instance and what the plugin said of
    /// itself.
    pub(super) fn start(
        program: &Path,
        library: &Path,
        config: &serde_json::Value,
        timeout: Duration,
        memory_limit_mb: Option<u64>,
    ) -> Result<(ProcessInstance, Hello), StartError> {
        let (live, hello) =
            Live::start(program, library, timeout, memory_limit_mb).map_err(StartError::Load)?;
        let mut instance = ProcessInstance {
            name: hello.name.clone(),
            library: library.to_owned(),
            program: program.to_owned(),
            config: serde_json::to_vec(config).unwrap_or_default(),
            timeout,
            memory_limit_mb,
            supports_state: hello.supports_state,
            live: Some(live),
            crashes: 0,
            lost_at: None,
            states: LruCache::new(NonZeroUsize::MIN.saturating_add(MAX_KEPT_STATES - 1)),
            frame: Vec::with_capacity(512),
            body: Vec::with_capacity(512),
        };
        let config = std::mem::take(&mut instance.config);
        let created = instance.round_trip(op::CREATE, "", &config);
        instance.config = config;
        created.map_err(|fault| StartError::Create(hello.name.clone(), fault))?;
        Ok((instance, hello))
    }

    /// One request and its answer; the answer's payload is left in
    /// `self.body[1..]`. A worker that fails is buried: the fault says
    /// what happened, and the next call starts another.
    fn round_trip(&mut self, request: u8, task: &str, payload: &[u8]) -> Result<(), PluginFault> {
        let Some(live) = self.live.as_mut() else {
            return Err(PluginFault::Host("its worker is not running".to_owned()));
        };
        protocol::encode_request(request, task, payload, &mut self.frame);
        let (frame, body) = (&self.frame, &mut self.body);
        let sent = live.deadline(self.timeout, |live| {
            live.stdin.write_all(frame)?;
            live.stdin.flush()?;
            read_frame(&mut live.stdout, body)
        });
        match sent {
            Ok(()) => match protocol::decode_answer(&self.body) {
                Ok(_) => Ok(()),
                // Not an answer at all: the protocol is broken.
                Err(PluginFault::Crashed(reason)) => {
                    Err(self.bury_live(io::Error::new(io::ErrorKind::InvalidData, reason)))
                }
                // The worker lives on after a plugin's own fault.
                Err(fault) => Err(fault),
            },
            Err(err) => Err(self.bury_live(err)),
        }
    }

    /// Buries the worker after `err` on its pipe (`InvalidData`: it wrote
    /// something that is not a frame or an answer): the fault that says
    /// what happened.
    fn bury_live(&mut self, err: io::Error) -> PluginFault {
        let Some(live) = self.live.take() else {
            return PluginFault::Host("its worker is not running".to_owned());
        };
        self.crashes = self.crashes.saturating_add(1);
        self.lost_at = Some(Instant::now());
        if live.killed.load(Ordering::SeqCst) {
            live.stop();
            return PluginFault::TimedOut(self.timeout);
        }
        let fault = if err.kind() == io::ErrorKind::InvalidData {
            live.stop();
            format!("{err}; it was stopped")
        } else {
            live.bury(&err.to_string())
        };
        tracing::warn!(plugin = %self.name, fault, "plugin worker lost; it is restarted on the next call");
        PluginFault::Crashed(fault)
    }

    /// A live worker: the running one, or a new one with the instance
    /// created and the kept task states imported.
    fn ensure_live(&mut self) -> Result<(), PluginFault> {
        if self.live.is_some() {
            return Ok(());
        }
        // Backoff counts from the crash: a call before the new worker is
        // due is answered at once (its event unseen by the plugin), so no
        // decision waits on a dead worker.
        let wait = BACKOFF_MS[self.crashes.saturating_sub(1).min(BACKOFF_MS.len() - 1)];
        if let Some(due) = self
            .lost_at
            .and_then(|lost| lost.checked_add(Duration::from_millis(wait)))
        {
            let now = Instant::now();
            if now < due {
                return Err(PluginFault::Restarting(due - now));
            }
        }
        let (live, _) = Live::start(
            &self.program,
            &self.library,
            self.timeout,
            self.memory_limit_mb,
        )
        .map_err(|reason| {
            self.crashes = self.crashes.saturating_add(1);
            self.lost_at = Some(Instant::now());
            PluginFault::Crashed(format!("its worker could not be restarted: {reason}"))
        })?;
        self.live = Some(live);
        let config = std::mem::take(&mut self.config);
        let created = self.round_trip(op::CREATE, "", &config);
        self.config = config;
        created?;
        let states: Vec<(String, Vec<u8>)> = self
            .states
            .iter()
            .rev()
            .map(|(task, state)| (task.clone(), state.clone()))
            .collect();
        for (task, state) in &states {
            self.round_trip(op::IMPORT, task, state)?;
        }
        tracing::info!(plugin = %self.name, tasks = states.len(), "plugin worker restarted");
        Ok(())
    }

    /// Keeps the task state at the end of an answer (after its `u32`
    /// prefixed first part), or forgets the task's state when it is empty.
    fn keep_state(&mut self, task: &str, state: &[u8]) {
        if !self.supports_state {
            return;
        }
        if state.is_empty() {
            self.states.pop(task);
        } else if let Some(kept) = self.states.get_mut(task) {
            kept.clear();
            kept.extend_from_slice(state);
        } else {
            self.states.put(task.to_owned(), state.to_vec());
        }
    }

    /// `request` with the export flag when the plugin keeps states.
    fn with_export(&self, request: u8) -> u8 {
        if self.supports_state {
            request | protocol::EXPORT
        } else {
            request
        }
    }
}

/// Why a plugin's worker could not start.
#[derive(Debug)]
pub(super) enum StartError {
    /// The worker did not start or did not load the library.
    Load(String),
    /// The plugin (named) refused its config.
    Create(String, PluginFault),
}

impl Calls for ProcessInstance {
    fn name(&self) -> &str {
        &self.name
    }

    fn observe_encoded(&mut self, task: &str, input: &[u8]) -> Result<Vec<Detection>, PluginFault> {
        self.ensure_live()?;
        let request = self.with_export(op::OBSERVE);
        self.round_trip(request, task, input)?;
        self.crashes = 0;
        let body = std::mem::take(&mut self.body);
        let answer = (|| {
            let (detections, state) =
                protocol::split_prefixed(&body[1..]).map_err(PluginFault::InvalidAnswer)?;
            let detections = wire::decode_detections(detections)
                .map_err(|err| PluginFault::InvalidAnswer(err.0))?;
            self.keep_state(task, state);
            Ok(detections)
        })();
        self.body = body;
        answer
    }

    fn reset_task(&mut self, task: &str) -> Result<(), PluginFault> {
        match self.ensure_live() {
            Err(PluginFault::Restarting(_)) => {
                // The new worker starts without the task's state: reset.
                self.states.pop(task);
                return Ok(());
            }
            started => started?,
        }
        let request = self.with_export(op::RESET);
        self.round_trip(request, task, &[])?;
        let body = std::mem::take(&mut self.body);
        let answer = protocol::split_prefixed(&body[1..])
            .map(|(_, state)| self.keep_state(task, state))
            .map_err(PluginFault::InvalidAnswer);
        self.body = body;
        answer
    }

    fn export_task(&mut self, task: &str) -> Result<Option<serde_json::Value>, PluginFault> {
        // The state after the task's last call, kept from its answer.
        let Some(state) = self.states.get(task) else {
            return Ok(None);
        };
        let state: serde_json::Value = serde_json::from_slice(state).map_err(|err| {
            PluginFault::InvalidAnswer(format!("its exported task state is not valid JSON: {err}"))
        })?;
        Ok((!state.is_null()).then_some(state))
    }

    fn import_task(&mut self, task: &str, state: &serde_json::Value) -> Result<(), PluginFault> {
        if !self.supports_state {
            return Ok(());
        }
        let state = serde_json::to_vec(state)
            .map_err(|err| PluginFault::Host(format!("cannot encode the task state: {err}")))?;
        match self.ensure_live() {
            Err(PluginFault::Restarting(_)) => {
                // The new worker imports it with the others it is handed.
                self.keep_state(task, &state);
                return Ok(());
            }
            started => started?,
        }
        self.round_trip(op::IMPORT, task, &state)?;
        self.keep_state(task, &state);
        Ok(())
    }
}

impl Drop for ProcessInstance {
    fn drop(&mut self) {
        if let Some(live) = self.live.take() {
            // Closing its stdin ends a worker that is waiting for requests.
            let Live { child, stdin, .. } = live;
            drop(stdin);
            let start = Instant::now();
            let mut child = child.lock();
            while start.elapsed() < Duration::from_millis(200) {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_program_is_the_setting_the_variable_loopguard_or_one_found() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let app = dir.path().join("bin/app");
        let on_path = dir.path().join("path");
        let worker_name = format!("{WORKER_PROGRAM}{}", std::env::consts::EXE_SUFFIX);
        std::fs::create_dir_all(app.parent().expect("a parent")).expect("made");
        std::fs::create_dir_all(&on_path).expect("made");
        let path = std::env::join_paths([&on_path]).expect("a PATH");
        let find = |configured: Option<&Path>, variable: Option<&str>, exe: &Path| {
            find_worker(
                configured,
                variable.map(std::ffi::OsStr::new),
                Some(exe),
                Some(&path),
            )
        };
        let named = Path::new("/opt/lg/loopguard");
        assert_eq!(find(Some(named), Some("/x"), &app), Ok(named.to_owned()));
        assert_eq!(find(None, Some("/x"), &app), Ok(PathBuf::from("/x")));
        let loopguard = Path::new("/usr/bin/loopguard");
        assert_eq!(find(None, Some(""), loopguard), Ok(loopguard.to_owned()));
        // Nothing found: the message says what to set.
        let missing = find(None, None, &app).expect_err("nothing to find");
        assert!(
            missing.contains("plugin_host.worker")
                && missing.contains(WORKER_ENV)
                && missing.contains("in-process"),
            "{missing}"
        );
        // Found on the PATH; one directory up (cargo's `deps/` layout) wins
        // over it, and beside the program wins over both.
        std::fs::write(on_path.join(&worker_name), b"").expect("written");
        assert_eq!(find(None, None, &app), Ok(on_path.join(&worker_name)));
        std::fs::write(dir.path().join(&worker_name), b"").expect("written");
        assert_eq!(find(None, None, &app), Ok(dir.path().join(&worker_name)));
        let beside = app.with_file_name(&worker_name);
        std::fs::write(&beside, b"").expect("written");
        assert_eq!(find(None, None, &app), Ok(beside));
    }

    #[test]
    fn signals_and_statuses_are_named() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(64), "signal 64");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                describe_exit(ExitStatus::from_raw(11)),
                "its worker was killed by SIGSEGV"
            );
            assert_eq!(
                describe_exit(ExitStatus::from_raw(3 << 8)),
                "its worker exited with status 3"
            );
        }
    }
}
