//! Tuned-encoder cosines read from a file instead of the encoder: the
//! out-of-fold cosines of the pairs an encoder was tuned on.
//!
//! An encoder tuned on a pair has learned that pair's cosine; fitting the
//! judge's weights on it would teach them to trust the encoder more than
//! it deserves on text it never saw. When the encoder was tuned on every
//! train pair, each pair's honest reading comes from an encoder tuned
//! without it (one of k folds), computed where the encoder is tuned
//! (`research/tuned-encoder/finetune.py oof`) and written one pair a line:
//!
//! ```json
//! {"a": "Deploy build 5812 to staging.", "b": "Ship 5812 to staging.", "tuned_cosine": 0.8123}
//! ```
//!
//! A pair of the file is matched by its two texts, in either order.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use loopguard_semantic::Features;
use serde::Deserialize;

use crate::error::{Result, TuneError};
use crate::pairs::PairSet;

/// One line of the file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    a: String,
    b: String,
    tuned_cosine: f32,
}

/// The cosines of a tuned-cosines file, by pair.
#[derive(Debug, Clone)]
pub struct TunedCosines {
    path: PathBuf,
    /// By the pair's lesser text, then its greater (in byte order).
    by_pair: HashMap<String, HashMap<String, f32>>,
    count: usize,
}

