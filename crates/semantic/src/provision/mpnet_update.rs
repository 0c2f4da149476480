//! The larger tuned encoder's low-rank update
//! (`[similarity] tuned_encoder = "mpnet"`): the ONNX graph with every
//! weight left out, the update's factors, the manifest that says where
//! each weight comes from, and the list of texts it was tuned on, written
//! by `research/tuned-encoder/lowrank.py split`. No package index carries
//! them: they ship in the loopguard repository
//! (`models/tuned-encoder/mpnet-lora16/`, [`mpnet_update_checkout_dir`])
//! and are read from `tuned-encoder/mpnet-lora16/` of the model directory
//! ([`MPNET_UPDATE_DIR`]), each checked against its pinned size and
//! sha256 ([`MPNET_UPDATE_FILES`]).
//!
//! A program running from the checkout it was built in copies the
//! repository's files there when they are missing; any other program is
//! told where to copy them from ([`copy_mpnet_update`] does it, checked).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use super::lookup::workspace_dir;
use super::tuned::TunedModelFile;
use super::verify::{Checked, FileState, Stamp, check_file, copy_hashing, set_readable};
use super::{Resolved, runs_from_checkout};
use crate::error::{Result, SemanticError};

/// Where in the model directory the update's files are read from.
pub const MPNET_UPDATE_DIR: &str = "tuned-encoder/mpnet-lora16";

/// The update's low-rank factors, two per layer at half precision; the
/// larger encoder's id ([`MPNET_TUNED_MODEL_ID`]) and its
/// `trained-on.json` name this file's sha256.
pub const MPNET_FACTORS: TunedModelFile = TunedModelFile {
    name: "low-rank.safetensors",
    size: 5_324_920,
    sha256: "54c45583a1c1786b473b8b34265b16696ca3f1c4a98ec28a0e06e5ff767ead46",
};

/// Every file of the update, each with its pinned size and sha256: the
/// graph without weights, the factors, the manifest, and what the encoder
/// was tuned on.
pub const MPNET_UPDATE_FILES: [TunedModelFile; 4] = [
    TunedModelFile {
        name: "graph.onnx",
        size: 232_990,
        sha256: "8cf5018442a981edacb533a41466a8ed765e1ff24d84dec064e717b1f8ba4625",
    },
    MPNET_FACTORS,
    TunedModelFile {
        name: "manifest.json",
        size: 26_998,
        sha256: "eb054e01782603af68503c80221f3ae76a03dead4f0359ce9fc3b21c7b5a8a2e",
    },
    TunedModelFile {
        name: "trained-on.json",
        size: 142_294,
        sha256: "4c9c6b202f2fad04f9220090c43c1c6bed0582017df892b2326b59b0d3544cca",
    },
];

/// The id the larger tuned encoder's embedder reports
/// (`FastEmbedder::tuned_mpnet`) and a weights file fitted with its cosine
/// names: it ends with the sha256 prefix of its low-rank factors
/// ([`MPNET_FACTORS`]), so neither a disk cache of its vectors nor a
/// weights file outlives a retuned update.
pub const MPNET_TUNED_MODEL_ID: &str = "all-mpnet-base-v2-lora16-tuned-54c45583a1c1";

/// `models/tuned-encoder/mpnet-lora16/` of the loopguard checkout this
/// crate was built in (fixed at compile time), where the update ships. It
/// is read only while the running program lives inside that checkout
/// ([`super::runs_from_checkout`]), or when a caller names it to
/// [`copy_mpnet_update`].
pub fn mpnet_update_checkout_dir() -> PathBuf {
    workspace_dir()
        .join("models")
        .join("tuned-encoder")
        .join("mpnet-lora16")
}

/// A tuned encoder stored as its difference from a base model (module
/// [`crate::lowrank`]), read into memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowRankUpdate {
    /// The ONNX graph, weights left out.
    pub graph: Vec<u8>,
    /// The low-rank factors (safetensors).
    pub factors: Vec<u8>,
    /// Where each of the graph's weights comes from (JSON).
    pub manifest: Vec<u8>,
}

