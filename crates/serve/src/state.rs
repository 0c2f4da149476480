//! [`State`]: what every request shares (the engine, the limits, the
//! outlets, the OTLP buffer), and what the handlers do through it: decide
//! an event, take a place among the requests handled at once, check the
//! token.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use loopguard_core_types::{Decision, Event};
use loopguard_host::{LoopGuard, Observed, Store};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::error::ApiError;
use crate::options::ServeOptions;
use crate::otlp_buffer::Buffer;
use crate::outlets::Outlets;

/// What every request shares.
#[derive(Debug)]
pub(crate) struct State {
    /// The one engine.
    pub(crate) engine: LoopGuard,
    /// The SHA-256 of the token, compared in constant time.
    token_hash: Option<[u8; 32]>,
    /// Requests handled at once.
    pub(crate) permits: Arc<Semaphore>,
    /// The limits.
    pub(crate) options: ServeOptions,
    /// The next input line number: every line of every request takes one,
    /// so decisions, evidence and the audit log name distinct lines.
    next_line: AtomicU64,
    /// The last line answered.
    last_line: AtomicU64,
    /// Where every decision goes besides its reply.
    pub(crate) outlets: Outlets,
    /// Turns `true` when the server stops accepting: long-lived responses
    /// (`GET /v1/live`) end then, so a graceful shutdown does not wait on
    /// them.
    pub(crate) closing: Arc<watch::Sender<bool>>,
    /// OTLP spans waiting for their trace to be decided.
    pub(crate) otlp: Buffer,
}

impl State {
    /// The state over `engine` with `options` and `outlets`; the first line
    /// decided is `first_line`.
    pub(crate) fn new(
        engine: LoopGuard,
        options: ServeOptions,
        outlets: Outlets,
        first_line: u64,
    ) -> State {
        let token_hash = options
            .token
            .as_deref()
            .map(|token| Sha256::digest(token.as_bytes()).into());
        let otlp = Buffer::new(
            options.otlp_flush,
            options.otlp_max_traces,
            options.otlp_max_spans_per_trace,
        );
        State {
            engine,
            token_hash,
            permits: Arc::new(Semaphore::new(options.queue.max(1))),
            options,
            next_line: AtomicU64::new(first_line),
            last_line: AtomicU64::new(0),
            outlets,
            closing: Arc::new(watch::Sender::new(false)),
            otlp,
        }
    }

    /// Takes `count` consecutive line numbers; returns the first.
    pub(crate) fn take_lines(&self, count: u64) -> u64 {
        self.next_line.fetch_add(count, Ordering::Relaxed)
    }

    /// Notes that `line` was answered.
    pub(crate) fn answered(&self, line: u64) {
        self.last_line.fetch_max(line, Ordering::Relaxed);
    }

    /// The last line answered (0 when none was).
    pub(crate) fn last_line(&self) -> u64 {
        self.last_line.load(Ordering::Relaxed)
    }

    /// Decides `event` on the next line number and passes the decision to
    /// the outlets (metrics, live feed): every route that feeds the engine
    /// one event goes through here.
    pub(crate) async fn observe(&self, event: Event) -> Decision {
        let line = self.take_lines(1);
        let event_type = compact_str::CompactString::from(event.kind.type_name());
        let started = std::time::Instant::now();
        let decision = self.engine.observe_line(line, event).await;
        let observed = Observed::new(&event_type, started.elapsed());
        self.answered(line);
        self.outlets.decided(&decision, observed);
        decision
    }

    /// The engine's store.
    pub(crate) fn store(&self) -> &dyn Store {
        self.engine.store().as_ref()
    }

    /// A place among the requests handled at once (given back when
    /// dropped); [`ApiError::Overloaded`], counted in `/metrics`, when
    /// every place is taken: nothing waits.
    pub(crate) fn take_place(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        Arc::clone(&self.permits).try_acquire_owned().map_err(|_| {
            self.outlets.metrics.refused("queue");
            ApiError::Overloaded {
                queue: self.options.queue,
            }
        })
    }

    /// Whether `header` (the `Authorization` value) carries the token; with
    /// no token, every request does.
    pub(crate) fn authorized(&self, header: Option<&[u8]>) -> bool {
        let Some(expected) = &self.token_hash else {
            return true;
        };
        let Some(given) = header.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let given: [u8; 32] = Sha256::digest(given).into();
        // Constant time: every byte is compared whatever the first
        // difference (and the hashes have one length whatever the token's).
        given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}
