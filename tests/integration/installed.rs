//! An installed `loopguard`, away from the checkout that built it: the
//! README's "Install" line `cargo install --locked --path crates/cli`, with
//! `--root` a temporary folder (and `--debug`, reusing the dev-profile
//! crates this test run already compiled), run from another directory with
//! an empty `HOME`, in a mount namespace where the checkout is hidden under
//! an empty tmpfs (`unshare --user --map-root-user --mount`; the binary is
//! copied out of the target directory first, which is inside), so that
//! reading any path of the build tree finds nothing. The model files go to
//! that home's cache; the demo runs with semantic matching on; `serve`
//! keeps its store in that home's data folder. The README's "Install"
//! section is run line by line this way, its air-gapped route included.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use tempfile::TempDir;

use crate::support::http_request;

/// The README's `cargo install` line, run once per test run into a folder
/// of the target directory: the installed `loopguard` (each test copies it
/// out of the checkout before running it).
fn cargo_installed() -> &'static Path {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let binary = Path::new(env!("CARGO_BIN_EXE_loopguard"));
        // <target>/debug/loopguard
        let target = binary
            .ancestors()
            .nth(2)
            .expect("the binary is in a target directory");
        let root = target.join("tmp/cargo-install");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let installed = Command::new(cargo)
            .args(["install", "--locked", "--path"])
            .arg(checkout().join("crates/cli"))
            .args(["--debug", "--force", "--quiet", "--root"])
            .arg(&root)
            .env("CARGO_TARGET_DIR", target)
            .output()
            .expect("cargo runs");
        assert!(
            installed.status.success(),
            "cargo install failed: {}",
            text(&installed.stderr)
        );
        root.join("bin/loopguard")
    })
}

/// The installed binary, an empty home and a working directory, outside
/// the checkout.
struct Installed {
    root: TempDir,
}

impl Installed {
    fn new() -> Installed {
        let root = tempfile::tempdir().expect("a temporary folder");
        for dir in ["bin", "home", "elsewhere"] {
            std::fs::create_dir(root.path().join(dir)).expect("a folder");
        }
        std::fs::copy(cargo_installed(), root.path().join("bin/loopguard"))
            .expect("the installed binary copies");
        Installed { root }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// `loopguard ARGS` from the copy, in a mount namespace that hides the
    /// checkout, with `HOME` the empty home and nothing else saying where
    /// files go.
    fn command(&self, args: &[&str]) -> Command {
        self.in_namespace(&self.root.path().join("bin/loopguard"), args)
    }

    /// `PROGRAM ARGS` where the checkout is an empty tmpfs.
    fn in_namespace(&self, program: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("unshare");
        command
            .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
            .arg(r#"mount -t tmpfs loopguard-hidden "$0" && exec "$@""#)
            .arg(checkout())
            .arg(program)
            .args(args)
            .current_dir(self.root.path().join("elsewhere"))
            .env("HOME", self.home());
        for var in [
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "LOOPGUARD_MODEL_DIR",
            "LOOPGUARD_DATA_DIR",
            "LOOPGUARD_OFFLINE",
            "ORT_DYLIB_PATH",
            "LOOPGUARD_LOG",
            "RUST_LOG",
        ] {
            command.env_remove(var);
        }
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        let output = self
            .command(args)
            .output()
            .expect("unshare runs (util-linux)");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("unshare:") && !stderr.contains("mount:"),
            "cannot hide the checkout in a mount namespace (user namespaces are needed): {stderr}"
        );
        output
    }
}

/// The checkout that built the binary.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the checkout")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn an_installed_binary_keeps_the_model_in_the_users_cache_and_never_reads_the_checkout() {
    let installed = Installed::new();
    let cache = installed.home().join(".cache/loopguard/models");

    // The namespace hides the checkout: its files are not there.
    let manifest = checkout().join("Cargo.toml");
    let hidden = installed
        .in_namespace(Path::new("test"), &["!", "-e", &manifest.to_string_lossy()])
        .status()
        .expect("unshare runs (util-linux)");
    assert!(
        hidden.success(),
        "the checkout is hidden in the namespace (user namespaces are needed)"
    );

    let before = installed.run(&["models", "where"]);
    let said = text(&before.stdout);
    assert_eq!(
        before.status.code(),
        Some(2),
        "{said}{}",
        text(&before.stderr)
    );
    assert!(
        said.starts_with(&format!("{}\n", cache.display())),
        "{said}"
    );
    assert!(said.contains("the user's cache directory"), "{said}");

