//! The semantic detectors with the calibrated same-request judge (the
//! default `similarity.judge`) and the real model, through the engine:
//! rewordings are loops as with cosine, a change of the one word that
//! matters (a PR number, an environment, a direction) is not, although its
//! cosine is above 0.85.

use loopguard_config::Config;
use loopguard_core_types::{Action, Decision, Detection, Event, Severity};
use loopguard_host::LoopGuard;
use loopguard_semantic::{JudgeKind, SemanticDetectors};

use crate::common::service;

fn event(json: &str) -> Event {
    Event::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

fn collab(task: &str, request: &str) -> Event {
    event(&format!(
        r#"{{"type":"collaboration","task":"{task}","from":"planner","to":"coder","request":"{request}"}}"#
    ))
}

fn query(task: &str, content: &str) -> Event {
    event(&format!(
        r#"{{"type":"handoff","task":"{task}","from":"planner","to":"researcher","content":"{content}"}}"#
    ))
}

fn engine(judge: JudgeKind) -> LoopGuard {
    let mut config = Config::default();
    config.similarity.judge = judge;
    SemanticDetectors::with_service(&config, service())
        .install(LoopGuard::builder(config))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"))
}

async fn replay(guard: &LoopGuard, events: &[Event]) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for (index, event) in events.iter().enumerate() {
        decisions.push(guard.observe_line(index as u64 + 1, event.clone()).await);
    }
    decisions
}

fn of_kind<'a>(decision: &'a Decision, kind: &str) -> Option<&'a Detection> {
    decision.detections.iter().find(|d| d.kind == kind)
}

/// Pairs that differ in the one word that matters, each above 0.85 by
/// cosine with this model.
const CONTRASTS: [(&str, &str); 3] = [
    (
        "Please review pull request #412 for the billing service",
        "Please review pull request #418 for the billing service",
    ),
    (
        "Deploy the payments service to staging",
        "Deploy the payments service to production",
    ),
    (
        "Scale the Kafka brokers up to handle the load",
        "Scale the Kafka brokers down to handle the load",
    ),
];

#[tokio::test]
async fn a_reworded_request_is_a_loop_named_by_the_judge() {
    let guard = engine(JudgeKind::Calibrated);
    let decisions = replay(
        &guard,
        &[
            collab("T", "Can you review this authentication code?"),
            collab("T", "Could you review this authentication code again?"),
            collab("T", "Can you please review this authentication code?"),
        ],
    )
    .await;
    assert!(decisions[0].detections.is_empty(), "{:?}", decisions[0]);
    let first = of_kind(&decisions[1], "collaboration_loop").expect("a loop at line 2");
    assert_eq!(first.evidence, [1, 2]);
    assert_eq!(first.matched_line, Some(1));
    assert_eq!(first.severity, Severity::Low);
    assert_eq!(decisions[1].action, Action::Warn);
    // The threshold is the judge's score threshold; the similarity stays
    // the cosine, for the reader.
    let threshold = first.threshold.expect("a threshold");
    let shipped = loopguard_semantic::JudgeWeights::shipped().threshold;
    assert!(
        (threshold - shipped).abs() < 0.005,
        "{threshold} vs {shipped}"
    );
    assert!(first.similarity.is_some_and(|s| s > 0.85), "{first:?}");
    assert!(
        first
            .reason
            .starts_with("request from 'planner' to 'coder' is the same as line 1's: same request"),
        "{}",
        first.reason
    );
    assert!(
        first.reason.ends_with("from the shipped judge weights)"),
        "{}",
        first.reason
    );
    assert_eq!(decisions[2].loop_count, 2);
    assert_eq!(decisions[2].action, Action::InjectContext);
}

