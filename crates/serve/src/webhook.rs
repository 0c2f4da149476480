//! The webhook: each decision that asks for an action, POSTed as JSON to
//! `[serve] webhook_url`, for the events that have no reply channel (OTLP)
//! and for whoever wants to be told (a chat bot, an incident tool).
//!
//! Delivery never holds up an answer. A decision is put on a bounded queue
//! ([`WebhookOptions::queue`]) without waiting: a full queue drops it and
//! counts it (`loopguard_webhook_total{outcome="dropped"}`). One worker
//! sends the queue in order; each decision is tried up to
//! [`WebhookOptions::attempts`] times, backing off 0.5 s, 1 s, 2 s, ... (at
//! most 30 s) after a failure (no answer within
//! [`WebhookOptions::timeout`], or a status that is not 2xx), then given up
//! and counted as failed. At shutdown the worker is given a bounded time to
//! send what waits.

use std::sync::Arc;
use std::time::Duration;

use loopguard_config::ServeConfig;
use loopguard_core_types::{Action, Decision};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The pause after the first failed attempt (doubled after each next one).
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// Where and how decisions are delivered: `[serve] webhook_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOptions {
    /// The URL each decision is POSTed to.
    pub url: String,
    /// Attempts per decision before it is given up.
    pub attempts: u32,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Decisions waiting at most; one more is dropped.
    pub queue: usize,
}

impl WebhookOptions {
    /// The options `[serve]` sets, when it names a `webhook_url`.
    pub fn from_config(config: &ServeConfig) -> Option<WebhookOptions> {
        let url = config.webhook_url.clone()?;
        Some(WebhookOptions {
            url,
            attempts: config.webhook_attempts.max(1),
            timeout: Duration::from_millis(config.webhook_timeout_ms.max(1)),
            queue: config.webhook_queue.max(1),
        })
    }
}

/// The sending side: what the outlets hold.
#[derive(Debug)]
pub(crate) struct Webhook {
    queue: mpsc::Sender<Arc<Decision>>,
    metrics: Arc<Metrics>,
}

impl Webhook {
    /// Starts the worker that delivers to `options.url`; returns the
    /// sending side and the worker, which ends once every sender is dropped
    /// and the queue is sent.
    pub(crate) fn start(
        options: &WebhookOptions,
        metrics: Arc<Metrics>,
    ) -> Result<(Webhook, JoinHandle<()>), reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .user_agent(concat!("loopguard/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let (queue, waiting) = mpsc::channel(options.queue);
        let worker = tokio::spawn(deliver(
            client,
            options.url.clone(),
            options.attempts,
            waiting,
            Arc::clone(&metrics),
        ));
        Ok((Webhook { queue, metrics }, worker))
    }

    /// Queues `decision` (one it [`wants`](Webhook::wants)); never waits.
    pub(crate) fn offer(&self, decision: Arc<Decision>) {
        if let Err(refused) = self.queue.try_send(decision) {
            let decision = refused.into_inner();
            self.metrics.webhook("dropped");
            tracing::warn!(
                task = %decision.task,
                line = decision.line,
                "the webhook queue is full (serve.webhook_queue): this decision is not delivered"
            );
        }
    }

    /// Whether `decision` is for the webhook: it asks for an action.
    pub(crate) fn wants(&self, decision: &Decision) -> bool {
        decision.action != Action::None
    }
}

/// The worker: sends the queue in order until it is closed and empty.
async fn deliver(
    client: reqwest::Client,
    url: String,
    attempts: u32,
    mut waiting: mpsc::Receiver<Arc<Decision>>,
    metrics: Arc<Metrics>,
) {
    while let Some(decision) = waiting.recv().await {
        let body = match serde_json::to_vec(&*decision) {
            Ok(body) => body,
            Err(err) => {
                tracing::error!(%err, "a decision cannot be written as JSON for the webhook");
                metrics.webhook("failed");
                continue;
            }
        };
        let mut backoff = FIRST_BACKOFF;
        let mut delivered = false;
        for attempt in 1..=attempts {
            let sent = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(answer) if answer.status().is_success() => {
                    delivered = true;
                    break;
                }
                Ok(answer) => tracing::warn!(
                    %url, attempt, status = %answer.status(),
                    task = %decision.task, line = decision.line,
                    "the webhook refused a decision"
                ),
                Err(err) => tracing::warn!(
                    %url, attempt, %err,
                    task = %decision.task, line = decision.line,
                    "the webhook cannot be reached"
                ),
            }
            if attempt < attempts {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        if delivered {
            metrics.webhook("delivered");
        } else {
            metrics.webhook("failed");
            tracing::error!(
                %url, attempts,
                task = %decision.task, line = decision.line,
                "the webhook gave up on a decision"
            );
        }
    }
}
