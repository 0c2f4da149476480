//! Shared pieces of loopguard's workspace benchmarks: a deterministic
//! generator of realistic traces.
#![deny(missing_docs)]

use std::fmt::Write as _;

/// What kind of trace [`generate_trace`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Tasks that mostly move on: agents hand work along a pipeline, phases
    /// follow each other, most failures and outputs are new, progress grows;
    /// a few per cent of events repeat (and so loop).
    Realistic,
    /// Every field drawn from a handful of values: nearly every event
    /// repeats something, so detectors fire on most events. A stress case.
    LoopHeavy,
}

/// Writes `events` trace lines spread over `tasks` tasks into `out`, a
/// deterministic stream of handoffs, collaborations, failures, turns,
/// transitions and progress, about 130 bytes a line, with `ts` on every
/// line.
pub fn generate_trace(events: usize, tasks: usize, out: &mut String) {
    generate_trace_mix(events, tasks, Mix::LoopHeavy, out);
}

/// [`generate_trace`] with a choice of [`Mix`].
pub fn generate_trace_mix(events: usize, tasks: usize, mix: Mix, out: &mut String) {
    if mix == Mix::Realistic {
        return realistic(events, tasks, out);
    }
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

/// A pipeline that moves on: see [`Mix::Realistic`].
fn realistic(events: usize, tasks: usize, out: &mut String) {
    let agents = ["planner", "coder", "reviewer", "tester"];
    let phases = ["plan", "build", "test", "review"];
    let tasks = tasks.max(1);
    let mut step = vec![0usize; tasks];
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    for i in 0..events {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let task = (state as usize) % tasks;
        let n = step[task];
        step[task] += 1;
        // One event in 25 repeats an earlier one of its task.
        let repeat = (state >> 32) % 25 == 0;
        let unique = if repeat { 0 } else { n };
        let a = agents[n % 4];
        let b = agents[(n + 1) % 4];
        let seconds = i / 50;
        let ts = format!(
            "2026-11-22T{:02}:{:02}:{:02}Z",
            (seconds / 3600) % 24,
            (seconds / 60) % 60,
            seconds % 60
        );
        let _ = match n % 8 {
            0 | 4 => writeln!(
                out,
                r#"{{"type":"handoff","task":"T{task}","ts":"{ts}","from":"{a}","to":"{b}","content":"work item {unique}"}}"#
            ),
            1 => writeln!(
                out,
                r#"{{"type":"transition","task":"T{task}","ts":"{ts}","from":"{}","to":"{}"}}"#,
                phases[(n / 8) % 4],
                phases[(n / 8 + 1) % 4]
            ),
            2 => writeln!(
                out,
                r#"{{"type":"failure","task":"T{task}","ts":"{ts}","agent":"{a}","error":"error[E0308]: mismatched types at src/step{unique}.rs:{}","error_type":"compile"}}"#,
                unique % 97
            ),
            3 => writeln!(
                out,
                r#"{{"type":"turn","task":"T{task}","ts":"{ts}","agent":"{a}","output":"patch {unique} applied","success":{}}}"#,
                !repeat
            ),
            5 => writeln!(
                out,
                r#"{{"type":"collaboration","task":"T{task}","ts":"{ts}","from":"{a}","to":"{b}","request":"please review change {unique}"}}"#
            ),
            6 => writeln!(
                out,
                r#"{{"type":"progress","task":"T{task}","ts":"{ts}","tests_total":120,"tests_failed":{},"files_changed":{}}}"#,
                10usize.saturating_sub(n / 8),
                n / 8
            ),
            _ => writeln!(
                out,
                r#"{{"type":"turn","task":"T{task}","ts":"{ts}","agent":"{b}","output":"review {unique} done","success":true}}"#
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
        for mix in [Mix::Realistic, Mix::LoopHeavy] {
            let mut trace = String::new();
            generate_trace_mix(2_000, 50, mix, &mut trace);
            let lines: Vec<&str> = trace.lines().collect();
            assert_eq!(lines.len(), 2_000);
            for line in lines {
                Event::from_json(line).unwrap_or_else(|err| panic!("{line}: {err}"));
            }
        }
    }
}
