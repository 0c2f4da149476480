//! Decisions out: actions, severities, detections, task statuses.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::spend::{BudgetCrossing, Spend};

/// What loopguard tells the orchestrator to do, from mildest to strongest.
///
/// The derived order is the contract's order: when several detections fire
/// on one event, the strongest action wins.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Nothing to do.
    #[default]
    None,
    /// Log it; the agents may go on.
    Warn,
    /// Route the next step away from the agent that keeps receiving the work.
    BreakCycle,
    /// Give the agents the loop's history so they stop repeating it.
    InjectContext,
    /// Replace the approach: the decision carries a `directive` text.
    Pivot,
    /// Refuse this transition.
    Block,
    /// Human gate: the task is paused until a `human` event.
    Escalate,
    /// Terminal: the task is stuck (`aborted_stuck`).
    Abort,
}

/// How serious a detection is.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A first sign.
    #[default]
    Low,
    /// A repeated sign.
    Medium,
    /// A loop that needs an intervention.
    High,
    /// A loop that needs a human or an abort.
    Critical,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running normally.
    #[default]
    Active,
    /// Succeeded; more events make it active again.
    Completed,
    /// Waiting for a human (the human gate).
    Escalated,
    /// The pivot budget is spent; waiting for a human.
    Paused,
    /// Terminal: stuck and aborted.
    AbortedStuck,
}

impl TaskStatus {
    /// Precedence when two statuses compete (ruling 10): `aborted_stuck` over
    /// `paused` over `escalated` over `active`/`completed`.
    pub fn precedence(self) -> u8 {
        match self {
            TaskStatus::Active | TaskStatus::Completed => 0,
            TaskStatus::Escalated => 1,
            TaskStatus::Paused => 2,
            TaskStatus::AbortedStuck => 3,
        }
    }

    /// Whether the task is behind the human gate (escalated or paused).
    pub fn is_gated(self) -> bool {
        matches!(self, TaskStatus::Escalated | TaskStatus::Paused)
    }
}

macro_rules! names {
    ($ty:ty { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// The name used in the trace format.
            pub fn as_str(self) -> &'static str {
                match self { $(<$ty>::$variant => $name),* }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok(<$ty>::$variant),)*
                    other => Err(format!(
                        concat!("unknown ", stringify!($ty), " {:?} (expected one of: {})"),
                        other,
                        [$($name),*].join(", ")
                    )),
                }
            }
        }
    };
}

names!(Action {
    None => "none",
    Warn => "warn",
    BreakCycle => "break_cycle",
    InjectContext => "inject_context",
    Pivot => "pivot",
    Block => "block",
    Escalate => "escalate",
    Abort => "abort",
});

names!(Severity {
    Low => "low",
    Medium => "medium",
    High => "high",
    Critical => "critical",
});

names!(TaskStatus {
    Active => "active",
    Completed => "completed",
    Escalated => "escalated",
    Paused => "paused",
    AbortedStuck => "aborted_stuck",
});

impl Severity {
    /// Severity of counter-based detections (ruling 11): the 1st loop is
    /// low, the 2nd medium, the 3rd and later high.
    pub fn for_loop(count: u32) -> Severity {
        match count {
            0 | 1 => Severity::Low,
            2 => Severity::Medium,
            _ => Severity::High,
        }
    }
}

/// The built-in detection kinds of the trace format. Plugins name their own.
pub mod kinds {
    /// The same failure message again.
    pub const EXACT_FAILURE: &str = "exact_failure";
    /// The same request to the same agent again (by embedding similarity).
    pub const COLLABORATION_LOOP: &str = "collaboration_loop";
    /// Two agents handing work back and forth.
    pub const AGENT_PAIR: &str = "agent_pair";
    /// Three to six agents passing work around a cycle.
    pub const MULTI_AGENT: &str = "multi_agent";
    /// The same topic exchanged again and again.
    pub const TOPIC_CYCLE: &str = "topic_cycle";
    /// A research query that already got no new information.
    pub const REPEATED_QUERY: &str = "repeated_query";
    /// One workflow edge taken too often without progress.
    pub const EDGE_LIMIT: &str = "edge_limit";
    /// A phase entered too often.
    pub const PHASE_VISITS: &str = "phase_visits";
    /// The same from→to transition too often.
    pub const TRANSITION_LIMIT: &str = "transition_limit";
    /// Recent transitions repeating one short cycle.
    pub const OSCILLATION: &str = "oscillation";
    /// The same failed output again and again (the entropy count).
    pub const REPEATED_OUTPUT: &str = "repeated_output";
    /// Failures with no measurable progress.
    pub const NO_PROGRESS: &str = "no_progress";
    /// Test failures rising.
    pub const REGRESSION: &str = "regression";
    /// Failures from outside the agents (network, timeout, auth, dependency).
    pub const EXTERNAL_FAILURE: &str = "external_failure";
    /// The same tool call again with nothing new (trace format 1.1).
    pub const TOOL_REPEAT: &str = "tool_repeat";
    /// A sequence of 2 to 5 tool calls repeated with nothing new.
    pub const TOOL_CYCLE: &str = "tool_cycle";
    /// Tool calls with varying arguments whose results repeat.
    pub const TOOL_NO_NEW_INFO: &str = "tool_no_new_info";
    /// One query reworded call after call, with nothing used of what came
    /// back (trace format 1.2, ruling 19).
    pub const TOOL_REPHRASE: &str = "tool_rephrase";
    /// A task's spend passed a `[budget]` limit (ruling 18; trace format
    /// 1.2). Never adds to the loop count.
    pub const BUDGET: &str = "budget";

