//! Test helpers for plugin authors. [`Harness`] drives a [`Detector`]
//! through the ABI in-process, as loopguard would: the config and every
//! event cross as JSON, panics are caught and become errors.

use std::ffi::c_void;
use std::marker::PhantomData;

use loopguard_core_types::{Detection, Event};

use crate::Detector;
use crate::abi::{Buffer, status};
use crate::export;
use crate::wire::{PluginDescription, decode_detections, encode_observe};

/// Why a call through the ABI failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The detector returned an error (a refused config, an event it could
    /// not read).
    Error(String),
    /// The detector panicked; the panic was caught.
    Panic(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Error(message) => write!(f, "error: {message}"),
            CallError::Panic(message) => write!(f, "panicked: {message}"),
        }
    }
}

impl std::error::Error for CallError {}

/// One instance of `D`, created and called through its exported ABI
/// functions.
pub struct Harness<D: Detector> {
    instance: *mut c_void,
    input: Vec<u8>,
    detector: PhantomData<D>,
}

impl<D: Detector> Harness<D> {
    /// Creates an instance from a JSON config (`""` for none).
    pub fn new(config: &str) -> Result<Harness<D>, CallError> {
        let mut instance = std::ptr::null_mut();
        let mut out = Buffer::EMPTY;
        // SAFETY: the config is borrowed for the call; both out-pointers
        // are valid.
        let code =
            unsafe { export::create::<D>(config.as_ptr(), config.len(), &mut instance, &mut out) };
        answer(code, out)?;
        Ok(Harness {
            instance,
            input: Vec::new(),
            detector: PhantomData,
        })
    }

    /// What `describe` answers.
    pub fn describe() -> Result<PluginDescription, CallError> {
        let mut out = Buffer::EMPTY;
        // SAFETY: `out` is valid.
        let code = unsafe { export::describe::<D>(&mut out) };
        let bytes = answer(code, out)?;
        serde_json::from_slice(&bytes).map_err(|err| CallError::Error(err.to_string()))
    }

    /// Observes one event from input line `line`.
    pub fn observe(&mut self, line: u64, event: &Event) -> Result<Vec<Detection>, CallError> {
        encode_observe(line, event, &mut self.input);
        let mut out = Buffer::EMPTY;
        // SAFETY: the instance is live and used by this thread only; the
        // input is borrowed for the call.
        let code = unsafe {
            export::observe::<D>(
                self.instance,
                self.input.as_ptr(),
                self.input.len(),
                &mut out,
            )
        };
        let bytes = answer(code, out)?;
        decode_detections(&bytes).map_err(|err| CallError::Error(err.0))
    }

    /// Resets a task.
    pub fn reset_task(&mut self, task: &str) -> Result<(), CallError> {
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe`.
        let code =
            unsafe { export::reset_task::<D>(self.instance, task.as_ptr(), task.len(), &mut out) };
        answer(code, out).map(drop)
    }

    /// Asks for a task's state, as a durable store would (`None`: nothing
    /// to keep).
    pub fn export_task(&self, task: &str) -> Result<Option<serde_json::Value>, CallError> {
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe`.
        let code =
            unsafe { export::export_task::<D>(self.instance, task.as_ptr(), task.len(), &mut out) };
        let bytes = answer(code, out)?;
        if bytes.is_empty() {
            return Ok(None);
        }
        let state: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|err| CallError::Error(format!("the exported state is not JSON: {err}")))?;
        Ok((!state.is_null()).then_some(state))
    }

    /// Puts back a task's state, as loopguard does when it reloads a task
    /// from a durable store.
    pub fn import_task(&mut self, task: &str, state: &serde_json::Value) -> Result<(), CallError> {
        let bytes = serde_json::to_vec(state).map_err(|err| CallError::Error(err.to_string()))?;
        self.import_task_bytes(task, &bytes)
    }

    /// Puts back a task's state from raw bytes (which need not be JSON:
    /// to test what the detector does with garbage).
    pub fn import_task_bytes(&mut self, task: &str, state: &[u8]) -> Result<(), CallError> {
        let mut out = Buffer::EMPTY;
        // SAFETY: as in `observe`; the state is borrowed for the call.
        let code = unsafe {
            export::import_task::<D>(
                self.instance,
                task.as_ptr(),
                task.len(),
                state.as_ptr(),
                state.len(),
                &mut out,
            )
        };
        answer(code, out).map(drop)
    }
}