    let demo = installed.run(&["demo"]);
    let (out, err) = (text(&demo.stdout), text(&demo.stderr));
    assert!(demo.status.success(), "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "into {} (the user's cache directory",
            cache.display()
        )),
        "the fetch says where and why: {err}"
    );
    assert!(cache.join("model.onnx").is_file(), "{}", cache.display());
    // Semantic matching ran: the demo compares texts with the model.
    assert!(out.contains("calibrated judge: same request: yes"), "{out}");
    assert!(!out.contains("semantic matching is off"), "{out}");

    let after = installed.run(&["models", "where"]);
    assert!(after.status.success(), "{}", text(&after.stderr));
    assert!(text(&after.stdout).contains("all there and intact"));

    the_larger_tuned_encoders_update_is_read_from_the_model_directory(&installed, &cache);

    // XDG_CACHE_HOME, when set, is the cache.
    let xdg = installed.root.path().join("xdg-cache");
    let output = installed
        .command(&["models", "where"])
        .env("XDG_CACHE_HOME", &xdg)
        .output()
        .expect("unshare runs");
    let said = text(&output.stdout);
    assert!(
        said.starts_with(&format!("{}\n", xdg.join("loopguard/models").display())),
        "{said}"
    );
}

/// With `tuned_encoder = "mpnet"`, an installed binary (no checkout to
/// copy the update from) stops before fetching anything and says where
/// the update's files go; with them copied there, it reads them and goes
/// on to the base (offline here, so it stops there instead).
fn the_larger_tuned_encoders_update_is_read_from_the_model_directory(
    installed: &Installed,
    cache: &Path,
) {
    let config = installed.root.path().join("elsewhere/mpnet.toml");
    std::fs::write(&config, "[similarity]\ntuned_encoder = \"mpnet\"\n").expect("a config");
    let similarity = |installed: &Installed| {
        let output = installed
            .command(&[
                "similarity",
                "a text",
                "another text",
                "--config",
                "mpnet.toml",
            ])
            .env("LOOPGUARD_OFFLINE", "1")
            .output()
            .expect("unshare runs");
        assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
        text(&output.stderr)
    };
    let update = cache.join(loopguard_semantic::MPNET_UPDATE_DIR);
    let err = similarity(installed);
    for needle in [
        "the larger tuned encoder's update file graph.onnx",
        &format!("missing from {}", update.display()),
        "models/tuned-encoder/mpnet-lora16/",
        "tuned_encoder = \"minilm\"",
    ] {
        assert!(err.contains(needle), "{needle:?} in {err}");
    }
    assert!(!cache.join(loopguard_semantic::MPNET_BASE_DIR).exists());

    let from = loopguard_semantic::mpnet_update_checkout_dir();
    loopguard_semantic::copy_mpnet_update(&from, cache).expect("the update copies");
    let err = similarity(installed);
    assert!(err.contains("model.safetensors is missing from"), "{err}");
    assert!(!err.contains("update file"), "{err}");
}

/// The commands of the README's "Install" section, in order: each bash
/// line with its continuation lines joined and its comment cut.
fn readme_install_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(checkout().join("README.md")).expect("README.md");
    let section = readme
        .split_once("\n## Install\n")
        .and_then(|(_, rest)| rest.split_once("\n## "))
        .map(|(section, _)| section.to_owned())
        .expect("README.md has an \"Install\" section");
    let mut commands = Vec::new();
    for block in section.split("```bash\n").skip(1) {
        let code = block.split_once("\n```").map_or(block, |(code, _)| code);
        let joined = code.replace("\\\n", " ");
        for line in joined.lines() {
            let command = line.split(" #").next().unwrap_or(line);
            let command = command.split_whitespace().collect::<Vec<_>>().join(" ");
            if !command.is_empty() {
                commands.push(command);
            }
        }
    }
    commands
}

