//! The Python exceptions, and the errors of building a guard.

use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::PyException;

create_exception!(
    loopguard,
    LoopguardError,
    PyException,
    "The base of every loopguard exception."
);
create_exception!(
    loopguard,
    EventError,
    LoopguardError,
    "An event that is not valid under the trace contract; the message names the field. \
     The guard's state is unchanged."
);
create_exception!(
    loopguard,
    ConfigError,
    LoopguardError,
    "A config that cannot be read or is not valid; the message names the key or the file."
);
create_exception!(
    loopguard,
    StoreError,
    LoopguardError,
    "The store cannot be opened or read."
);
create_exception!(
    loopguard,
    ModelError,
    LoopguardError,
    "The embedding model cannot be fetched, verified or loaded; the message says where it was \
     looked for, which rule chose that directory, and what to do."
);
create_exception!(
    loopguard,
    UnknownTaskError,
    LoopguardError,
    "A task the guard has seen no event of (from ``human()`` or ``completed()``); the message \
     names the task."
);

/// Why a guard cannot start or answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GuardError {
    /// The config (its file, dict or values).
    #[error("{0}")]
    Config(String),
    /// The store.
    #[error("{0}")]
    Store(String),
    /// The embedding model cannot be provisioned or loaded.
    #[error("{0}")]
    Model(String),
    /// A plugin, the judge or the runtime cannot start.
    #[error("{0}")]
    Start(String),
    /// A task the guard has seen no event of.
    #[error(
        "no task {0:?}: the guard has seen no event of it (human() and completed() act on a \
         task the guard knows; check the task id)"
    )]
    UnknownTask(String),
    /// The guard was closed.
    #[error("the guard is closed")]
    Closed,
}

impl From<GuardError> for PyErr {
    fn from(err: GuardError) -> PyErr {
        let message = err.to_string();
        match err {
            GuardError::Config(_) => ConfigError::new_err(message),
            GuardError::Store(_) => StoreError::new_err(message),
            GuardError::Model(_) => ModelError::new_err(message),
            GuardError::UnknownTask(_) => UnknownTaskError::new_err(message),
            GuardError::Start(_) | GuardError::Closed => LoopguardError::new_err(message),
        }
    }
}

/// `err` and its sources, as one line: `a: b: c`.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = cause_of(source);
    }
    text
}

fn cause_of<'a>(
    err: Option<&'a (dyn std::error::Error + 'static)>,
) -> Option<&'a (dyn std::error::Error + 'static)> {
    err.and_then(std::error::Error::source)
}
