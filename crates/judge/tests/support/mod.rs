//! What the tests share: the workspace's labelled pairs, and a stand-in
//! for the embedding model.

use std::path::{Path, PathBuf};

/// The workspace's `data/pairs/` directory.
pub(crate) fn pairs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/pairs")
}

/// This crate's test fixture `name`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The pair files of `data/pairs/` that hold texts (`a`, `b`), in the
/// order they are scored. `second-annotator.jsonl` holds labels of these
/// files' lines, no texts; the `tuned-oof-cosines*` files hold cosines.
pub(crate) const PAIR_FILES: [&str; 4] = [
    "requests.jsonl",
    "replies.jsonl",
    "encoder-extra.jsonl",
    "unseen-batches-16-18.jsonl",
];

/// One labelled pair: its file, line (from 1) and texts.
#[derive(Debug, Clone)]
pub(crate) struct Pair {
    pub(crate) file: &'static str,
    pub(crate) line: usize,
    pub(crate) a: String,
    pub(crate) b: String,
}

/// Every pair of [`PAIR_FILES`], in order.
pub(crate) fn shipped_pairs() -> Vec<Pair> {
    let mut pairs = Vec::new();
    for file in PAIR_FILES {
        let path = pairs_dir().join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        for (at, line) in text.lines().enumerate() {
            let value: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|err| panic!("{file}:{}: {err}", at + 1));
            let text_of = |key: &str| {
                value[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("{file}:{}: no {key}", at + 1))
                    .to_owned()
            };
            pairs.push(Pair {
                file,
                line: at + 1,
                a: text_of("a"),
                b: text_of("b"),
            });
        }
    }
    pairs
}

/// The 64-bit FNV-1a hash of `bytes`, as 16 hex digits.
pub(crate) fn fnv(bytes: &[u8]) -> String {
    format!("{:016x}", fnv_u64(bytes))
}

fn fnv_u64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The stand-in's dimension.
const DIMENSION: usize = 256;

/// A stand-in for the embedding model, deterministic and model-free:
/// each lowercase word and each of its letter trigrams hashed into one of
/// 256 dimensions, the vector scaled to unit length. Its cosines are
/// nothing like the model's, but they are the same on every machine,
/// which is what a recorded score needs.
pub(crate) fn stand_in_vector(text: &str) -> Vec<f32> {
    let mut vector = vec![0f32; DIMENSION];
    let slot = |bytes: &[u8]| (fnv_u64(bytes) % DIMENSION as u64) as usize;
    let lower = text.to_lowercase();
    for word in lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        vector[slot(word.as_bytes())] += 1.0;
        let padded: Vec<char> = format!(" {word} ").chars().collect();
        for window in padded.windows(3) {
            let gram: String = window.iter().collect();
            vector[slot(gram.as_bytes())] += 0.5;
        }
    }
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

/// The stand-in's cosine of two texts: the dot product of their unit
/// vectors, summed in order.
pub(crate) fn stand_in_cosine(a: &str, b: &str) -> f32 {
    stand_in_vector(a)
        .iter()
        .zip(stand_in_vector(b))
        .map(|(x, y)| x * y)
        .sum()
}