impl LowRankUpdate {
    /// Reads the update's files from `dir` (checked by
    /// [`super::MpnetBase::ensure_resolved_notify`]).
    pub fn read(dir: &Path) -> Result<Self> {
        let read = |file: &TunedModelFile| {
            let path = dir.join(file.name);
            fs::read(&path).map_err(|e| SemanticError::io("cannot read", path, e))
        };
        Ok(Self {
            graph: read(&MPNET_UPDATE_FILES[0])?,
            factors: read(&MPNET_FACTORS)?,
            manifest: read(&MPNET_UPDATE_FILES[2])?,
        })
    }
}

/// Makes sure every file of the update is in [`MPNET_UPDATE_DIR`] of the
/// resolved model directory and intact, copying the checkout's files
/// there when the program runs from the checkout; returns that
/// directory. Copying reads no network, so it is done offline too.
pub(super) fn ensure_update(resolved: &Resolved) -> Result<PathBuf> {
    let dir = resolved.model_dir.join(MPNET_UPDATE_DIR);
    let bad = bad_files(&dir, resolved.full_verify)?;
    if bad.is_empty() {
        return Ok(dir);
    }
    if !runs_from_checkout() {
        return Err(update_error(&dir, &dir, &bad, ""));
    }
    copy_mpnet_update(&mpnet_update_checkout_dir(), &resolved.model_dir)
}

/// Copies the update's files from `from` (a folder holding them, such as
/// the repository's `models/tuned-encoder/mpnet-lora16/`) into
/// [`MPNET_UPDATE_DIR`] of `model_dir`, each checked against its pinned
/// size and sha256 while it is copied and renamed into place; files
/// already there and intact are left as they are. Returns the directory
/// the files are in.
pub fn copy_mpnet_update(from: &Path, model_dir: &Path) -> Result<PathBuf> {
    let dir = model_dir.join(MPNET_UPDATE_DIR);
    let bad = bad_files(&dir, false)?;
    if bad.is_empty() {
        return Ok(dir);
    }
    fs::create_dir_all(&dir)
        .map_err(|e| SemanticError::io("cannot create the update's directory", &dir, e))?;
    let mut stamp = Stamp::load(&dir);
    for (file, _) in &bad {
        copy_checked(from, file, &dir)?;
        stamp.record(&dir, *file);
    }
    stamp.save(&dir);
    tracing::info!(from = %from.display(), dir = %dir.display(), "copied the larger tuned encoder's update");
    Ok(dir)
}

/// The update's files in `dir` that are missing or not the pinned ones.
fn bad_files(dir: &Path, full: bool) -> Result<Vec<(&'static TunedModelFile, FileState)>> {
    let mut stamp = Stamp::load(dir);
    let mut bad = Vec::new();
    for file in &MPNET_UPDATE_FILES {
        match check_file(dir, file, &mut stamp, full)? {
            FileState::Good => {}
            state => bad.push((file, state)),
        }
    }
    if dir.is_dir() {
        stamp.save(dir);
    }
    Ok(bad)
}

/// Copies `file` from `from` into `dir` through a temporary file,
/// checking its size and sha256 before renaming it into place.
fn copy_checked(from: &Path, file: &TunedModelFile, dir: &Path) -> Result<()> {
    let source = from.join(file.name);
    let mut input =
        File::open(&source).map_err(|e| SemanticError::io("cannot open", &source, e))?;
    let mut out = tempfile::Builder::new()
        .prefix(&format!(".{}.", file.name))
        .tempfile_in(dir)
        .map_err(|e| SemanticError::io("cannot create a temporary file in", dir, e))?;
    let (size, sha256) = copy_hashing(&mut input, out.as_file_mut())
        .map_err(|e| SemanticError::io("cannot copy", &source, e))?;
    if size != file.size() || sha256 != file.sha256() {
        let wrong = FileState::Wrong { size, sha256 };
        return Err(update_error(
            dir,
            from,
            &[(file, wrong)],
            ", the copy's source",
        ));
    }
    out.as_file()
        .sync_all()
        .map_err(|e| SemanticError::io("cannot flush", out.path().to_path_buf(), e))?;
    set_readable(out.as_file());
    let target = dir.join(file.name);
    out.persist(&target)
        .map_err(|e| SemanticError::io("cannot rename into place", &target, e.error))?;
    Ok(())
}

