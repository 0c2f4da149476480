//! The bootstrap intervals `loopguard tune` prints under each held-out
//! figure: 2,000 resamples of the scored pairs, on as many pairs as the
//! shipped test split (421) and as the whole shipped file (1,684).
//!
//! ```text
//! cargo bench -p loopguard-tune --bench bootstrap [-- --quick]
//! ```

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use loopguard_tune::bootstrap_intervals;

/// `pairs` labels and verdicts with about the shipped judge's mistakes:
/// 45% of the pairs the same, one verdict in eleven wrong.
fn outcomes(pairs: usize) -> (Vec<bool>, Vec<bool>) {
    let same: Vec<bool> = (0..pairs).map(|i| i % 20 < 9).collect();
    let said = same
        .iter()
        .enumerate()
        .map(|(i, same)| if i % 11 == 0 { !same } else { *same })
        .collect();
    (same, said)
}

fn intervals(c: &mut Criterion) {
    let mut group = c.benchmark_group("bootstrap_intervals");
    for pairs in [421, 1_684] {
        let (same, said) = outcomes(pairs);
        group.bench_function(format!("{pairs}_pairs"), |b| {
            b.iter(|| bootstrap_intervals(black_box(&same), black_box(&said)))
        });
    }
    group.finish();
}

criterion_group!(benches, intervals);
criterion_main!(benches);
