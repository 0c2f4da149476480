//! A plugin that counts each task's events (a per-task state, exported
//! and imported; `completed` and `human` reset it) and reports every
//! `every`-th event of a task as a `crashy_count` warning, until a chosen
//! line, where it crashes the way its config says:
//!
//! ```toml
//! config = { crash_at = [3], how = "segv", every = 3 }
//! ```
//!
//! Line 0 crashes in `new`, as the plugin starts. `how`: `segv` (a write
//! to an unmapped address), `abort`, `stack` (a stack overflow), `exit`
//! (status 3), `garbage` (prints to stdout, then answers), `hang`,
//! `panic`, `alloc` (allocates without bound: run it under a memory limit
//! only), or `fds` (no crash: a `crashy_fds` detection whose message lists
//! the process's open file descriptors above 2). The process isolation tests check that
//! each crash is a fault of that line only, and that the budget counts go on
//! after the worker is restarted.

use std::collections::HashMap;

use loopguard_plugin_api::serde_json::{Value, json};
use loopguard_plugin_api::{Action, Detection, Detector, Event, Severity};

/// The crashing detector: per-task counts and a crash switch.
pub struct Crashy {
    counts: HashMap<String, u64>,
    every: u64,
    crash_at: Vec<u64>,
    how: String,
}

impl Detector for Crashy {
    const NAME: &'static str = "crashy";
    const VERSION: &'static str = "0.0.1";
    const KINDS: &'static [&'static str] = &["crashy_count", "crashy_fds"];

    fn new(mut config: Value) -> Result<Self, String> {
        let object = config.as_object_mut().ok_or("the config must be a table")?;
        let crash_at = match object.remove("crash_at") {
            None => Vec::new(),
            Some(Value::Number(line)) => line.as_u64().into_iter().collect(),
            Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_u64).collect(),
            Some(other) => return Err(format!("`crash_at` = {other} is not a line or lines")),
        };
        let how = match object.remove("how") {
            None => "segv".to_owned(),
            Some(Value::String(how)) => how,
            Some(other) => return Err(format!("`how` = {other} is not a string")),
        };
        let every = match object.remove("every") {
            None => 3,
            Some(every) => every
                .as_u64()
                .filter(|every| *every > 0)
                .ok_or_else(|| format!("`every` = {every} is not a positive count"))?,
        };
        if let Some(key) = object.keys().next() {
            return Err(format!("unknown key `{key}`"));
        }
        // Line 0: crash while starting, in `new`.
        if crash_at.contains(&0) {
            crash(&how, 0);
        }
        Ok(Crashy {
            counts: HashMap::new(),
            every,
            crash_at,
            how,
        })
    }

    fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
        if self.how == "fds" && self.crash_at.contains(&line) {
            return vec![Detection::new(
                Self::NAME,
                "crashy_fds",
                Severity::Low,
                Action::Warn,
                vec![line],
                open_fds(),
            )];
        }
        if self.crash_at.contains(&line) {
            crash(&self.how, line);
        }
        let count = self.counts.entry(event.task.to_string()).or_insert(0);
        *count += 1;
        if *count % self.every != 0 {
            return Vec::new();
        }
        vec![Detection::new(
            Self::NAME,
            "crashy_count",
            Severity::Low,
            Action::Warn,
            vec![line],
            format!("event {count} of task {}", event.task),
        )]
    }

    fn reset_task(&mut self, task: &str) {
        self.counts.remove(task);
    }

    fn export_task(&self, task: &str) -> Option<Value> {
        self.counts
            .get(task)
            .map(|events| json!({ "events": events }))
    }

    fn import_task(&mut self, task: &str, state: Value) -> Result<(), String> {
        let events = state["events"]
            .as_u64()
            .ok_or_else(|| format!("not a crashy state: {state}"))?;
        self.counts.insert(task.to_owned(), events);
        Ok(())
    }
}

/// Crashes as `how` says.
fn crash(how: &str, line: u64) {
    match how {
        "segv" => {
            let unmapped = std::ptr::without_provenance_mut::<u64>(16);
            // SAFETY: none; this fixture crashes on purpose (address 16 is
            // never mapped).
            unsafe { unmapped.write_volatile(line) };
        }
        "abort" => std::process::abort(),
        "exit" => std::process::exit(3),
        "garbage" => {
            use std::io::Write;
            let mut stdout = std::io::stdout();
            let _ = writeln!(stdout, "garbage from the plugin on line {line}");
            let _ = stdout.flush();
        }
        "hang" => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        "panic" => panic!("crashy panicked on line {line}"),
        "stack" => {
            std::hint::black_box(recurse(line));
        }
        "alloc" => {
            // Without bound: only a memory limit stops it.
            let mut hog: Vec<Vec<u8>> = Vec::new();
            loop {
                hog.push(vec![1u8; 16 << 20]);
                std::hint::black_box(&hog);
            }
        }
        _ => {}
    }
}

/// Recurses without end, 4 KiB of stack a call, until the stack overflows.
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 512]);
    let below = recurse(std::hint::black_box(depth + 1));
    frame[(depth % 512) as usize].wrapping_add(below)
}

/// The open file descriptors above 2, with what they are.
fn open_fds() -> String {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return "unknown".to_owned();
    };
    let mut fds: Vec<(u32, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let fd: u32 = entry.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            Some((fd, target.display().to_string()))
        })
        .filter(|(fd, target)| *fd > 2 && !target.starts_with("/proc/"))
        .collect();
    fds.sort();
    let listed: Vec<String> = fds
        .iter()
        .map(|(fd, target)| format!("{fd}={target}"))
        .collect();
    format!("open fds: [{}]", listed.join(", "))
}

loopguard_plugin_api::export_detector!(Crashy);
