//! The veto cases of `tests/fixtures/veto_cases.jsonl`: pairs of texts,
//! each with the rule of [`VETOES`] that vetoes it (or none), what the
//! veto says, and what else the comparison must find.
//!
//! A line's fields: `a` and `b`, the texts; `veto`, the rule's name or
//! `null`; `says`, the veto's reason (with a veto); `only_a` and `only_b`,
//! each side's differing words as written (absent: none); `synonyms`, the
//! swapped words WordNet calls synonyms (absent: none);
//! `intent_mismatch`, `report_vs_request`, `adds_on_one_side` (absent:
//! false); `note`, what the case shows.

use loopguard_judge::{Contrast, ReadText, VETOES, compare_with_rule};
use serde::Deserialize;

use crate::support::{fixture, shipped_pairs};

/// One line of the fixture.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    a: String,
    b: String,
    veto: Option<String>,
    #[serde(default)]
    says: Option<String>,
    #[serde(default)]
    only_a: Vec<String>,
    #[serde(default)]
    only_b: Vec<String>,
    #[serde(default)]
    synonyms: Vec<(String, String)>,
    #[serde(default)]
    intent_mismatch: bool,
    #[serde(default)]
    report_vs_request: bool,
    #[serde(default)]
    adds_on_one_side: bool,
    note: String,
}

fn cases() -> Vec<Case> {
    let path = fixture("veto_cases.jsonl");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    text.lines()
        .enumerate()
        .map(|(at, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("veto_cases.jsonl:{}: {err}", at + 1))
        })
        .collect()
}

/// What `case` expects that `found` (with its rule) does not give, if
/// anything.
fn mismatch(case: &Case, (found, rule): (&Contrast, Option<&str>)) -> Option<String> {
    let says = found.veto.as_ref().map(ToString::to_string);
    let expected = (
        case.veto.as_deref(),
        &case.says,
        (&case.only_a, &case.only_b),
        &case.synonyms,
        [
            case.intent_mismatch,
            case.report_vs_request,
            case.adds_on_one_side,
        ],
    );
    let actual = (
        rule,
        &says,
        (&found.only_a, &found.only_b),
        &found.synonyms,
        [
            found.intent_mismatch,
            found.report_vs_request,
            found.adds_on_one_side,
        ],
    );
    (expected != actual).then(|| {
        format!(
            "{:?} / {:?} ({}):\n  expected {expected:?}\n  found    {actual:?}",
            case.a, case.b, case.note
        )
    })
}

#[test]
fn every_veto_case_is_decided_by_its_rule() {
    let cases = cases();
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let (contrast, rule) =
                compare_with_rule(&ReadText::new(&case.a), &ReadText::new(&case.b));
            mismatch(case, (&contrast, rule))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} cases:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

#[test]
fn every_rule_has_cases_and_every_case_names_a_rule() {
    let cases = cases();
    for rule in VETOES {
        assert!(
            cases
                .iter()
                .any(|case| case.veto.as_deref() == Some(rule.name)),
            "no case of {}",
            rule.name
        );
    }
    for case in &cases {
        if let Some(name) = &case.veto {
            assert!(
                VETOES.iter().any(|rule| rule.name == name),
                "{name} is no rule"
            );
            assert!(case.says.is_some(), "{:?}: a veto says why", case.a);
        }
    }
    // Each rule's near misses are cases too: pairs no rule vetoes.
    assert!(cases.iter().filter(|case| case.veto.is_none()).count() >= VETOES.len());
}

#[test]
fn the_veto_table_is_in_its_order() {
    let names: Vec<&str> = VETOES.iter().map(|rule| rule.name).collect();
    assert_eq!(
        names,
        [
            "identifiers",
            "named_things",
            "opposites",
            "period",
            "words",
            "kind",
            "name_in_one_place",
            "direction",
            "swapped_ends",
            "roles",
            "markers",
        ]
    );
}

#[test]
fn no_case_quotes_a_labelled_pair() {
    let labelled: std::collections::HashSet<String> = shipped_pairs()
        .into_iter()
        .flat_map(|pair| [pair.a, pair.b])
        .collect();
    for case in cases() {
        for text in [&case.a, &case.b] {
            assert!(!labelled.contains(text), "{text:?} is a text of data/pairs");
        }
    }
}
