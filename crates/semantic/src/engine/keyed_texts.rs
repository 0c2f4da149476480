//! Texts kept per task and key, matched with the same-request judge: what
//! the tool-argument matcher (key: agent, tool and argument) and the
//! exchange matcher (key: the sender) share.
//!
//! A new text is compared with the key's earlier distinct texts: with the
//! calibrated judge, every earlier text above its candidate floor is judged
//! (outside the lock, embedding at most the residual texts); otherwise the
//! cosine above the request threshold decides. A text judged the same as
//! an earlier one is answered with that one and not kept again; a new text
//! is kept. Bounded: per task at most [`SemanticLimits::histories_per_task`]
//! keys (least recently used forgotten first), each with its last
//! [`SemanticLimits::rows_per_history`] distinct texts.

use std::hash::Hash;
use std::sync::Arc;

use loopguard_config::SimilarityConfig;
use loopguard_host::ExtensionError;
use lru::LruCache;

use super::history::{History, Matcher, SavedRow, Seen, TaskStates, restore_histories};
use super::judged::{best, deciding, judge_candidates};
use super::{SemanticLimits, extension_error, non_zero};
use crate::judge::SameRequestJudge;

/// An earlier text a new one was judged the same as.
pub(crate) struct Found {
    /// Where the earlier text was first seen.
    pub(crate) seen: Seen,
    /// The earlier text.
    pub(crate) text: Arc<str>,
    /// The verdict in words.
    pub(crate) reason: String,
}

/// Per task, each key's earlier distinct texts.
pub(crate) struct KeyedTexts<K: Hash + Eq> {
    matcher: Matcher,
    judge: SameRequestJudge,
    similarity: SimilarityConfig,
    limits: SemanticLimits,
    tasks: TaskStates<LruCache<K, History<Seen>>>,
    /// What a text is, for errors ("an argument").
    what: &'static str,
    /// Which judges must call a text the same as an earlier one.
    agreement: Agreement,
}

/// Which judges decide "the same text".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agreement {
    /// The configured judge alone.
    Judge,
    /// The configured judge, and a cosine above the request threshold.
    Both,
}

impl<K: Hash + Eq> std::fmt::Debug for KeyedTexts<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedTexts")
            .field("what", &self.what)
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

impl<K: Hash + Eq + Clone> KeyedTexts<K> {
    pub(crate) fn new(
        matcher: Matcher,
        similarity: SimilarityConfig,
        limits: SemanticLimits,
        judge: SameRequestJudge,
        what: &'static str,
    ) -> KeyedTexts<K> {
        KeyedTexts {
            tasks: TaskStates::new(limits.max_tasks),
            matcher,
            judge,
            similarity,
            limits,
            what,
            agreement: Agreement::Judge,
        }
    }

    /// The same, asking the cosine too: a text is the same as an earlier
    /// one only when its cosine is above the request threshold and the
    /// configured judge calls it the same.
    pub(crate) fn asking_both_judges(mut self) -> KeyedTexts<K> {
        self.agreement = Agreement::Both;
        self
    }

    /// How many tasks it remembers.
    pub(crate) fn tasks(&self) -> usize {
        self.tasks.len()
    }

    fn fresh(&self) -> LruCache<K, History<Seen>> {
        LruCache::new(non_zero(self.limits.histories_per_task))
    }

    /// The earlier text of `key` in `task` that `text` (seen on `line`) is
    /// judged the same as; otherwise `text` is kept as a new one.
    pub(crate) async fn match_text(
        &self,
        at: (&str, Option<&str>, u64),
        key: K,
        text: &str,
    ) -> Result<Option<Found>, ExtensionError> {
        Ok(self.match_text_and_related(at, key, text, None).await?.0)
    }

