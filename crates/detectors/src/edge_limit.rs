//! Edge limit: one workflow edge taken too often without progress (ruling 5).
//!
//! Each `transition` event is one hop along the edge `from`→`to`. Every edge
//! counts its hops since the task last showed progress
//! ([`ObservedEvent::progressed`]: a `progress` event that changed a metric,
//! or more `files_changed`); progress clears every edge's counter. A hop
//! beyond the edge's limit (`edges.max_loop_edge`, `MAX_LOOP_EDGE`, default
//! 5, with per-edge overrides) aborts the task: the 6th hop by default, and
//! every later hop until progress.
//!
//! A task remembers at most 64 edges; beyond that the least recently used
//! edge is forgotten and starts counting again. Evidence is the edge's last
//! hops since progress, at most 8 (the current one included), among the
//! task's last 16 transitions.

use loopguard_config::{Config, EdgeConfig};
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};

use crate::phase_visits::CounterTable;
use crate::{Detector, ObservedEvent};

/// Most edges remembered per task.
const MAX_EDGES: usize = 64;
/// Recent transitions kept as evidence, for all edges together.
const RECENT: usize = 16;
/// Most hops of the edge in a detection's evidence, the current one
/// included.
const EVIDENCE: usize = 8;

/// Detects an edge taken more often than its limit without progress.
#[derive(Debug, Clone)]
pub struct EdgeLimit {
    config: EdgeConfig,
}

/// Hops along each edge of a task since its last progress.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct EdgeLimitState {
    edges: CounterTable<MAX_EDGES, RECENT>,
}

impl EdgeLimit {
    /// The detector with the edge limits of `config`.
    pub fn new(config: &Config) -> EdgeLimit {
        EdgeLimit {
            config: config.edges.clone(),
        }
    }
}

