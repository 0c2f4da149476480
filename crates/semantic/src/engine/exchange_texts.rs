//! Exchanges' texts matched by meaning (ruling 17): the engine's
//! [`ExchangeMatcher`], so that a hub's reworded instruction, or a worker's
//! reworded reply, brings nothing new.
//!
//! The text of a `handoff` (its `content`) or a `collaboration` (its
//! `request`) is compared with its sender's earlier distinct texts in the
//! task, to anyone, by the same-request judge (`similarity.judge`, at the
//! request threshold of the event's task type), asking the cosine too:
//! an earlier text is a candidate only when the two texts' cosine is above
//! `similarity.request_threshold` (0.85 by default). A hub sends one worker
//! many different instructions about one subject, and a false "the same"
//! here turns the protocol into a cycle, so both judges must agree. When
//! the judge calls it the same as an earlier one, the hub tracker compares the exchange as
//! that earlier text: an instruction to a worker repeats one it was given
//! before, a reply repeats one its sender gave before. Judged against the
//! sender's texts to anyone, so a text repeated to another agent is matched
//! too; the hub tracker still decides, by recipient, whether that makes it
//! a repeat (ruling 17: an instruction repeats one *to that agent*, a reply
//! any reply *of its own*).
//!
//! With `cycles.count = "repeats"` (trace format 1.2, the default) an
//! exchange brings nothing new when its text repeats one *any* agent of the
//! pair exchanged (ruling 4), so the texts are kept for the whole task, not
//! per sender: an earlier text of the task judged the same is handed over,
//! and the exchange tracker decides, by the agents of that earlier
//! exchange, whether it is in scope.
//!
//! Bounded like the other semantic parts: per task at most
//! [`SemanticLimits::histories_per_task`] senders (least recently used
//! forgotten first), each with its last
//! [`SemanticLimits::rows_per_history`] distinct texts. With a durable
//! store the texts survive a restart ([`ExchangeTexts::export_task`]).
//!
//! [`ExchangeMatcher`]: loopguard_host::ExchangeMatcher
//! [`ExchangeTexts::export_task`]: loopguard_host::ExchangeMatcher::export_task

use async_trait::async_trait;
use loopguard_config::SimilarityConfig;
use loopguard_detectors::MatchedText;
use loopguard_host::{ExchangeMatcher, ExchangeRef, ExtensionError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::history::{Matcher, SavedRow, parse_saved};
use super::keyed_texts::KeyedTexts;
use super::{STATE_FORMAT, SemanticLimits};
use crate::judge::SameRequestJudge;

/// The name the matcher's errors carry.
const NAME: &str = "exchange texts";

/// The senders' texts of a task as a durable store keeps them.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedExchanges {
    format: u32,
    /// The least recently used sender first, as they are put back.
    senders: Vec<SavedSender>,
}

/// One sender's texts, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedSender {
    agent: String,
    texts: Vec<SavedRow>,
}

/// Matches exchanges' texts with their senders' earlier ones by the
/// same-request judge.
#[derive(Debug)]
pub struct ExchangeTexts {
    texts: KeyedTexts<String>,
    /// One history for the whole task (`cycles.count = "repeats"`), not
    /// one per sender.
    task_wide: bool,
}

impl ExchangeTexts {
    pub(crate) fn new(
        matcher: Matcher,
        similarity: SimilarityConfig,
        limits: SemanticLimits,
        judge: SameRequestJudge,
        task_wide: bool,
    ) -> ExchangeTexts {
        ExchangeTexts {
            // Both judges: a cosine above the request threshold and the
            // judge calling it the same. Replies on one subject that say
            // different things share most of their words, and a false "the
            // same" turns work into a cycle.
            texts: KeyedTexts::new(matcher, similarity, limits, judge, "an exchange's text")
                .asking_both_judges(),
            task_wide,
        }
    }

    /// How many tasks it remembers.
    pub fn tasks(&self) -> usize {
        self.texts.tasks()
    }

    /// [`ExchangeMatcher::import_task`] without the clean-up on error.
    async fn restore(&self, task: &str, state: Value) -> Result<(), ExtensionError> {
        let mut saved: SavedExchanges = parse_saved(NAME, task, state)?;
        if self.task_wide && saved.senders.len() > 1 {
            // Kept per sender (`cycles.count = "every"`): one history for
            // the task now, its texts in the order they were seen.
            let mut texts: Vec<SavedRow> = saved
                .senders
                .drain(..)
                .flat_map(|sender| sender.texts)
                .collect();
            texts.sort_by_key(|row| row.line);
            saved.senders = vec![SavedSender {
                agent: String::new(),
                texts,
            }];
        }
        let task_wide = self.task_wide;
        self.texts
            .restore(
                (NAME, task),
                &saved.senders,
                |sender| &sender.texts,
                |sender| {
                    if task_wide {
                        String::new()
                    } else {
                        sender.agent.clone()
                    }
                },
            )
            .await
    }
}

#[async_trait]
impl ExchangeMatcher for ExchangeTexts {
    async fn match_exchange(
        &self,
        exchange: ExchangeRef<'_>,
    ) -> Result<Option<MatchedText>, ExtensionError> {
        let at = (exchange.task, exchange.task_type, exchange.line);
        let key = if self.task_wide {
            String::new()
        } else {
            exchange.from.to_owned()
        };
        let found = self.texts.match_text(at, key, exchange.text).await?;
        Ok(found.map(|found| MatchedText {
            text: found.text.to_string(),
            line: found.seen.line,
            reason: found.reason,
        }))
    }

    async fn reset_task(&self, task: &str) {
        self.texts.reset(task);
    }

    /// The task's senders, the least recently used first, each with its
    /// kept texts (line and original text), oldest first.
    async fn export_task(&self, task: &str) -> Option<Value> {
        let senders = self.texts.export(task, |agent, texts| SavedSender {
            agent: agent.clone(),
            texts,
        })?;
        serde_json::to_value(SavedExchanges {
            format: STATE_FORMAT,
            senders,
        })
        .ok()
    }

    /// Puts back what [`export_task`](ExchangeMatcher::export_task) gave
    /// and embeds the texts again (one batched call); an unknown format
    /// or malformed JSON is an error naming the matcher, and the task
    /// starts afresh.
    async fn import_task(&self, task: &str, state: Value) -> Result<(), ExtensionError> {
        let restored = self.restore(task, state).await;
        self.texts.forget_on_error(task, restored)
    }
}
