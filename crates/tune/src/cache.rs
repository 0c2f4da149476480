//! Embeddings kept on disk, so that a second sweep of the same texts runs
//! no inference.
//!
//! One file per model in the cache directory, named for the model id and
//! dimension (`all-MiniLM-L6-v2-int8-384.vectors`): a header, then
//! fixed-size records appended as texts are embedded. A record is the key
//! (sha256 of the model id, the dimension and the text), the vector
//! (little-endian `f32`s) and the first 8 bytes of the sha256 of both, so a
//! record damaged or cut short by a killed run is recognised and dropped
//! without losing the others. A damaged file is rewritten (to a temporary
//! file, then renamed over it) with its good records only.

use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The first bytes of every cache file, with the format version.
const MAGIC: &[u8; 8] = b"LGVEC\x001\n";
/// The key's length: a sha256.
const KEY_LEN: usize = 32;
/// The record check's length: the first bytes of a sha256.
const CHECK_LEN: usize = 8;

/// A key: sha256 of the model id, the dimension and the text.
pub(crate) type Key = [u8; KEY_LEN];

/// Where embeddings are kept between runs.
///
/// The vectors of a model are only ever read back for the same model id
/// and dimension, and for the very text they were made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingCache {
    dir: PathBuf,
}

/// What loading from the cache gave.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// The vectors found, by key.
    pub(crate) vectors: HashMap<Key, Vec<f32>>,
    /// What was wrong with the file, once, if anything was.
    pub(crate) warning: Option<String>,
    /// The file is there but cannot be read: do not write to it either.
    pub(crate) unreadable: bool,
}

