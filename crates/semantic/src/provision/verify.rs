//! Checking a file against its pinned size and sha256, and the
//! `.verified` stamp that spares re-hashing a file whose size,
//! modification time and inode have not changed since it was checked.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use crate::error::{Result, SemanticError};

/// The file recording which files were verified, by size, mtime and inode.
const STAMP_FILE: &str = ".verified";

/// A file checked by its size and sha256 before it is used: a file of a
/// pinned wheel, a tuned encoder's file or one of the larger tuned
/// encoder's update files.
pub(super) trait Checked {
    /// Its name in its directory.
    fn name(&self) -> &'static str;
    /// Its size in bytes.
    fn size(&self) -> u64;
    /// Its sha256, lowercase hex.
    fn sha256(&self) -> &'static str;
}

/// [`Checked`] for a type with `name`, `size` and `sha256` fields.
macro_rules! checked_by_its_fields {
    ($($file:ty),+) => {$(
        impl $crate::provision::verify::Checked for $file {
            fn name(&self) -> &'static str {
                self.name
            }
            fn size(&self) -> u64 {
                self.size
            }
            fn sha256(&self) -> &'static str {
                self.sha256
            }
        }
    )+};
}

/// What [`check_file`] found.
pub(super) enum FileState {
    /// There, with the pinned size and sha256.
    Good,
    /// Not there.
    Missing,
    /// There, with another size or sha256 (both given).
    Wrong { size: u64, sha256: String },
}

/// Checks `file` in `dir`: its size, then its sha256 unless `stamp` vouches
/// for it (`full` re-hashes anyway).
pub(super) fn check_file(
    dir: &Path,
    file: &impl Checked,
    stamp: &mut Stamp,
    full: bool,
) -> Result<FileState> {
    let path = dir.join(file.name());
    let meta = match fs::metadata(&path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return Ok(FileState::Missing),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(e) => return Err(SemanticError::io("cannot inspect", path, e)),
    };
    if meta.len() != file.size() {
        // A wrong size needs no hashing to be wrong; hash anyway so the
        // error says what is there.
        let sha256 = hash_file(&path)?;
        return Ok(FileState::Wrong {
            size: meta.len(),
            sha256,
        });
    }
    let key = StampKey::of(&meta);
    if !full && stamp.matches(file, &key) {
        return Ok(FileState::Good);
    }
    let sha256 = hash_file(&path)?;
    if sha256 == file.sha256() {
        stamp.insert(file, key);
        Ok(FileState::Good)
    } else {
        stamp.remove(file);
        Ok(FileState::Wrong {
            size: meta.len(),
            sha256,
        })
    }
}

