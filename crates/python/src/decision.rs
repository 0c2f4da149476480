//! `loopguard.Decision` and `loopguard.Detection`: the engine's answer,
//! read-only, with typed attributes. Both compare, hash and pickle as
//! their JSON dict.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use loopguard_core_types as core;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::convert;

/// A value made again from its fields, as `to_dict()` gives them: a dict
/// (`fields`), keywords (`more`), or both; `what` names it in the error.
fn from_fields<T: DeserializeOwned>(
    py: Python<'_>,
    fields: Option<&Bound<'_, PyAny>>,
    more: Option<&Bound<'_, PyDict>>,
    what: &str,
) -> PyResult<T> {
    let merged = PyDict::new(py);
    if let Some(fields) = fields {
        let fields = fields.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} is made from a dict of its fields (as to_dict() gives them)"
            ))
        })?;
        merged.update(fields.as_mapping())?;
    }
    if let Some(more) = more {
        merged.update(more.as_mapping())?;
    }
    let text = convert::dict_to_json(merged.as_any())
        .map_err(|err| PyValueError::new_err(err.message(what)))?;
    serde_json::from_str(&text).map_err(|err| PyValueError::new_err(format!("{what}: {err}")))
}

/// Whether two values have the same JSON (the same `to_dict()`).
fn same_json(a: &impl Serialize, b: &impl Serialize) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A hash of the value's JSON text, so that equal values hash alike.
fn json_hash(value: &impl Serialize) -> u64 {
    let mut hasher = DefaultHasher::new();
    serde_json::to_value(value)
        .map(|value| value.to_string())
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// `(cls, (dict,))`: how pickle makes the value again.
fn reduce<'py>(
    cls: Bound<'py, PyType>,
    dict: Bound<'py, PyDict>,
) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
    let py = cls.py();
    Ok((cls, PyTuple::new(py, [dict])?))
}

