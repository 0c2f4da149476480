//! The Python package's tests, from `cargo test`: a virtualenv under the
//! target directory (made again only when its pinned requirements change)
//! gets `maturin`, `pytest` and the agent frameworks the adapters of
//! `loopguard.integrations` are tested on (`tests/python/requirements.txt`,
//! every package pinned) from PyPI, the package is built into it with
//! `maturin develop` (again only when a source it is built from changed),
//! and pytest runs `tests/python/`. The decisions pytest compares with are
//! made here, by replaying the same traces through `loopguard_host`.
//!
//! Set `LOOPGUARD_PYTHON` to choose the interpreter (default `python3`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Instant;

use loopguard_core_types::Config;
use loopguard_host::{LoopGuard, MemoryStore, ReplayItem, replay_each};
use loopguard_progress_evaluator::ProgressEvaluator;
use loopguard_semantic::SemanticDetectors;
use sha2::{Digest, Sha256};

/// What the virtualenv holds, every package pinned (relative to this crate).
const REQUIREMENTS: &str = "tests/python/requirements.txt";

/// The traces whose decisions pytest compares, line by line, with the
/// guard's.
const TRACES: &[&str] = &[
    "agent_pair.jsonl",
    "completed_reset.jsonl",
    "edge_limit.jsonl",
    "exact_failure.jsonl",
    "human_gate.jsonl",
    "oscillation.jsonl",
    "progress.jsonl",
    "repeated_output.jsonl",
    "tool_calls.jsonl",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The target directory this test was built in (`CARGO_TARGET_DIR`, else
/// three levels above this executable: `<target>/debug/deps/python-…`).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.is_absolute() {
            dir
        } else {
            workspace().join(dir)
        };
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| workspace().join("target"))
}

fn run(command: &mut Command) -> Output {
    match command.output() {
        Ok(output) => output,
        Err(err) => panic!("cannot run {command:?}: {err}"),
    }
}

fn text(output: &Output) -> String {
    format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn python() -> String {
    std::env::var("LOOPGUARD_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// The virtualenv with the pinned requirements, made when it is missing or
/// its requirements (or the interpreter) changed.
fn venv(target: &Path) -> PathBuf {
    let venv = target.join("python-venv");
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join(REQUIREMENTS);
    let pinned = match std::fs::read(&requirements) {
        Ok(pinned) => pinned,
        Err(err) => panic!("cannot read {}: {err}", requirements.display()),
    };
    let version = run(Command::new(python()).arg("--version"));
    assert!(
        version.status.success(),
        "the Python tests need CPython >= 3.9 as `{}` (or set LOOPGUARD_PYTHON): {}",
        python(),
        text(&version)
    );
    let stamp = hex(Sha256::new()
        .chain_update(&pinned)
        .chain_update(&version.stdout)
        .chain_update(&version.stderr));
    let stamp_file = venv.join(".loopguard-requirements");
    if std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return venv;
    }
    let _ = std::fs::remove_dir_all(&venv);
    let made = run(Command::new(python()).args(["-m", "venv"]).arg(&venv));
    assert!(
        made.status.success(),
        "cannot create a virtualenv with `{} -m venv` (on Debian: apt-get install -y python3-venv): {}",
        python(),
        text(&made)
    );
    let started = Instant::now();
    let installed = run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&requirements));
    assert!(
        installed.status.success(),
        "cannot pip install {} from PyPI into {} (is pypi.org reachable? by hand: {}/bin/pip \
         install -r {}): {}",
        requirements.display(),
        venv.display(),
        venv.display(),
        requirements.display(),
        text(&installed)
    );
    eprintln!(
        "pip install -r {}: {:.1} s",
        REQUIREMENTS,
        started.elapsed().as_secs_f64()
    );
    if let Err(err) = std::fs::write(&stamp_file, &stamp) {
        panic!("cannot write {}: {err}", stamp_file.display());
    }
    venv
}

fn hex(hasher: Sha256) -> String {
    hasher
        .finalize()
        .iter()
        .fold(String::new(), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

/// Every source the package is built from: the workspace's manifests and
/// lock file, and the Rust, TOML and Python files under `crates/` and
/// `plugins/` (not tests, not build output).
fn sources_hash() -> String {
    let root = workspace();
    let mut files = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    for dir in ["crates", "plugins"] {
        collect(&root.join(dir), &mut files);
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(file.to_string_lossy().as_bytes());
        hasher.update(std::fs::read(&file).unwrap_or_default());
    }
    hex(hasher)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(
                name.as_ref(),
                "tests" | "target" | "__pycache__" | "benches"
            ) {
                collect(&path, files);
            }
        } else if [".rs", ".toml", ".py", ".pyi", ".typed"]
            .iter()
            .any(|ext| name.ends_with(ext))
        {
            files.push(path);
        }
    }
}

