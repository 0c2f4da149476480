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
//! the progress evaluator. `fetch_model` provisions the model on its own,
//! where a guard would look for it; the package names its own file and
//! interpreter at import (`_locate`), so the model directory follows the
//! package and pip is the interpreter's.
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
    module.add("ModelError", py.get_type::<error::ModelError>())?;
    module.add("UnknownTaskError", py.get_type::<error::UnknownTaskError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_function(wrap_pyfunction!(run_plugin_worker, module)?)?;
    module.add_function(wrap_pyfunction!(fetch_model, module)?)?;
    module.add_function(wrap_pyfunction!(locate, module)?)?;
    module.add_function(wrap_pyfunction!(run_cli, module)?)?;
    Ok(())
}

/// Fetches (once) and verifies the pinned embedding model where a
/// ``Guard`` would look for it, and returns that directory. ``dir`` names
/// the directory; otherwise the lookup order of a guard with ``config``
/// (``None``, a TOML file's path or a dict) applies: ``semantic.model_dir``,
/// ``LOOPGUARD_MODEL_DIR``, the checkout's ``models/cache/`` when the
/// package is built inside a loopguard checkout, else the user's cache
/// directory (``~/.cache/loopguard/models``). When the config's judge uses
/// the larger tuned encoder, its base is fetched too and its update
/// checked (copied from the checkout the package was built in, when it
/// runs from there). A fetch says so on stderr; nothing else is
/// printed. Raises :class:`ModelError` when the
/// files cannot be fetched or are not the pinned ones, and
/// :class:`ConfigError` for a bad config.
#[pyfunction]
#[pyo3(signature = (dir=None, config=None))]
fn fetch_model(
    py: Python<'_>,
    dir: Option<PathBuf>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<std::ffi::OsString> {
    let source = guard::config_source(config)?;
    let dir = py.detach(|| setup::fetch_model(&source, dir.as_deref()))?;
    Ok(dir.into_os_string())
}

/// Runs the `loopguard` command line with `argv` (the program's name
/// first, as `sys.argv`) and returns its exit status: the package's
/// `loopguard` console script (`loopguard._cli:main`) is this, so a pip
/// install gives the whole command (`serve`, `replay`, `import`, `eval`,
/// `tune`, `models`, ...) with no Rust toolchain. The GIL is released while
/// it runs; `serve` stops on SIGTERM or SIGINT as the binary does.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| loopguard_cli::run(argv))
}

/// Names this extension module's file (for the rule that reads a
/// checkout's ``models/cache/`` only when the package lives inside that
/// checkout) and the interpreter whose pip fetches the model when
/// ``LOOPGUARD_PYTHON`` is unset. ``loopguard/__init__.py`` calls it once,
/// before anything else; later calls change nothing.
#[pyfunction]
#[pyo3(name = "_locate", signature = (module_file, python=None))]
fn locate(module_file: PathBuf, python: Option<PathBuf>) {
    loopguard_semantic::set_running_from(module_file);
    if let Some(python) = python.filter(|python| !python.as_os_str().is_empty()) {
        loopguard_semantic::set_default_python(python);
    }
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
