//! Records the compiler's version (`rustc --version`) for the plugin table:
//! a plugin reports the rustc it was built with, for diagnostics only (the
//! ABI itself does not depend on it).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=RUSTC");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(&rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "rustc (unknown version)".to_owned());
    println!("cargo:rustc-env=LOOPGUARD_PLUGIN_API_RUSTC_VERSION={version}");
}