    /// Every built-in kind, in the order the spec lists them.
    pub const ALL: [&str; 19] = [
        EXACT_FAILURE,
        COLLABORATION_LOOP,
        AGENT_PAIR,
        MULTI_AGENT,
        TOPIC_CYCLE,
        REPEATED_QUERY,
        EDGE_LIMIT,
        PHASE_VISITS,
        TRANSITION_LIMIT,
        OSCILLATION,
        REPEATED_OUTPUT,
        NO_PROGRESS,
        REGRESSION,
        EXTERNAL_FAILURE,
        TOOL_REPEAT,
        TOOL_CYCLE,
        TOOL_NO_NEW_INFO,
        TOOL_REPHRASE,
        BUDGET,
    ];
}

/// What identifies a failure beyond its message, kept for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureSignature {
    /// The error's type or class, if the event gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Where it happened, if the event gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// SHA-256 (hex, first 16 characters) of the stack, if the event gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_hash: Option<String>,
}

/// One detector's finding on one event: what loops, why, and the lines that
/// show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// The input line of the event it fired on (in the JSON report only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The detector that produced it.
    pub detector: Cow<'static, str>,
    /// What kind of loop it is (one of [`kinds`], or a plugin's own kind).
    pub kind: Cow<'static, str>,
    /// How serious it is.
    pub severity: Severity,
    /// The intervention this detection asks for.
    #[serde(default)]
    pub action: Action,
    /// The task's loop count after this detection (counter-based kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_count: Option<u32>,
    /// The count the detector compared with its limit (exchanges, visits,
    /// hops, identical outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// The input lines that show the loop, oldest first, this event last.
    pub evidence: Vec<u64>,
    /// The orchestrator's ids of those events, where they had one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence_ids: Vec<String>,
    /// Why this is a loop, in plain words.
    pub reason: String,
    /// For a pivot: the directive to give the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
    /// For `break_cycle`: the agent to skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_agent: Option<String>,
    /// For failures: the failure's signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<FailureSignature>,
    /// For similarity-based kinds: the cosine similarity of the match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
    /// For similarity-based kinds: the threshold it was compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f32>,
    /// For similarity-based kinds: the earlier line it matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_line: Option<u64>,
    /// The agents the detection is about, in the order its reason names
    /// them: the pair, the cycle, the caller of a tool, the failing agents
    /// (trace format 1.2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// On a `budget` detection: the limit crossed, the spend against it and
    /// the costliest loops (ruling 18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<BudgetCrossing>>,
}

impl Detection {
    /// A detection with the given detector, kind, severity, action, evidence
    /// and reason; every optional field empty.
    pub fn new(
        detector: impl Into<Cow<'static, str>>,
        kind: impl Into<Cow<'static, str>>,
        severity: Severity,
        action: Action,
        evidence: Vec<u64>,
        reason: impl Into<String>,
    ) -> Detection {
        Detection {
            line: None,
            detector: detector.into(),
            kind: kind.into(),
            severity,
            action,
            loop_count: None,
            count: None,
            evidence,
            evidence_ids: Vec::new(),
            reason: reason.into(),
            directive: None,
            skip_agent: None,
            signature: None,
            similarity: None,
            threshold: None,
            matched_line: None,
            agents: Vec::new(),
            budget: None,
        }
    }

    /// The same detection naming `agents` (trace format 1.2's `agents`).
    pub fn with_agents<I, S>(mut self, agents: I) -> Detection
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.agents = agents.into_iter().map(Into::into).collect();
        self
    }
}