#[tokio::test]
async fn a_one_word_contrast_is_no_loop_for_the_judge_but_one_for_cosine() {
    for (index, (a, b)) in CONTRASTS.iter().enumerate() {
        let task = format!("T{index}");
        let events = [collab(&task, a), collab(&task, b)];

        let calibrated = replay(&engine(JudgeKind::Calibrated), &events).await;
        assert!(
            of_kind(&calibrated[1], "collaboration_loop").is_none(),
            "{a} / {b}: {:?}",
            calibrated[1]
        );
        assert_eq!(calibrated[1].loop_count, 0);

        let cosine = replay(&engine(JudgeKind::Cosine), &events).await;
        let found = of_kind(&cosine[1], "collaboration_loop")
            .unwrap_or_else(|| panic!("cosine calls {a} / {b} a loop: {:?}", cosine[1]));
        assert!(found.similarity.is_some_and(|s| s > 0.85), "{found:?}");
    }
}

#[tokio::test]
async fn a_repeated_query_is_judged_and_a_contrast_is_not_a_repeat() {
    let guard = engine(JudgeKind::Calibrated);
    let decisions = replay(
        &guard,
        &[
            query("Q", "Find recent papers on retrieval augmented generation"),
            query(
                "Q",
                "Search for recent papers about retrieval augmented generation",
            ),
            query(
                "Q",
                "Look up recent research papers on retrieval augmented generation",
            ),
            query("P", "Find the open P1 bugs in the billing service"),
            query("P", "Find the closed P1 bugs in the billing service"),
        ],
    )
    .await;
    let repeats: Vec<Option<Severity>> = decisions
        .iter()
        .map(|d| of_kind(d, "repeated_query").map(|d| d.severity))
        .collect();
    assert_eq!(
        repeats,
        [
            None,
            Some(Severity::Low),
            Some(Severity::Medium),
            None,
            None
        ]
    );
    let second = of_kind(&decisions[2], "repeated_query").expect("the second repeat");
    assert_eq!(second.evidence, [1, 2, 3]);
    assert!(
        second
            .reason
            .starts_with("query to 'researcher' is the same as line "),
        "{}",
        second.reason
    );
    assert!(
        second
            .reason
            .ends_with("its 2nd repeat; no new information since line 1"),
        "{}",
        second.reason
    );
}

#[tokio::test]
async fn a_task_type_judge_threshold_is_used_and_named() {
    let config =
        Config::from_toml_str("[similarity.task_types.research]\njudge_threshold = 0.99\n")
            .unwrap_or_else(|e| panic!("{e}"));
    let guard = SemanticDetectors::with_service(&config, service())
        .install(LoopGuard::builder(config))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"));
    let typed = |request: &str| {
        event(&format!(
            r#"{{"type":"collaboration","task":"R","task_type":"research","from":"a","to":"b","request":"{request}"}}"#
        ))
    };
    let decisions = replay(
        &guard,
        &[
            typed("Can you review this authentication code?"),
            typed("Could you review the auth code for security issues?"),
            typed("Can you review this authentication code?"),
        ],
    )
    .await;
    // A rewording scores below 0.99; the exact repeat is the same at any
    // threshold and names the task type's key.
    assert!(
        of_kind(&decisions[1], "collaboration_loop").is_none(),
        "{:?}",
        decisions[1]
    );
    let exact = of_kind(&decisions[2], "collaboration_loop").expect("the exact repeat");
    assert_eq!(exact.threshold, Some(0.99));
    assert!(
        exact
            .reason
            .ends_with("(threshold 0.99 from similarity.task_types.research.judge_threshold)"),
        "{}",
        exact.reason
    );
}

