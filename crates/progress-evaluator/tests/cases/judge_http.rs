//! [`OpenAiJudge`] against a real HTTP server on 127.0.0.1, started by each
//! test and answering like an OpenAI-compatible chat-completions server
//! (the fake of `loopguard-test-support`; no LLM runs here): good answers,
//! slow answers, 5xx and 429 statuses, garbage. No test reaches outside
//! the machine.

use std::sync::Arc;
use std::time::Duration;

use loopguard_config::Config;
use loopguard_core_types::{Event, kinds};
use loopguard_detectors::ObservedEvent;
use loopguard_progress_evaluator::{
    FailureRecord, GoalJudge, JudgeError, JudgeRequest, OpenAiJudge, OpenAiSettings,
    ProgressEvaluator, Verdict,
};
use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm};
use serde_json::json;

/// How the fake server answers the n-th request (0-based); the last entry
/// repeats.
#[derive(Debug, Clone)]
enum Answer {
    /// 200 with this message content.
    Content(&'static str),
    /// 200 with this whole body.
    Body(&'static str),
    /// This status, with a short error body.
    Status(u16),
    /// Waits this long, then answers `progress`.
    Slow(Duration),
}

/// Starts the fake server on a free loopback port, answering the n-th
/// request with `script[n]` (the last entry repeats); returns it and its
/// base URL (`http://127.0.0.1:PORT/v1`).
async fn serve(script: Vec<Answer>) -> (Arc<FakeLlm>, String) {
    let fake = FakeLlm::start(move |n, _| match script.get(n).or(script.last()).cloned() {
        Some(Answer::Content(content)) => FakeAnswer::Content(content.to_owned()),
        Some(Answer::Body(body)) => FakeAnswer::Body(body.to_owned()),
        Some(Answer::Status(code)) => FakeAnswer::Status(code),
        Some(Answer::Slow(delay)) => FakeAnswer::Slow(
            delay,
            r#"{"verdict":"progress","reason":"late"}"#.to_owned(),
        ),
        None => FakeAnswer::Status(500),
    })
    .await;
    let url = fake.base_url();
    (fake, url)
}

fn settings(base_url: &str) -> OpenAiSettings {
    OpenAiSettings {
        base_url: base_url.to_owned(),
        model: "judge-7b".to_owned(),
        api_key: Some("sk-test".to_owned()),
        timeout: Duration::from_secs(10),
        retries: 2,
        backoff: Duration::from_millis(5),
    }
}

fn judge(base_url: &str) -> OpenAiJudge {
    OpenAiJudge::new(settings(base_url)).expect("a client")
}

fn request() -> JudgeRequest {
    let failure = |line, error: &str| FailureRecord {
        line,
        agent: "coder".into(),
        error: error.into(),
        error_type: None,
    };
    JudgeRequest {
        task: "T-9".into(),
        goal: "support nested tables".into(),
        history: vec![failure(3, "expected ']' at 1:7")],
        current: failure(7, "expected '=' at 2:3"),
        metrics: None,
    }
}

#[tokio::test]
async fn a_strict_answer_is_a_judgement_and_the_request_is_openai_shaped() {
    let (fake, url) = serve(vec![Answer::Content(
        r#"{"verdict":"regressive","reason":"the parser now fails earlier"}"#,
    )])
    .await;
    let judgement = judge(&url).judge(&request()).await.expect("an answer");
    assert_eq!(judgement.verdict, Verdict::Regressive);
    assert_eq!(judgement.reason, "the parser now fails earlier");

    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 1);
    let body = &bodies[0];
    assert_eq!(body["model"], "judge-7b");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .is_some_and(|text| text.contains(r#""verdict""#) && text.contains("no_progress"))
    );
    let question = body["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(
        question.contains("Goal: support nested tables"),
        "{question}"
    );
    assert!(question.contains("expected '=' at 2:3"), "{question}");
    assert_eq!(fake.auth().as_slice(), [Some("Bearer sk-test".to_owned())]);
}

#[tokio::test]
async fn a_slow_answer_times_out_without_a_retry() {
    let (fake, url) = serve(vec![Answer::Slow(Duration::from_secs(30))]).await;
    let judge = OpenAiJudge::new(OpenAiSettings {
        timeout: Duration::from_millis(200),
        ..settings(&url)
    })
    .expect("a client");
    let err = judge.judge(&request()).await.expect_err("too slow");
    assert_eq!(err, JudgeError::Timeout(Duration::from_millis(200)));
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn a_500_is_retried_then_given_up() {
    let (fake, url) = serve(vec![Answer::Status(500)]).await;
    let err = judge(&url).judge(&request()).await.expect_err("500s");
    match &err {
        JudgeError::Status { status, url, body } => {
            assert_eq!(*status, 500);
            assert!(url.ends_with("/v1/chat/completions"), "{url}");
            assert!(body.contains("the fake server says no"), "{body}");
        }
        other => panic!("expected a status error, got {other:?}"),
    }
    // The first attempt and `retries` (2) more.
    assert_eq!(fake.requests(), 3);
}

#[tokio::test]
async fn a_429_or_503_then_an_answer_succeeds() {
    let (fake, url) = serve(vec![
        Answer::Status(429),
        Answer::Status(503),
        Answer::Content(r#"{"verdict":"progress","reason":"a later stage fails"}"#),
    ])
    .await;
    let judgement = judge(&url).judge(&request()).await.expect("third time");
    assert_eq!(judgement.verdict, Verdict::Progress);
    assert_eq!(fake.requests(), 3);
}

#[tokio::test]
async fn a_401_is_not_retried() {
    let (fake, url) = serve(vec![Answer::Status(401)]).await;
    let err = judge(&url).judge(&request()).await.expect_err("401");
    assert!(
        matches!(err, JudgeError::Status { status: 401, .. }),
        "{err}"
    );
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn garbage_answers_are_malformed_and_not_retried() {
    for answer in [
        Answer::Content("Sure! The task is progressing nicely."),
        Answer::Content(r#"{"verdict":"stuck","reason":"x"}"#),
        Answer::Body("<html>gateway</html>"),
        Answer::Body(r#"{"choices":[]}"#),
    ] {
        let (fake, url) = serve(vec![answer.clone()]).await;
        let err = judge(&url).judge(&request()).await.expect_err("garbage");
        assert!(matches!(err, JudgeError::Malformed(_)), "{answer:?}: {err}");
        assert_eq!(fake.requests(), 1, "{answer:?}");
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_after_the_retries() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("bound");
    drop(listener);
    let err = judge(&format!("http://{address}/v1"))
        .judge(&request())
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, JudgeError::Unreachable { .. }), "{err}");
}

/// Runs trace lines through `evaluator`; returns (line, kind, reason).
async fn replay(evaluator: &ProgressEvaluator, lines: &[&str]) -> Vec<(u64, String, String)> {
    let mut found = Vec::new();
    for (index, text) in lines.iter().enumerate() {
        let event = Event::from_json(text).expect("valid event");
        let line = index as u64 + 1;
        for detection in evaluator.evaluate(&ObservedEvent::new(line, &event)).await {
            found.push((line, detection.kind.to_string(), detection.reason));
        }
    }
    found
}

const STALE_METRICS: [&str; 4] = [
    r#"{"type":"progress","task":"T","tests_total":12,"tests_failed":3,"goal":"nested tables"}"#,
    r#"{"type":"failure","task":"T","agent":"coder","error":"expected ']' at 1:7"}"#,
    r#"{"type":"failure","task":"T","agent":"coder","error":"expected '=' at 2:3"}"#,
    r#"{"type":"failure","task":"T","agent":"coder","error":"unexpected EOF at 3:1"}"#,
];

#[tokio::test]
async fn the_evaluator_asks_the_server_and_reports_its_verdict() {
    let (fake, url) = serve(vec![Answer::Content(
        r#"{"verdict":"no_progress","reason":"the same tokenizer bug each time"}"#,
    )])
    .await;
    let evaluator = ProgressEvaluator::new(&Config::default()).with_judge(Arc::new(judge(&url)));
    let found = replay(&evaluator, &STALE_METRICS).await;
    // Lines 3 and 4 are undecidable by metrics; both asked (different
    // histories), both judged no_progress.
    assert_eq!(fake.requests(), 2);
    assert_eq!(
        found,
        [3, 4].map(|line| (
            line,
            kinds::NO_PROGRESS.to_owned(),
            "LLM judge (model judge-7b): the same tokenizer bug each time".to_owned()
        ))
    );
    let bodies = fake.bodies();
    let question = bodies[1]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(question.contains("Goal: nested tables"), "{question}");
    assert!(question.contains("tests_failed=3"), "{question}");
}

#[tokio::test]
async fn a_broken_server_falls_back_to_the_metrics_only_verdict() {
    let (fake, url) = serve(vec![Answer::Status(500)]).await;
    let evaluator = ProgressEvaluator::new(&Config::default()).with_judge(Arc::new(judge(&url)));
    let found = replay(&evaluator, &STALE_METRICS).await;
    // Two questions, each tried three times.
    assert_eq!(fake.requests(), 6);
    // Each unanswered failure gets the metrics-only verdict: one loop each
    // (ruling 13), naming the failure the judge could not answer.
    let lines: Vec<(u64, &str)> = found
        .iter()
        .map(|(line, kind, _)| (*line, kind.as_str()))
        .collect();
    assert_eq!(lines, [(3, kinds::NO_PROGRESS), (4, kinds::NO_PROGRESS)]);
    let (first, second) = (&found[0].2, &found[1].2);
    assert!(
        first.starts_with("2 differing failures in a row (lines 2 and 3)"),
        "{first}"
    );
    assert!(
        first.contains("LLM unreachable (model judge-7b) on line 3: HTTP 500"),
        "{first}"
    );
    assert!(
        second.starts_with("3 differing failures in a row (lines 2, 3 and 4)"),
        "{second}"
    );
    assert!(
        second.contains("LLM unreachable (model judge-7b) on line 4: HTTP 500"),
        "{second}"
    );
    for reason in [first, second] {
        assert!(reason.ends_with("; metrics-only verdict"), "{reason}");
    }
}
