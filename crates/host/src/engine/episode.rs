//! The cycle log: one [`CycleEpisode`] per detection episode of a task,
//! opened by its first detection and closed by its resolution (an abort,
//! `completed` or `human`).

use loopguard_core_types::{Action, Detection, Timestamp};

use crate::store::{CycleEpisode, Resolution};

/// Lines kept per cycle-log episode.
const EPISODE_LINES: usize = 64;

/// One event's detections, as the cycle log records them.
pub(super) struct EpisodeEvent<'a> {
    pub(super) task: &'a str,
    pub(super) line: u64,
    pub(super) time: Timestamp,
    pub(super) detections: &'a [Detection],
    /// The action the task answers with (gated).
    pub(super) action: Action,
    /// Whether the task is behind the human gate after this event.
    pub(super) gated: bool,
}

/// Opens the task's episode on its first detection (with the id `next_id`
/// gives) or extends the open one. Returns whether the episode changed in
/// a way a reader of the log cares about (opened, a new pattern, a
/// stronger intervention, the gate); further evidence lines ride along
/// with the next such write or the resolution.
pub(super) fn track(
    slot: &mut Option<Box<CycleEpisode>>,
    next_id: impl FnOnce() -> u64,
    seen: &EpisodeEvent<'_>,
) -> bool {
    if seen.detections.is_empty() {
        return false;
    }
    let mut changed = false;
    let episode = slot.get_or_insert_with(|| {
        changed = true;
        Box::new(CycleEpisode {
            id: next_id(),
            task: seen.task.to_owned(),
            opened_at: seen.time,
            patterns: Vec::new(),
            intervention: Action::None,
            escalated: false,
            lines: Vec::new(),
            resolution: None,
            resolved_at: None,
        })
    });
    for detection in seen.detections {
        if !episode.patterns.iter().any(|kind| *kind == detection.kind) {
            episode.patterns.push(detection.kind.to_string());
            changed = true;
        }
    }
    if seen.action > episode.intervention {
        episode.intervention = seen.action;
        changed = true;
    }
    if seen.gated && !episode.escalated {
        episode.escalated = true;
        changed = true;
    }
    if episode.lines.len() < EPISODE_LINES {
        episode.lines.push(seen.line);
    }
    changed
}

/// Closes the open episode, if any, with its resolution.
pub(super) fn close(
    slot: &mut Option<Box<CycleEpisode>>,
    resolution: Resolution,
    time: Timestamp,
) -> Option<CycleEpisode> {
    let mut episode = slot.take()?;
    episode.resolution = Some(resolution);
    episode.resolved_at = Some(time);
    Some(*episode)
}
