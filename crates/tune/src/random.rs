//! A small, seeded generator (SplitMix64) for the cross-validation's
//! shuffles and the bootstrap's resamples: the same draws on every run and
//! every machine, with no dependency.

/// SplitMix64, seeded by its state.
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index below `len` (which must not be 0). The modulo's bias is
    /// below `len / 2^64`: nothing a tune's few thousand pairs can show.
    pub(crate) fn below(&mut self, len: usize) -> usize {
        (self.next() % len as u64) as usize
    }

    /// Fisher-Yates.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}
