//! A task's clock: time never runs backwards inside one task.
//!
//! Merged or clock-skewed logs deliver events whose `ts` decreases. A
//! window that trusted them would never expire what it holds (13 handoffs a
//! day apart in descending order would all sit "within 600 s" of each
//! other). The rule, one for every detector:
//!
//! - an event timed before the latest time its task has seen is *late*: it
//!   is counted at that latest time (clamped), and its decision carries a
//!   note saying so;
//! - a late event more than one exchange window (`cycles.window_secs`)
//!   behind is too late for any window: the windowed detectors
//!   (`agent_pair`, `multi_agent`, `topic_cycle`, those whose
//!   [`crate::Detector::WINDOWED`] is set) do not count it, and the note says
//!   that too. Within a window, clamping moves an event forward by less than
//!   the window's length;
//! - an untimed event (a replay without `ts`) neither moves the clock nor is
//!   late.
//!
//! So a window never counts events whose own times lie further apart than
//! its length, in whatever order they arrive.

use loopguard_core_types::Timestamp;

/// The latest time one task has seen. Part of the saved state: a key
/// missing from an older saved state reads as a clock that has seen
/// nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskClock {
    latest_ms: Option<i64>,
}

/// An event's time moved forward to its task's latest time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clamped {
    /// The event's own time.
    pub from: Timestamp,
    /// The task's latest time, which the event was given.
    pub to: Timestamp,
}

impl Clamped {
    /// How far behind the task's latest time the event was, in ms.
    pub fn behind_ms(&self) -> i64 {
        self.to.as_millis().saturating_sub(self.from.as_millis())
    }

    /// The note a decision carries; `window_ms` is the exchange window.
    pub fn note(&self, window_ms: i64) -> String {
        let counted = if self.behind_ms() > window_ms {
            format!(
                "more than the {} s exchange window behind, it is not counted in any window",
                window_ms / 1000
            )
        } else {
            format!("counted at {}", self.to.to_rfc3339())
        };
        format!(
            "time went backwards: the event's time {} is before this task's latest {}; {counted}",
            self.from.to_rfc3339(),
            self.to.to_rfc3339(),
        )
    }
}

impl TaskClock {
    /// The time an event at `time` counts at, and whether it was clamped.
    /// Moves the clock forward.
    pub fn admit(&mut self, time: Option<Timestamp>) -> (Option<Timestamp>, Option<Clamped>) {
        let Some(time) = time else {
            return (None, None);
        };
        match self.latest_ms {
            Some(latest) if time.as_millis() < latest => {
                let to = Timestamp(latest);
                (Some(to), Some(Clamped { from: time, to }))
            }
            _ => {
                self.latest_ms = Some(time.as_millis());
                (Some(time), None)
            }
        }
    }

    /// The latest time seen, if any.
    pub fn latest(&self) -> Option<Timestamp> {
        self.latest_ms.map(Timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_running_backwards_is_clamped_to_the_latest_and_said() {
        let mut clock = TaskClock::default();
        assert_eq!(
            clock.admit(Some(Timestamp(1_000))),
            (Some(Timestamp(1_000)), None)
        );
        assert_eq!(
            clock.admit(Some(Timestamp(5_000))),
            (Some(Timestamp(5_000)), None)
        );
        let (time, clamped) = clock.admit(Some(Timestamp(2_000)));
        assert_eq!(time, Some(Timestamp(5_000)));
        let clamped = clamped.expect("clamped");
        assert_eq!(clamped.from, Timestamp(2_000));
        assert_eq!(clamped.behind_ms(), 3_000);
        let within = clamped.note(600_000);
        assert!(within.contains("time went backwards"), "{within}");
        assert!(within.contains("counted at"), "{within}");
        let beyond = clamped.note(1_000);
        assert!(beyond.contains("not counted in any window"), "{beyond}");
        // The clock does not move back.
        assert_eq!(clock.latest(), Some(Timestamp(5_000)));
        // Equal times are not clamped; untimed events pass untouched.
        assert_eq!(clock.admit(Some(Timestamp(5_000))).1, None);
        assert_eq!(clock.admit(None), (None, None));
        assert_eq!(clock.latest(), Some(Timestamp(5_000)));
    }
}
