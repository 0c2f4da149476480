//! Hubs (ruling 17): an orchestrator's exchanges with its workers are the
//! protocol of a hub-and-spoke team, not a cycle; only exchanges that bring
//! nothing new count. Under trace format 1.1's counting (`cycles.count =
//! "every"`) that takes recognizing the hub; under 1.2's (the default)
//! every exchange is asked the same, and a hub needs no recognition.

use std::ffi::OsStr;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::*;

/// The exchange kinds ruling 17 speaks of.
const EXCHANGE_KINDS: [&str; 3] = ["agent_pair", "multi_agent", "topic_cycle"];

fn replay_with(config_name: &str) -> Vec<Value> {
    let path = trace("hub_team.jsonl");
    let config = config(config_name);
    let out = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("jsonl"),
        OsStr::new("--no-semantic"),
        OsStr::new("--config"),
        config.as_os_str(),
    ]);
    assert_eq!(out.code, Some(0), "{out:?}");
    parse_jsonl(&out.stdout)
}

#[test]
fn a_recognized_hubs_new_exchanges_are_not_a_cycle_and_its_repeats_are() {
    let every = count_every();
    for extra in [
        &["--config", &every][..],
        &["--config", &every, "--no-semantic"][..],
    ] {
        let decisions = replay_jsonl("hub_team.jsonl", extra);
        // H1: fourteen exchanges, every one new. Before the 6th handoff
        // the orchestrator is not yet a hub, and four exchanges with the
        // web surfer are a pair cycle (ruling 4); once it is one (the
        // 6th handoff: one side of all six, with two other agents), new
        // exchanges are the protocol and never count.
        assert_eq!(lines_with(&decisions, "H1", "agent_pair"), [4], "{extra:?}");
        for kind in ["multi_agent", "topic_cycle"] {
            assert!(lines_with(&decisions, "H1", kind).is_empty(), "{kind}");
        }
        // H2: the hub re-issues the same instruction and the worker
        // returns the same page: those exchanges count.
        assert_eq!(
            lines_with(&decisions, "H2", "agent_pair"),
            [20, 21, 22],
            "{extra:?}"
        );
        let first = detection(&decisions, 20, "agent_pair");
        assert_eq!(first["action"], "break_cycle");
    }
}

#[test]
fn without_recognition_every_exchange_counts_and_a_named_hub_counts_from_the_start() {
    let off = replay_with("hubs_off.toml");
    assert_eq!(
        lines_with(&off, "H1", "agent_pair"),
        [4, 7, 8, 11, 12, 13, 14],
        "ruling 4 alone: the protocol is a cycle"
    );
    let named = replay_with("hubs_named.toml");
    assert!(
        lines_with(&named, "H1", "agent_pair").is_empty(),
        "a named hub's new exchanges never count"
    );
    // H2's repeats: the instruction at 19 and 21, the same page at 20 and
    // 22; the fourth is a cycle.
    assert_eq!(lines_with(&named, "H2", "agent_pair"), [22]);
    for kind in &EXCHANGE_KINDS[1..] {
        for task in ["H1", "H2"] {
            assert!(lines_with(&named, task, kind).is_empty(), "{task} {kind}");
        }
    }
}

#[test]
fn a_hubs_reworded_instruction_and_its_workers_reworded_reply_bring_nothing_new() {
    let config = config("hubs_named.toml");
    let config = config.to_str().expect("a UTF-8 path");
    // R1: the orchestrator asks the web surfer three times for one price,
    // in other words each time, and gets the same broken page back, in
    // other words each time. Judged by meaning (semantic matching on), the
    // exchanges at 5 to 8 bring nothing new, and the 4th is a pair cycle.
    let judged = replay_jsonl("hub_reworded.jsonl", &["--config", config]);
    assert_eq!(lines_with(&judged, "R1", "agent_pair"), [8]);
    // Compared as text, every one of them is news: the protocol.
    let exact = replay_jsonl("hub_reworded.jsonl", &["--config", config, "--no-semantic"]);
    assert!(lines_with(&exact, "R1", "agent_pair").is_empty());
}

