//! Cosine similarity of unit vectors, and nearest-match search over a
//! bounded history.

use ndarray::{ArrayView1, ArrayView2};

use crate::error::{Result, SemanticError};

/// The cosine similarity of two unit-length vectors: their dot product.
///
/// Every [`Embedder`](crate::Embedder) returns unit vectors; for others,
/// [`normalize`] them first.
pub fn cosine(a: &[f32], b: &[f32]) -> Result<f32> {
    if a.len() != b.len() {
        return Err(SemanticError::DimensionMismatch {
            expected: a.len(),
            actual: b.len(),
        });
    }
    Ok(ArrayView1::from(a).dot(&ArrayView1::from(b)))
}

/// Scales `v` to unit length in place and returns its former length. A zero
/// or non-finite vector is left as it is (its length is returned, so the
/// caller can reject it).
pub fn normalize(v: &mut [f32]) -> f32 {
    let norm = l2_norm(v);
    if norm.is_finite() && norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    norm
}

/// The Euclidean length of `v`.
pub(crate) fn l2_norm(v: &[f32]) -> f32 {
    let v = ArrayView1::from(v);
    v.dot(&v).sqrt()
}

/// A history entry that matched a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Match<K> {
    /// The key the entry was pushed with.
    pub key: K,
    /// Its cosine similarity with the query.
    pub cosine: f32,
}

/// The last `capacity` vectors of one task (its collaboration requests, its
/// topics), searched by cosine similarity.
///
/// Each entry carries a key of the caller's choosing (a line number, an
/// event id) so a match can be cited as evidence. When full, pushing drops
/// the oldest entry, so memory (`capacity × dimension × 4` bytes) and query
/// cost stay bounded however long the task runs. A query is one
/// matrix-vector product.
#[derive(Debug, Clone)]
pub struct SimilarityIndex<K = u64> {
    dimension: usize,
    capacity: usize,
    /// Row-major, `len × dimension`, in slot order (a ring once full).
    data: Vec<f32>,
    /// Keys by slot.
    keys: Vec<K>,
    /// Once full, the slot the next push overwrites: the oldest entry.
    next: usize,
}

impl<K: Clone> SimilarityIndex<K> {
    /// An empty index of vectors of `dimension` floats, keeping the last
    /// `capacity` of them. A capacity of 0 keeps nothing.
    pub fn new(dimension: usize, capacity: usize) -> Self {
        Self {
            dimension,
            capacity,
            data: Vec::new(),
            keys: Vec::new(),
            next: 0,
        }
    }

    /// The vector length this index holds.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The most entries it keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many entries it holds now.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Forgets every entry (a task completed, a human intervened).
    pub fn clear(&mut self) {
        self.data.clear();
        self.keys.clear();
        self.next = 0;
    }

    /// Adds `vector` under `key`, dropping the oldest entry when full.
    pub fn push(&mut self, key: K, vector: &[f32]) -> Result<()> {
        self.check(vector)?;
        if self.capacity == 0 {
            return Ok(());
        }
        if self.keys.len() < self.capacity {
            self.data.extend_from_slice(vector);
            self.keys.push(key);
        } else {
            let slot = self.next;
            self.data[slot * self.dimension..(slot + 1) * self.dimension].copy_from_slice(vector);
            self.keys[slot] = key;
            self.next = (slot + 1) % self.capacity;
        }
        Ok(())
    }

    /// The cosine of `query` with every entry, in slot order.
    fn cosines(&self, query: &[f32]) -> Result<Vec<f32>> {
        self.check(query)?;
        let rows = ArrayView2::from_shape((self.keys.len(), self.dimension), &self.data).map_err(
            |_| SemanticError::DimensionMismatch {
                expected: self.keys.len() * self.dimension,
                actual: self.data.len(),
            },
        )?;
        Ok(rows.dot(&ArrayView1::from(query)).to_vec())
    }

