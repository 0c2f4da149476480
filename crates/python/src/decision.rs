//! `loopguard.Decision` and `loopguard.Detection`: the engine's answer,
//! read-only, with typed attributes.

use std::sync::Arc;

use loopguard_core_types as core;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert;

/// loopguard's answer to one event.
///
/// `action` is what to do (`"none"`, `"warn"`, `"break_cycle"`,
/// `"inject_context"`, `"pivot"`, `"block"`, `"escalate"`, `"abort"`);
/// `detections` is the evidence for it.
///
/// >>> import loopguard
/// >>> guard = loopguard.Guard(semantic=False)
/// >>> d = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b"})
/// >>> d.action, d.loop_count, d.status
/// ('none', 0, 'active')
#[pyclass(frozen, module = "loopguard", name = "Decision")]
#[derive(Debug)]
pub(crate) struct Decision {
    inner: Arc<core::Decision>,
}

impl Decision {
    /// Wraps the engine's decision.
    pub(crate) fn new(inner: core::Decision) -> Decision {
        Decision {
            inner: Arc::new(inner),
        }
    }
}

#[pymethods]
impl Decision {
    /// What to do: the strongest action of all detections.
    #[getter]
    fn action(&self) -> &'static str {
        self.inner.action.as_str()
    }

    /// The task's loop count after this event.
    #[getter]
    fn loop_count(&self) -> u32 {
        self.inner.loop_count
    }

    /// The task's status after this event (`"active"`, `"completed"`,
    /// `"escalated"`, `"paused"`, `"aborted_stuck"`).
    #[getter]
    fn status(&self) -> &'static str {
        self.inner.status.as_str()
    }

    /// For a pivot: the directive to give the agent; otherwise `None`.
    #[getter]
    fn directive(&self) -> Option<String> {
        self.inner.directive.clone()
    }

    /// The guard's sequence number of the event (its "line").
    #[getter]
    fn line(&self) -> u64 {
        self.inner.line
    }

    /// The task the event belongs to.
    #[getter]
    fn task(&self) -> String {
        self.inner.task.clone()
    }

    /// How many pivots the task has had since its last reset.
    #[getter]
    fn pivots(&self) -> u32 {
        self.inner.pivots
    }

    /// The event's own `id`, if it had one.
    #[getter]
    fn id(&self) -> Option<String> {
        self.inner.id.clone()
    }

    /// Every detection on this event.
    #[getter]
    fn detections(&self) -> Vec<Detection> {
        self.inner
            .detections
            .iter()
            .map(|detection| Detection {
                inner: detection.clone(),
            })
            .collect()
    }

    /// Detectors that failed on this event (each message names the
    /// detector); the other detectors ran.
    #[getter]
    fn errors(&self) -> Vec<String> {
        self.inner.errors.clone()
    }

    /// How the event was read, when that is not as it came.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes.clone()
    }

    /// The decision as the dict `loopguard replay --format jsonl` prints
    /// for it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(convert::serialize_to_python(py, &*self.inner)?.cast_into::<PyDict>()?)
    }

    /// The decision as one line of JSON (`loopguard replay --format
    /// jsonl`).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&*self.inner)
            .map_err(|err| pyo3::exceptions::PyValueError::new_err(err.to_string()))
    }

    fn __repr__(&self) -> String {
        let kinds: Vec<&str> = self
            .inner
            .detections
            .iter()
            .map(|detection| detection.kind.as_ref())
            .collect();
        format!(
            "Decision(task={:?}, line={}, action={:?}, loop_count={}, status={:?}, detections={:?})",
            self.inner.task,
            self.inner.line,
            self.inner.action.as_str(),
            self.inner.loop_count,
            self.inner.status.as_str(),
            kinds
        )
    }
}

/// One detector's finding on one event: what loops, why, and the events
/// that show it.
#[pyclass(frozen, module = "loopguard", name = "Detection")]
#[derive(Debug)]
pub(crate) struct Detection {
    inner: core::Detection,
}

#[pymethods]
impl Detection {
    /// The kind of loop (`"agent_pair"`, `"tool_repeat"`, ...).
    #[getter]
    fn kind(&self) -> String {
        self.inner.kind.to_string()
    }

    /// The detector that produced it.
    #[getter]
    fn detector(&self) -> String {
        self.inner.detector.to_string()
    }

    /// How serious it is (`"low"`, `"medium"`, `"high"`, `"critical"`).
    #[getter]
    fn severity(&self) -> &'static str {
        self.inner.severity.as_str()
    }

    /// The intervention this detection asks for.
    #[getter]
    fn action(&self) -> &'static str {
        self.inner.action.as_str()
    }

    /// Why this is a loop, in plain words.
    #[getter]
    fn reason(&self) -> String {
        self.inner.reason.clone()
    }

    /// The sequence numbers ("lines") of the events that show the loop,
    /// oldest first.
    #[getter]
    fn evidence(&self) -> Vec<u64> {
        self.inner.evidence.clone()
    }

    /// The orchestrator's ids of those events, where they had one.
    #[getter]
    fn evidence_ids(&self) -> Vec<String> {
        self.inner.evidence_ids.clone()
    }

    /// The task's loop count after this detection (counter-based kinds).
    #[getter]
    fn loop_count(&self) -> Option<u32> {
        self.inner.loop_count
    }

    /// The count the detector compared with its limit.
    #[getter]
    fn count(&self) -> Option<u32> {
        self.inner.count
    }

    /// For a pivot: the directive to give the agent.
    #[getter]
    fn directive(&self) -> Option<String> {
        self.inner.directive.clone()
    }

    /// For `break_cycle`: the agent to skip.
    #[getter]
    fn skip_agent(&self) -> Option<String> {
        self.inner.skip_agent.clone()
    }

    /// The agents the detection is about, in the order its reason names
    /// them: the pair, the cycle, the caller of a tool, the failing agent
    /// (empty for a phase kind).
    #[getter]
    fn agents(&self) -> Vec<String> {
        self.inner.agents.clone()
    }

    /// The detection as a dict (every field the JSON output has).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(convert::serialize_to_python(py, &self.inner)?.cast_into::<PyDict>()?)
    }

    fn __repr__(&self) -> String {
        format!(
            "Detection(kind={:?}, severity={:?}, action={:?}, evidence={:?}, reason={:?})",
            self.inner.kind,
            self.inner.severity.as_str(),
            self.inner.action.as_str(),
            self.inner.evidence,
            self.inner.reason
        )
    }
}