impl Detector for EdgeLimit {
    type State = EdgeLimitState;
    const CONFIG_SECTION: &'static str = "edges";
    const KINDS: &'static [&'static str] = &[kinds::EDGE_LIMIT];

    fn name(&self) -> &'static str {
        "edge_limit"
    }

    fn observe(
        &self,
        state: &mut EdgeLimitState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        if event.progressed {
            state.edges.clear();
            return;
        }
        let EventKind::Transition { from, to } = &event.event.kind else {
            return;
        };
        let hit = state.edges.hit(from, to, event.evidence_ref());
        let limit = self.config.limit_for(from, to);
        if hit.count <= limit {
            return;
        }
        let reason = format!(
            "edge '{from}' -> '{to}' taken {} times without progress (limit {limit})",
            hit.count
        );
        let (lines, ids) = state.edges.evidence(hit, EVIDENCE);
        let mut detection = Detection::new(
            self.name(),
            kinds::EDGE_LIMIT,
            Severity::Critical,
            Action::Abort,
            lines,
            reason,
        );
        detection.count = Some(hit.count);
        detection.evidence_ids = ids;
        out.push(detection);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProgressState, ProgressTracker};
    use loopguard_core_types::Event;

    fn transition(from: &str, to: &str) -> String {
        format!(r#"{{"type":"transition","task":"T1","from":"{from}","to":"{to}"}}"#)
    }

    fn files_changed(total: u64) -> String {
        format!(r#"{{"type":"progress","task":"T1","files_changed":{total}}}"#)
    }

    /// Runs the lines through a fresh detector, with progress worked out as
    /// the built-in detectors do; returns (line, detection).
    fn run_with(config: &Config, lines: &[String]) -> Vec<(u64, Detection)> {
        let detector = EdgeLimit::new(config);
        let mut progress = ProgressState::default();
        let mut state = EdgeLimitState::default();
        let mut found = Vec::new();
        for (index, text) in lines.iter().enumerate() {
            let event = Event::from_json(text).expect("valid event");
            let line = index as u64 + 1;
            let mut observed = ObservedEvent::new(line, &event);
            observed.progressed = ProgressTracker.observe(&mut progress, &event);
            let mut out = Vec::new();
            detector.observe(&mut state, &observed, &mut out);
            found.extend(out.into_iter().map(|detection| (line, detection)));
        }
        found
    }

    fn run(lines: &[String]) -> Vec<(u64, Detection)> {
        run_with(&Config::default(), lines)
    }

    fn fired_lines(found: &[(u64, Detection)]) -> Vec<u64> {
        found.iter().map(|(line, _)| *line).collect()
    }

    #[test]
    fn sixth_hop_without_progress_aborts_and_later_hops_too() {
        let lines: Vec<String> = (0..7)
            .map(|_| transition("planner", "researcher"))
            .collect();
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![6, 7]);
        let detection = &found[0].1;
        assert_eq!(detection.detector, "edge_limit");
        assert_eq!(detection.kind, kinds::EDGE_LIMIT);
        assert_eq!(detection.severity, Severity::Critical);
        assert_eq!(detection.action, Action::Abort);
        assert_eq!(detection.count, Some(6));
        assert_eq!(
            detection.reason,
            "edge 'planner' -> 'researcher' taken 6 times without progress (limit 5)"
        );
        assert_eq!(detection.evidence, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(found[1].1.count, Some(7));
    }

    #[test]
    fn evidence_keeps_the_last_eight_hops() {
        let lines: Vec<String> = (0..10).map(|_| transition("a", "b")).collect();
        let found = run(&lines);
        let last = &found.last().expect("fired").1;
        assert_eq!(last.count, Some(10));
        assert_eq!(last.evidence, vec![3, 4, 5, 6, 7, 8, 9, 10]);
    }

    #[test]
    fn a_three_phase_loop_shows_every_hop() {
        let lines: Vec<String> = (0..6)
            .flat_map(|_| {
                [
                    transition("a", "b"),
                    transition("b", "c"),
                    transition("c", "a"),
                ]
            })
            .collect();
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![16, 17, 18]);
        assert_eq!(found[0].1.evidence, vec![1, 4, 7, 10, 13, 16]);
    }

    #[test]
    fn progress_resets_every_edge() {
        let mut lines: Vec<String> = (0..5)
            .flat_map(|_| [transition("a", "b"), transition("b", "a")])
            .collect();
        lines.push(files_changed(3));
        lines.extend((0..5).flat_map(|_| [transition("a", "b"), transition("b", "a")]));
        assert!(run(&lines).is_empty());
        // The 6th hop after progress fires, with evidence since progress only.
        lines.push(transition("a", "b"));
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![22]);
        assert_eq!(found[0].1.evidence, vec![12, 14, 16, 18, 20, 22]);
    }

    #[test]
    fn a_progress_event_without_change_does_not_reset() {
        let mut lines = vec![files_changed(2)];
        lines.extend((0..3).map(|_| transition("a", "b")));
        // Same total again, and a lower one: neither is progress.
        lines.push(files_changed(2));
        lines.push(files_changed(1));
        lines.extend((0..3).map(|_| transition("a", "b")));
        let found = run(&lines);
        assert_eq!(fired_lines(&found), vec![9]);
        assert_eq!(found[0].1.evidence, vec![2, 3, 4, 7, 8, 9]);
    }

    #[test]
    fn edges_are_directed_and_counted_apart() {
        let lines: Vec<String> = (0..5)
            .flat_map(|_| {
                [
                    transition("a", "b"),
                    transition("b", "a"),
                    transition("a", "c"),
                ]
            })
            .collect();
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn per_edge_override_applies() {
        let mut config = Config::default();
        config
            .edges
            .overrides
            .insert("planner->researcher".into(), 2);
        let lines: Vec<String> = (0..3)
            .flat_map(|_| [transition("planner", "researcher"), transition("x", "y")])
            .collect();
        let found = run_with(&config, &lines);
        assert_eq!(fired_lines(&found), vec![5]);
        assert_eq!(
            found[0].1.reason,
            "edge 'planner' -> 'researcher' taken 3 times without progress (limit 2)"
        );
    }

    #[test]
    fn ids_are_listed_in_evidence_ids() {
        let mut lines: Vec<String> = (1..=5)
            .map(|n| {
                format!(r#"{{"type":"transition","task":"T1","id":"h{n}","from":"a","to":"b"}}"#)
            })
            .collect();
        lines.push(transition("a", "b"));
        let found = run(&lines);
        assert_eq!(found[0].1.evidence, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(found[0].1.evidence_ids, vec!["h1", "h2", "h3", "h4", "h5"]);
    }

    #[test]
    fn other_events_are_ignored() {
        let mut lines = Vec::new();
        for _ in 0..6 {
            lines.push(r#"{"type":"handoff","task":"T1","from":"a","to":"b"}"#.to_owned());
            lines.push(r#"{"type":"failure","task":"T1","agent":"a","error":"e"}"#.to_owned());
        }
        assert!(run(&lines).is_empty());
    }

    #[test]
    fn edges_per_task_are_capped() {
        let detector = EdgeLimit::new(&Config::default());
        let mut state = EdgeLimitState::default();
        let mut out = Vec::new();
        for n in 0..100 {
            let event =
                Event::from_json(&transition("hub", &format!("n{n}"))).expect("valid event");
            detector.observe(&mut state, &ObservedEvent::new(n + 1, &event), &mut out);
        }
        assert_eq!(state.edges.len(), MAX_EDGES);
        assert!(out.is_empty());
    }
}