#[test]
fn by_default_a_hub_needs_no_recognition_and_only_repeats_count() {
    for extra in [&[][..], &["--no-semantic"][..]] {
        let decisions = replay_jsonl("hub_team.jsonl", extra);
        // H1: every exchange brings something new, before the hub could
        // be recognized too (1.1's counting flagged line 4).
        for kind in EXCHANGE_KINDS {
            assert!(
                lines_with(&decisions, "H1", kind).is_empty(),
                "{kind} {extra:?}"
            );
        }
        // H2: the same instruction and the same page again count, and so
        // do the first instruction and page they repeat.
        assert_eq!(
            lines_with(&decisions, "H2", "agent_pair"),
            [20, 21, 22],
            "{extra:?}"
        );
        assert_eq!(
            numbers(&detection(&decisions, 20, "agent_pair")["evidence"]),
            [15, 16, 19, 20]
        );
    }
    // Reworded, the repeats count when judged by meaning: the instruction
    // at 5 repeats 1's, the page at 6 repeats 2's.
    let judged = replay_jsonl("hub_reworded.jsonl", &[]);
    assert_eq!(lines_with(&judged, "R1", "agent_pair"), [6, 7, 8]);
    assert_eq!(
        numbers(&detection(&judged, 6, "agent_pair")["evidence"]),
        [1, 2, 5, 6]
    );
    let exact = replay_jsonl("hub_reworded.jsonl", &["--no-semantic"]);
    assert!(lines_with(&exact, "R1", "agent_pair").is_empty());
}

#[test]
fn hub_settings_are_validated_by_name() {
    let dir = tempfile::TempDir::new().expect("a temporary directory");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[cycles]\nhub_share = 0.4\n").expect("written");
    let path = trace("hub_team.jsonl");
    let out = run([
        OsStr::new("replay"),
        path.as_os_str(),
        OsStr::new("--config"),
        bad.as_os_str(),
        OsStr::new("--no-semantic"),
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("cycles.hub_share"), "{}", out.stderr);
}

/// `loopguard eval` on the labelled team corpus (`data/team-traces`), with
/// `extra` arguments, as JSON.
fn eval_team_corpus(extra: &[&str]) -> Value {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/team-traces");
    let mut args = vec![
        OsStr::new("eval"),
        corpus.as_os_str(),
        OsStr::new("--format"),
        OsStr::new("json"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    let out = run(args);
    assert_eq!(out.code, Some(0), "{out:?}");
    serde_json::from_str(&out.stdout).expect("eval prints JSON")
}

/// Every detection kind that reports a loop (all built-in kinds but
/// `external_failure`, which reports an outside-world failure).
const LOOP_KINDS: &str = "exact_failure,collaboration_loop,agent_pair,multi_agent,topic_cycle,\
repeated_query,edge_limit,phase_visits,transition_limit,oscillation,repeated_output,no_progress,\
regression,tool_repeat,tool_cycle,tool_no_new_info";

/// Event precision the defaults reach on the team corpus at least.
const PRECISION_FLOOR: f64 = 0.95;
/// Event recall the defaults reach on the team corpus at least.
const RECALL_FLOOR: f64 = 0.65;

#[test]
fn on_the_team_corpus_the_defaults_keep_normal_runs_quiet_and_find_the_loops() {
    let figures = eval_team_corpus(&["--kinds", LOOP_KINDS]);
    let events = &figures["events"];
    let (precision, recall) = (
        events["precision"].as_f64().expect("a precision"),
        events["recall"].as_f64().expect("a recall"),
    );
    assert!(
        precision >= PRECISION_FLOOR && recall >= RECALL_FLOOR,
        "{figures}"
    );
    assert_eq!(
        figures["trace_any_detection"]["fp"], 0,
        "no normal run flagged: {figures}"
    );
    // Trace format 1.1's counting (every exchange) flags normal teamwork:
    // review rounds, a supervisor routing new questions, a hub's protocol.
    let every = count_every();
    let every = eval_team_corpus(&["--config", &every, "--kinds", LOOP_KINDS]);
    assert!(
        every["trace_any_detection"]["fp"]
            .as_u64()
            .expect("a count")
            > 0,
        "{every}"
    );
}