/// What the README's "Install" section says to run, as this test runs it.
const INSTALL: [&str; 12] = [
    // Run by `cargo_installed` (with --debug and --root).
    "cargo install --locked --path crates/cli",
    // Not run here: the same binary as the line above, in the release
    // profile (a cold release build takes minutes).
    "cargo build --release -p loopguard-cli",
    // Run by loopguard-python's wheel test (crates/python/tests/python.rs),
    // in the dev profile.
    "pip install maturin && maturin build --release -m crates/python/Cargo.toml --out dist && pip install dist/loopguard_rs-*.whl",
    "loopguard models fetch",
    "loopguard models where",
    "loopguard demo",
    "loopguard models fetch --dir ./loopguard-models",
    "export LOOPGUARD_MODEL_DIR=/opt/loopguard-models",
    "loopguard models where",
    // With --listen 127.0.0.1:0: any free port, read from stderr.
    "loopguard serve &",
    r#"curl -s localhost:7878/v1/events -H 'content-type: application/json' -d '{"type":"failure","task":"T1","agent":"coder","error":"assertion failed: x == 3"}'"#,
    "xdg-open http://127.0.0.1:7878/",
];

#[test]
fn the_readme_install_section_runs_line_by_line() {
    assert_eq!(
        readme_install_commands(),
        INSTALL,
        "the README's \"Install\" commands changed: update this test with them"
    );
    let installed = Installed::new();
    let home = installed.home();
    let cache = home.join(".cache/loopguard/models");

    // loopguard models fetch / where / demo
    let fetched = installed.run(&["models", "fetch"]);
    let said = text(&fetched.stdout);
    assert!(fetched.status.success(), "{said}{}", text(&fetched.stderr));
    assert!(
        said.contains(&format!("model files ready in {}", cache.display())),
        "{said}"
    );
    let located = installed.run(&["models", "where"]);
    let said = text(&located.stdout);
    assert!(located.status.success(), "{said}");
    assert!(said.contains("all there and intact"), "{said}");
    let demo = installed.run(&["demo"]);
    let said = text(&demo.stdout);
    assert!(demo.status.success(), "{said}{}", text(&demo.stderr));
    assert!(
        said.contains("calibrated judge: same request: yes"),
        "{said}"
    );

    // The air-gapped route: fetch into a folder, copy it to a machine with
    // an empty home and no fetching, point LOOPGUARD_MODEL_DIR at it.
    let fetched = installed.run(&["models", "fetch", "--dir", "./loopguard-models"]);
    assert!(fetched.status.success(), "{}", text(&fetched.stderr));
    assert!(text(&fetched.stdout).contains("(set by --dir)"));
    let folder = installed.root.path().join("elsewhere/loopguard-models");
    let copied = installed.root.path().join("opt/loopguard-models");
    std::fs::create_dir_all(&copied).expect("a folder");
    for entry in std::fs::read_dir(&folder).expect("the fetched folder") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), copied.join(entry.file_name())).expect("copied");
    }
    let target_home = installed.root.path().join("target-machine-home");
    std::fs::create_dir(&target_home).expect("a folder");
    let located = installed
        .command(&["models", "where"])
        .env("HOME", &target_home)
        .env("LOOPGUARD_MODEL_DIR", &copied)
        .env("LOOPGUARD_OFFLINE", "1")
        .output()
        .expect("unshare runs");
    let said = text(&located.stdout);
    assert!(located.status.success(), "{said}{}", text(&located.stderr));
    assert!(said.contains("set by LOOPGUARD_MODEL_DIR"), "{said}");
    assert!(said.contains("all there and intact"), "{said}");

    // The first five minutes with the server.
    let mut child = installed
        .command(&["serve", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare runs");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let mut seen = String::new();
    let addr = loop {
        let mut line = String::new();
        let read = stderr.read_line(&mut line).expect("stderr is readable");
        if read == 0 {
            let _ = child.kill();
            panic!("the server stopped before listening: {seen}");
        }
        seen.push_str(&line);
        if let Some(addr) = line.trim().strip_prefix("loopguard: listening on http://") {
            break addr.to_owned();
        }
    };
    let event = INSTALL[10]
        .split_once(" -d '")
        .and_then(|(_, rest)| rest.strip_suffix('\''))
        .expect("the curl line posts one event");
    let (status, body) = http_request(
        &addr,
        "POST",
        "/v1/events",
        "application/json",
        event.as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""task":"T1""#), "{body}");
    let (status, page) = http_request(&addr, "GET", "/", "text/html", b"");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<html"), "{page}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let exit = child.wait().expect("the server exits");
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    assert!(exit.success(), "{seen}{rest}");
    let store = home.join(".local/share/loopguard/serve.sqlite");
    assert!(store.is_file(), "{} after: {seen}{rest}", store.display());
}
