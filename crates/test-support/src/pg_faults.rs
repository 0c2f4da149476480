//! PostgreSQL connections cut on purpose: a task that terminates the
//! server backends of the connections a test named (their
//! `application_name`), again and again, as a server restart or a
//! network fault would.
//!
//! ```no_run
//! use std::time::Duration;
//! use loopguard_test_support::pg_faults::{BackendKiller, Victims, application_name};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let admin = "postgres://postgres@127.0.0.1:5432/test";
//! let name = application_name("lg_example");
//! let store_url = format!("{admin}?application_name={name}");
//! // ... open the store under test on `store_url` ...
//! let every = Duration::from_millis(100);
//! let lasting = Some(Duration::from_secs(6));
//! let killer = BackendKiller::start(admin, &name, Victims::All, every, lasting).await?;
//! // ... drive the store while `!killer.is_over()` ...
//! let done = killer.finish().await?;
//! assert!(done.killed >= done.rounds);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::task::{JoinError, JoinHandle};

/// Terminates every backend named `$1` but the killer's own, and counts
/// those terminated.
const TERMINATE_ALL: &str = "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) \
     FROM pg_stat_activity \
     WHERE application_name = $1 AND pid <> pg_backend_pid()";

/// Terminates one backend named `$1` (not the killer's own), one that is
/// not idle first, and counts it (0 or 1).
const TERMINATE_ONE_BUSY_FIRST: &str = "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) \
     FROM (SELECT pid FROM pg_stat_activity \
     WHERE application_name = $1 AND pid <> pg_backend_pid() \
     ORDER BY (state <> 'idle') DESC LIMIT 1) AS one";

/// Which of the named backends each round terminates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victims {
    /// Every one.
    All,
    /// One, preferring one that is not idle (inside a transaction, so
    /// holding its locks).
    OneBusyFirst,
}

/// An `application_name` of the test's own, for the connections a
/// [`BackendKiller`] is to cut: `prefix`, the process id and the clock's
/// nanoseconds.
pub fn application_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// What a [`BackendKiller`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminations {
    /// Its rounds.
    pub rounds: usize,
    /// The backends it terminated.
    pub killed: usize,
}

/// The counts a killer's task keeps, and the flags it reads.
#[derive(Debug, Default)]
struct Progress {
    rounds: AtomicUsize,
    killed: AtomicUsize,
    /// Set by [`BackendKiller::stop`]: end after the current round.
    stop: AtomicBool,
    /// Set by the task when it ends.
    over: AtomicBool,
}

impl Progress {
    fn terminations(&self) -> Terminations {
        Terminations {
            rounds: self.rounds.load(Ordering::Relaxed),
            killed: self.killed.load(Ordering::Relaxed),
        }
    }
}

/// A task on the tokio runtime it was started on that terminates, every
/// round, the backends of the connections named as a test asked
/// ([`Victims`]), then waits before the next round; until its time is
/// over, or until [`BackendKiller::stop`].
#[derive(Debug)]
pub struct BackendKiller {
    progress: Arc<Progress>,
    task: JoinHandle<()>,
}

impl BackendKiller {
    /// Connects to the server at `url` (as a user allowed to terminate
    /// the test's backends) and starts terminating the `victims` among the
    /// backends whose `application_name` is `name`, every `every`, for
    /// `lasting` (`None`: until stopped).
    pub async fn start(
        url: &str,
        name: &str,
        victims: Victims,
        every: Duration,
        lasting: Option<Duration>,
    ) -> Result<BackendKiller, sqlx::Error> {
        let pool = PgPool::connect(url).await?;
        let progress = Arc::new(Progress::default());
        let until = lasting.map(|lasting| Instant::now() + lasting);
        let task = tokio::spawn(rounds(
            pool,
            name.to_owned(),
            victims,
            every,
            until,
            Arc::clone(&progress),
        ));
        Ok(BackendKiller { progress, task })
    }

    /// The backends terminated so far.
    pub fn killed(&self) -> usize {
        self.progress.killed.load(Ordering::Relaxed)
    }

    /// Whether it has ended (its time is over).
    pub fn is_over(&self) -> bool {
        self.progress.over.load(Ordering::Relaxed)
    }

    /// Ends it after the current round; what it did.
    pub async fn stop(self) -> Result<Terminations, JoinError> {
        self.progress.stop.store(true, Ordering::Relaxed);
        self.finish().await
    }

    /// Waits until it ends (its time is over, or it was stopped); what it
    /// did.
    pub async fn finish(self) -> Result<Terminations, JoinError> {
        self.task.await?;
        Ok(self.progress.terminations())
    }
}

/// The killer's rounds (see [`BackendKiller`]).
async fn rounds(
    pool: PgPool,
    name: String,
    victims: Victims,
    every: Duration,
    until: Option<Instant>,
    progress: Arc<Progress>,
) {
    while !progress.stop.load(Ordering::Relaxed) && until.is_none_or(|until| Instant::now() < until)
    {
        let killed = terminate(&pool, &name, victims).await;
        progress.killed.fetch_add(killed, Ordering::Relaxed);
        progress.rounds.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(every).await;
    }
    progress.over.store(true, Ordering::Relaxed);
    pool.close().await;
}

/// One round: the `victims` among the backends named `name` terminated;
/// how many were (0 when the query fails).
async fn terminate(pool: &PgPool, name: &str, victims: Victims) -> usize {
    let query = match victims {
        Victims::All => TERMINATE_ALL,
        Victims::OneBusyFirst => TERMINATE_ONE_BUSY_FIRST,
    };
    let killed: i64 = sqlx::query_scalar(query)
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap_or_default();
    usize::try_from(killed).unwrap_or(0)
}
