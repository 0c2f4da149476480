//! The loopguard engine as a Python extension module: `import loopguard`.
//!
//! This crate is the native half of the Python package (maturin builds it
//! into `loopguard._loopguard`; `python/loopguard/` is the Python half). A
//! `Guard` owns one engine and one tokio runtime; every
//! event goes dict -> JSON text -> `Event::from_json_within`, so the
//! contract's validation is exactly the command line's, and the engine
//! runs with the GIL released. The engine is built as `loopguard replay`
//! builds it (module `setup`): the semantic detectors over the pinned model
//! (provisioned by `loopguard-semantic`), the plugins the config names and
//! the progress evaluator.
//!
//! Nothing in Rust links this crate (it is a `cdylib` only); its tests are
//! the pytest suite in `tests/python/`, which `tests/python.rs` runs in a
//! virtualenv it creates.
#![deny(missing_docs)]

use std::path::PathBuf;

use pyo3::prelude::*;

mod convert;
mod decision;
mod error;
mod guard;
mod setup;

/// The module `loopguard._loopguard`: the classes and exceptions that
/// `loopguard/__init__.py` re-exports.
#[pymodule]
fn _loopguard(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<guard::Guard>()?;
    module.add_class::<decision::Decision>()?;
    module.add_class::<decision::Detection>()?;
    module.add("LoopguardError", py.get_type::<error::LoopguardError>())?;
    module.add("EventError", py.get_type::<error::EventError>())?;
    module.add("ConfigError", py.get_type::<error::ConfigError>())?;
    module.add("StoreError", py.get_type::<error::StoreError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_function(wrap_pyfunction!(run_plugin_worker, module)?)?;
    Ok(())
}

/// Runs one detector plugin for a guard that isolates its plugins
/// (`plugin_host.isolation = "process"`, the default): loads the library
/// and answers the guard over this process's stdin and stdout until the
/// guard closes them. The `loopguard-plugin-worker` script this package
/// installs calls it; nothing else should. Raises `OSError` when the
/// pipes fail or the memory limit cannot be set.
#[pyfunction]
#[pyo3(signature = (library, memory_limit_mb=None))]
fn run_plugin_worker(
    py: Python<'_>,
    library: PathBuf,
    memory_limit_mb: Option<u64>,
) -> PyResult<()> {
    py.detach(|| loopguard_host::run_worker(&library, memory_limit_mb))
        .map_err(|err| {
            PyErr::new::<pyo3::exceptions::PyOSError, _>(format!(
                "plugin worker for {}: {err}",
                library.display()
            ))
        })
}