impl TunedCosines {
    /// Reads `path`. Any bad line stops the read with its line number: a
    /// fit on a file read in part would be fitted on other pairs than the
    /// file names. Bad is: not `{"a", "b", "tuned_cosine"}`, a cosine that
    /// is not a number in [-1, 1] (with a rounding margin), or a pair given
    /// twice with two cosines. An empty file is an error too.
    pub fn read(path: &Path) -> Result<Self> {
        let text = fs::read_to_string(path)
            .map_err(|source| TuneError::io("cannot read the tuned cosines", path, source))?;
        let bad = |line: usize, message: String| TuneError::TunedCosines {
            path: path.to_path_buf(),
            line: Some(line as u64),
            message,
        };
        let mut by_pair: HashMap<String, HashMap<String, f32>> = HashMap::new();
        let mut count = 0;
        for (index, raw) in text.lines().enumerate() {
            let number = index + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let line: Line = serde_json::from_str(raw).map_err(|error| {
                bad(
                    number,
                    format!("not {{\"a\", \"b\", \"tuned_cosine\"}}: {error}"),
                )
            })?;
            if !line.tuned_cosine.is_finite() || line.tuned_cosine.abs() > 1.0001 {
                return Err(bad(
                    number,
                    format!("tuned_cosine {} is not in [-1, 1]", line.tuned_cosine),
                ));
            }
            let (lesser, greater) = if line.a <= line.b {
                (line.a, line.b)
            } else {
                (line.b, line.a)
            };
            let earlier = by_pair
                .entry(lesser)
                .or_default()
                .insert(greater, line.tuned_cosine);
            match earlier {
                None => count += 1,
                Some(earlier) if earlier == line.tuned_cosine => {}
                Some(earlier) => {
                    return Err(bad(
                        number,
                        format!(
                            "the pair is given twice, with tuned_cosine {earlier} and {}",
                            line.tuned_cosine
                        ),
                    ));
                }
            }
        }
        if count == 0 {
            return Err(TuneError::TunedCosines {
                path: path.to_path_buf(),
                line: None,
                message: "no cosines in the file".to_owned(),
            });
        }
        Ok(Self {
            path: path.to_path_buf(),
            by_pair,
            count,
        })
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many pairs the file gives a cosine for.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the file gives no cosine (never, once read).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The file's cosine of `a` and `b`, in either order.
    pub fn get(&self, a: &str, b: &str) -> Option<f32> {
        let (lesser, greater) = if a <= b { (a, b) } else { (b, a) };
        self.by_pair.get(lesser)?.get(greater).copied()
    }

    /// Puts the file's cosine into the features of every pair it names
    /// (`features` in the order of `pairs.pairs`), over whatever the
    /// encoder read. Returns, per pair, whether its cosine came from the
    /// file.
    pub fn apply(&self, pairs: &PairSet, features: &mut [Features]) -> Vec<bool> {
        pairs
            .pairs
            .iter()
            .zip(features.iter_mut())
            .map(|(pair, features)| match self.get(&pair.a, &pair.b) {
                Some(cosine) => {
                    features.tuned_cosine = Some(cosine);
                    true
                }
                None => false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::TempDir::new().expect("a temporary directory");
        let path = dir.path().join("cosines.jsonl");
        fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn a_pair_is_found_in_either_order() {
        let (_dir, path) = file(concat!(
            "{\"a\": \"fix the build\", \"b\": \"repair the build\", \"tuned_cosine\": 0.75}\n",
            "\n",
            "{\"a\": \"deploy to staging\", \"b\": \"deploy to prod\", \"tuned_cosine\": -0.25}\n",
        ));
        let cosines = TunedCosines::read(&path).expect("a good file");
        assert_eq!(cosines.len(), 2);
        assert_eq!(cosines.get("fix the build", "repair the build"), Some(0.75));
        assert_eq!(cosines.get("repair the build", "fix the build"), Some(0.75));
        assert_eq!(
            cosines.get("deploy to prod", "deploy to staging"),
            Some(-0.25)
        );
        assert_eq!(cosines.get("fix the build", "deploy to prod"), None);
    }

    #[test]
    fn a_bad_line_stops_the_read_and_names_its_line() {
        let cases = [
            (
                "{\"a\": \"x\", \"b\": \"y\", \"tuned_cosine\": 0.5}\n{\"a\": \"x\", \"b\": \"z\"}\n",
                "line 2",
                "missing field `tuned_cosine`",
            ),
            (
                "{\"a\": \"x\", \"b\": \"y\", \"tuned_cosine\": 1.5}\n",
                "line 1",
                "not in [-1, 1]",
            ),
            (
                "{\"a\": \"x\", \"b\": \"y\", \"tuned_cosine\": 0.5}\n{\"a\": \"y\", \"b\": \"x\", \"tuned_cosine\": 0.6}\n",
                "line 2",
                "given twice",
            ),
            (
                "not json\n",
                "line 1",
                "not {\"a\", \"b\", \"tuned_cosine\"}",
            ),
            ("\n", "", "no cosines"),
        ];
        for (text, at, what) in cases {
            let (_dir, path) = file(text);
            let error = TunedCosines::read(&path).expect_err(text).to_string();
            assert!(error.contains(&path.display().to_string()), "{error}");
            assert!(error.contains(at), "{error}");
            assert!(error.contains(what), "{error}");
        }
        // The same pair twice with the same cosine is no contradiction.
        let (_dir, path) = file(concat!(
            "{\"a\": \"x\", \"b\": \"y\", \"tuned_cosine\": 0.5}\n",
            "{\"a\": \"y\", \"b\": \"x\", \"tuned_cosine\": 0.5}\n",
        ));
        assert_eq!(TunedCosines::read(&path).map(|c| c.len()).ok(), Some(1));
    }

    #[test]
    fn apply_overwrites_only_the_pairs_the_file_names() {
        let pairs = PairSet::parse(
            concat!(
                "{\"a\": \"fix the build\", \"b\": \"repair the build\", \"same\": true}\n",
                "{\"a\": \"deploy to staging\", \"b\": \"deploy to prod\", \"same\": false}\n",
            )
            .as_bytes(),
            Path::new("p.jsonl"),
        )
        .expect("pairs");
        let (_dir, path) = file(
            "{\"a\": \"repair the build\", \"b\": \"fix the build\", \"tuned_cosine\": 0.875}\n",
        );
        let cosines = TunedCosines::read(&path).expect("a good file");
        let read = Features {
            cosine: 0.9,
            contrast: loopguard_semantic::judge::compare("x", "y"),
            residuals: None,
            tuned_cosine: Some(0.1),
        };
        let mut features = vec![read.clone(), read];
        let from_file = cosines.apply(&pairs, &mut features);
        assert_eq!(from_file, vec![true, false]);
        assert_eq!(features[0].tuned_cosine, Some(0.875));
        assert_eq!(features[1].tuned_cosine, Some(0.1));
    }
}