impl<D: Detector> std::fmt::Debug for Harness<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("detector", &D::NAME)
            .finish()
    }
}

impl<D: Detector> Drop for Harness<D> {
    fn drop(&mut self) {
        // SAFETY: the instance came from `create::<D>` and is not used again.
        unsafe { export::destroy::<D>(self.instance) };
    }
}

/// The bytes of an answer, or its error; frees the buffer.
fn answer(code: i32, out: Buffer) -> Result<Vec<u8>, CallError> {
    // SAFETY: the buffer was filled by this library's functions.
    let bytes = unsafe { out.into_vec() };
    match code {
        status::OK => Ok(bytes),
        status::PANIC => Err(CallError::Panic(
            String::from_utf8_lossy(&bytes).into_owned(),
        )),
        _ => Err(CallError::Error(
            String::from_utf8_lossy(&bytes).into_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::{Action, Severity};
    use serde_json::Value;

    /// Panics on a turn whose output is "boom"; reports every other turn.
    struct Fragile {
        resets: Vec<String>,
    }

    impl Detector for Fragile {
        const NAME: &'static str = "fragile";
        const VERSION: &'static str = "1.2.3";
        const KINDS: &'static [&'static str] = &["fragile_kind"];
        fn new(config: Value) -> Result<Self, String> {
            if config.get("refuse").is_some() {
                return Err("refused as asked".to_owned());
            }
            Ok(Fragile { resets: Vec::new() })
        }
        fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
            if let crate::EventKind::Turn { output, .. } = &event.kind
                && output == "boom"
            {
                panic!("boom on line {line}");
            }
            assert!(self.resets.len() < 100);
            vec![Detection::new(
                "someone else",
                "fragile_kind",
                Severity::Low,
                Action::Warn,
                vec![line],
                "seen",
            )]
        }
        fn reset_task(&mut self, task: &str) {
            self.resets.push(task.to_owned());
        }
        fn export_task(&self, task: &str) -> Option<Value> {
            match task {
                "boom" => panic!("export of {task} blew up"),
                "none" => None,
                "null" => Some(Value::Null),
                _ => Some(serde_json::json!({ "format": 1, "resets": self.resets })),
            }
        }
        fn import_task(&mut self, task: &str, state: Value) -> Result<(), String> {
            if task == "boom" {
                panic!("import of {task} blew up");
            }
            let resets = state
                .get("resets")
                .and_then(|resets| serde_json::from_value(resets.clone()).ok())
                .ok_or_else(|| format!("fragile: no resets in {state}"))?;
            self.resets = resets;
            Ok(())
        }
    }

    /// Keeps no state: the trait's defaults.
    struct Stateless;

    impl Detector for Stateless {
        const NAME: &'static str = "stateless";
        const VERSION: &'static str = "0.1.0";
        const KINDS: &'static [&'static str] = &["stateless_kind"];
        fn new(_config: Value) -> Result<Self, String> {
            Ok(Stateless)
        }
        fn observe(&mut self, _line: u64, _event: &Event) -> Vec<Detection> {
            Vec::new()
        }
    }

    /// Records the type of every event it is handed.
    struct Recording {
        seen: Vec<String>,
    }

    impl Detector for Recording {
        const NAME: &'static str = "recording";
        const VERSION: &'static str = "0.1.0";
        const KINDS: &'static [&'static str] = &["recorded"];
        fn new(_config: Value) -> Result<Self, String> {
            Ok(Recording { seen: Vec::new() })
        }
        fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
            self.seen.push(event.kind.type_name().to_owned());
            vec![Detection::new(
                Self::NAME,
                "recorded",
                Severity::Low,
                Action::Warn,
                vec![line],
                "seen",
            )]
        }
    }

    /// The event types the instance was handed.
    fn seen(harness: &Harness<Recording>) -> Vec<String> {
        // SAFETY: the instance is live and this thread's alone.
        unsafe { &*harness.instance.cast::<Recording>() }
            .seen
            .clone()
    }

    const NEWER: &str = r#"{"type":"tool_result_v9","task":"T","agent":"a","tool":"grep"}"#;
    const TOOL_CALL: &str = r#"{"type":"tool_call","task":"T","agent":"a","tool":"grep","args":{"q":"x"},"result":"..."}"#;

    #[test]
    fn an_event_type_newer_than_the_sdk_is_skipped_without_an_error() {
        let mut harness = Harness::<Recording>::new("").expect("created");
        let newer = Event::from_json_forward(NEWER).expect("read forward");
        assert_eq!(harness.observe(1, &newer), Ok(Vec::new()));
        assert!(seen(&harness).is_empty(), "the detector was not called");
        // The instance goes on with the types it knows, `tool_call` among
        // them (trace format 1.1).
        let found = harness.observe(2, &turn("fine")).expect("observes");
        assert_eq!(found[0].evidence, [2]);
        let tool_call = Event::from_json(TOOL_CALL).expect("a tool call");
        harness.observe(3, &tool_call).expect("observes");
        assert_eq!(seen(&harness), ["turn", "tool_call"]);
    }

    #[test]
    fn the_exported_observe_answers_a_newer_type_with_nothing_and_status_ok() {
        let harness = Harness::<Recording>::new("").expect("created");
        let request = format!(r#"{{"format":1,"line":7,"event":{NEWER}}}"#);
        let mut out = Buffer::EMPTY;
        // SAFETY: a live instance of `Recording`; the request is borrowed
        // for the call; `out` is writable.
        let code = unsafe {
            export::observe::<Recording>(
                harness.instance,
                request.as_ptr(),
                request.len(),
                &mut out,
            )
        };
        assert_eq!(answer(code, out), Ok(Vec::new()), "no detections, no error");
        assert!(seen(&harness).is_empty(), "the detector was not called");
    }

    fn turn(output: &str) -> Event {
        Event::from_json(&format!(
            r#"{{"type":"turn","task":"T","agent":"a","output":"{output}","success":false}}"#
        ))
        .expect("an event")
    }

    #[test]
    fn a_panic_becomes_an_error_and_the_instance_goes_on() {
        let mut harness = Harness::<Fragile>::new("").expect("created");
        let err = harness.observe(3, &turn("boom")).expect_err("panics");
        assert_eq!(err, CallError::Panic("boom on line 3".to_owned()));
        let found = harness.observe(4, &turn("fine")).expect("goes on");
        assert_eq!(found[0].evidence, [4]);
        assert_eq!(found[0].detector, "fragile", "the SDK names the detector");
    }

    #[test]
    fn config_errors_describe_and_reset_cross_the_abi() {
        let err = Harness::<Fragile>::new(r#"{"refuse":true}"#).expect_err("refused");
        assert_eq!(err, CallError::Error("refused as asked".to_owned()));
        let err = Harness::<Fragile>::new("{not json").expect_err("garbage");
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        let description = Harness::<Fragile>::describe().expect("describes");
        assert_eq!(
            (description.name.as_str(), description.version.as_str()),
            ("fragile", "1.2.3")
        );
        assert_eq!(description.kinds, ["fragile_kind"]);
        let mut harness = Harness::<Fragile>::new("{}").expect("created");
        harness.reset_task("T9").expect("resets");
        // SAFETY: the instance is live and this thread's alone.
        let detector = unsafe { &*harness.instance.cast::<Fragile>() };
        assert_eq!(detector.resets, ["T9"]);
    }

    /// The resets the instance holds.
    fn resets(harness: &Harness<Fragile>) -> Vec<String> {
        // SAFETY: the instance is live and this thread's alone.
        unsafe { &*harness.instance.cast::<Fragile>() }
            .resets
            .clone()
    }

    #[test]
    fn a_task_state_round_trips_through_export_and_import() {
        let mut first = Harness::<Fragile>::new("").expect("created");
        first.reset_task("A").expect("resets");
        first.reset_task("B").expect("resets");
        let state = first.export_task("T").expect("exports").expect("a state");
        assert_eq!(
            state,
            serde_json::json!({"format": 1, "resets": ["A", "B"]})
        );
        let mut second = Harness::<Fragile>::new("").expect("created");
        assert!(resets(&second).is_empty());
        second.import_task("T", &state).expect("imports");
        assert_eq!(resets(&second), ["A", "B"]);
        // Nothing to keep, either way of saying it.
        assert_eq!(first.export_task("none"), Ok(None));
        assert_eq!(first.export_task("null"), Ok(None));
        // A state the detector cannot read is its error, and changes nothing.
        let err = second
            .import_task("T", &serde_json::json!({"format": 1}))
            .expect_err("refused");
        assert_eq!(
            err,
            CallError::Error(r#"fragile: no resets in {"format":1}"#.to_owned())
        );
        let err = second
            .import_task_bytes("T", b"{not json")
            .expect_err("refused");
        assert!(
            matches!(&err, CallError::Error(m) if m.starts_with("import_task: the state is not valid JSON")),
            "{err}"
        );
        assert_eq!(resets(&second), ["A", "B"]);
    }

    #[test]
    fn a_panicking_export_or_import_is_an_error_status_and_the_instance_goes_on() {
        let mut harness = Harness::<Fragile>::new("").expect("created");
        let err = harness.export_task("boom").expect_err("panics");
        assert_eq!(err, CallError::Panic("export of boom blew up".to_owned()));
        let err = harness
            .import_task("boom", &serde_json::json!({"resets": []}))
            .expect_err("panics");
        assert_eq!(err, CallError::Panic("import of boom blew up".to_owned()));
        assert!(harness.export_task("T").expect("goes on").is_some());
        assert_eq!(harness.observe(1, &turn("fine")).expect("goes on").len(), 1);
    }

    #[test]
    fn a_detector_without_export_and_import_keeps_nothing_and_ignores_a_state() {
        let mut harness = Harness::<Stateless>::new("").expect("created");
        assert_eq!(harness.export_task("T"), Ok(None));
        harness
            .import_task("T", &serde_json::json!({"anything": [1, 2]}))
            .expect("ignored");
        // The slots are in its table all the same: the host may call them.
        let table = export::table::<Stateless>(crate::ABI_MAJOR, crate::ABI_MINOR);
        assert!(table.export_task.is_some() && table.import_task.is_some());
    }

    #[test]
    fn the_macro_table_carries_the_sdk_versions() {
        let table = export::table::<Fragile>(7, 9);
        assert_eq!((table.header.abi_major, table.header.abi_minor), (7, 9));
        assert_eq!(table.header.struct_size, crate::abi::TABLE_SIZE_V1_4);
        // SAFETY: static strings.
        let sdk = unsafe { table.header.sdk_version.to_string_lossy() };
        assert_eq!(sdk, crate::SDK_VERSION);
        // SAFETY: static strings.
        let rustc = unsafe { table.header.rustc_version.to_string_lossy() };
        assert!(rustc.starts_with("rustc "), "{rustc}");
    }

    /// Reports the usage of every event that carries one (ABI 1.4).
    struct Spending;

    impl Detector for Spending {
        const NAME: &'static str = "spending";
        const VERSION: &'static str = "0.1.0";
        const KINDS: &'static [&'static str] = &["spent"];
        fn new(_config: Value) -> Result<Self, String> {
            Ok(Spending)
        }
        fn observe(&mut self, line: u64, event: &Event) -> Vec<Detection> {
            let Ok(Some(usage)) = event.usage() else {
                return Vec::new();
            };
            let usage: crate::Usage = usage;
            vec![Detection::new(
                Self::NAME,
                "spent",
                Severity::Low,
                Action::Warn,
                vec![line],
                format!(
                    "{} in, {} out, ${}, {}",
                    usage.input_tokens.unwrap_or(0),
                    usage.output_tokens.unwrap_or(0),
                    usage.cost_usd.unwrap_or(0.0),
                    usage.model.as_deref().unwrap_or("?")
                ),
            )]
        }
    }

    #[test]
    fn a_plugin_sees_the_usage_of_an_event_through_the_abi() {
        let mut harness = Harness::<Spending>::new("").expect("created");
        let spent = Event::from_json(
            r#"{"type":"tool_call","task":"T","agent":"a","tool":"grep","usage":{"input_tokens":1200,"output_tokens":80,"cost_usd":0.0125,"model":"gpt-4o-mini"}}"#,
        )
        .expect("an event with usage");
        let found = harness.observe(4, &spent).expect("observes");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].reason, "1200 in, 80 out, $0.0125, gpt-4o-mini");
        assert_eq!(found[0].evidence, [4]);
        // Without usage: nothing to read.
        assert_eq!(harness.observe(5, &turn("no usage")), Ok(Vec::new()));
        // Part of a usage: the rest is absent.
        let partial =
            Event::from_json(r#"{"type":"completed","task":"T","usage":{"output_tokens":7}}"#)
                .expect("an event with usage");
        let found = harness.observe(6, &partial).expect("observes");
        assert_eq!(found[0].reason, "0 in, 7 out, $0, ?");
    }
}
