//! Python values to JSON text (events, config dicts) and JSON values to
//! Python objects (decisions, reports).

use std::fmt::Write as _;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// How deep a value may nest: deeper is refused (bounded recursion).
const MAX_DEPTH: usize = 64;

/// Why a Python value is not JSON; `at` is where, as a path of keys and
/// indexes (`args.items[2]`), empty for the value itself.
#[derive(Debug)]
pub(crate) struct NotJson {
    /// The path to the value.
    pub(crate) at: String,
    /// What is wrong with it.
    pub(crate) problem: String,
}

impl NotJson {
    /// The message: `field "args.x": <problem>`, or the problem alone at
    /// the top.
    pub(crate) fn message(&self, what: &str) -> String {
        if self.at.is_empty() {
            format!("{what}: {}", self.problem)
        } else {
            format!("{what} field {:?}: {}", self.at, self.problem)
        }
    }
}

/// `value` (a dict) as JSON text, for `Event::from_json_within` or the
/// config. Keys must be strings; values dicts, lists, tuples, strings,
/// ints, finite floats, bools or `None`.
pub(crate) fn dict_to_json(value: &Bound<'_, PyAny>) -> Result<String, NotJson> {
    if !value.is_instance_of::<PyDict>() {
        return Err(NotJson {
            at: String::new(),
            problem: format!("expected a dict, got {}", type_name(value)),
        });
    }
    let mut out = String::with_capacity(256);
    let mut path = Vec::new();
    write_value(value, &mut out, &mut path)?;
    Ok(out)
}

/// One step of a path: a key (kept as the Python string, made text only
/// for an error message) or an index.
enum Step<'py> {
    Key(Bound<'py, PyString>),
    Index(usize),
}

fn path_text(path: &[Step<'_>]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(&key.to_string_lossy());
            }
            Step::Index(index) => {
                let _ = write!(text, "[{index}]");
            }
        }
    }
    text
}

fn fail(path: &[Step<'_>], problem: String) -> NotJson {
    NotJson {
        at: path_text(path),
        problem,
    }
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

fn write_value<'py>(
    value: &Bound<'py, PyAny>,
    out: &mut String,
    path: &mut Vec<Step<'py>>,
) -> Result<(), NotJson> {
    if path.len() > MAX_DEPTH {
        return Err(fail(path, format!("nested deeper than {MAX_DEPTH} levels")));
    }
    if value.is_none() {
        out.push_str("null");
    } else if let Ok(text) = value.cast::<PyString>() {
        let text = text
            .to_cow()
            .map_err(|err| fail(path, format!("not valid text ({err})")))?;
        write_string(&text, out);
    } else if let Ok(flag) = value.cast::<PyBool>() {
        out.push_str(if flag.is_true() { "true" } else { "false" });
    } else if value.is_instance_of::<PyInt>() {
        if let Ok(int) = value.extract::<i64>() {
            let _ = write!(out, "{int}");
        } else if let Ok(int) = value.extract::<u64>() {
            let _ = write!(out, "{int}");
        } else {
            return Err(fail(path, "an int outside the 64-bit range".to_owned()));
        }
    } else if let Ok(float) = value.cast::<PyFloat>() {
        let float = float.value();
        if !float.is_finite() {
            return Err(fail(path, format!("{float} is not a JSON number")));
        }
        match serde_json::to_string(&float) {
            Ok(text) => out.push_str(&text),
            Err(err) => return Err(fail(path, err.to_string())),
        }
    } else if let Ok(dict) = value.cast::<PyDict>() {
        out.push('{');
        for (n, (key, item)) in dict.iter().enumerate() {
            let key = match key.cast_into::<PyString>() {
                Ok(key) => key,
                Err(err) => {
                    return Err(fail(
                        path,
                        format!("a key is a {}, not a str", type_name(&err.into_inner())),
                    ));
                }
            };
            let text = key
                .to_cow()
                .map_err(|err| fail(path, format!("a key is not valid text ({err})")))?;
            if n > 0 {
                out.push(',');
            }
            write_string(&text, out);
            drop(text);
            out.push(':');
            path.push(Step::Key(key));
            write_value(&item, out, path)?;
            path.pop();
        }
        out.push('}');
    } else if let Ok(list) = value.cast::<PyList>() {
        write_items(list.iter(), out, path)?;
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        write_items(tuple.iter(), out, path)?;
    } else {
        return Err(fail(
            path,
            format!(
                "a {} is not JSON (expected dict, list, tuple, str, int, float, bool or None)",
                type_name(value)
            ),
        ));
    }
    Ok(())
}

fn write_items<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    out: &mut String,
    path: &mut Vec<Step<'py>>,
) -> Result<(), NotJson> {
    out.push('[');
    for (index, item) in items.enumerate() {
        if index > 0 {
            out.push(',');
        }
        path.push(Step::Index(index));
        write_value(&item, out, path)?;
        path.pop();
    }
    out.push(']');
    Ok(())
}

/// `text` as a JSON string (quoted and escaped).
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ch if (ch as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", ch as u32);
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
}

/// A JSON value as the Python object `json.loads` would give.
pub(crate) fn to_python<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    Ok(match value {
        serde_json::Value::Null => py.None().into_bound(py),
        serde_json::Value::Bool(flag) => flag.into_bound_py_any(py)?,
        serde_json::Value::Number(number) => {
            if let Some(int) = number.as_u64() {
                int.into_bound_py_any(py)?
            } else if let Some(int) = number.as_i64() {
                int.into_bound_py_any(py)?
            } else {
                number.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?
            }
        }
        serde_json::Value::String(text) => text.into_bound_py_any(py)?,
        serde_json::Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        serde_json::Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// `value` serialized and turned into Python objects.
pub(crate) fn serialize_to_python<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(value).map_err(|err| PyTypeError::new_err(err.to_string()))?;
    to_python(py, &value)
}