/// The lowercase hex sha256 of a file.
pub fn hash_file(path: &Path) -> Result<String> {
    let mut f = File::open(path).map_err(|e| SemanticError::io("cannot open", path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| SemanticError::io("cannot read", path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// `bytes` as lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Copies `from` to `to`, returning the size and sha256 of what was copied.
pub(super) fn copy_hashing(from: &mut impl Read, to: &mut File) -> io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        size += n as u64;
    }
    Ok((size, hex(&hasher.finalize())))
}

/// Makes a file written here readable by all (a temporary file is 0600).
#[cfg(unix)]
pub(super) fn set_readable(file: &File) {
    use std::os::unix::fs::PermissionsExt;
    // Temporary files are created 0600; the cache may be shared.
    let _ = file.set_permissions(fs::Permissions::from_mode(0o644));
}

#[cfg(not(unix))]
pub(super) fn set_readable(_file: &File) {}

/// What identifies a file's current contents cheaply: size, modification
/// time and (on Unix) inode. A rename-replace changes the inode, an
/// in-place write changes the mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StampKey {
    size: u64,
    mtime_ns: u128,
    inode: u64,
}

impl StampKey {
    fn of(meta: &fs::Metadata) -> Self {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Self {
            size: meta.len(),
            mtime_ns,
            inode,
        }
    }
}

/// The `.verified` file: one line per file whose sha256 was checked,
/// `name size mtime_ns inode sha256`.
pub(super) struct Stamp {
    entries: BTreeMap<String, (StampKey, String)>,
    dirty: bool,
}

impl Stamp {
    /// The stamp of `dir` (empty when there is none).
    pub(super) fn load(dir: &Path) -> Self {
        let mut entries = BTreeMap::new();
        if let Ok(text) = fs::read_to_string(dir.join(STAMP_FILE)) {
            for line in text.lines() {
                let parts: Vec<&str> = line.split(' ').collect();
                if let [name, size, mtime, inode, sha] = parts[..]
                    && let (Ok(size), Ok(mtime_ns), Ok(inode)) =
                        (size.parse(), mtime.parse(), inode.parse())
                {
                    let key = StampKey {
                        size,
                        mtime_ns,
                        inode,
                    };
                    entries.insert(name.to_string(), (key, sha.to_string()));
                }
            }
        }
        Self {
            entries,
            dirty: false,
        }
    }

    fn matches(&self, file: &impl Checked, key: &StampKey) -> bool {
        self.entries
            .get(file.name())
            .is_some_and(|(k, sha)| k == key && sha == file.sha256())
    }

    fn insert(&mut self, file: &impl Checked, key: StampKey) {
        self.entries
            .insert(file.name().to_string(), (key, file.sha256().to_string()));
        self.dirty = true;
    }

    fn remove(&mut self, file: &impl Checked) {
        self.dirty |= self.entries.remove(file.name()).is_some();
    }

    /// Records `file`, just written into `dir` and checked while written.
    pub(super) fn record(&mut self, dir: &Path, file: &impl Checked) {
        if let Ok(meta) = fs::metadata(dir.join(file.name())) {
            self.insert(file, StampKey::of(&meta));
        }
    }

    /// Best effort: a read-only model directory just means re-hashing next time.
    pub(super) fn save(&self, dir: &Path) {
        if !self.dirty {
            return;
        }
        let text: String = self
            .entries
            .iter()
            .map(|(name, (k, sha))| format!("{name} {} {} {} {sha}\n", k.size, k.mtime_ns, k.inode))
            .collect();
        let write = || -> io::Result<()> {
            let mut tmp = tempfile::Builder::new()
                .prefix(".verified.")
                .tempfile_in(dir)?;
            tmp.write_all(text.as_bytes())?;
            set_readable(tmp.as_file());
            tmp.persist(dir.join(STAMP_FILE))?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::debug!(error = %e, dir = %dir.display(), "cannot write the verification stamp");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provision::{MODEL_PACKAGE, PinnedFile};

    #[test]
    fn stamp_round_trips_and_notices_changes() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| SemanticError::io("tempdir", "/tmp", e))?;
        let file = PinnedFile {
            name: "x.txt",
            package: MODEL_PACKAGE,
            member: "x.txt",
            size: 3,
            // sha256("abc")
            sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        };
        let path = dir.path().join("x.txt");
        fs::write(&path, "abc").map_err(|e| SemanticError::io("write", &path, e))?;
        let mut stamp = Stamp::load(dir.path());
        assert!(matches!(
            check_file(dir.path(), &file, &mut stamp, false)?,
            FileState::Good
        ));
        stamp.save(dir.path());
        let stamp = Stamp::load(dir.path());
        let meta = fs::metadata(&path).map_err(|e| SemanticError::io("stat", &path, e))?;
        assert!(stamp.matches(&file, &StampKey::of(&meta)));

        // Same size, other bytes, written by rename: the inode changes.
        let other = dir.path().join("y.txt");
        fs::write(&other, "abd").map_err(|e| SemanticError::io("write", &other, e))?;
        fs::rename(&other, &path).map_err(|e| SemanticError::io("rename", &path, e))?;
        let mut stamp = Stamp::load(dir.path());
        assert!(matches!(
            check_file(dir.path(), &file, &mut stamp, false)?,
            FileState::Wrong { size: 3, .. }
        ));
        Ok(())
    }
}
