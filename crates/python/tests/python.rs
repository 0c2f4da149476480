//! The Python package's tests, from `cargo test`: a virtualenv under the
//! target directory (made again only when its pinned requirements change)
//! gets `maturin`, `pytest` and the agent frameworks the adapters of
//! `loopguard.integrations` are tested on (`tests/python/requirements.txt`,
//! every package pinned) from PyPI, the package is built into it with
//! `maturin develop` (again only when a source it is built from changed),
//! and pytest runs `tests/python/`. The decisions pytest compares with are
//! made here, by replaying the same traces through `loopguard_host`.
//!
//! The wheel is tested as a user installs it: `maturin build` (dev
//! profile, this target directory) makes the abi3 manylinux wheel, whose
//! extension module must not link libpython; it is installed into a fresh
//! virtualenv outside the checkout, and with an empty `HOME`, from another
//! directory, in a mount namespace where the checkout is an empty tmpfs,
//! the Python examples of `docs/python.md` run as written (semantic
//! matching on: the model lands in that home's cache), and the wheel's
//! `loopguard` command runs the demo, `models where` and `serve`.
//!
//! Set `LOOPGUARD_PYTHON` to choose the interpreter (default `python3`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Instant;

use loopguard_config::Config;
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
    // Both tests ask for it: one makes it, the other waits and reuses it.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = MAKING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
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

/// One maturin at a time: `maturin develop` and `maturin build` share the
/// target directory's `maturin/` folder.
static MATURIN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `venv`'s maturin on this crate, with the arguments `set` adds, in
/// this target directory (dev-profile crates reused), one at a time.
fn maturin(venv: &Path, target: &Path, set: impl FnOnce(&mut Command)) -> Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv.join("bin")];
    paths.extend(std::env::split_paths(&path));
    let mut command = Command::new(venv.join("bin/maturin"));
    set(&mut command);
    command
        .arg("-m")
        .arg(workspace().join("crates/python/Cargo.toml"))
        .env("PATH", std::env::join_paths(paths).unwrap_or(path))
        .env("CARGO_TARGET_DIR", target);
    let _one_at_a_time = MATURIN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    run(&mut command)
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
    let started = Instant::now();
    let built = maturin(venv, target, |maturin| {
        maturin.arg("develop").env("VIRTUAL_ENV", venv);
    });
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

/// The model's directory the tests use: `LOOPGUARD_MODEL_DIR`, else the
/// workspace's `models/cache/`.
fn model_dir() -> PathBuf {
    std::env::var_os("LOOPGUARD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models/cache"))
}

