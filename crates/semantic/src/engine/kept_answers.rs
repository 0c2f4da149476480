//! The second opinion's answers kept in the engine's store.

use std::sync::Arc;

use async_trait::async_trait;
use loopguard_core_types::Timestamp;
use loopguard_host::{Durability, KeptOpinion, Store};

use crate::judge::{AnswerArchive, Opinion, OpinionError, SameRequestJudge};

/// An [`AnswerArchive`] over a loopguard store (SQLite or PostgreSQL
/// through `loopguard-store-sqlx`, or a durable memory store): the
/// second opinion's answers are kept in its `loopguard_second_opinions`
/// table, the first answer per pair winning.
#[derive(Debug, Clone)]
pub struct StoreAnswers(Arc<dyn Store>);

impl StoreAnswers {
    /// The answers kept in `store`.
    pub fn new(store: Arc<dyn Store>) -> StoreAnswers {
        StoreAnswers(store)
    }
}

#[async_trait]
impl AnswerArchive for StoreAnswers {
    async fn recall(&self, key: &str) -> Result<Option<(String, Opinion)>, OpinionError> {
        let kept = self
            .0
            .recall_opinion(key)
            .await
            .map_err(|err| OpinionError(err.to_string()))?;
        Ok(kept.map(|kept| {
            (
                kept.by,
                Opinion {
                    same: kept.same,
                    reason: kept.reason,
                },
            )
        }))
    }

    async fn keep(&self, key: &str, by: &str, opinion: &Opinion) -> Result<Opinion, OpinionError> {
        let kept = self
            .0
            .keep_opinion(&KeptOpinion {
                key: key.to_owned(),
                by: by.to_owned(),
                same: opinion.same,
                reason: opinion.reason.clone(),
                answered_at: Timestamp::now(),
            })
            .await
            .map_err(|err| OpinionError(err.to_string()))?;
        Ok(Opinion {
            same: kept.same,
            reason: kept.reason,
        })
    }
}

impl SameRequestJudge {
    /// This judge with its second opinion's answers kept in `store`
    /// ([`SameRequestJudge::with_answer_archive`] over [`StoreAnswers`]),
    /// when the store is durable. A counters-only store
    /// ([`Durability::Memory`], what `replay` uses without `--store`)
    /// keeps nothing, so the judge is returned as it is.
    pub fn with_answers_kept_in(self, store: Arc<dyn Store>) -> SameRequestJudge {
        if store.durability() == Durability::Memory {
            return self;
        }
        self.with_answer_archive(Arc::new(StoreAnswers::new(store)))
    }
}
