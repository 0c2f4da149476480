//! Where every decision goes besides its reply: the metrics and the live
//! feed (the dashboard's), whatever route the event came by (`/v1/events`,
//! `/v1/tasks/{task}/human`, OTLP).

use std::sync::Arc;

use loopguard_core_types::Decision;
use loopguard_host::Observed;
use tokio::sync::broadcast;

use crate::metrics::Metrics;

/// How many decisions the live feed holds for a slow subscriber before it
/// skips ahead (the subscriber is told how many it missed).
pub(crate) const LIVE_BACKLOG: usize = 1024;

/// The outlets every answered event passes through.
#[derive(Debug)]
pub(crate) struct Outlets {
    /// `GET /metrics`.
    pub(crate) metrics: Metrics,
    /// Every decision as it is answered, for whoever subscribes (bounded:
    /// a subscriber that falls [`LIVE_BACKLOG`] behind skips ahead).
    pub(crate) live: broadcast::Sender<Arc<Decision>>,
}

impl Default for Outlets {
    fn default() -> Self {
        Outlets {
            metrics: Metrics::new(),
            live: broadcast::Sender::new(LIVE_BACKLOG),
        }
    }
}

impl Outlets {
    /// One event answered with `decision`.
    pub(crate) fn decided(&self, decision: &Decision, observed: Observed<'_>) {
        self.metrics.decided(decision, observed);
        if self.live.receiver_count() > 0 {
            // No subscriber left between the check and the send is fine.
            let _ = self.live.send(Arc::new(decision.clone()));
        }
    }

    /// One input line that was not a valid event.
    pub(crate) fn line_failed(&self) {
        self.metrics.line_failed();
    }
}