/// loopguard's answer to one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The 1-based input line (or the engine's sequence number when
    /// streamed).
    pub line: u64,
    /// The task the event belongs to.
    pub task: String,
    /// What to do: the strongest action of all detections, and `escalate`
    /// while the task is behind the human gate.
    pub action: Action,
    /// The task's loop count after this event.
    pub loop_count: u32,
    /// The task's status after this event.
    pub status: TaskStatus,
    /// How many pivots the task has had since its last reset.
    pub pivots: u32,
    /// For a pivot: the directive to give the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
    /// The event's own `id`, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Every detection on this event: the evidence for the action.
    pub detections: Vec<Detection>,
    /// Detectors that failed on this event (a plugin fault, an unreachable
    /// model): each message names the detector. The other detectors ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// How the event was read, when that is not as it came: e.g. a time
    /// that ran backwards, counted at the task's latest time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Whether this decision was made on the engine's own copy of the task
    /// while a shared store (PostgreSQL, several engines) could not be
    /// written: another engine may have moved the task on meanwhile, so a
    /// degraded decision may be behind the fleet's. The writes wait and are
    /// written when the store answers. Absent (false) otherwise.
    #[serde(default, skip_serializing_if = "is_false")]
    pub degraded: bool,
    /// The task's spend after this event (ruling 18), when any of its
    /// events carried `usage`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Spend>,
}

/// For `skip_serializing_if`: a `false` flag is left out.
fn is_false(flag: &bool) -> bool {
    !*flag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_ordered_mildest_to_strongest() {
        let ordered = [
            Action::None,
            Action::Warn,
            Action::BreakCycle,
            Action::InjectContext,
            Action::Pivot,
            Action::Block,
            Action::Escalate,
            Action::Abort,
        ];
        assert!(ordered.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(ordered.iter().max(), Some(&Action::Abort));
    }

    #[test]
    fn names_round_trip() {
        for name in ["none", "break_cycle", "inject_context", "abort"] {
            let action: Action = name.parse().expect("known");
            assert_eq!(action.as_str(), name);
            assert_eq!(
                serde_json::to_string(&action).expect("serializes"),
                format!("\"{name}\"")
            );
        }
        assert_eq!(
            "aborted_stuck".parse::<TaskStatus>(),
            Ok(TaskStatus::AbortedStuck)
        );
        assert!("stuck".parse::<TaskStatus>().is_err());
    }

    #[test]
    fn status_precedence_follows_ruling_10() {
        use TaskStatus::*;
        assert!(AbortedStuck.precedence() > Paused.precedence());
        assert!(Paused.precedence() > Escalated.precedence());
        assert!(Escalated.precedence() > Active.precedence());
        assert_eq!(Active.precedence(), Completed.precedence());
    }

    #[test]
    fn loop_severity_follows_ruling_11() {
        assert_eq!(Severity::for_loop(1), Severity::Low);
        assert_eq!(Severity::for_loop(2), Severity::Medium);
        assert_eq!(Severity::for_loop(3), Severity::High);
        assert_eq!(Severity::for_loop(9), Severity::High);
    }

    #[test]
    fn decision_serializes_like_the_spec_example() {
        let mut detection = Detection::new(
            "exact_failure",
            kinds::EXACT_FAILURE,
            Severity::High,
            Action::Escalate,
            vec![2, 4, 7, 9],
            "same error message as lines 2, 4 and 7",
        );
        detection.loop_count = Some(3);
        let decision = Decision {
            usage: None,
            line: 9,
            task: "T1".into(),
            action: Action::Escalate,
            loop_count: 3,
            status: TaskStatus::Escalated,
            pivots: 0,
            directive: None,
            id: None,
            detections: vec![detection],
            errors: Vec::new(),
            notes: Vec::new(),
            degraded: false,
        };
        let json = serde_json::to_value(&decision).expect("serializes");
        assert_eq!(json["line"], 9);
        assert_eq!(json["action"], "escalate");
        assert_eq!(json["loop_count"], 3);
        assert_eq!(json["detections"][0]["kind"], "exact_failure");
        assert_eq!(json["detections"][0]["severity"], "high");
        assert_eq!(
            json["detections"][0]["evidence"],
            serde_json::json!([2, 4, 7, 9])
        );
        assert!(json["detections"][0].get("line").is_none());
        assert!(json.get("directive").is_none());
        assert!(json.get("degraded").is_none(), "absent unless true");
        let back: Decision = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, decision);

        let degraded = Decision {
            degraded: true,
            ..decision
        };
        let json = serde_json::to_value(&degraded).expect("serializes");
        assert_eq!(json["degraded"], true);
        let back: Decision = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, degraded);
    }
}