    /// [`KeyedTexts::match_text`], and the earlier texts of `key` whose
    /// cosine with `text` is at least `related_floor` (where they were
    /// first seen, and the cosine), oldest first.
    pub(crate) async fn match_text_and_related(
        &self,
        (task, task_type, line): (&str, Option<&str>, u64),
        key: K,
        text: &str,
        related_floor: Option<f32>,
    ) -> Result<(Option<Found>, Vec<(Seen, f32)>), ExtensionError> {
        let what = self.what;
        let Some(probe) = self
            .matcher
            .probe(text)
            .await
            .map_err(|err| extension_error(&format!("cannot embed {what}"), &err))?
        else {
            return Ok((None, Vec::new()));
        };
        let cosine_threshold = self.similarity.request_threshold_for(task_type);
        let threshold = self.judge.threshold_for(&self.similarity, task_type);
        let mut deciding = deciding(&self.judge, &self.matcher, cosine_threshold.value);
        if self.agreement == Agreement::Both {
            deciding.floor = deciding.floor.max(cosine_threshold.value);
        }
        let (matcher, limits) = (&self.matcher, &self.limits);
        let candidates = self.tasks.with(
            task,
            || self.fresh(),
            |histories| {
                let history = histories
                    .get_or_insert_mut(key.clone(), || matcher.history(limits.rows_per_history));
                // The texts always: a matched text is answered with its own.
                let candidates = history.all_above_with_texts(&probe, deciding.floor)?;
                let related = match related_floor {
                    // `all_above` is strict: "at least" the floor.
                    Some(floor) => history.all_above(&probe, floor - f32::EPSILON)?,
                    None => Vec::new(),
                };
                Ok((candidates, related))
            },
        );
        let (candidates, mut related) =
            candidates.map_err(|err| extension_error(&format!("cannot compare {what}"), &err))?;
        let found = match deciding.service {
            Some(service) => {
                let thresholds = (threshold.value, cosine_threshold.value);
                let judged = judge_candidates(&self.judge, service, text, candidates, thresholds)
                    .await
                    .map_err(|err| extension_error(&format!("cannot judge {what}"), &err))?;
                if related_floor.is_some() {
                    // What the judge calls the same request is about the
                    // same thing too, whatever the cosine.
                    for same in &judged {
                        if !related.iter().any(|(seen, _)| *seen == same.key) {
                            related.push((same.key.clone(), same.cosine));
                        }
                    }
                }
                best(&judged).map(|best| Found {
                    seen: best.key.clone(),
                    text: Arc::clone(&best.text),
                    reason: best.verdict.reason(),
                })
            }
            None => candidates
                .into_iter()
                .rev()
                .fold(
                    None::<(Seen, f32, Arc<str>)>,
                    |best, candidate| match best {
                        Some(best) if best.1 >= candidate.1 => Some(best),
                        _ => Some(candidate),
                    },
                )
                .map(|(seen, cosine, text)| Found {
                    seen,
                    text,
                    reason: format!(
                        "cosine {cosine:.2} above the threshold {:.2}",
                        threshold.value
                    ),
                }),
        };
        if found.is_none() {
            // A new text: kept for the ones to come.
            let this = Seen { line, id: None };
            let pushed = self.tasks.with(
                task,
                || self.fresh(),
                |histories| {
                    let history = histories
                        .get_or_insert_mut(key, || matcher.history(limits.rows_per_history));
                    history.push(this, &probe)
                },
            );
            pushed.map_err(|err| extension_error(&format!("cannot keep {what}"), &err))?;
        }
        Ok((found, related))
    }

    /// Forgets a task.
    pub(crate) fn reset(&self, task: &str) {
        self.tasks.remove(task);
    }

    /// `restored`, forgetting the task when it is an error (whatever was
    /// kept of it is not what the store holds).
    pub(crate) fn forget_on_error(
        &self,
        task: &str,
        restored: Result<(), ExtensionError>,
    ) -> Result<(), ExtensionError> {
        self.tasks.forget_on_error(task, restored)
    }

    /// The task's keys, the least recently used first, each made into a
    /// saved group by `group` from its key and its rows (oldest first).
    pub(crate) fn export<G>(
        &self,
        task: &str,
        group: impl Fn(&K, Vec<SavedRow>) -> G,
    ) -> Option<Vec<G>> {
        self.tasks.peek(task, |histories| {
            histories
                .iter()
                .rev()
                .map(|(key, history)| group(key, history.save()))
                .collect()
        })
    }

    /// Puts back a task's saved groups (least recently used first), each
    /// keyed by `key_of` with its rows from `rows_of`, embedding the texts
    /// again (one batched call). An error names `detector` and the task;
    /// the caller then forgets the task ([`KeyedTexts::forget_on_error`]).
    pub(crate) async fn restore<G>(
        &self,
        (detector, task): (&str, &str),
        groups: &[G],
        rows_of: impl Fn(&G) -> &[SavedRow],
        key_of: impl Fn(&G) -> K,
    ) -> Result<(), ExtensionError> {
        let limits = (self.limits.histories_per_task, self.limits.rows_per_history);
        let restored =
            restore_histories(&self.matcher, groups, rows_of, limits, (detector, task)).await?;
        let mut histories = self.fresh();
        for (group, history) in restored {
            histories.put(key_of(group), history);
        }
        self.tasks.insert(task, histories);
        Ok(())
    }
}
