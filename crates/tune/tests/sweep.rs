//! The sweep on a small hand-checked set: ten pairs whose cosines are
//! exact, so every count below was worked out by hand.
//!
//! Same pairs: 0.60, 0.80, 0.85, 0.90, 0.95.
//! Different pairs: 0.10, 0.50, 0.70, 0.85, 0.92.

use loopguard_tune::{
    Confusion, EmbedOptions, PairSet, Thresholds, TuneOptions, TuneReport, embed_texts, tune_pairs,
};

use crate::common::{Counting, Toy, pair, pairs};

const SAME: [f32; 5] = [0.60, 0.80, 0.85, 0.90, 0.95];
const DIFFERENT: [f32; 5] = [0.10, 0.50, 0.70, 0.85, 0.92];

fn set() -> PairSet {
    let lines: Vec<String> = SAME
        .iter()
        .map(|&c| pair(c, true, "train"))
        .chain(DIFFERENT.iter().map(|&c| pair(c, false, "train")))
        .collect();
    pairs(&lines)
}

fn sweep(options: TuneOptions) -> TuneReport {
    let set = set();
    let toy = Counting::new(Toy::default());
    let (vectors, stats) = embed_texts(
        &toy,
        set.distinct_texts(),
        &EmbedOptions::new(),
        &mut |_, _| {},
    )
    .expect("the toy embeds");
    // "base" and ten others, but 0.85 is both a same and a different text.
    assert_eq!(stats.texts, 10);
    assert_eq!((stats.embedded, toy.texts()), (10, 10));
    tune_pairs(&set, &vectors, &stats, &options).expect("the sweep runs")
}

fn range() -> Thresholds {
    Thresholds::new(0.50, 0.95, 0.05).expect("a valid range")
}

fn counts(report: &TuneReport, threshold: f64) -> (u64, u64, u64, u64) {
    let row = report
        .row_at(threshold)
        .unwrap_or_else(|| panic!("no row at {threshold}"));
    let Confusion { tp, fp, tn, fn_ } = row.confusion;
    (tp, fp, tn.expect("pairs have negatives"), fn_)
}

#[test]
fn every_threshold_has_the_hand_computed_counts() {
    let report = sweep(TuneOptions::new(range()));
    let thresholds: Vec<f64> = report.rows.iter().map(|r| r.threshold).collect();
    assert_eq!(
        thresholds,
        [0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95]
    );
    // (threshold, TP, FP, TN, FN)
    let expected = [
        (0.50, 5, 3, 2, 0),
        (0.55, 5, 3, 2, 0),
        (0.60, 4, 3, 2, 1),
        (0.65, 4, 3, 2, 1),
        (0.70, 4, 2, 3, 1),
        (0.75, 4, 2, 3, 1),
        (0.80, 3, 2, 3, 2),
        (0.85, 2, 1, 4, 3),
        (0.90, 1, 1, 4, 4),
        (0.95, 0, 0, 5, 5),
    ];
    for (t, tp, fp, tn, fn_) in expected {
        assert_eq!(counts(&report, t), (tp, fp, tn, fn_), "at {t}");
    }
    let at = |t: f64| report.row_at(t).expect("a row").metrics;
    let m = at(0.50);
    assert_eq!(m.precision, Some(5.0 / 8.0));
    assert_eq!(m.recall, Some(1.0));
    assert_eq!(m.f1, Some(10.0 / 13.0));
    assert_eq!(m.fpr, Some(3.0 / 5.0));
    let m = at(0.85);
    assert_eq!(m.precision, Some(2.0 / 3.0));
    assert_eq!(m.recall, Some(2.0 / 5.0));
    assert_eq!(m.f1, Some(0.5));
    assert_eq!(m.fpr, Some(1.0 / 5.0));
    // Nothing flagged: precision is undefined, never a made-up 0 or 1.
    let m = at(0.95);
    assert_eq!(m.precision, None);
    assert_eq!((m.recall, m.f1, m.fpr), (Some(0.0), Some(0.0), Some(0.0)));
}

