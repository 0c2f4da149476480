//! [`ChatClient`] against a real HTTP server on 127.0.0.1 (the fake
//! chat-completions server of `loopguard-test-support`: no LLM runs here,
//! the HTTP, timeouts and retries are real). No test reaches outside the
//! machine.

use std::time::Duration;

use loopguard_llm_client::{ChatClient, LlmError, LlmSettings};
use loopguard_test_support::fake_llm::{FakeAnswer, FakeLlm, message};

fn settings(base_url: &str) -> LlmSettings {
    LlmSettings {
        base_url: base_url.to_owned(),
        model: "judge-7b".to_owned(),
        api_key: Some("sk-test".to_owned()),
        timeout: Duration::from_secs(10),
        retries: 2,
        backoff: Duration::from_millis(5),
    }
}

fn client(base_url: &str) -> ChatClient {
    ChatClient::new(settings(base_url)).expect("a client")
}

#[tokio::test]
async fn it_asks_for_json_at_temperature_zero_and_returns_the_content() {
    let fake = FakeLlm::start(|_, _| FakeAnswer::Content(r#"{"same": true}"#.into())).await;
    let content = client(&fake.base_url())
        .ask("the rules", "the question")
        .await
        .expect("an answer");
    assert_eq!(content, r#"{"same": true}"#);
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 1);
    let body = &bodies[0];
    assert_eq!(body["model"], "judge-7b");
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(message(body, "system").as_deref(), Some("the rules"));
    assert_eq!(message(body, "user").as_deref(), Some("the question"));
    assert_eq!(fake.auth(), vec![Some("Bearer sk-test".to_owned())]);
}

#[tokio::test]
async fn no_key_sends_no_authorization() {
    let fake = FakeLlm::start(|_, _| FakeAnswer::Content("{}".into())).await;
    let client = ChatClient::new(LlmSettings {
        api_key: None,
        ..settings(&fake.base_url())
    })
    .expect("a client");
    client.ask("s", "u").await.expect("an answer");
    assert_eq!(fake.auth(), vec![None]);
}

#[tokio::test]
async fn a_5xx_and_a_429_are_retried_then_answered() {
    let fake = FakeLlm::start(|n, _| match n {
        0 => FakeAnswer::Status(503),
        1 => FakeAnswer::Status(429),
        _ => FakeAnswer::Content("third time".into()),
    })
    .await;
    let content = client(&fake.base_url()).ask("s", "u").await.expect("third");
    assert_eq!(content, "third time");
    assert_eq!(fake.requests(), 3);
}

#[tokio::test]
async fn retries_run_out_with_the_last_status() {
    let fake = FakeLlm::start(|_, _| FakeAnswer::Status(500)).await;
    let err = client(&fake.base_url())
        .ask("s", "u")
        .await
        .expect_err("500s");
    match err {
        LlmError::Status { status, url, body } => {
            assert_eq!(status, 500);
            assert!(url.ends_with("/v1/chat/completions"), "{url}");
            assert!(body.contains("the fake server says no"), "{body}");
        }
        other => panic!("not a status: {other}"),
    }
    assert_eq!(fake.requests(), 3, "the first attempt and two retries");
}

#[tokio::test]
async fn a_401_is_not_retried() {
    let fake = FakeLlm::start(|_, _| FakeAnswer::Status(401)).await;
    let err = client(&fake.base_url())
        .ask("s", "u")
        .await
        .expect_err("401");
    assert!(matches!(err, LlmError::Status { status: 401, .. }), "{err}");
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn a_slow_answer_times_out_without_retrying() {
    let fake = FakeLlm::start(|_, _| FakeAnswer::Slow(Duration::from_secs(5), "late".into())).await;
    let client = ChatClient::new(LlmSettings {
        timeout: Duration::from_millis(200),
        ..settings(&fake.base_url())
    })
    .expect("a client");
    let err = client.ask("s", "u").await.expect_err("too slow");
    assert_eq!(err, LlmError::Timeout(Duration::from_millis(200)));
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn a_body_that_is_no_completion_is_malformed() {
    let fake = FakeLlm::start(|_, _| FakeAnswer::Body("<html>proxy error</html>".into())).await;
    let err = client(&fake.base_url())
        .ask("s", "u")
        .await
        .expect_err("garbage");
    assert!(matches!(err, LlmError::Malformed(_)), "{err}");
    assert_eq!(fake.requests(), 1);
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_named() {
    // Bind a port, then free it: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = listener.local_addr().expect("bound");
    drop(listener);
    let client = ChatClient::new(LlmSettings {
        retries: 1,
        ..settings(&format!("http://{address}/v1/"))
    })
    .expect("a client");
    assert_eq!(
        client.endpoint(),
        format!("http://{address}/v1/chat/completions")
    );
    let err = client.ask("s", "u").await.expect_err("nobody there");
    match &err {
        LlmError::Unreachable { url, .. } => assert_eq!(url, client.endpoint()),
        other => panic!("not unreachable: {other}"),
    }
    assert!(err.to_string().contains(&address.to_string()), "{err}");
}
