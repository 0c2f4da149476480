//! Shared fixtures: the pinned files, fetched once, and one loaded model.

use std::fs;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use loopguard_semantic::{FastEmbedder, ModelFiles, PINNED_FILES, ProvisionOptions};
use tempfile::TempDir;

/// The pinned files in the default place (or `LOOPGUARD_MODEL_DIR`),
/// fetched on first use.
pub(crate) fn files() -> &'static ModelFiles {
    static FILES: OnceLock<ModelFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        ModelFiles::ensure_with(&ProvisionOptions::new())
            .unwrap_or_else(|e| panic!("cannot provision the model files: {e}"))
    })
}

/// One model shared by every test of this binary (~265 MB each).
pub(crate) fn embedder() -> Arc<FastEmbedder> {
    static EMBEDDER: OnceLock<Arc<FastEmbedder>> = OnceLock::new();
    Arc::clone(EMBEDDER.get_or_init(|| {
        Arc::new(
            FastEmbedder::new(files()).unwrap_or_else(|e| panic!("cannot load the model: {e}")),
        )
    }))
}

/// A temporary model directory holding the pinned files, except those in
/// `leave_out`. Files in `copy` are real copies (safe to damage); the rest
/// are hard links to the cache when the file system allows.
pub(crate) fn model_dir(leave_out: &[&str], copy: &[&str]) -> TempDir {
    let source = files().dir();
    // Next to the cache, so hard links work.
    let dir = tempfile::Builder::new()
        .prefix(".test-")
        .tempdir_in(source)
        .expect("a temporary directory in the model cache");
    for file in &PINNED_FILES {
        if leave_out.contains(&file.name) {
            continue;
        }
        let from = source.join(file.name);
        let to = dir.path().join(file.name);
        if copy.contains(&file.name) || fs::hard_link(&from, &to).is_err() {
            fs::copy(&from, &to).expect("copy a pinned file");
        }
    }
    dir
}

/// Flips one byte in the middle of `path`, keeping its size.
pub(crate) fn corrupt(path: &Path) {
    let mut bytes = fs::read(path).expect("read the file to corrupt");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(path, bytes).expect("write the corrupted file");
}