/// loopguard's answer to one event.
///
/// `action` is what to do (`"none"`, `"warn"`, `"break_cycle"`,
/// `"inject_context"`, `"pivot"`, `"block"`, `"escalate"`, `"abort"`);
/// `stopped` says whether the run must stop (`escalate` or `abort`);
/// `detections` is the evidence for it. Two decisions are equal when their
/// `to_dict()` are; a decision pickles as that dict.
///
/// >>> import loopguard, pickle
/// >>> guard = loopguard.Guard(semantic=False)
/// >>> d = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b"})
/// >>> d.action, d.stopped, d.loop_count, d.status
/// ('none', False, 0, 'active')
/// >>> pickle.loads(pickle.dumps(d)) == d
/// True
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
    /// A decision from its fields, as :meth:`to_dict` gives them (a dict,
    /// keywords, or both): ``Decision(d.to_dict()) == d``. Raises
    /// ``ValueError`` naming a field that is missing or wrong.
    #[new]
    #[pyo3(signature = (fields=None, /, **more))]
    fn py_new(
        py: Python<'_>,
        fields: Option<&Bound<'_, PyAny>>,
        more: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Decision> {
        Ok(Decision::new(from_fields(py, fields, more, "a Decision")?))
    }

    /// What to do: the strongest action of all detections.
    #[getter]
    fn action(&self) -> &'static str {
        self.inner.action.as_str()
    }

    /// Whether the orchestrator must stop the task's run: the action is
    /// ``escalate`` (the human gate) or ``abort``.
    #[getter]
    fn stopped(&self) -> bool {
        matches!(
            self.inner.action,
            core::Action::Escalate | core::Action::Abort
        )
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

    /// Whether it was decided on this engine's own copy of the task while
    /// a shared store could not be written (provisional: another engine
    /// may have moved the task on).
    #[getter]
    fn degraded(&self) -> bool {
        self.inner.degraded
    }

    /// The task's spend after this event (trace format 1.2, ruling 18),
    /// when any of its events carried ``usage``: ``{"input_tokens": N,
    /// "output_tokens": N, "cost_usd": X, "in_loops": {...}}``, with
    /// ``in_loops`` the part spent on the events its loop detections name
    /// and ``cost_usd`` absent when no event gave a cost and no
    /// ``[pricing]`` entry priced its model. ``None`` otherwise.
    ///
    /// >>> guard = loopguard.Guard(semantic=False)
    /// >>> usage = {"input_tokens": 1200, "output_tokens": 80, "cost_usd": 0.25}
    /// >>> d = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b", "usage": usage})
    /// >>> d.usage["input_tokens"], d.usage["cost_usd"], d.usage["in_loops"]["input_tokens"]
    /// (1200, 0.25, 0)
    /// >>> guard.observe({"type": "handoff", "task": "U", "from": "a", "to": "b"}).usage is None
    /// True
    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .usage
            .as_ref()
            .map(|spend| convert::serialize_to_python(py, spend))
            .transpose()
    }

    /// The decision as the dict `loopguard replay --format jsonl` prints
    /// for it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(convert::serialize_to_python(py, &*self.inner)?.cast_into::<PyDict>()?)
    }

    /// :meth:`to_dict` under the name serializers look for on a named
    /// tuple, so a LangGraph checkpoint keeps a decision (and makes it
    /// again with ``Decision(**fields)``).
    fn _asdict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.to_dict(py)
    }

    /// The decision as one line of JSON (`loopguard replay --format
    /// jsonl`).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&*self.inner)
            .map_err(|err| pyo3::exceptions::PyValueError::new_err(err.to_string()))
    }

    fn __eq__(&self, other: &Decision) -> bool {
        same_json(&*self.inner, &*other.inner)
    }

    fn __hash__(&self) -> u64 {
        json_hash(&*self.inner)
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        reduce(py.get_type::<Decision>(), slf.get().to_dict(py)?)
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
/// that show it. Equal, hashed and pickled as its `to_dict()`, as a
/// `Decision` is.
#[pyclass(frozen, module = "loopguard", name = "Detection")]
#[derive(Debug)]
pub(crate) struct Detection {
    inner: core::Detection,
}

#[pymethods]
impl Detection {
    /// A detection from its fields, as :meth:`to_dict` gives them (a dict,
    /// keywords, or both). Raises ``ValueError`` naming a field that is
    /// missing or wrong.
    #[new]
    #[pyo3(signature = (fields=None, /, **more))]
    fn py_new(
        py: Python<'_>,
        fields: Option<&Bound<'_, PyAny>>,
        more: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Detection> {
        Ok(Detection {
            inner: from_fields(py, fields, more, "a Detection")?,
        })
    }

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

    /// On a ``budget`` detection (ruling 18): the limit crossed and the
    /// spend against it, ``{"limit": "budget.max_tokens", "allowed": X,
    /// "spent": X, "usage": {...}, "costliest_loops": [...]}`` (``usage``
    /// as :attr:`Decision.usage`; each loop a ``kind``, its ``evidence``
    /// and what those events spent). ``None`` on every other kind.
    #[getter]
    fn budget<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .budget
            .as_deref()
            .map(|crossing| convert::serialize_to_python(py, crossing))
            .transpose()
    }

    /// The detection as a dict (every field the JSON output has).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        Ok(convert::serialize_to_python(py, &self.inner)?.cast_into::<PyDict>()?)
    }

    /// :meth:`to_dict` under the name serializers look for on a named
    /// tuple (see :meth:`Decision._asdict`).
    fn _asdict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.to_dict(py)
    }

    fn __eq__(&self, other: &Detection) -> bool {
        same_json(&self.inner, &other.inner)
    }

    fn __hash__(&self) -> u64 {
        json_hash(&self.inner)
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        reduce(py.get_type::<Detection>(), slf.get().to_dict(py)?)
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
