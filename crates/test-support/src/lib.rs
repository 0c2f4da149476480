//! Dev-only helpers for loopguard's own tests and benches (not published,
//! never a dependency of a shipped crate).
//!
//! [`build_cdylib`] builds one of the workspace's plugin packages
//! (`plugins/*`, `tests/plugins/*`) as a loadable library, so that a test
//! loads it through the real `libloading` path, as `loopguard` does:
//!
//! ```no_run
//! let library = loopguard_test_support::build_cdylib("loopguard-plugin-monologue")?;
//! assert!(library.is_file());
//! # Ok::<(), loopguard_test_support::BuildError>(())
//! ```
//!
//! A plugin author tests a detector in-process with
//! `loopguard_plugin_api::testing::Harness` instead; this crate is for
//! tests of the host itself.
//!
//! With the feature `fake-llm`, the module `fake_llm` starts a fake
//! OpenAI-compatible chat-completions server on loopback for the tests of
//! loopguard's LLM clients (no LLM runs on a test machine; the HTTP, the
//! timeouts and the retries are real).
//!
//! With the feature `pg-faults`, the module `pg_faults` terminates a
//! test's PostgreSQL backends again and again, for the tests of a store
//! through an outage.
#![deny(missing_docs)]

#[cfg(feature = "fake-llm")]
pub mod fake_llm;
#[cfg(feature = "pg-faults")]
pub mod pg_faults;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a plugin library could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The running executable's path is unknown.
    #[error("no test executable: {0}")]
    NoExecutable(#[source] std::io::Error),
    /// The running executable is not in a cargo target directory.
    #[error("{} is not in a cargo target directory", .0.display())]
    NotInTargetDir(PathBuf),
    /// Cargo could not be started.
    #[error("cannot run cargo to build {package}: {source}")]
    Cargo {
        /// The package.
        package: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Cargo ran and failed: its own output.
    #[error("cargo build -p {package} failed:\n{stderr}")]
    Failed {
        /// The package.
        package: String,
        /// What cargo printed on stderr.
        stderr: String,
    },
}

/// Builds the `cdylib` of workspace package `package` with the profile of
/// the running test or bench, in `TARGET/plugin-cdylibs` beside its own
/// target directory `TARGET` (both found from its executable's path:
/// `TARGET/PROFILE/deps/EXE`), and returns the library's path. Cargo is
/// `$CARGO` (set when cargo runs the test).
///
/// A directory of its own, because a `cdylib` + `rlib` package's outputs
/// carry no hash in their names: a build of the plugin alone (with the
/// features it has alone) in the test's own target directory would
/// overwrite the `rlib` that the test run's other targets link against.
///
/// When the build fails, [`BuildError::Failed`] carries cargo's own output.
pub fn build_cdylib(package: &str) -> Result<PathBuf, BuildError> {
    let exe = std::env::current_exe().map_err(BuildError::NoExecutable)?;
    let (target_dir, profile) =
        target_of(&exe).ok_or_else(|| BuildError::NotInTargetDir(exe.clone()))?;
    let target_dir = target_dir.join("plugin-cdylibs");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--quiet", "--lib", "-p", package, "--target-dir"])
        .arg(&target_dir);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let output = command.output().map_err(|source| BuildError::Cargo {
        package: package.to_owned(),
        source,
    })?;
    if !output.status.success() {
        return Err(BuildError::Failed {
            package: package.to_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    let file = format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    );
    Ok(target_dir.join(profile).join(file))
}

/// The target directory and profile directory name of an executable at
/// `TARGET/PROFILE/deps/EXE` (tests, benches) or `TARGET/PROFILE/EXE`.
fn target_of(exe: &Path) -> Option<(PathBuf, String)> {
    let mut dir = exe.parent()?;
    if dir.file_name()? == "deps" || dir.file_name()? == "examples" {
        dir = dir.parent()?;
    }
    let profile = dir.file_name()?.to_str()?.to_owned();
    Some((dir.parent()?.to_path_buf(), profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_directory_and_profile_come_from_the_executable_path() {
        assert_eq!(
            target_of(Path::new("/w/target/release/deps/bench-123")),
            Some((PathBuf::from("/w/target"), "release".to_owned()))
        );
        assert_eq!(
            target_of(Path::new("/w/target/debug/loopguard")),
            Some((PathBuf::from("/w/target"), "debug".to_owned()))
        );
    }
}
