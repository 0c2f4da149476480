//! A fake OpenAI-compatible chat-completions server on 127.0.0.1.
//!
//! It stands in for an LLM, which cannot run on a test machine: the
//! answers come from the test's own function, and everything around them
//! is real (a TCP port, HTTP, JSON bodies, statuses, slow answers). It
//! keeps every request's body and `Authorization` header for the test to
//! read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::{Value, json};

/// How the fake server answers one request.
#[derive(Debug, Clone, PartialEq)]
pub enum FakeAnswer {
    /// 200, a chat completion with this message content.
    Content(String),
    /// 200 with this whole body (garbage, say).
    Body(String),
    /// This status, with a short JSON error body.
    Status(u16),
    /// Waits this long, then answers this content.
    Slow(Duration, String),
}

/// What answers: the request's number (0-based) and its JSON body.
type Respond = dyn Fn(usize, &Value) -> FakeAnswer + Send + Sync;

/// A running fake server. It stops when the test's runtime does.
pub struct FakeLlm {
    respond: Box<Respond>,
    requests: AtomicUsize,
    bodies: Mutex<Vec<Value>>,
    auth: Mutex<Vec<Option<String>>>,
    base_url: Mutex<String>,
}

impl std::fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLlm")
            .field("base_url", &*self.base_url.lock())
            .field("requests", &self.requests())
            .finish()
    }
}

impl FakeLlm {
    /// Starts a server on a free loopback port, in the current tokio
    /// runtime, answering each request with `respond`.
    ///
    /// # Panics
    /// When no loopback port can be bound (a broken test machine).
    pub async fn start(
        respond: impl Fn(usize, &Value) -> FakeAnswer + Send + Sync + 'static,
    ) -> Arc<FakeLlm> {
        let fake = Arc::new(FakeLlm {
            respond: Box::new(respond),
            requests: AtomicUsize::new(0),
            bodies: Mutex::new(Vec::new()),
            auth: Mutex::new(Vec::new()),
            base_url: Mutex::new(String::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&fake));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("no loopback port: {err}"));
        let address = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("no local address: {err}"));
        *fake.base_url.lock() = format!("http://{address}/v1");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }

    /// Starts a server as [`FakeLlm::start`] does, on a runtime of its
    /// own (one worker thread) that serves while the caller runs something
    /// else: a `loopguard` command, a benchmark. The server stops when the
    /// returned runtime is dropped.
    ///
    /// # Panics
    /// When the runtime cannot be built or no loopback port can be bound
    /// (a broken test machine).
    pub fn start_in_background(
        respond: impl Fn(usize, &Value) -> FakeAnswer + Send + Sync + 'static,
    ) -> (tokio::runtime::Runtime, Arc<FakeLlm>) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap_or_else(|err| panic!("no runtime for the fake LLM: {err}"));
        let fake = runtime.block_on(FakeLlm::start(respond));
        (runtime, fake)
    }

    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        self.base_url.lock().clone()
    }

    /// How many requests it has had.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Every request's JSON body, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().clone()
    }

    /// Every request's `Authorization` header, in order.
    pub fn auth(&self) -> Vec<Option<String>> {
        self.auth.lock().clone()
    }
}

/// The content of the message with `role` in a chat-completions request
/// body.
pub fn message(body: &Value, role: &str) -> Option<String> {
    body["messages"]
        .as_array()?
        .iter()
        .find(|message| message["role"] == role)
        .and_then(|message| message["content"].as_str())
        .map(str::to_owned)
}

async fn chat(
    State(fake): State<Arc<FakeLlm>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let n = fake.requests.fetch_add(1, Ordering::SeqCst);
    let answer = (fake.respond)(n, &body);
    fake.bodies.lock().push(body);
    fake.auth.lock().push(
        headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
    );
    let completion = |content: &str| {
        Json(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": content}}],
        }))
        .into_response()
    };
    match answer {
        FakeAnswer::Content(content) => completion(&content),
        FakeAnswer::Body(body) => (StatusCode::OK, body).into_response(),
        FakeAnswer::Status(code) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(json!({"error": {"message": "the fake server says no"}})),
        )
            .into_response(),
        FakeAnswer::Slow(delay, content) => {
            tokio::time::sleep(delay).await;
            completion(&content)
        }
    }
}
