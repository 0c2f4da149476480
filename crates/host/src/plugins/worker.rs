//! The thread layer: the [`Limiter`] that bounds plugin calls running at
//! once, the [`Worker`] thread that owns one plugin instance and runs its
//! calls off the async reactor, and the [`Watchdog`] that answers a call
//! past its deadline. Safe code: what a call does is the typed layer's
//! business.
//!
//! A hop to tokio's blocking pool costs two thread wake-ups per call
//! (about 8 µs on a 2-core machine, several times the call itself). The
//! worker instead spins for a short while after each call, so a stream of
//! events finds it awake; the caller spins a few microseconds for the
//! answer before it awaits it. Neither spin is longer than its bound, so
//! the reactor is never held for longer than [`CALLER_SPIN`] by a plugin,
//! however slow the plugin is, and an idle worker sleeps.
//!
//! Every call has a deadline: the [`Watchdog`], one thread for the process,
//! answers a call that overran it with [`PluginFault::TimedOut`], so a
//! plugin stuck in a loop cannot hold up the run (its thread stays busy).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::sync::oneshot::error::TryRecvError;
use tokio::sync::{Semaphore, oneshot};

use loopguard_core_types::Detection;

use super::PluginFault;

/// The calls a worker thread makes on the instance it owns: a library
/// loaded in this process ([`PluginInstance`](super::PluginInstance)) or a
/// plugin in a worker process of its own
/// ([`ProcessInstance`](super::child::ProcessInstance)).
pub(super) trait Calls: Send {
    /// The plugin's name.
    fn name(&self) -> &str;
    /// Observes one encoded event of `task`.
    fn observe_encoded(&mut self, task: &str, input: &[u8]) -> Result<Vec<Detection>, PluginFault>;
    /// Tells the plugin `task` was reset.
    fn reset_task(&mut self, task: &str) -> Result<(), PluginFault>;
    /// The task's state, if the plugin keeps one.
    fn export_task(&mut self, task: &str) -> Result<Option<serde_json::Value>, PluginFault>;
    /// Hands the plugin a task's state.
    fn import_task(&mut self, task: &str, state: &serde_json::Value) -> Result<(), PluginFault>;
}

/// How long an idle worker stays awake for the next call.
const WORKER_SPIN: Duration = Duration::from_micros(50);
/// How long a caller waits for an answer on its own thread before it
/// yields to the reactor.
const CALLER_SPIN: Duration = Duration::from_micros(20);
/// Busy-wait rounds before a waiting thread starts yielding its core (on a
/// busy machine, the thread it waits for may need that core).
const BUSY_ROUNDS: u32 = 64;

/// One round of waiting: a pause instruction at first, then a yield.
fn pause(round: &mut u32) {
    if *round < BUSY_ROUNDS {
        *round += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

type Job = Box<dyn FnOnce(&mut dyn Calls) + Send>;

/// The host's bound on plugin calls running at once, over all plugins
/// (`plugin_host.max_concurrency`).
#[derive(Debug, Clone)]
pub(super) struct Limiter {
    permits: Arc<Semaphore>,
}

impl Limiter {
    /// At most `max_concurrency` calls at once (at least one).
    pub(super) fn new(max_concurrency: u32) -> Limiter {
        let permits = usize::try_from(max_concurrency.max(1)).unwrap_or(1);
        Limiter {
            permits: Arc::new(Semaphore::new(permits)),
        }
    }

    /// Runs `call` on `worker`'s instance, holding one permit, within
    /// `timeout`.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        worker: &Worker,
        timeout: Duration,
        call: impl FnOnce(&mut dyn Calls) -> Result<T, PluginFault> + Send + 'static,
    ) -> Result<T, PluginFault> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|err| PluginFault::Host(err.to_string()))?;
        worker.call(timeout, call).await
    }
}

/// Calls for one instance, in order, on its own thread. Dropping the
/// worker stops the thread, which releases the instance.
pub(super) struct Worker {
    shared: Arc<Shared>,
    thread: Thread,
}

struct Shared {
    queue: Mutex<VecDeque<Job>>,
    /// Jobs in the queue, read without the lock.
    pending: AtomicUsize,
    /// The worker is (about to be) parked: a new job must unpark it.
    parked: AtomicBool,
    closed: AtomicBool,
}