/// A detector's event judged against several earlier texts needs the
/// residual texts of each candidate the words do not decide: they are
/// embedded in one inference, not one per candidate, and each verdict is
/// the one the pair gets alone.
#[tokio::test]
async fn every_candidates_residual_texts_are_embedded_in_one_inference() {
    use loopguard_semantic::{EmbeddingService, FirstLook, SameRequestJudge, cosine};

    let service =
        EmbeddingService::new(crate::common::embedder()).unwrap_or_else(|e| panic!("service: {e}"));
    let judge = SameRequestJudge::of_kind(JudgeKind::Calibrated);
    let text = "Can you review the authentication code for security issues?";
    let earlier = [
        "Please take another look at the login code for security problems",
        "Could you audit the auth module for vulnerabilities?",
        "Check the sign-in code for security holes again",
    ];
    let mut all = vec![text];
    all.extend(earlier);
    let vectors = service
        .embed_many(&all)
        .await
        .unwrap_or_else(|e| panic!("embed: {e}"));
    let with_cosines: Vec<(&str, f32)> = earlier
        .iter()
        .zip(&vectors[1..])
        .map(|(before, vector)| {
            let similarity = cosine(vector, &vectors[0]).unwrap_or_else(|e| panic!("{e}"));
            (*before, similarity)
        })
        .collect();
    let threshold = judge.default_threshold(0.85);
    // Each pair needs its residual texts: the words alone decide none.
    for &(before, similarity) in &with_cosines {
        assert!(
            matches!(
                judge.first_look(before, text, similarity, threshold),
                FirstLook::Pending(_)
            ),
            "{before:?} was decided by its words alone"
        );
    }
    let before = service.stats();
    let verdicts = judge
        .judge_many(&service, text, &with_cosines, threshold)
        .await
        .unwrap_or_else(|e| panic!("judge_many: {e}"));
    let after = service.stats();
    assert_eq!(
        after.batches,
        before.batches + 1,
        "the residual texts of {} pairs took {} inferences",
        with_cosines.len(),
        after.batches - before.batches
    );
    assert!(after.texts_embedded > before.texts_embedded);
    assert_eq!(verdicts.len(), with_cosines.len());
    for (verdict, &(before, similarity)) in verdicts.iter().zip(&with_cosines) {
        let alone = judge
            .judge(&service, before, text, similarity, threshold)
            .await
            .unwrap_or_else(|e| panic!("judge: {e}"));
        assert_eq!(verdict, &alone, "{before:?}");
        assert!(verdict.features.residuals.is_some(), "{before:?}");
    }
}

/// A rewording the pinned model puts below the judge's floor of 0.5 and
/// the tuned encoder above it (written for this test: cosines of about
/// 0.46 and 0.63): with the defaults (the tuned encoder on) the floor is
/// on the nearer cosine and the judge calls it the same request; without
/// the tuned encoder it is too far apart to be asked about.
#[tokio::test]
async fn a_rewording_only_the_tuned_encoder_reads_as_near_is_a_loop() {
    let (a, b) = (
        "asking several couriers for formal offers so we can decide who delivers web orders to European buyers after the shipping deal expires",
        "running the RFP to select a new e-commerce logistics partner for the EU",
    );
    let dir = crate::common::model_dir(&[], &[]);
    let mut config = Config::default();
    config.semantic.model_dir = Some(dir.path().to_path_buf());
    config.semantic.offline = Some(true);
    let guard_with = |config: Config| {
        let judge = loopguard_semantic::SameRequestJudge::from_config(&config.similarity)
            .unwrap_or_else(|e| panic!("the judge: {e}"));
        let (service, judge) =
            loopguard_semantic::load_service_and_tuned_encoder(&config, judge, |_| {})
                .unwrap_or_else(|e| panic!("the models: {e}"));
        SemanticDetectors::with_judge(
            &config,
            Some(service),
            loopguard_semantic::SemanticLimits::default(),
            judge,
        )
        .install(LoopGuard::builder(config))
        .build()
        .unwrap_or_else(|e| panic!("engine: {e}"))
    };
    let events = [collab("T", a), collab("T", b)];
    let decisions = replay(&guard_with(config.clone()), &events).await;
    let found = of_kind(&decisions[1], "collaboration_loop").expect("a loop at line 2");
    assert_eq!(found.matched_line, Some(1));
    let pinned = found.similarity.expect("the pinned cosine");
    assert!(
        (loopguard_semantic::TUNED_CANDIDATE_FLOOR..loopguard_semantic::CANDIDATE_FLOOR)
            .contains(&pinned),
        "{pinned}: between the floors"
    );
    assert!(
        found.reason.contains("same request (score"),
        "{}",
        found.reason
    );

    config.similarity.tuned_encoder = loopguard_config::TunedEncoder::Off;
    let decisions = replay(&guard_with(config), &events).await;
    assert!(
        of_kind(&decisions[1], "collaboration_loop").is_none(),
        "{:?}",
        decisions[1]
    );
}