/// Whether the model's files are there (as the Rust tests leave them).
fn model_available() -> bool {
    model_dir().join("model.onnx").is_file()
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
        // The larger tuned encoder's update, from the repository (a
        // package installed outside the checkout does not copy it itself).
        let from = loopguard_semantic::mpnet_update_checkout_dir();
        if let Err(err) = loopguard_semantic::copy_mpnet_update(&from, &model_dir()) {
            panic!("cannot place the larger tuned encoder's update: {err}");
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

/// The ```python blocks of `docs/python.md` before its "Framework adapters"
/// section: the model fetch and the plain `Guard` example, as a user
/// copies them.
fn documented_python_examples() -> Vec<String> {
    let page = match std::fs::read_to_string(workspace().join("docs/python.md")) {
        Ok(page) => page,
        Err(err) => panic!("cannot read docs/python.md: {err}"),
    };
    let section = page
        .split_once("\n## Framework adapters")
        .map(|(section, _)| section)
        .unwrap_or_else(|| panic!("docs/python.md has no \"## Framework adapters\" section"));
    section
        .split("```python\n")
        .skip(1)
        .filter_map(|block| {
            block
                .split_once("\n```")
                .map(|(code, _)| format!("{code}\n"))
        })
        .collect()
}

/// `PROGRAM ARGS` in a mount namespace where the checkout is an empty
/// tmpfs (`unshare --user --map-root-user --mount`), from `cwd`, with
/// `home` as `HOME` and nothing else saying where files go.
fn hidden_checkout(program: &Path, args: &[&str], home: &Path, cwd: &Path) -> Command {
    let checkout = match workspace().canonicalize() {
        Ok(checkout) => checkout,
        Err(err) => panic!("cannot resolve the checkout: {err}"),
    };
    let mut command = Command::new("unshare");
    command
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(r#"mount -t tmpfs loopguard-hidden "$0" && exec "$@""#)
        .arg(checkout)
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    for var in [
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "LOOPGUARD_MODEL_DIR",
        "LOOPGUARD_DATA_DIR",
        "LOOPGUARD_OFFLINE",
        "LOOPGUARD_PYTHON",
        "LOOPGUARD_PLUGIN_WORKER",
        "ORT_DYLIB_PATH",
        "VIRTUAL_ENV",
        "PYTHONPATH",
    ] {
        command.env_remove(var);
    }
    command
}

/// Builds the wheel with `maturin build` in the dev profile and this
/// target directory (the crates the other tests compiled are reused) into
/// `dist`, and returns its path.
fn build_wheel(venv: &Path, target: &Path, dist: &Path) -> PathBuf {
    let started = Instant::now();
    let built = maturin(venv, target, |maturin| {
        maturin
            .args(["build", "--profile", "dev", "--interpreter"])
            .arg(venv.join("bin/python"))
            .arg("--out")
            .arg(dist);
    });
    assert!(
        built.status.success(),
        "`maturin build` failed: {}",
        text(&built)
    );
    eprintln!("maturin build: {:.1} s", started.elapsed().as_secs_f64());
    let wheels: Vec<PathBuf> = std::fs::read_dir(dist)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "whl"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        wheels.len(),
        1,
        "one wheel in {}: {wheels:?}",
        dist.display()
    );
    wheels[0].clone()
}

/// The extension module's bytes, read from the wheel.
fn extension_in(wheel: &Path) -> (String, Vec<u8>) {
    let file = match std::fs::File::open(wheel) {
        Ok(file) => file,
        Err(err) => panic!("cannot open {}: {err}", wheel.display()),
    };
    let mut archive = match zip::ZipArchive::new(file) {
        Ok(archive) => archive,
        Err(err) => panic!("{} is not a zip: {err}", wheel.display()),
    };
    let name = archive
        .file_names()
        .find(|name| name.starts_with("loopguard/_loopguard") && name.ends_with(".so"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no loopguard/_loopguard*.so in {}", wheel.display()));
    let mut bytes = Vec::new();
    match archive.by_name(&name) {
        Ok(mut member) => {
            if let Err(err) = std::io::Read::read_to_end(&mut member, &mut bytes) {
                panic!("cannot read {name}: {err}");
            }
        }
        Err(err) => panic!("cannot read {name}: {err}"),
    }
    (name, bytes)
}

#[test]
fn the_wheel_installs_and_runs_with_no_checkout_and_no_toolchain() {
    let target = target_dir();
    let venv = venv(&target);
    let root = match tempfile::tempdir() {
        Ok(root) => root,
        Err(err) => panic!("cannot make a temporary directory: {err}"),
    };
    let (dist, home, elsewhere) = (
        root.path().join("dist"),
        root.path().join("home"),
        root.path().join("elsewhere"),
    );
    for dir in [&dist, &home, &elsewhere] {
        if let Err(err) = std::fs::create_dir_all(dir) {
            panic!("cannot create {}: {err}", dir.display());
        }
    }
    let wheel = build_wheel(&venv, &target, &dist);

    // One abi3 wheel, manylinux-tagged by maturin's own audit, whose
    // extension module does not link libpython.
    let wheel_name = wheel
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(wheel_name.contains("-abi3-"), "{wheel_name}");
    assert!(wheel_name.contains("manylinux"), "{wheel_name}");
    let (module, bytes) = extension_in(&wheel);
    let needed = match goblin::elf::Elf::parse(&bytes) {
        Ok(elf) => elf
            .libraries
            .iter()
            .map(|lib| (*lib).to_owned())
            .collect::<Vec<_>>(),
        Err(err) => panic!("{module} is not an ELF file: {err}"),
    };
    assert!(
        !needed.iter().any(|lib| lib.starts_with("libpython")),
        "{module} links {needed:?}"
    );

    // A fresh virtualenv outside the checkout, the wheel and nothing else.
    let user_venv = root.path().join("venv");
    let made = run(Command::new(python()).args(["-m", "venv"]).arg(&user_venv));
    assert!(made.status.success(), "{}", text(&made));
    let installed = run(Command::new(user_venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-index",
        ])
        .arg(&wheel)
        .env("HOME", &home));
    assert!(installed.status.success(), "{}", text(&installed));

    // The documented examples, as a user copies them, with semantic
    // matching on: the model lands in that home's cache.
    let examples = documented_python_examples();
    assert!(examples.len() >= 2, "{examples:?}");
    for (number, example) in examples.iter().enumerate() {
        let script = root.path().join(format!("example_{number}.py"));
        if let Err(err) = std::fs::write(&script, example) {
            panic!("cannot write {}: {err}", script.display());
        }
        let ran = run(&mut hidden_checkout(
            &user_venv.join("bin/python"),
            &[&script.to_string_lossy()],
            &home,
            &elsewhere,
        ));
        assert!(
            ran.status.success(),
            "docs/python.md example {number}:\n{example}\n{}",
            text(&ran)
        );
    }
    let cache = home.join(".cache/loopguard/models");
    assert!(cache.join("model.onnx").is_file(), "{}", cache.display());

    // The whole command line, from the same venv.
    let loopguard = user_venv.join("bin/loopguard");
    let demo = run(&mut hidden_checkout(
        &loopguard,
        &["demo"],
        &home,
        &elsewhere,
    ));
    let said = text(&demo);
    assert!(demo.status.success(), "{said}");
    assert!(
        said.contains("calibrated judge: same request: yes"),
        "{said}"
    );
    let where_ = run(&mut hidden_checkout(
        &loopguard,
        &["models", "where"],
        &home,
        &elsewhere,
    ));
    let said = text(&where_);
    assert!(where_.status.success(), "{said}");
    assert!(said.contains(&cache.display().to_string()), "{said}");
    assert!(said.contains("the user's cache directory"), "{said}");

    serve_one_event(&mut hidden_checkout(
        &loopguard,
        &["serve", "--listen", "127.0.0.1:0"],
        &home,
        &elsewhere,
    ));
    let store = home.join(".local/share/loopguard/serve.sqlite");
    assert!(store.is_file(), "{}", store.display());
}

/// Starts `serve` with `command`, posts one event, asks `/healthz`, and
/// stops it with SIGTERM: it exits 0.
fn serve_one_event(command: &mut Command) {
    use std::io::{BufRead, BufReader, Read};
    let mut child = match command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(err) => panic!("cannot start {command:?}: {err}"),
    };
    let Some(stderr) = child.stderr.take() else {
        panic!("stderr is piped");
    };
    let mut stderr = BufReader::new(stderr);
    let mut seen = String::new();
    let addr = loop {
        let mut line = String::new();
        if !matches!(stderr.read_line(&mut line), Ok(read) if read > 0) {
            let _ = child.kill();
            panic!("the server stopped before listening: {seen}");
        }
        seen.push_str(&line);
        if let Some(addr) = line.trim().strip_prefix("loopguard: listening on http://") {
            break addr.to_owned();
        }
    };
    let event = r#"{"type":"handoff","task":"T1","from":"planner","to":"coder","content":"Add a retry budget"}"#;
    let (status, body) = http(&addr, "POST", "/v1/events", event);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""task":"T1""#), "{body}");
    let (status, body) = http(&addr, "GET", "/healthz", "");
    assert_eq!(status, 200, "{body}");
    let killed = run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
    assert!(killed.status.success(), "{}", text(&killed));
    let exit = child.wait();
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    assert!(
        exit.as_ref().is_ok_and(|status| status.success()),
        "{exit:?}: {seen}{rest}"
    );
}

/// One HTTP/1.1 request (`connection: close`): the status and the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = match std::net::TcpStream::connect(addr) {
        Ok(stream) => stream,
        Err(err) => panic!("cannot connect to {addr}: {err}"),
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut answer = String::new();
    if let Err(err) = stream
        .write_all(request.as_bytes())
        .and_then(|()| stream.read_to_string(&mut answer))
    {
        panic!("{method} {path}: {err}");
    }
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}
