//! The encoder tuned for "the same request?" ([`TUNED_MODEL`]): its pin,
//! the copy compiled into the build (feature `bundled-tuned-encoder`),
//! and where else it is found.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::verify::{FileState, Stamp, check_file, hex};
use crate::error::{Result, SemanticError};

/// The encoder tuned for "the same request?": all-MiniLM-L6-v2 fine-tuned
/// on every pair of the labelled pairs' train split, int8 weights, read
/// with the pinned tokenizer files. No package index carries it: it ships
/// in this crate (`models/tuned-encoder/`, [`tuned_model_dir`]) and, with
/// the feature `bundled-tuned-encoder` (on in the `loopguard` binary and
/// the Python wheel), inside the build itself.
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

/// A model file that no package index carries (a tuned encoder's file,
/// or a file of the larger tuned encoder's update), with its pinned size
/// and sha256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunedModelFile {
    /// The file's name.
    pub name: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: &'static str,
}

checked_by_its_fields!(TunedModelFile);

/// The tuned encoder's file compiled into this build (feature
/// `bundled-tuned-encoder`), so a binary or wheel installed away from the
/// checkout has it.
#[cfg(feature = "bundled-tuned-encoder")]
static BUNDLED_TUNED_MODEL: &[u8] =
    include_bytes!("../../models/tuned-encoder/model-tuned-int8.onnx");

// A retuned file with an old pin, or the other way round, fails the build
// (its sha256 is checked by a test: hashing 23 MB at compile time is slow).
#[cfg(feature = "bundled-tuned-encoder")]
const _: () = assert!(BUNDLED_TUNED_MODEL.len() as u64 == TUNED_MODEL_SIZE);

/// Where the tuned encoder ([`TUNED_MODEL`]) is read from:
/// [`super::ModelFiles::tuned_model`] says which, after checking it.
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

/// `models/tuned-encoder/` of this crate's directory in the loopguard
/// checkout it was built in (fixed at compile time), where [`TUNED_MODEL`]
/// and the list of texts it was tuned on (`trained-on.json`) ship. It is
/// read only while the running program lives inside that checkout
/// ([`super::runs_from_checkout`]).
pub fn tuned_model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join("tuned-encoder")
}

/// The tuned encoder's file in `dir` if it is there and is the pinned
/// one; a wrong copy is an error. The `.verified` stamp of that directory
/// is used as for the pinned files: a file checked before is not hashed
/// again.
pub(super) fn tuned_copy_in(dir: &Path) -> Result<Option<PathBuf>> {
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
pub(super) fn tuned_model_error(what: String) -> SemanticError {
    SemanticError::TunedModel {
        file: TUNED_MODEL.name,
        size: TUNED_MODEL.size,
        sha256: TUNED_MODEL.sha256,
        what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tuned_encoder_ships_in_this_crate_under_its_pin() {
        let dir = tuned_model_dir();
        assert!(
            dir.starts_with(env!("CARGO_MANIFEST_DIR")),
            "{}",
            dir.display()
        );
        let size = fs::metadata(dir.join(TUNED_MODEL.name))
            .map(|meta| meta.len())
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(size, TUNED_MODEL.size);
        assert!(TUNED_MODEL_ID.ends_with(&TUNED_MODEL.sha256[..12]));
        assert_eq!(bundled_tuned_model_sha256().is_some(), TUNED_MODEL_BUNDLED);
    }
}
