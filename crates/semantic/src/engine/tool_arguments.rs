//! Tool calls' free-text arguments matched by meaning (ruling 15): the
//! engine's [`ArgumentMatcher`].
//!
//! A string argument of a successful `tool_call` that reads as free text
//! ([`is_free_text`]: 3 to 64 words on one line, mostly letters) is
//! compared with the earlier values of the same argument (same task, agent,
//! tool and key path) by the same-request judge (`similarity.judge`, at
//! the request threshold of the event's task type). When the judge calls
//! it the same as an earlier value, the matcher hands `tool_calls` the
//! arguments with that value in its place, so "find recent papers on
//! retrieval augmented generation" and "search for the latest papers about
//! RAG" are one call; the detection's reason names the argument and the
//! line it matched. Paths, code, commands, multi-line text, volatile keys
//! (`tools.volatile_args`) and excluded tools are left alone, and so are
//! failing calls (they are failures, ruling 14).
//!
//! Bounded like the other semantic detectors: per task at most
//! [`SemanticLimits::histories_per_task`] arguments (by agent, tool and
//! key; least recently used forgotten first), each with its last
//! [`SemanticLimits::rows_per_history`] distinct values (a value judged the
//! same as one kept is not kept again), and at most [`MAX_FREE_TEXT_ARGS`]
//! free-text arguments of a call are looked at. With a durable store the
//! values survive a restart ([`ToolArguments::export_task`]).
//!
//! [`ArgumentMatcher`]: loopguard_host::ArgumentMatcher
//! [`is_free_text`]: loopguard_detectors::is_free_text

use async_trait::async_trait;
use loopguard_config::{SimilarityConfig, ToolsConfig};
use loopguard_detectors::{ArgMatch, MatchedArgs, RelatedArg, is_free_text};
use loopguard_host::{ArgumentMatcher, ExtensionError, ToolCallRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::history::{Matcher, SavedRow, parse_saved};
use super::keyed_texts::KeyedTexts;
use super::{STATE_FORMAT, SemanticLimits};
use crate::judge::SameRequestJudge;

/// Free-text arguments of one call looked at, in the arguments' order.
pub const MAX_FREE_TEXT_ARGS: usize = 8;

/// The name the matcher's errors carry.
const NAME: &str = "tool arguments";

/// An argument: the agent, the tool and the key path.
type ArgKey = (String, String, String);

/// The arguments' values of a task as a durable store keeps them.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedArgs {
    format: u32,
    /// The least recently used argument first, as they are put back.
    args: Vec<SavedArg>,
}

/// One argument's values, oldest first.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedArg {
    agent: String,
    tool: String,
    key: String,
    values: Vec<SavedRow>,
}

/// Matches tool calls' free-text arguments with the same-request judge.
#[derive(Debug)]
pub struct ToolArguments {
    tools: ToolsConfig,
    texts: KeyedTexts<ArgKey>,
}

/// A free-text string argument: where it is and its text.
struct FreeText {
    path: Vec<PathStep>,
    key: String,
    text: String,
}

/// One step into a JSON value.
#[derive(Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

impl ToolArguments {
    pub(crate) fn new(
        matcher: Matcher,
        similarity: SimilarityConfig,
        tools: ToolsConfig,
        limits: SemanticLimits,
        judge: SameRequestJudge,
    ) -> ToolArguments {
        ToolArguments {
            tools,
            texts: KeyedTexts::new(matcher, similarity, limits, judge, "an argument"),
        }
    }

    /// How many tasks it remembers.
    pub fn tasks(&self) -> usize {
        self.texts.tasks()
    }

    /// The free-text arguments of `args` worth matching, at most
    /// [`MAX_FREE_TEXT_ARGS`], volatile keys left out.
    fn free_texts(&self, tool: &str, args: &Value) -> Vec<FreeText> {
        let mut found = Vec::new();
        let mut path = Vec::new();
        self.walk(tool, args, &mut path, &mut found);
        found
    }