    /// Slot numbers from oldest to newest.
    fn slots_by_age(&self) -> impl Iterator<Item = usize> + '_ {
        let len = self.keys.len();
        let start = if len < self.capacity { 0 } else { self.next };
        (0..len).map(move |i| (start + i) % len.max(1))
    }

    /// The entry most similar to `query`; on a tie, the newest. `None` when
    /// empty.
    pub fn nearest(&self, query: &[f32]) -> Result<Option<Match<K>>> {
        let cosines = self.cosines(query)?;
        let mut best: Option<(usize, f32)> = None;
        for slot in self.slots_by_age() {
            let c = cosines[slot];
            if c.is_nan() {
                continue;
            }
            if best.is_none_or(|(_, b)| c >= b) {
                best = Some((slot, c));
            }
        }
        Ok(best.map(|(slot, cosine)| Match {
            key: self.keys[slot].clone(),
            cosine,
        }))
    }

    /// The nearest entry if its cosine is strictly greater than `threshold`.
    pub fn best_above(&self, query: &[f32], threshold: f32) -> Result<Option<Match<K>>> {
        Ok(self.nearest(query)?.filter(|m| m.cosine > threshold))
    }

    /// Every entry whose cosine is strictly greater than `threshold`, oldest
    /// first: how often "the same" request came back.
    pub fn all_above(&self, query: &[f32], threshold: f32) -> Result<Vec<Match<K>>> {
        let cosines = self.cosines(query)?;
        Ok(self
            .slots_by_age()
            .filter(|&slot| cosines[slot] > threshold)
            .map(|slot| Match {
                key: self.keys[slot].clone(),
                cosine: cosines[slot],
            })
            .collect())
    }

    fn check(&self, vector: &[f32]) -> Result<()> {
        if vector.len() == self.dimension {
            Ok(())
        } else {
            Err(SemanticError::DimensionMismatch {
                expected: self.dimension,
                actual: vector.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let mut v = v.to_vec();
        normalize(&mut v);
        v
    }

    #[test]
    fn cosine_of_unit_vectors() -> Result<()> {
        let a = unit(&[1.0, 0.0, 0.0]);
        let b = unit(&[1.0, 1.0, 0.0]);
        assert!((cosine(&a, &a)? - 1.0).abs() < 1e-6);
        assert!((cosine(&a, &b)? - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert!((cosine(&a, &unit(&[-1.0, 0.0, 0.0]))? + 1.0).abs() < 1e-6);
        assert!(cosine(&a, &unit(&[0.0, 0.0, 2.0]))?.abs() < 1e-6);
        Ok(())
    }

    #[test]
    fn cosine_rejects_mismatched_lengths() {
        let err = cosine(&[1.0, 0.0], &[1.0, 0.0, 0.0]);
        assert!(matches!(
            err,
            Err(SemanticError::DimensionMismatch {
                expected: 2,
                actual: 3
            })
        ));
    }

    #[test]
    fn normalize_scales_to_unit_length_and_leaves_zero_alone() {
        let mut v = vec![3.0, 4.0];
        assert!((normalize(&mut v) - 5.0).abs() < 1e-6);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut z = vec![0.0, 0.0];
        assert_eq!(normalize(&mut z), 0.0);
        assert_eq!(z, vec![0.0, 0.0]);
    }

    #[test]
    fn nearest_finds_the_most_similar_row() -> Result<()> {
        let mut index = SimilarityIndex::new(3, 10);
        assert_eq!(index.nearest(&unit(&[1.0, 0.0, 0.0]))?, None);
        index.push(1, &unit(&[1.0, 0.0, 0.0]))?;
        index.push(2, &unit(&[0.0, 1.0, 0.0]))?;
        index.push(3, &unit(&[0.0, 1.0, 1.0]))?;
        let m = index.nearest(&unit(&[0.1, 1.0, 0.0]))?;
        assert_eq!(m.as_ref().map(|m| m.key), Some(2));
        let m = index.nearest(&unit(&[0.0, 0.9, 1.0]))?;
        assert_eq!(m.map(|m| m.key), Some(3));
        Ok(())
    }

    #[test]
    fn best_above_is_strictly_greater() -> Result<()> {
        let mut index = SimilarityIndex::new(2, 4);
        let a = unit(&[1.0, 0.0]);
        let b = unit(&[1.0, 1.0]);
        index.push("a", &a)?;
        let c = cosine(&a, &b)?;
        assert_eq!(
            index.best_above(&b, c)?,
            None,
            "equal to the threshold is not above"
        );
        let m = index.best_above(&b, c - 1e-6)?;
        assert_eq!(m.map(|m| m.key), Some("a"));
        assert_eq!(index.best_above(&a, 1.0)?, None);
        Ok(())
    }

    #[test]
    fn full_index_drops_the_oldest() -> Result<()> {
        let mut index = SimilarityIndex::new(2, 2);
        index.push(1, &unit(&[1.0, 0.0]))?;
        index.push(2, &unit(&[0.0, 1.0]))?;
        index.push(3, &unit(&[-1.0, 0.0]))?;
        assert_eq!(index.len(), 2);
        // Row 1 (pointing at +x) is gone: the best match for +x is now 2.
        let m = index.nearest(&unit(&[1.0, 0.0]))?;
        assert_eq!(m.map(|m| m.key), Some(2));
        index.push(4, &unit(&[1.0, 0.0]))?;
        let keys: Vec<i32> = index
            .all_above(&unit(&[0.0, 1.0]), -2.0)?
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(keys, vec![3, 4], "oldest first, 2 dropped");
        Ok(())
    }

    #[test]
    fn ties_go_to_the_newest() -> Result<()> {
        let mut index = SimilarityIndex::new(2, 3);
        let v = unit(&[1.0, 1.0]);
        index.push(10, &v)?;
        index.push(11, &v)?;
        index.push(12, &v)?;
        index.push(13, &v)?; // overwrites slot 0
        assert_eq!(index.nearest(&v)?.map(|m| m.key), Some(13));
        Ok(())
    }

    #[test]
    fn all_above_counts_repeats() -> Result<()> {
        let mut index = SimilarityIndex::new(2, 8);
        for k in 0..5 {
            let v = if k % 2 == 0 { [1.0, 0.05] } else { [0.0, 1.0] };
            index.push(k, &unit(&v))?;
        }
        let hits = index.all_above(&unit(&[1.0, 0.0]), 0.85)?;
        assert_eq!(
            hits.iter().map(|m| m.key).collect::<Vec<_>>(),
            vec![0, 2, 4]
        );
        Ok(())
    }

    #[test]
    fn dimension_is_checked_on_push_and_query() -> Result<()> {
        let mut index: SimilarityIndex<u32> = SimilarityIndex::new(3, 4);
        assert!(index.push(1, &[1.0, 0.0]).is_err());
        assert!(index.nearest(&[1.0, 0.0]).is_err());
        index.push(1, &unit(&[1.0, 0.0, 0.0]))?;
        assert!(index.best_above(&[1.0; 4], 0.0).is_err());
        Ok(())
    }

    #[test]
    fn zero_capacity_keeps_nothing_and_clear_empties() -> Result<()> {
        let mut index = SimilarityIndex::new(2, 0);
        index.push(1, &unit(&[1.0, 0.0]))?;
        assert!(index.is_empty());
        assert_eq!(index.nearest(&unit(&[1.0, 0.0]))?, None);

        let mut index = SimilarityIndex::new(2, 2);
        index.push(1, &unit(&[1.0, 0.0]))?;
        index.push(2, &unit(&[1.0, 0.0]))?;
        index.push(3, &unit(&[1.0, 0.0]))?;
        index.clear();
        assert!(index.is_empty());
        index.push(4, &unit(&[0.0, 1.0]))?;
        assert_eq!(index.nearest(&unit(&[1.0, 0.0]))?.map(|m| m.key), Some(4));
        Ok(())
    }
}