impl Worker {
    /// Starts the thread that owns `instance`.
    pub(super) fn spawn(instance: Box<dyn Calls>) -> std::io::Result<Worker> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            pending: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        let handle = std::thread::Builder::new()
            .name(format!("plugin {}", instance.name()))
            .spawn({
                let shared = Arc::clone(&shared);
                move || work(instance, &shared)
            })?;
        Ok(Worker {
            shared,
            thread: handle.thread().clone(),
        })
    }

    /// Runs `call` on the instance and waits for its answer, or for
    /// `timeout` to pass (then [`PluginFault::TimedOut`]).
    pub(super) async fn call<T: Send + 'static>(
        &self,
        timeout: Duration,
        call: impl FnOnce(&mut dyn Calls) -> Result<T, PluginFault> + Send + 'static,
    ) -> Result<T, PluginFault> {
        let (reply, mut answer) = oneshot::channel();
        // Whoever comes first answers: the call, or the watchdog.
        let reply = Arc::new(Mutex::new(Some(reply)));
        let expire = {
            let reply = Arc::clone(&reply);
            move || {
                if let Some(reply) = reply.lock().take() {
                    let _ = reply.send(Err(PluginFault::TimedOut(timeout)));
                }
            }
        };
        let watchdog = watchdog();
        let armed = Instant::now()
            .checked_add(timeout)
            .map(|deadline| watchdog.arm(deadline, Box::new(expire)));
        self.submit(Box::new(move |instance| {
            let result = call(instance);
            if let Some(key) = armed {
                watchdog.disarm(key);
            }
            // The caller may have gone (its future dropped): nothing to do.
            if let Some(reply) = reply.lock().take() {
                let _ = reply.send(result);
            }
        }));
        let start = Instant::now();
        let mut round = 0;
        loop {
            match answer.try_recv() {
                Ok(result) => return result,
                Err(TryRecvError::Closed) => return Err(stopped()),
                Err(TryRecvError::Empty) if start.elapsed() < CALLER_SPIN => pause(&mut round),
                Err(TryRecvError::Empty) => break,
            }
        }
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    fn submit(&self, job: Job) {
        self.shared.queue.lock().push_back(job);
        self.shared.pending.fetch_add(1, Ordering::SeqCst);
        if self.shared.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// Answers calls that overran their deadline.
pub(super) struct Watchdog {
    state: Mutex<Watch>,
    /// Signalled when a deadline earlier than the one slept for arrives.
    earlier: Condvar,
    sequence: AtomicU64,
}

#[derive(Default)]
struct Watch {
    /// Armed calls by deadline (and a sequence number, for unique keys).
    calls: BTreeMap<(Instant, u64), Expire>,
    /// When the watchdog wakes next (`None`: when a call is armed). A call
    /// whose deadline is later needs no wake-up, so a stream of calls
    /// costs the watchdog one wake-up per timeout period, not one per call.
    wake_at: Option<Instant>,
}

/// What to do when a call's deadline passes: answer it with a timeout.
pub(super) type Expire = Box<dyn FnOnce() + Send>;

/// The process's watchdog, started on first use. Should its thread fail to
/// start, deadlines are not enforced; calls still run.
pub(super) fn watchdog() -> &'static Watchdog {
    static WATCHDOG: OnceLock<&'static Watchdog> = OnceLock::new();
    WATCHDOG.get_or_init(|| {
        let watchdog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            state: Mutex::new(Watch::default()),
            earlier: Condvar::new(),
            sequence: AtomicU64::new(0),
        }));
        let started = std::thread::Builder::new()
            .name("plugin watchdog".to_owned())
            .spawn(|| watchdog.watch());
        if let Err(err) = started {
            tracing::error!(error = %err, "cannot start the plugin watchdog: plugin calls have no deadline");
        }
        watchdog
    })
}

impl Watchdog {
    /// Arms a deadline; returns its key, to disarm it.
    pub(super) fn arm(&self, deadline: Instant, expire: Expire) -> (Instant, u64) {
        let key = (deadline, self.sequence.fetch_add(1, Ordering::Relaxed));
        let mut state = self.state.lock();
        state.calls.insert(key, expire);
        if state.wake_at.is_none_or(|wake_at| deadline < wake_at) {
            state.wake_at = Some(deadline);
            self.earlier.notify_one();
        }
        key
    }

    /// The call answered in time.
    pub(super) fn disarm(&self, key: (Instant, u64)) {
        self.state.lock().calls.remove(&key);
    }

    /// The watchdog's loop: expire what is due, sleep until the next
    /// deadline.
    fn watch(&self) {
        let mut state = self.state.lock();
        loop {
            let later = state.calls.split_off(&(Instant::now(), u64::MAX));
            let due = std::mem::replace(&mut state.calls, later);
            if !due.is_empty() {
                MutexGuard::unlocked(&mut state, || {
                    due.into_values().for_each(|expire| expire());
                });
                continue;
            }
            state.wake_at = state.calls.keys().next().map(|&(deadline, _)| deadline);
            match state.wake_at {
                Some(deadline) => {
                    self.earlier.wait_until(&mut state, deadline);
                }
                None => self.earlier.wait(&mut state),
            }
        }
    }
}

fn stopped() -> PluginFault {
    PluginFault::Host("the plugin's thread stopped".to_owned())
}

/// The worker's loop: run queued jobs; when there are none, spin for
/// [`WORKER_SPIN`], then sleep until a job or the end arrives.
fn work(mut instance: Box<dyn Calls>, shared: &Shared) {
    let mut idle_since = Instant::now();
    let mut round = 0;
    loop {
        if shared.pending.load(Ordering::SeqCst) > 0 {
            let job = shared.queue.lock().pop_front();
            if let Some(job) = job {
                shared.pending.fetch_sub(1, Ordering::SeqCst);
                // The plugin's own panics are caught inside it; this is
                // the host's side of the call. Should it panic, the reply
                // is dropped (its caller gets an error) and the worker
                // goes on.
                let _ = catch_unwind(AssertUnwindSafe(|| job(instance.as_mut())));
                idle_since = Instant::now();
                round = 0;
                continue;
            }
        }
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        if idle_since.elapsed() < WORKER_SPIN {
            pause(&mut round);
            continue;
        }
        // `parked` is set before `pending` is read, and a submitter bumps
        // `pending` before it reads `parked`: one of the two sees the
        // other, so a job never waits for a sleeping worker.
        shared.parked.store(true, Ordering::SeqCst);
        if shared.pending.load(Ordering::SeqCst) == 0 && !shared.closed.load(Ordering::SeqCst) {
            std::thread::park();
        }
        shared.parked.store(false, Ordering::SeqCst);
        idle_since = Instant::now();
        round = 0;
    }
}
