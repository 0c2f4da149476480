//! `[cycles]`: exchange cycles between agents and on topics
//! (`agent_pair`, `multi_agent`, `topic_cycle`), their severity ladder
//! (ruling 4) and hubs (ruling 17).

use loopguard_core_types::Severity;
use serde::{Deserialize, Serialize};

use crate::ConfigError;
use crate::check::{at_least_one, invalid};

/// `[cycles]`: exchange cycles between agents and on topics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CycleConfig {
    /// More exchanges than this in the window is a cycle (default 3).
    pub max_exchanges: u32,
    /// The exchange window in seconds (default 600). Events without
    /// timestamps are not windowed.
    pub window_secs: u64,
    /// Exchange count from which a cycle is of medium severity (default 5).
    pub severity_medium: u32,
    /// Exchange count from which a cycle is of high severity (default 8).
    pub severity_high: u32,
    /// Exchange count from which a cycle is critical and escalates
    /// (default 12; at most 16, the exchanges a window keeps).
    pub severity_critical: u32,
    /// Most distinct agents in a multi-agent cycle (default 6; the fewest
    /// is 3).
    pub max_cycle_agents: u32,
    /// Agents that are hubs in every task (ruling 17): an orchestrator or a
    /// supervisor that sends every instruction and receives every reply.
    /// Their exchanges count toward `agent_pair`, `multi_agent` and
    /// `topic_cycle` only when they bring nothing new (default none).
    pub hubs: Vec<String>,
    /// Whether a task's hub is also recognized from its handoffs: one side
    /// of at least `hub_share` of them once there have been `hub_after`,
    /// dealing with at least 2 other agents (default true).
    pub recognize_hubs: bool,
    /// The share of a task's handoffs a recognized hub is a side of
    /// (default 0.8; above 0.5, at most 1).
    pub hub_share: f64,
    /// Handoffs a task needs before a hub is recognized (default 6; at
    /// least 2).
    pub hub_after: u32,
    /// What an exchange counts toward `agent_pair`, `multi_agent` and
    /// `topic_cycle` (ruling 4): only when it brings nothing new
    /// (`"repeats"`, the default since trace format 1.2), or every exchange
    /// (`"every"`, trace format 1.1, with ruling 17's hubs).
    pub count: CycleCount,
    /// The deprecated spelling of `count`: `true` reads as `"repeats"`,
    /// `false` as `"every"`, and wins over `count` when both are given
    /// ([`Config::deprecations`](crate::Config::deprecations) says so). Never written back.
    #[serde(skip_serializing)]
    pub repeats_only: Option<bool>,
}

/// `cycles.count`: which exchanges count toward the cycle kinds (ruling 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CycleCount {
    /// Only an exchange that brings nothing new: its text repeats one
    /// already exchanged by an agent of the pair (or of the cycle, or of
    /// the topic) within the window, or it has no text (trace format 1.2).
    #[default]
    Repeats,
    /// Every exchange, except a hub's that brings something new (trace
    /// format 1.1, rulings 4 and 17).
    Every,
}

impl CycleConfig {
    /// The counting in force: `count`, or what the deprecated
    /// `repeats_only` says when it is given.
    pub fn counting(&self) -> CycleCount {
        match self.repeats_only {
            Some(true) => CycleCount::Repeats,
            Some(false) => CycleCount::Every,
            None => self.count,
        }
    }
}

impl Default for CycleConfig {
    fn default() -> Self {
        CycleConfig {
            max_exchanges: 3,
            window_secs: 600,
            severity_medium: 5,
            severity_high: 8,
            severity_critical: 12,
            max_cycle_agents: 6,
            hubs: Vec::new(),
            recognize_hubs: true,
            hub_share: 0.8,
            hub_after: 6,
            count: CycleCount::Repeats,
            repeats_only: None,
        }
    }
}

/// Most exchanges the detectors keep per pair, cycle or topic window (the
/// detectors' `WINDOW_CAP`); counts saturate there, so
/// `cycles.severity_critical` must not exceed it.
const MOST_EXCHANGES_KEPT: u32 = 16;

impl CycleConfig {
    /// Severity of a cycle detection with this many exchanges (ruling 4).
    pub fn severity(&self, exchanges: u32) -> Severity {
        if exchanges >= self.severity_critical {
            Severity::Critical
        } else if exchanges >= self.severity_high {
            Severity::High
        } else if exchanges >= self.severity_medium {
            Severity::Medium
        } else {
            Severity::Low
        }
    }
}

impl CycleConfig {
    /// Checks the window, the severity ladder, the cycle size and the hub
    /// settings.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one("cycles.max_exchanges", self.max_exchanges)?;
        if self.window_secs == 0 {
            return Err(invalid("cycles.window_secs", 0, "must be at least 1"));
        }
        self.validate_severities()?;
        if !(3..=16).contains(&self.max_cycle_agents) {
            return Err(invalid(
                "cycles.max_cycle_agents",
                self.max_cycle_agents,
                "must be between 3 and 16",
            ));
        }
        self.validate_hubs()
    }

    /// Each step of the ladder above the one before it, the top within a
    /// window.
    fn validate_severities(&self) -> Result<(), ConfigError> {
        if self.severity_medium <= self.max_exchanges {
            return Err(invalid(
                "cycles.severity_medium",
                self.severity_medium,
                "must be greater than cycles.max_exchanges (the first detection is low)",
            ));
        }
        if self.severity_high <= self.severity_medium {
            return Err(invalid(
                "cycles.severity_high",
                self.severity_high,
                "must be greater than cycles.severity_medium",
            ));
        }
        if self.severity_critical <= self.severity_high {
            return Err(invalid(
                "cycles.severity_critical",
                self.severity_critical,
                "must be greater than cycles.severity_high",
            ));
        }
        if self.severity_critical > MOST_EXCHANGES_KEPT {
            return Err(invalid(
                "cycles.severity_critical",
                self.severity_critical,
                "must be at most 16: windows keep at most 16 exchanges per pair, cycle or \
                 topic, so a higher count is never reached",
            ));
        }
        Ok(())
    }

    fn validate_hubs(&self) -> Result<(), ConfigError> {
        if !(self.hub_share > 0.5 && self.hub_share <= 1.0) {
            return Err(invalid(
                "cycles.hub_share",
                self.hub_share,
                "must be above 0.5 and at most 1: a hub is one side of most of its task's \
                 handoffs",
            ));
        }
        if self.hub_after < 2 {
            return Err(invalid(
                "cycles.hub_after",
                self.hub_after,
                "must be at least 2",
            ));
        }
        if let Some(empty) = self.hubs.iter().position(|hub| hub.trim().is_empty()) {
            return Err(invalid(
                &format!("cycles.hubs[{empty}]"),
                "\"\"",
                "a hub is an agent's name: it cannot be empty",
            ));
        }
        Ok(())
    }
}
