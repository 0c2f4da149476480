//! A model rebuilt by `lowrank::rebuild` runs in ONNX Runtime: the
//! fixtures (`tests/fixtures/lowrank/`) were written by Python's `onnx`
//! and `safetensors` packages, as `research/tuned-encoder/lowrank.py split`
//! writes a tuned encoder's parts: a graph `y = x · w` whose weight `w`
//! was left out, the base's `dense.weight` (out 2, in 3), a rank-1 update
//! at half precision, and the manifest.

use std::path::PathBuf;

use loopguard_semantic::lowrank::{WeightSource, read_manifest, rebuild};
use loopguard_semantic::ort_environment;
use ort::session::Session;
use ort::value::Tensor;

use crate::common::files;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lowrank")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `y` for `x = [1, 2, 3]`, by ONNX Runtime on the model rebuilt with
/// `manifest` (and the update's factors from `factors`).
fn y_of(manifest: &[WeightSource], factors: &str) -> Vec<f32> {
    let model = rebuild(
        &fixture("graph.onnx"),
        manifest,
        &fixture("base.safetensors"),
        &fixture(factors),
    )
    .expect("rebuilt");
    let environment = ort_environment(files()).expect("ONNX Runtime");
    let mut session = Session::builder(&environment)
        .expect("a builder")
        .commit_from_memory(&model)
        .expect("ONNX Runtime accepts the rebuilt model");
    let x = Tensor::from_array(([1usize, 3], vec![1.0f32, 2.0, 3.0])).expect("an input");
    let outputs = session.run(ort::inputs!["x" => x]).expect("a run");
    let (shape, y) = outputs["y"].try_extract_tensor::<f32>().expect("y");
    assert_eq!(shape.iter().copied().collect::<Vec<i64>>(), vec![1, 2]);
    y.to_vec()
}

fn assert_close(got: &[f32], want: [f32; 2]) {
    assert!(
        got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-5),
        "y = {got:?}, want {want:?}"
    );
}

#[test]
fn a_rebuilt_model_runs_in_onnx_runtime_with_the_base_plus_its_update() {
    let manifest = read_manifest(&fixture("manifest.json")).expect("a manifest");
    // W + b·a = [[1.5, 2.25, 3.125], [3.5, 4.75, 5.875]]; y = x · (W + b·a)ᵀ.
    assert_close(
        &y_of(&manifest, "low-rank.safetensors"),
        [1.5 + 4.5 + 9.375, 3.5 + 9.5 + 17.625],
    );
    // Without the update the same graph is the base: y = x · Wᵀ (the
    // factors file, here the base's own, is not read for the weight).
    let mut plain = manifest;
    plain[0].low_rank = false;
    assert_close(&y_of(&plain, "base.safetensors"), [14.0, 32.0]);
}