impl EmbeddingCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The default cache directory for a model directory: its `embeddings`
    /// folder (`models/cache/embeddings/` by default).
    pub fn default_dir(model_dir: &Path) -> PathBuf {
        model_dir.join("embeddings")
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file holding the vectors of `model_id` at `dimension`.
    pub fn file_for(&self, model_id: &str, dimension: usize) -> PathBuf {
        let name: String = model_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{name}-{dimension}.vectors"))
    }

    /// The key of `text` for a model.
    pub(crate) fn key(model_id: &str, dimension: usize, text: &str) -> Key {
        let mut hasher = Sha256::new();
        hasher.update(b"loopguard-tune embedding\0");
        hasher.update(model_id.as_bytes());
        hasher.update(b"\0");
        hasher.update((dimension as u64).to_le_bytes());
        hasher.update(text.as_bytes());
        hasher.finalize().into()
    }

    /// The vectors of the `wanted` keys that the cache holds. Never fails:
    /// a missing file is an empty cache, and a damaged one gives its good
    /// records, a warning, and is rewritten without the bad ones.
    pub(crate) fn load(&self, model_id: &str, dimension: usize, wanted: &HashSet<Key>) -> Loaded {
        let path = self.file_for(model_id, dimension);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == ErrorKind::NotFound => return Loaded::default(),
            Err(err) => {
                return Loaded {
                    warning: Some(format!(
                        "cannot read the embedding cache {}: {err}; embedding without it",
                        path.display()
                    )),
                    unreadable: true,
                    ..Loaded::default()
                };
            }
        };
        let header = header(model_id, dimension);
        if !bytes.starts_with(&header) {
            let warning = format!(
                "the embedding cache {} is damaged or of another format (its header is not \
                 {model_id}'s at {dimension} dimensions); it is started afresh",
                path.display()
            );
            let warning = match self.rewrite(&path, &header, &[]) {
                Ok(()) => warning,
                Err(err) => format!("{warning}, but {err}"),
            };
            return Loaded {
                warning: Some(warning),
                ..Loaded::default()
            };
        }
        let record_len = record_len(dimension);
        let body = &bytes[header.len()..];
        let mut vectors = HashMap::new();
        let mut good: Vec<&[u8]> = Vec::new();
        let mut bad_records = 0usize;
        let records = body.chunks_exact(record_len);
        let tail = records.remainder().len();
        for record in records {
            let (key, rest) = record.split_at(KEY_LEN);
            let (vector, check) = rest.split_at(dimension * 4);
            if check != &check_of(key, vector)[..] {
                bad_records += 1;
                continue;
            }
            good.push(record);
            let Ok(key) = <Key>::try_from(key) else {
                continue;
            };
            if wanted.contains(&key) {
                let vector: Vec<f32> = vector
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                vectors.insert(key, vector);
            }
        }
        if bad_records == 0 && tail == 0 {
            return Loaded {
                vectors,
                ..Loaded::default()
            };
        }
        let mut what = Vec::new();
        if bad_records > 0 {
            what.push(format!("{bad_records} damaged record(s)"));
        }
        if tail > 0 {
            what.push(format!("a cut-short last record ({tail} bytes)"));
        }
        let mut warning = format!(
            "the embedding cache {} had {}: kept its {} good record(s); the texts it lost \
             are embedded again",
            path.display(),
            what.join(" and "),
            good.len()
        );
        if let Err(err) = self.rewrite(&path, &header, &good) {
            warning = format!("{warning} ({err})");
        }
        Loaded {
            vectors,
            warning: Some(warning),
            unreadable: false,
        }
    }

    /// Appends the vectors of `entries` (key, vector) to the model's file,
    /// creating it with its header when new. One write for the lot.
    pub(crate) fn append(
        &self,
        model_id: &str,
        dimension: usize,
        entries: &[(Key, &[f32])],
    ) -> Result<(), String> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.file_for(model_id, dimension);
        fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let is_new = file
            .metadata()
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?
            .len()
            == 0;
        let mut buffer =
            Vec::with_capacity(entries.len() * record_len(dimension) + if is_new { 64 } else { 0 });
        if is_new {
            buffer.extend_from_slice(&header(model_id, dimension));
        }
        for (key, vector) in entries {
            if vector.len() != dimension {
                return Err(format!(
                    "a vector of {} dimensions does not belong in {}",
                    vector.len(),
                    path.display()
                ));
            }
            let start = buffer.len();
            buffer.extend_from_slice(key);
            for x in *vector {
                buffer.extend_from_slice(&x.to_le_bytes());
            }
            let check = check_of(key, &buffer[start + KEY_LEN..]);
            buffer.extend_from_slice(&check);
        }
        file.write_all(&buffer)
            .map_err(|e| format!("cannot write to {}: {e}", path.display()))
    }

    /// Replaces the file at `path` with `header` and `records`, through a
    /// temporary file renamed over it: a run killed midway leaves the old
    /// file or the new one, never a mix.
    fn rewrite(&self, path: &Path, header: &[u8], records: &[&[u8]]) -> Result<(), String> {
        let failed = |e: std::io::Error| format!("cannot rewrite it: {e}");
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir).map_err(failed)?;
        temp.write_all(header).map_err(failed)?;
        for record in records {
            temp.write_all(record).map_err(failed)?;
        }
        temp.as_file().sync_all().map_err(failed)?;
        temp.persist(path).map_err(|e| failed(e.error))?;
        Ok(())
    }
}

/// The header of a model's file: the magic, the dimension, the model id.
fn header(model_id: &str, dimension: usize) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    header.extend_from_slice(&(dimension as u32).to_le_bytes());
    header.extend_from_slice(&(model_id.len() as u32).to_le_bytes());
    header.extend_from_slice(model_id.as_bytes());
    header
}

fn record_len(dimension: usize) -> usize {
    KEY_LEN + dimension * 4 + CHECK_LEN
}

fn check_of(key: &[u8], vector: &[u8]) -> [u8; CHECK_LEN] {
    let digest = Sha256::new()
        .chain_update(key)
        .chain_update(vector)
        .finalize();
    let mut check = [0u8; CHECK_LEN];
    check.copy_from_slice(&digest[..CHECK_LEN]);
    check
}
