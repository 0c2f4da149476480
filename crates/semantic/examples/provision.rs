//! Fetch (if needed) and verify the pinned model files, printing how long
//! each step took.
//!
//! ```text
//! cargo run -p loopguard-semantic --example provision [-- DIR]
//! ```
//!
//! Without DIR the lookup order applies: `LOOPGUARD_MODEL_DIR`, then the
//! checkout's `models/cache/` (this example runs from the checkout).

use std::time::Instant;

use loopguard_semantic::{ModelFiles, ProvisionOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut options = ProvisionOptions::new();
    if let Some(dir) = std::env::args_os().nth(1) {
        options = options.model_dir(dir);
    }
    let resolved = options.resolve();
    println!(
        "model directory: {} ({})",
        resolved.model_dir.display(),
        resolved.model_dir_rule()
    );

    let start = Instant::now();
    let files = ModelFiles::ensure_resolved(&resolved)?;
    println!("ensure:                 {:>8.1?}", start.elapsed());

    let start = Instant::now();
    ModelFiles::ensure_resolved(&resolved)?;
    println!("ensure again (stamp):   {:>8.1?}", start.elapsed());

    let start = Instant::now();
    ModelFiles::ensure_with(&options.clone().full_verify(true))?;
    println!("ensure again (re-hash): {:>8.1?}", start.elapsed());

    println!("runtime library: {}", files.runtime().display());
    Ok(())
}
