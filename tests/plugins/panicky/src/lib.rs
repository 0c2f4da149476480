//! A plugin that panics on every `turn` whose output contains "boom",
//! never answers one whose output contains "hang", and reports a
//! `panicky_seen` warning on every other turn: the tests check that its
//! panics are contained, reported and, after `plugin_host.max_faults`,
//! disable it while the other detectors go on, and that a hang is cut off
//! by `plugin_host.call_timeout_ms`.

use loopguard_plugin_api::serde_json::Value;
use loopguard_plugin_api::{Action, Detection, Detector, Event, EventKind, Severity};

/// The panicking detector.
pub struct Panicky;

impl Detector for Panicky {
    const NAME: &'static str = "panicky";
    const VERSION: &'static str = "0.0.1";
    const KINDS: &'static [&'static str] = &["panicky_seen"];

    fn new(_config: Value) -> Result<Self, String> {
        Ok(Panicky)
    }

    fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
        let EventKind::Turn { output, .. } = &event.kind else {
            return Vec::new();
        };
        if output.contains("boom") {
            panic!("the fixture blew up on line {line}");
        }
        if output.contains("hang") {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        vec![Detection::new(
            Self::NAME,
            "panicky_seen",
            Severity::Low,
            Action::Warn,
            vec![line],
            "a turn went by",
        )]
    }
}

loopguard_plugin_api::export_detector!(Panicky);
