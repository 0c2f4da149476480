//! The held-out split: test pairs never influence the choice, and the
//! chosen threshold is scored on them.

use loopguard_tune::{EmbedOptions, PairSet, Thresholds, TuneOptions, embed_texts, tune_pairs};

use crate::common::{Toy, pair, pairs};

fn tune(set: &PairSet) -> loopguard_tune::TuneReport {
    let (vectors, stats) = embed_texts(
        &Toy::default(),
        set.distinct_texts(),
        &EmbedOptions::new(),
        &mut |_, _| {},
    )
    .expect("the toy embeds");
    let options = TuneOptions::new(Thresholds::new(0.50, 0.95, 0.05).expect("a range"))
        .min_precision(0.9)
        .expect("a floor");
    tune_pairs(set, &vectors, &stats, &options).expect("the sweep runs")
}

#[test]
fn test_pairs_never_move_the_choice() {
    // Train: same pairs at 0.90 and 0.95, different ones at 0.60 and 0.80:
    // every threshold from 0.80 up to (not including) 0.90 separates them,
    // and the tie rule picks 0.85.
    let train = [
        pair(0.90, true, "train"),
        pair(0.95, true, "train"),
        pair(0.60, false, "train"),
        pair(0.80, false, "train"),
    ];
    // Test: pairs that, chosen on, would want a threshold around 0.55
    // (same pairs at 0.60 and 0.70, a different one at 0.50).
    let test = [
        pair(0.60, true, "test"),
        pair(0.70, true, "test"),
        pair(0.50, false, "test"),
    ];
    let alone = tune(&pairs(&train));
    let lines: Vec<String> = train.iter().chain(&test).cloned().collect();
    let with_test = tune(&pairs(&lines));
    let chosen = |report: &loopguard_tune::TuneReport| {
        (
            report.best_f1.as_ref().map(|c| c.threshold),
            report
                .min_precision
                .as_ref()
                .and_then(|m| m.choice.as_ref())
                .map(|c| c.threshold),
        )
    };
    assert_eq!(chosen(&alone), (Some(0.85), Some(0.80)));
    assert_eq!(
        chosen(&with_test),
        chosen(&alone),
        "test rows changed the choice"
    );
    assert_eq!(with_test.rows, alone.rows, "the table is the train split's");
    assert_eq!(with_test.train.items, 4);
    assert_eq!(with_test.test.map(|c| c.items), Some(3));

    // And those test pairs would have chosen otherwise: swept on their own,
    // as train, their best F1 is at 0.55.
    let as_train: Vec<String> = lines[4..]
        .iter()
        .map(|l| l.replace("\"test\"", "\"train\""))
        .collect();
    assert_eq!(
        tune(&pairs(&as_train)).best_f1.map(|c| c.threshold),
        Some(0.55)
    );

    // The held-out scores of the chosen threshold: at 0.85 no test pair is
    // flagged: TP 0, FP 0, TN 1, FN 2.
    let best = with_test.best_f1.expect("a best threshold");
    let held_out = best.test.expect("held-out scores");
    assert_eq!(
        (
            held_out.confusion.tp,
            held_out.confusion.fp,
            held_out.confusion.tn,
            held_out.confusion.fn_
        ),
        (0, 0, Some(1), 2)
    );
    assert_eq!(held_out.metrics.precision, None);
    assert_eq!(held_out.metrics.recall, Some(0.0));
    assert!(
        alone.best_f1.expect("a best threshold").test.is_none(),
        "no test pairs"
    );
}

#[test]
fn a_file_without_train_pairs_is_an_error() {
    let set = pairs(&[pair(0.9, true, "test")]);
    let (vectors, stats) = embed_texts(
        &Toy::default(),
        set.distinct_texts(),
        &EmbedOptions::new(),
        &mut |_, _| {},
    )
    .expect("the toy embeds");
    let options = TuneOptions::new(Thresholds::new(0.5, 0.9, 0.1).expect("a range"));
    let err = tune_pairs(&set, &vectors, &stats, &options).expect_err("nothing to choose on");
    assert!(err.to_string().contains("no train pair"), "{err}");
}