#[test]
fn a_cosine_equal_to_the_threshold_is_not_above_it() {
    let thresholds = Thresholds::from_values([0.8499, 0.85, 0.8501]).expect("valid thresholds");
    let report = sweep(TuneOptions::new(thresholds));
    // Just below 0.85 both pairs of cosine 0.85 are flagged; at 0.85 exactly
    // neither is (the same one becomes a miss, the different one a true
    // negative), as the detectors' `cosine > threshold` says.
    assert_eq!(counts(&report, 0.8499), (3, 2, 3, 2));
    assert_eq!(counts(&report, 0.85), (2, 1, 4, 3));
    assert_eq!(counts(&report, 0.8501), (2, 1, 4, 3));
}

#[test]
fn ties_in_f1_go_to_the_higher_threshold() {
    let report = sweep(TuneOptions::new(range()));
    // 0.50 and 0.55 both have F1 10/13; 0.55 flags nothing more.
    let best = report.best_f1.as_ref().expect("a best threshold");
    assert_eq!(best.threshold, 0.55);
    assert_eq!(best.train.metrics.f1, Some(10.0 / 13.0));
    assert_eq!(best.test, None, "no test pairs, no held-out scores");
    assert_eq!(report.marks(0.55), ["best_f1"]);
    assert!(report.marks(0.50).is_empty());
}

#[test]
fn the_precision_floor_takes_the_lowest_threshold_that_meets_it() {
    let floor = |p: f64| {
        let options = TuneOptions::new(range())
            .min_precision(p)
            .expect("a valid floor");
        sweep(options)
            .min_precision
            .expect("asked for")
            .choice
            .map(|c| c.threshold)
    };
    // Precision by threshold: 0.625 0.625 0.571 0.571 0.667 0.667 0.600
    // 0.667 0.500 n/a.
    assert_eq!(floor(0.6), Some(0.50));
    assert_eq!(floor(0.625), Some(0.50));
    assert_eq!(floor(0.65), Some(0.70));
    assert_eq!(floor(0.7), None);
    // 0.95 flags nothing: it has no precision and meets no floor.
    assert_eq!(floor(1.0), None);
    for bad in [0.0, -0.5, 1.5, f64::NAN] {
        assert!(
            TuneOptions::new(range()).min_precision(bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn the_csv_has_one_row_per_threshold_and_the_marks() {
    let options = TuneOptions::new(range())
        .min_precision(0.65)
        .expect("a valid floor")
        .configured(vec![loopguard_tune::Configured::new(
            "similarity.request_threshold",
            0.85,
        )]);
    let report = sweep(options);
    let configured = &report.configured[0];
    assert_eq!(
        configured.key.as_deref(),
        Some("similarity.request_threshold")
    );
    assert_eq!(configured.train.confusion.tp, 2);
    let mut csv = Vec::new();
    report.write_csv(&mut csv).expect("CSV in memory");
    let csv = String::from_utf8(csv).expect("UTF-8");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 11);
    assert_eq!(
        lines[0],
        "threshold,tp,fp,tn,fn,precision,recall,f1,fpr,marks"
    );
    assert_eq!(lines[2], "0.55,5,3,2,0,0.6250,1.0000,0.7692,0.6000,best_f1");
    assert_eq!(
        lines[5],
        "0.70,4,2,3,1,0.6667,0.8000,0.7273,0.4000,min_precision"
    );
    assert_eq!(
        lines[8],
        "0.85,2,1,4,3,0.6667,0.4000,0.5000,0.2000,configured"
    );
    assert_eq!(lines[10], "0.95,0,0,5,5,n/a,0.0000,0.0000,0.0000,");
}

#[test]
fn the_mistakes_of_the_best_threshold_are_listed() {
    let report = sweep(TuneOptions::new(range()));
    let mistakes = report.mistakes.expect("a best threshold, so mistakes");
    assert_eq!(mistakes.threshold, 0.55);
    let cosines = |list: &[loopguard_tune::Example]| -> Vec<f32> {
        list.iter().map(|e| e.cosine.expect("a cosine")).collect()
    };
    assert_eq!(cosines(&mistakes.false_positives), [0.92, 0.85, 0.70]);
    assert!(mistakes.false_negatives.is_empty());
    assert_eq!(mistakes.false_positives[0].at, "pairs.jsonl:10");
}
