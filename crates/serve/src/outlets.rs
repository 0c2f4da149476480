//! Where every decision goes besides its reply: the metrics, the live feed
//! (the dashboard's) and the webhook, whatever route the event came by
//! (`/v1/events`, `/v1/tasks/{task}/human`, OTLP).

use std::sync::Arc;

use loopguard_core_types::Decision;
use loopguard_host::Observed;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::webhook::{Webhook, WebhookOptions};

/// How many decisions the live feed holds for a slow subscriber before it
/// skips ahead (the subscriber is told how many it missed).
pub(crate) const LIVE_BACKLOG: usize = 1024;

/// The outlets every answered event passes through.
#[derive(Debug)]
pub(crate) struct Outlets {
    /// `GET /metrics`.
    pub(crate) metrics: Arc<Metrics>,
    /// Every decision as it is answered, for whoever subscribes (bounded:
    /// a subscriber that falls [`LIVE_BACKLOG`] behind skips ahead).
    pub(crate) live: broadcast::Sender<Arc<Decision>>,
    /// `[serve] webhook_url`, when set.
    webhook: Option<Webhook>,
}

impl Outlets {
    /// The outlets, with the webhook's worker when `webhook` is set (it
    /// ends once the outlets are dropped and it has sent what waits).
    pub(crate) fn new(
        webhook: Option<&WebhookOptions>,
    ) -> Result<(Outlets, Option<JoinHandle<()>>), reqwest::Error> {
        let metrics = Arc::new(Metrics::new());
        let (webhook, worker) = match webhook {
            Some(options) => {
                let (webhook, worker) = Webhook::start(options, Arc::clone(&metrics))?;
                (Some(webhook), Some(worker))
            }
            None => (None, None),
        };
        let outlets = Outlets {
            metrics,
            live: broadcast::Sender::new(LIVE_BACKLOG),
            webhook,
        };
        Ok((outlets, worker))
    }

    /// One event answered with `decision`.
    pub(crate) fn decided(&self, decision: &Decision, observed: Observed<'_>) {
        self.metrics.decided(decision, observed);
        // One copy of the decision, shared by the live feed and the webhook,
        // made only when one of them takes it.
        let mut shared: Option<Arc<Decision>> = None;
        let mut share = || Arc::clone(shared.get_or_insert_with(|| Arc::new(decision.clone())));
        if self.live.receiver_count() > 0 {
            // No subscriber left between the check and the send is fine.
            let _ = self.live.send(share());
        }
        if let Some(webhook) = &self.webhook
            && webhook.wants(decision)
        {
            webhook.offer(share());
        }
    }

    /// One input line that was not a valid event.
    pub(crate) fn line_failed(&self) {
        self.metrics.line_failed();
    }
}