/// Builds and installs the package into `venv` with `maturin develop`
/// (dev profile, this target directory, so the engine's compiled crates
/// are reused) unless it is installed from these very sources.
fn install_package(venv: &Path, target: &Path) {
    let stamp = sources_hash();
    let stamp_file = venv.join(".loopguard-build");
    let imports = || {
        run(Command::new(venv.join("bin/python")).args(["-c", "import loopguard"]))
            .status
            .success()
    };
    if std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) && imports() {
        return;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv.join("bin")];
    paths.extend(std::env::split_paths(&path));
    let started = Instant::now();
    let built = run(Command::new(venv.join("bin/maturin"))
        .arg("develop")
        .arg("-m")
        .arg(workspace().join("crates/python/Cargo.toml"))
        .env("VIRTUAL_ENV", venv)
        .env("PATH", std::env::join_paths(paths).unwrap_or(path))
        .env("CARGO_TARGET_DIR", target));
    assert!(
        built.status.success(),
        "`maturin develop` failed: {}",
        text(&built)
    );
    eprintln!("maturin develop: {:.1} s", started.elapsed().as_secs_f64());
    if let Err(err) = std::fs::write(&stamp_file, &stamp) {
        panic!("cannot write {}: {err}", stamp_file.display());
    }
}

/// The engine `loopguard.Guard(semantic=False)` builds.
fn exact_engine() -> LoopGuard {
    let mut config = Config::default();
    config.semantic.enabled = false;
    let builder = LoopGuard::builder(config.clone()).store(Arc::new(MemoryStore::new()));
    let builder = SemanticDetectors::exact(&config).install(builder);
    match builder
        .extension(Arc::new(ProgressEvaluator::new(&config)))
        .build()
    {
        Ok(engine) => engine,
        Err(err) => panic!("the default config builds an engine: {err}"),
    }
}

/// Each trace's decisions as `loopguard replay --format jsonl` prints them,
/// in `<dir>/<trace>`.
fn write_expected(dir: &Path) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => panic!("cannot start a runtime: {err}"),
    };
    for trace in TRACES {
        let input = match std::fs::read(workspace().join("tests/traces").join(trace)) {
            Ok(input) => input,
            Err(err) => panic!("cannot read tests/traces/{trace}: {err}"),
        };
        let engine = exact_engine();
        let mut lines = String::new();
        let replayed = runtime.block_on(replay_each(&engine, &input[..], |item| match item {
            ReplayItem::Decision(decision) => {
                lines.push_str(&serde_json::to_string(decision).unwrap_or_default());
                lines.push('\n');
            }
            ReplayItem::Error(error) => panic!("{trace}: {error:?}"),
        }));
        if let Err(err) = replayed {
            panic!("{trace}: {err}");
        }
        if let Err(err) = std::fs::write(dir.join(trace), lines) {
            panic!("cannot write the expected decisions: {err}");
        }
    }
}

/// The model's directory, if its files are there (as the Rust tests leave
/// them): `LOOPGUARD_MODEL_DIR`, else the workspace's `models/cache/`.
fn model_available() -> bool {
    let dir = std::env::var_os("LOOPGUARD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models/cache"));
    dir.join("model.onnx").is_file()
}

/// Whether `path` is inside `dir` (both canonical).
fn inside(path: &Path, dir: &Path) -> bool {
    match (std::fs::canonicalize(path), std::fs::canonicalize(dir)) {
        (Ok(path), Ok(dir)) => path.starts_with(dir),
        _ => false,
    }
}

#[test]
fn the_python_package_passes_its_pytest_suite() {
    let target = target_dir();
    let venv = venv(&target);
    install_package(&venv, &target);
    let expected = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(err) => panic!("cannot make a temporary directory: {err}"),
    };
    write_expected(expected.path());
    let root = workspace();
    let mut pytest = Command::new(venv.join("bin/python"));
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("crates/python/tests/python"))
        .current_dir(&root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("LOOPGUARD_PY_TRACES", root.join("tests/traces"))
        .env("LOOPGUARD_PY_EXPECTED", expected.path())
        .env("LOOPGUARD_PY_TRACE_NAMES", TRACES.join(","))
        .env_remove("LOOPGUARD_LLM_BASE_URL")
        .env_remove("LOOPGUARD_LLM_MODEL")
        // The frameworks' own telemetry would reach for the network.
        .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
        .env("OPENAI_API_KEY", "sk-dummy-not-used")
        .env_remove("LANGCHAIN_TRACING_V2")
        .env("LANGSMITH_TRACING", "false");
    if model_available() {
        pytest.env("LOOPGUARD_PY_SEMANTIC", "1");
        // A package installed outside the checkout (a target directory
        // elsewhere) would keep its model in the user's cache directory:
        // point it at the checkout's files instead of fetching them again.
        if std::env::var_os("LOOPGUARD_MODEL_DIR").is_none() && !inside(&target, &root) {
            pytest.env("LOOPGUARD_MODEL_DIR", root.join("models/cache"));
        }
    }
    // The plugin that segfaults on a chosen line: a guard's plugins run in
    // a worker process (the package's `loopguard-plugin-worker` script).
    match loopguard_test_support::build_cdylib("loopguard-fixture-crashy") {
        Ok(library) => pytest.env("LOOPGUARD_PY_CRASHY_PLUGIN", library),
        Err(err) => panic!("cannot build the crashy fixture plugin: {err}"),
    };
    let output = run(&mut pytest);
    assert!(
        output.status.success(),
        "pytest failed on crates/python/tests/python: {}",
        text(&output)
    );
    eprintln!("{}", String::from_utf8_lossy(&output.stdout));
}
