//! An installed `loopguard`, away from the checkout that built it: the
//! README's "Install" line `cargo install --locked --path crates/cli`, with
//! `--root` a temporary folder (and `--debug`, reusing the dev-profile
//! crates this test run already compiled), run from another directory with
//! an empty `HOME`, in a mount namespace where the checkout is hidden under
//! an empty tmpfs (`unshare --user --map-root-user --mount`; the binary is
//! copied out of the target directory first, which is inside), so that
//! reading any path of the build tree finds nothing. The model files go to
//! that home's cache; the demo runs with semantic matching on; `serve`
//! keeps its store in that home's data folder.

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

#[test]
fn an_installed_server_keeps_its_store_in_the_users_data_folder() {
    let installed = Installed::new();
    let mut child = installed
        .command(&["--no-semantic", "serve", "--listen", "127.0.0.1:0"])
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
    let event = br#"{"type":"handoff","task":"T1","from":"planner","to":"coder","content":"Add a retry budget"}"#;
    let (status, body) = http_request(&addr, "POST", "/v1/events", "application/json", event);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""task":"T1""#), "{body}");
    let (status, body) = http_request(&addr, "GET", "/healthz", "application/json", b"");
    assert_eq!(status, 200, "{body}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let exit = child.wait().expect("the server exits");
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    assert!(exit.success(), "{seen}{rest}");
    let store = installed.home().join(".local/share/loopguard/serve.sqlite");
    assert!(store.is_file(), "{} after: {seen}{rest}", store.display());
}
