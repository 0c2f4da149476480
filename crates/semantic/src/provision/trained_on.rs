//! What each tuned encoder was tuned on: the `trained-on.json` beside
//! its files, `{"format": 1, "model_sha256": "...", "texts_sha256":
//! [...]}`, the sha256 of every text of the pairs it saw.
//!
//! Only `loopguard tune` asks ([`tuned_encoder_saw`],
//! [`mpnet_encoder_saw`]): a pair with a text the encoder was tuned on
//! must not be fitted or scored on its cosine. A run of the engine never
//! does, so the lists are read from files on first use, not compiled in.
//! Each list is looked for, first match wins:
//!
//! 1. beside the encoder's files in the loopguard checkout this crate was
//!    built in, while the running program lives inside it
//!    ([`super::runs_from_checkout`]);
//! 2. in `tuned-encoder/` of the model directory (`LOOPGUARD_MODEL_DIR`,
//!    else the default one, [`super::default_model_dir`]):
//!    `tuned-encoder/trained-on.json` for the smaller encoder,
//!    `tuned-encoder/mpnet-lora16/trained-on.json` for the larger, where
//!    its update is provisioned ([`super::MpnetBase`]).
//!
//! A list is used only if its `model_sha256` names the encoder's pinned
//! file. With none found, the encoder is taken to have seen no text, and
//! a warning names the places looked in.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::mpnet_update::{MPNET_FACTORS, MPNET_UPDATE_DIR, mpnet_update_checkout_dir};
use super::tuned::{TUNED_MODEL, tuned_model_dir};
use super::verify::hex;
use super::{ProvisionOptions, runs_from_checkout};

/// The file name of a tuned encoder's list.
pub(super) const TRAINED_ON_FILE: &str = "trained-on.json";

/// `trained-on.json`, read.
#[derive(Debug, serde::Deserialize)]
struct TrainedOn {
    /// The file these texts tuned: the tuned model's sha256, or for the
    /// larger encoder its low-rank factors'.
    model_sha256: String,
    /// Lowercase hex sha256 of each text's UTF-8 bytes, as written.
    texts_sha256: Vec<String>,
}

/// Whether the tuned encoder ([`super::TUNED_MODEL`]) was tuned on a pair
/// with `text` (exactly as written) on one side. Its cosine on such a
/// pair is what it learned, not what it reads, so weights must never be
/// fitted or scored on it: `loopguard tune --tuned-encoder` leaves those
/// pairs out (unless `--tuned-cosines` gives their out-of-fold cosines).
pub fn tuned_encoder_saw(text: &str) -> bool {
    static LIST: OnceLock<HashSet<String>> = OnceLock::new();
    LIST.get_or_init(|| {
        let mut places = Vec::new();
        if runs_from_checkout() {
            places.push(tuned_model_dir().join(TRAINED_ON_FILE));
        }
        places.push(in_model_dir(Path::new("tuned-encoder")));
        first_list("the tuned encoder", &places, TUNED_MODEL.sha256)
    })
    .contains(&text_sha256(text))
}

/// Whether the larger tuned encoder ([`super::MpnetBase`] with its
/// update) was tuned on a pair with `text` (exactly as written) on one
/// side; as [`tuned_encoder_saw`] for the smaller one.
pub fn mpnet_encoder_saw(text: &str) -> bool {
    static LIST: OnceLock<HashSet<String>> = OnceLock::new();
    LIST.get_or_init(|| {
        let mut places = Vec::new();
        if runs_from_checkout() {
            places.push(mpnet_update_checkout_dir().join(TRAINED_ON_FILE));
        }
        places.push(in_model_dir(Path::new(MPNET_UPDATE_DIR)));
        first_list("the larger tuned encoder", &places, MPNET_FACTORS.sha256)
    })
    .contains(&text_sha256(text))
}

/// `trained-on.json` in `dir` of the model directory the environment
/// names, or the default one.
fn in_model_dir(dir: &Path) -> PathBuf {
    ProvisionOptions::new()
        .resolve()
        .model_dir
        .join(dir)
        .join(TRAINED_ON_FILE)
}

fn text_sha256(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// The texts of the first list of `places` that is there, readable and
/// for `model_sha256`; none (with a warning naming each place and what
/// was wrong) when there is no such list.
fn first_list(encoder: &str, places: &[PathBuf], model_sha256: &str) -> HashSet<String> {
    let mut looked = Vec::new();
    for place in places {
        match read_list(place, model_sha256) {
            Ok(texts) => return texts,
            Err(why) => looked.push(format!("{} ({why})", place.display())),
        }
    }
    tracing::warn!(
        "cannot tell which texts {encoder} was tuned on: no usable {TRAINED_ON_FILE} at {}; \
         pairs it was tuned on are not left out. Copy the file from the loopguard \
         repository (beside the encoder's files) into the last place named",
        looked.join(", ")
    );
    HashSet::new()
}

/// The text hashes of the list at `path`, if it is there, readable and
/// for `model_sha256`; otherwise what is wrong, in words.
pub(super) fn read_list(
    path: &Path,
    model_sha256: &str,
) -> std::result::Result<HashSet<String>, String> {
    let json = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let list: TrainedOn = serde_json::from_str(&json).map_err(|e| format!("not readable: {e}"))?;
    if list.model_sha256 != model_sha256 {
        return Err(format!(
            "a list for the file with sha256 {}, not {model_sha256}",
            list.model_sha256
        ));
    }
    Ok(list.texts_sha256.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_list_that_ships_names_its_encoder_and_its_texts() {
        for (path, model_sha256) in [
            (tuned_model_dir().join(TRAINED_ON_FILE), TUNED_MODEL.sha256),
            (
                mpnet_update_checkout_dir().join(TRAINED_ON_FILE),
                MPNET_FACTORS.sha256,
            ),
        ] {
            let texts = read_list(&path, model_sha256)
                .unwrap_or_else(|why| panic!("{}: {why}", path.display()));
            assert!(texts.len() > 100, "{} texts", texts.len());
            assert!(texts.iter().all(|hash| hash.len() == 64));
        }
        let wrong = read_list(
            &tuned_model_dir().join(TRAINED_ON_FILE),
            MPNET_FACTORS.sha256,
        );
        assert!(wrong.is_err_and(|why| why.contains("a list for the file with sha256")));
    }

    #[test]
    fn with_no_list_found_no_text_counts_as_seen() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let texts = first_list(
            "an encoder",
            &[dir.path().join(TRAINED_ON_FILE)],
            TUNED_MODEL.sha256,
        );
        assert!(texts.is_empty());
    }
}