    fn walk(&self, tool: &str, value: &Value, path: &mut Vec<PathStep>, out: &mut Vec<FreeText>) {
        if out.len() >= MAX_FREE_TEXT_ARGS {
            return;
        }
        match value {
            Value::String(text) if is_free_text(text) => out.push(FreeText {
                key: key_of(path),
                path: path.clone(),
                text: text.clone(),
            }),
            Value::Object(map) => {
                for (key, value) in map {
                    if self.tools.is_volatile(tool, key) {
                        continue;
                    }
                    path.push(PathStep::Key(key.clone()));
                    self.walk(tool, value, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (index, value) in items.iter().enumerate() {
                    path.push(PathStep::Index(index));
                    self.walk(tool, value, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// [`ArgumentMatcher::import_task`] without the clean-up on error.
    async fn restore(&self, task: &str, state: Value) -> Result<(), ExtensionError> {
        let saved: SavedArgs = parse_saved(NAME, task, state)?;
        self.texts
            .restore(
                (NAME, task),
                &saved.args,
                |arg| &arg.values,
                |arg| (arg.agent.clone(), arg.tool.clone(), arg.key.clone()),
            )
            .await
    }
}

/// `q`, `filter.text`, `queries[1]`.
fn key_of(path: &[PathStep]) -> String {
    let mut key = String::new();
    for step in path {
        match step {
            PathStep::Key(name) => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            PathStep::Index(index) => {
                key.push('[');
                key.push_str(&index.to_string());
                key.push(']');
            }
        }
    }
    key
}

/// Puts `text` at `path` in `value`.
fn replace_at(value: &mut Value, path: &[PathStep], text: &str) {
    let mut at = value;
    for step in path {
        let next = match (step, at) {
            (PathStep::Key(key), Value::Object(map)) => map.get_mut(key),
            (PathStep::Index(index), Value::Array(items)) => items.get_mut(*index),
            _ => None,
        };
        let Some(next) = next else {
            return;
        };
        at = next;
    }
    *at = Value::String(text.to_owned());
}

#[async_trait]
impl ArgumentMatcher for ToolArguments {
    async fn match_args(
        &self,
        call: ToolCallRef<'_>,
    ) -> Result<Option<MatchedArgs>, ExtensionError> {
        if self.tools.limits_for(call.tool).exclude {
            return Ok(None);
        }
        let free = self.free_texts(call.tool, call.args);
        if free.is_empty() {
            return Ok(None);
        }
        let mut args = call.args.clone();
        let mut matches = Vec::new();
        let mut related = Vec::new();
        // Ruling 19's "about the same thing", asked of the same rows.
        let floor = self.tools.rephrase_similarity as f32;
        for FreeText { path, key, text } in free {
            let arg = (call.agent.to_owned(), call.tool.to_owned(), key.clone());
            let at = (call.task, call.task_type, call.line);
            let (found, near) = self
                .texts
                .match_text_and_related(at, arg, &text, Some(floor))
                .await?;
            related.extend(near.into_iter().map(|(seen, cosine)| RelatedArg {
                key: key.clone(),
                line: seen.line,
                cosine,
            }));
            if let Some(found) = found {
                replace_at(&mut args, &path, &found.text);
                matches.push(ArgMatch {
                    key,
                    line: found.seen.line,
                    reason: found.reason,
                });
            }
        }
        // Answered for every call with free text: `tool_rephrase` reads an
        // answer without matches as "nothing about the same thing".
        Ok(Some(MatchedArgs {
            args,
            matches,
            related,
        }))
    }

    async fn reset_task(&self, task: &str) {
        self.texts.reset(task);
    }

    /// The task's arguments, the least recently used first, each with its
    /// kept values (line and original text), oldest first.
    async fn export_task(&self, task: &str) -> Option<Value> {
        let args = self
            .texts
            .export(task, |(agent, tool, key), values| SavedArg {
                agent: agent.clone(),
                tool: tool.clone(),
                key: key.clone(),
                values,
            })?;
        serde_json::to_value(SavedArgs {
            format: STATE_FORMAT,
            args,
        })
        .ok()
    }

    /// Puts back what [`export_task`](ArgumentMatcher::export_task) gave
    /// and embeds the values again (one batched call); an unknown format
    /// or malformed JSON is an error naming the matcher, and the task
    /// starts afresh.
    async fn import_task(&self, task: &str, state: Value) -> Result<(), ExtensionError> {
        let restored = self.restore(task, state).await;
        self.texts.forget_on_error(task, restored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_paths_name_nested_arguments() {
        let path = [
            PathStep::Key("filter".into()),
            PathStep::Key("queries".into()),
            PathStep::Index(1),
        ];
        assert_eq!(key_of(&path), "filter.queries[1]");
        let mut value = json!({"filter": {"queries": ["a", "b"]}});
        replace_at(&mut value, &path, "c");
        assert_eq!(value, json!({"filter": {"queries": ["a", "c"]}}));
    }
}