/// The error for the update's files that are missing or wrong in
/// `found_in` (`bad`, the first named; `note` follows the path), to be
/// read from `dir`.
fn update_error(
    dir: &Path,
    found_in: &Path,
    bad: &[(&TunedModelFile, FileState)],
    note: &str,
) -> SemanticError {
    let (file, state) = &bad[0];
    let mut what = match state {
        FileState::Wrong { size, sha256 } => format!(
            "not the pinned file at {}{note}: {size} bytes with sha256 {sha256}",
            found_in.join(file.name).display()
        ),
        FileState::Missing | FileState::Good => {
            format!("missing from {}{note}", found_in.display())
        }
    };
    if bad.len() > 1 {
        what.push_str(&format!(
            ", and {} more of the update's files are missing or wrong",
            bad.len() - 1
        ));
    }
    SemanticError::MpnetUpdate {
        file: file.name,
        size: file.size,
        sha256: file.sha256,
        dir: dir.to_path_buf(),
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn the_update_that_ships_is_the_pinned_one_and_names_its_factors() {
        let from = mpnet_update_checkout_dir();
        for file in &MPNET_UPDATE_FILES {
            let bytes = fs::read(from.join(file.name))
                .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
            assert_eq!(bytes.len() as u64, file.size, "{}", file.name);
            let sha = super::super::verify::hex(&sha2::Sha256::digest(&bytes));
            assert_eq!(sha, file.sha256, "{}", file.name);
        }
        assert!(MPNET_TUNED_MODEL_ID.ends_with(&MPNET_FACTORS.sha256[..12]));
        let update = LowRankUpdate::read(&from).expect("the update reads");
        let manifest = crate::lowrank::read_manifest(&update.manifest).expect("a manifest");
        assert!(manifest.iter().filter(|entry| entry.low_rank).count() >= 72);
    }

    #[test]
    fn copied_files_are_checked_and_a_wrong_one_is_named() -> Result<()> {
        let model_dir = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        let dir = copy_mpnet_update(&mpnet_update_checkout_dir(), model_dir.path())?;
        assert_eq!(dir, model_dir.path().join(MPNET_UPDATE_DIR));
        assert!(bad_files(&dir, true)?.is_empty());

        // A damaged source is refused, and nothing wrong is left in place.
        let other = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        let source = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        for file in &MPNET_UPDATE_FILES {
            let (from, to) = (dir.join(file.name), source.path().join(file.name));
            fs::copy(&from, &to).map_err(|e| SemanticError::io("copy", &to, e))?;
        }
        let graph = source.path().join("graph.onnx");
        fs::write(&graph, b"not a graph").map_err(|e| SemanticError::io("write", &graph, e))?;
        let err = copy_mpnet_update(source.path(), other.path()).expect_err("a damaged graph");
        let text = err.to_string();
        assert!(text.contains("update file graph.onnx"), "{text}");
        assert!(text.contains("11 bytes"), "{text}");
        assert!(text.contains("models/tuned-encoder/mpnet-lora16"), "{text}");
        assert!(
            !other
                .path()
                .join(MPNET_UPDATE_DIR)
                .join("graph.onnx")
                .exists()
        );
        Ok(())
    }

    #[test]
    fn a_missing_update_names_the_directory_and_how_to_get_it() {
        let dir = Path::new("/m/tuned-encoder/mpnet-lora16");
        let bad: Vec<_> = MPNET_UPDATE_FILES
            .iter()
            .map(|file| (file, FileState::Missing))
            .collect();
        let text = update_error(dir, dir, &bad, "").to_string();
        assert!(
            text.starts_with("the larger tuned encoder's update file graph.onnx"),
            "{text}"
        );
        assert!(
            text.contains("missing from /m/tuned-encoder/mpnet-lora16"),
            "{text}"
        );
        assert!(text.contains("and 3 more"), "{text}");
        assert!(text.contains("8cf5018442a981ed"), "{text}");
        assert!(text.contains("tuned_encoder"), "{text}");
    }
}
