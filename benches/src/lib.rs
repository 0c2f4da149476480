//! Shared pieces of loopguard's workspace benchmarks: a deterministic
//! generator of realistic traces.
#![deny(missing_docs)]

use std::fmt::Write as _;

/// Writes `events` trace lines spread over `tasks` tasks into `out`: a
/// deterministic mix of handoffs, collaborations, failures (some repeating),
/// turns, transitions and progress, about 130 bytes a line, with `ts` on
/// every line.
pub fn generate_trace(events: usize, tasks: usize, out: &mut String) {
    let agents = ["planner", "coder", "reviewer", "tester", "researcher"];
    let phases = ["plan", "build", "test", "review"];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let tasks = tasks.max(1);
    for i in 0..events {
        // xorshift64: cheap, deterministic, good enough to mix the stream.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let task = (state as usize) % tasks;
        let a = agents[(state >> 20) as usize % agents.len()];
        let b = agents[(state >> 24) as usize % agents.len()];
        let seconds = i / 50;
        let ts = format!(
            "2026-11-22T{:02}:{:02}:{:02}Z",
            (seconds / 3600) % 24,
            (seconds / 60) % 60,
            seconds % 60
        );
        let _ = match (state >> 32) % 10 {
            0 | 1 => writeln!(
                out,
                r#"{{"type":"handoff","task":"T{task}","ts":"{ts}","from":"{a}","to":"{b}","content":"work item {}"}}"#,
                (state >> 40) % 4
            ),
            2 => writeln!(
                out,
                r#"{{"type":"collaboration","task":"T{task}","ts":"{ts}","from":"{a}","to":"{b}","request":"please review part {}"}}"#,
                (state >> 40) % 3
            ),
            3 | 4 => writeln!(
                out,
                r#"{{"type":"failure","task":"T{task}","ts":"{ts}","agent":"{a}","error":"error[E0{}]: mismatched types in src/lib.rs","error_type":"compile"}}"#,
                300 + (state >> 40) % 6
            ),
            5 | 6 => writeln!(
                out,
                r#"{{"type":"transition","task":"T{task}","ts":"{ts}","from":"{}","to":"{}"}}"#,
                phases[(state >> 40) as usize % 4],
                phases[(state >> 44) as usize % 4]
            ),
            7 | 8 => writeln!(
                out,
                r#"{{"type":"turn","task":"T{task}","ts":"{ts}","agent":"{a}","output":"attempt {}","success":{}}}"#,
                (state >> 40) % 3,
                (state >> 50) % 3 == 0
            ),
            _ => writeln!(
                out,
                r#"{{"type":"progress","task":"T{task}","ts":"{ts}","tests_total":120,"tests_failed":{},"files_changed":{}}}"#,
                (state >> 40) % 9,
                i / 1000
            ),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::Event;

    #[test]
    fn generated_lines_are_valid_events() {
        let mut trace = String::new();
        generate_trace(2_000, 50, &mut trace);
        let lines: Vec<&str> = trace.lines().collect();
        assert_eq!(lines.len(), 2_000);
        for line in lines {
            Event::from_json(line).unwrap_or_else(|err| panic!("{line}: {err}"));
        }
    }
}
