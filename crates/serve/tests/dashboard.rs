//! The dashboard over a real socket: the pages and their headers, the
//! dashboard data against `GET /v1/tasks`, the live feed (server-sent
//! events) and the token; then the page itself in headless Chromium (Debian's
//! `chromium`, driven over the DevTools protocol on a pipe): its rendered
//! DOM must show what the API says, decisions answered after it loaded must
//! show up without a reload, and the token is taken from the form or the
//! address's fragment. Screenshots go to the target folder (or
//! `LOOPGUARD_SCREENSHOTS`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use loopguard_host::MemoryStore;
use loopguard_serve::ServeOptions;
use reqwest::StatusCode;
use serde_json::Value;

mod common;

use common::Running;

impl Running {
    /// A GET with the token, if the server has one.
    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.authed(reqwest::Method::GET, path)
    }

    async fn json(&self, path: &str) -> Value {
        let answer = self.get(path).send().await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK, "{path}");
        answer.json().await.expect("JSON")
    }

    async fn post_ndjson(&self, body: &str) -> Vec<Value> {
        let request = self
            .authed(reqwest::Method::POST, "/v1/events")
            .header("content-type", "application/x-ndjson")
            .body(body.to_owned());
        let answer = request.send().await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK);
        let text = answer.text().await.expect("a body");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("JSON lines"))
            .collect()
    }
}

fn durable() -> Arc<MemoryStore> {
    Arc::new(MemoryStore::durable())
}

fn with_token(token: &str) -> ServeOptions {
    ServeOptions {
        token: Some(token.into()),
        ..ServeOptions::default()
    }
}

/// The repository's trace folder.
fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/traces")
}

/// Several of the repository's traces as one NDJSON body, each trace's
/// tasks renamed `trace:task` so they stay apart, after one task whose id
/// is markup (which the page must show as text). The events' times are
/// spread over the last hour, 30 s apart, so the timeline has a shape.
fn mixed_trace() -> String {
    let mut out = String::new();
    let mut at = loopguard_core_types::Timestamp::now().as_millis() - 55 * 60_000;
    let mut stamp = |event: &mut Value| {
        event["ts"] = Value::String(loopguard_core_types::Timestamp(at).to_rfc3339());
        at += 30_000;
    };
    let markup = r#"<img src=x onerror="document.title='owned'">"#;
    for _ in 0..3 {
        let mut event = serde_json::json!({
            "type": "failure", "task": markup, "agent": "coder", "error": "same <b>error</b>",
        });
        stamp(&mut event);
        out.push_str(&event.to_string());
        out.push('\n');
    }
    for name in [
        "three_agent_rounds",
        "agent_pair",
        "exact_failure",
        "human_gate",
        "oscillation",
        "question_returns",
        "hub_team",
        "progress",
    ] {
        let path = traces().join(format!("{name}.jsonl"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let mut event: Value = serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{}: not JSON ({err}): {line}", path.display()));
            let task = event["task"].as_str().unwrap_or("T").to_owned();
            event["task"] = Value::String(format!("{name}:{task}"));
            stamp(&mut event);
            out.push_str(&event.to_string());
            out.push('\n');
        }
    }
    out
}

/// Task id → (status, loop_count, pivots, detections, last kind, last line)
/// as `GET /v1/tasks` lists them.
fn task_table(tasks: &Value) -> Vec<(String, String, u64, u64, u64, String, String)> {
    let mut rows: Vec<_> = tasks["tasks"]
        .as_array()
        .expect("a task list")
        .iter()
        .map(|task| {
            (
                task["task"].as_str().expect("an id").to_owned(),
                task["status"].as_str().expect("a status").to_owned(),
                task["loop_count"].as_u64().expect("a count"),
                task["pivots"].as_u64().expect("a count"),
                task["detections"].as_u64().expect("a count"),
                task["last_detection"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                task["last_detection"]["line"]
                    .as_u64()
                    .map(|line| line.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn pages_carry_the_csp_and_assets_their_content_types_without_a_token() {
    let server = Running::with_store(with_token("s3cret"), durable()).await;
    let anonymous = reqwest::Client::new();
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/tasks/T1", "text/html; charset=utf-8"),
        ("/tasks/a%20b%3Cc", "text/html; charset=utf-8"),
        ("/assets/dashboard.js", "text/javascript; charset=utf-8"),
        ("/assets/dashboard.css", "text/css; charset=utf-8"),
        ("/assets/favicon.svg", "image/svg+xml"),
    ] {
        let answer = anonymous
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK, "{path} needs no token");
        let headers = answer.headers().clone();
        assert_eq!(headers["content-type"], content_type, "{path}");
        let csp = headers["content-security-policy"].to_str().expect("ASCII");
        assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        let body = answer.text().await.expect("a body");
        if content_type.starts_with("text/html") {
            // No inline script: every script element loads a file.
            for script in body.split("<script").skip(1) {
                let tag = script.split('>').next().unwrap_or_default();
                assert!(
                    tag.contains("src=\"/assets/"),
                    "{path}: inline <script{tag}>"
                );
            }
            assert!(!body.contains(" style="), "{path}: no inline style");
        }
    }
    // The data is behind the token.
    for path in ["/v1/dashboard", "/v1/live"] {
        let answer = anonymous
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{path}");
        let wrong = anonymous
            .get(format!("{}{path}", server.url))
            .bearer_auth("s3cret!")
            .send()
            .await
            .expect("an answer");
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    assert_eq!(
        server
            .get("/v1/dashboard")
            .send()
            .await
            .expect("an answer")
            .status(),
        StatusCode::OK
    );
    server.stop().await;
}

/// Reads the event stream until `count` events named `name` came, returning
/// each one's data; `None` when the stream ends first.
async fn next_events(
    stream: &mut reqwest::Response,
    buffer: &mut String,
    name: &str,
    count: usize,
) -> Option<Vec<String>> {
    let mut found = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut event = "message";
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    event = value.trim();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.trim_start().to_owned());
                }
            }
            if event == name {
                found.push(data.join("\n"));
                if found.len() == count {
                    return Some(found);
                }
            }
        }
        let chunk = stream.chunk().await.expect("the stream reads")?;
        buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
    }
}

#[tokio::test]
async fn live_streams_each_decision_answered_after_subscribing_and_ends_on_shutdown() {
    let server = Running::with_store(with_token("s3cret"), durable()).await;
    let mut live = server.get("/v1/live").send().await.expect("an answer");
    assert_eq!(live.status(), StatusCode::OK);
    assert_eq!(live.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    let ready = next_events(&mut live, &mut buffer, "ready", 1)
        .await
        .expect("a ready event");
    let ready: Value = serde_json::from_str(&ready[0]).expect("JSON");
    assert!(ready["backlog"].as_u64().is_some_and(|backlog| backlog > 0));

    let failure = r#"{"type":"failure","task":"L1","agent":"coder","error":"boom"}"#;
    let answers = server.post_ndjson(&format!("{failure}\n{failure}\n")).await;
    let streamed = next_events(&mut live, &mut buffer, "decision", 2)
        .await
        .expect("two decisions");
    let streamed: Vec<Value> = streamed
        .iter()
        .map(|data| serde_json::from_str(data).expect("a JSON decision"))
        .collect();
    assert_eq!(
        streamed, answers,
        "the stream carries the decisions as answered"
    );
    assert_eq!(streamed[1]["detections"][0]["kind"], "exact_failure");

    // A human event by its own route is streamed too.
    let human = server
        .client
        .post(format!("{}/v1/tasks/L1/human", server.url))
        .bearer_auth("s3cret")
        .send()
        .await
        .expect("an answer");
    assert_eq!(human.status(), StatusCode::OK);
    let human: Value = human.json().await.expect("a decision");
    let streamed = next_events(&mut live, &mut buffer, "decision", 1)
        .await
        .expect("the human decision");
    assert_eq!(
        serde_json::from_str::<Value>(&streamed[0]).expect("JSON"),
        human
    );

    // Shutdown ends the stream instead of waiting on it.
    let finished = server.stop().await;
    assert_eq!(finished.lost, 0);
    assert!(
        next_events(&mut live, &mut buffer, "decision", 1)
            .await
            .is_none(),
        "the stream ends with the server"
    );
}

#[tokio::test]
async fn live_streams_are_bounded_and_hold_no_place_in_the_request_queue() {
    // One request at a time: the open streams must not hold that place.
    let server = Running::with_store(
        ServeOptions {
            queue: 1,
            ..ServeOptions::default()
        },
        durable(),
    )
    .await;
    let mut open = Vec::new();
    let refused = loop {
        let answer = server.get("/v1/live").send().await.expect("an answer");
        if answer.status() != StatusCode::OK {
            break answer;
        }
        open.push(answer);
        assert!(open.len() <= 64, "more than 64 streams at once");
    };
    assert_eq!(open.len(), 64);
    let tasks = server.get("/v1/tasks").send().await.expect("an answer");
    assert_eq!(
        tasks.status(),
        StatusCode::OK,
        "the streams take no queue place"
    );
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "5");
    // A stream that closes frees its place once the server notices (its
    // next write fails): a decision makes every stream write.
    drop(open.pop());
    let failure = r#"{"type":"failure","task":"B","agent":"coder","error":"boom"}"#;
    let mut again = None;
    for _ in 0..1000 {
        server.post_ndjson(&format!("{failure}\n")).await;
        let answer = server.get("/v1/live").send().await.expect("an answer");
        if answer.status() == StatusCode::OK {
            again = Some(answer);
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(again.is_some(), "the closed stream's place is free again");
    drop(open);
    server.stop().await;
}

#[tokio::test]
async fn the_dashboard_agrees_with_the_tasks_route_and_survives_a_restart() {
    let store = durable();
    let server = Running::with_store(ServeOptions::default(), store.clone()).await;
    let answers = server.post_ndjson(&mixed_trace()).await;
    let detections: usize = answers
        .iter()
        .map(|answer| answer["detections"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(detections > 10, "the traces detect loops: {detections}");

    let tasks = server.json("/v1/tasks").await;
    let dashboard = server.json("/v1/dashboard").await;
    assert_eq!(task_table(&dashboard), task_table(&tasks));
    assert_eq!(
        dashboard["totals"]["tasks"].as_u64(),
        tasks["tasks"].as_array().map(|t| t.len() as u64)
    );
    assert_eq!(dashboard["totals"]["detections"], detections);
    let by_status = dashboard["totals"]["by_status"]
        .as_object()
        .expect("counts");
    assert_eq!(
        by_status.values().filter_map(Value::as_u64).sum::<u64>(),
        dashboard["totals"]["tasks"].as_u64().expect("a count")
    );
    // Latest activity first.
    let activity: Vec<&str> = dashboard["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|task| task["last_activity"].as_str().expect("a time"))
        .collect();
    let times: Vec<i64> = activity
        .iter()
        .map(|text| {
            loopguard_core_types::Timestamp::parse_rfc3339(text)
                .expect("RFC 3339")
                .as_millis()
        })
        .collect();
    assert!(
        times.windows(2).all(|pair| pair[0] >= pair[1]),
        "{activity:?}"
    );

    // The recent detections, newest first, are the decisions' detections.
    let recent = dashboard["recent_detections"].as_array().expect("a list");
    assert_eq!(recent.len(), detections.min(200));
    let last_answered = answers
        .iter()
        .rev()
        .find(|answer| {
            answer["detections"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        })
        .expect("a decision with detections");
    assert_eq!(recent[0]["task"], last_answered["task"]);
    assert_eq!(recent[0]["line"], last_answered["line"]);
    let last_detection = last_answered["detections"]
        .as_array()
        .and_then(|d| d.last())
        .expect("a detection");
    assert_eq!(recent[0]["kind"], last_detection["kind"]);
    assert_eq!(recent[0]["reason"], last_detection["reason"]);
    assert_eq!(recent[0]["evidence"], last_detection["evidence"]);

    // The timeline counts the detections in its hour, per kind.
    let timeline = &dashboard["timeline"];
    let start =
        loopguard_core_types::Timestamp::parse_rfc3339(timeline["start"].as_str().expect("a time"))
            .expect("RFC 3339");
    let end =
        loopguard_core_types::Timestamp::parse_rfc3339(timeline["end"].as_str().expect("a time"))
            .expect("RFC 3339");
    assert_eq!(end.as_millis() - start.as_millis(), 3_600_000);
    let in_window = recent
        .iter()
        .filter(|detection| {
            let at = loopguard_core_types::Timestamp::parse_rfc3339(
                detection["at"].as_str().expect("a time"),
            )
            .expect("RFC 3339");
            at >= start && at < end
        })
        .count() as u64;
    let series = timeline["series"].as_array().expect("series");
    let charted: u64 = series
        .iter()
        .map(|series| {
            let counts = series["counts"].as_array().expect("counts");
            assert_eq!(counts.len(), 60);
            let sum: u64 = counts.iter().filter_map(Value::as_u64).sum();
            assert_eq!(series["total"].as_u64(), Some(sum));
            sum
        })
        .sum();
    assert_eq!(charted, in_window);
    assert!(charted > 0);

    // The matrix: the multi-agent cycle's agents loop with each other.
    let agents = &dashboard["agents"];
    let names: Vec<&str> = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = |name: &str| {
        names
            .iter()
            .position(|agent| *agent == name)
            .unwrap_or_else(|| panic!("{name} in {names:?}"))
    };
    let count = |a: &str, b: &str| agents["counts"][at(a)][at(b)].as_u64().expect("a count");
    assert!(count("planner", "coder") > 0);
    assert_eq!(count("planner", "coder"), count("coder", "planner"));
    assert!(count("coder", "coder") >= count("coder", "reviewer"));
    // The detections' agents: agent_pair's pair, topic_cycle's latest
    // handoff (and the multi-agent cycle's), the hub team's pair.
    assert!(count("coder", "reviewer") > 0);
    assert!(count("billing", "tax") > 0);
    assert!(count("tester", "planner") > 0);
    assert!(count("orchestrator", "web_surfer") > 0);

    // A new server on the same store shows the same.
    server.stop().await;
    let again = Running::with_store(ServeOptions::default(), store).await;
    let after = again.json("/v1/dashboard").await;
    for key in ["totals", "tasks", "recent_detections", "timeline", "agents"] {
        assert_eq!(after[key], dashboard[key], "{key} after a restart");
    }
    again.stop().await;
}

// ---- headless Chromium ----------------------------------------------------

/// Debian's Chromium: found on the PATH (or `LOOPGUARD_CHROMIUM`); when
/// missing and running as root, installed with apt-get; otherwise the test
/// fails saying how to install it.
fn chromium() -> PathBuf {
    static FOUND: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut found = FOUND
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = found.as_ref() {
        return path.clone();
    }
    let find = || {
        if let Some(path) = std::env::var_os("LOOPGUARD_CHROMIUM") {
            return Some(PathBuf::from(path));
        }
        let dirs = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&dirs)
            .chain([PathBuf::from("/usr/bin")])
            .flat_map(|dir| {
                ["chromium", "chromium-browser"]
                    .into_iter()
                    .map(move |name| dir.join(name))
            })
            .find(|path| path.is_file())
    };
    let path = find().or_else(|| {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
        if !root {
            return None;
        }
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "chromium"])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|status| status.success())
        };
        if !install() {
            let _ = Command::new("apt-get").arg("update").status();
            install();
        }
        find()
    });
    let path = path.unwrap_or_else(|| {
        panic!(
            "this test needs Debian's Chromium (`chromium` on the PATH, or LOOPGUARD_CHROMIUM \
             naming the binary): install it with `sudo apt-get install chromium` (as root, the \
             test installs it itself)"
        )
    });
    *found = Some(path.clone());
    path
}

/// When the page has loaded its data and follows the live feed.
const LOADED: &str = "document.body.dataset.loaded === 'true' \
                      && document.getElementById('live').dataset.state === 'live'";
/// When the page shows the token form.
const FORM_SHOWN: &str = "!document.getElementById('token-form').hidden";

/// The DOM of `url` in headless Chromium (as HTML) once `ready` is true on
/// the page.
fn rendered(url: &str, ready: &str) -> String {
    let mut browser = Browser::open(url);
    browser.wait_for(ready, "that it is ready");
    match browser.eval("document.documentElement.outerHTML") {
        Value::String(html) => html,
        other => panic!("the page's HTML: {other}"),
    }
}

/// A screenshot of `url` in a window of `size` (width, height) pixels,
/// saved to `file` (Chromium's own `--screenshot`: the page as a person
/// sees it after its scripts ran).
/// Each `(file name, path, window size)` of `shots` as a screenshot of
/// `server`'s page into `dir`, replacing an older one.
async fn take_screenshots<const N: usize>(
    server: &Running,
    dir: &Path,
    shots: [(&str, String, (u32, u32)); N],
) {
    for (name, path, size) in shots {
        let file = dir.join(name);
        let _ = std::fs::remove_file(&file);
        let url = format!("{}{path}", server.url);
        tokio::task::spawn_blocking(move || screenshot(&url, &file, size))
            .await
            .expect("chromium ran");
    }
}

fn screenshot(url: &str, file: &Path, size: (u32, u32)) {
    let profile = tempfile::tempdir().expect("a temporary profile");
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", file.display()))
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let png = std::fs::read(file).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{} is a PNG", file.display());
}

/// `name="value"` attributes of the start tag that contains `marker`, for
/// every such tag in `dom`, with the entities Chromium writes decoded.
fn tags_with(dom: &str, marker: &str) -> Vec<Vec<(String, String)>> {
    let mut tags = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find(marker) {
        let start = rest[..at].rfind('<').expect("inside a tag");
        let end = at + rest[at..].find('>').expect("a closed tag");
        tags.push(attributes(&rest[start..end]));
        rest = &rest[end..];
    }
    tags
}

fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = tag;
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq]
            .rsplit(|c: char| c.is_whitespace())
            .next()
            .unwrap_or_default()
            .to_owned();
        let value_start = eq + 2;
        let value_end = value_start + rest[value_start..].find('"').expect("a closed value");
        let value = rest[value_start..value_end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&nbsp;", "\u{a0}")
            .replace("&amp;", "&");
        out.push((name, value));
        rest = &rest[value_end + 1..];
    }
    out
}

fn attr<'a>(tag: &'a [(String, String)], name: &str) -> &'a str {
    tag.iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
        .unwrap_or_else(|| panic!("no {name} in {tag:?}"))
}

/// Where screenshots go: `LOOPGUARD_SCREENSHOTS` if set (e.g. docs/images),
/// else the test's target folder.
fn screenshot_dir() -> PathBuf {
    std::env::var_os("LOOPGUARD_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_renders_the_tasks_and_counts_the_api_reports() {
    let server = Running::with_store(ServeOptions::default(), durable()).await;
    server.post_ndjson(&mixed_trace()).await;
    let expected = task_table(&server.json("/v1/tasks").await);
    let dashboard = server.json("/v1/dashboard").await;

    let url = format!("{}/", server.url);
    let dom = tokio::task::spawn_blocking(move || rendered(&url, LOADED))
        .await
        .expect("chromium ran");
    assert!(
        dom.contains("data-loaded=\"true\""),
        "the page loaded its data:\n{dom}"
    );
    assert!(
        dom.contains("id=\"live\" data-state=\"live\""),
        "the page follows GET /v1/live"
    );
    let rows: Vec<_> = tags_with(&dom, "class=\"task-row")
        .into_iter()
        .map(|row| {
            let number = |name: &str| attr(&row, name).parse::<u64>().expect("a number");
            (
                attr(&row, "data-task").to_owned(),
                attr(&row, "data-status").to_owned(),
                number("data-loop-count"),
                number("data-pivots"),
                number("data-detections"),
                attr(&row, "data-last-kind").to_owned(),
                attr(&row, "data-last-line").to_owned(),
            )
        })
        .collect();
    let mut sorted = rows.clone();
    sorted.sort();
    assert_eq!(
        sorted, expected,
        "the table shows every task as GET /v1/tasks"
    );
    // Newest activity first, as the dashboard data orders them.
    let order: Vec<&str> = dashboard["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|task| task["task"].as_str())
        .collect();
    let shown: Vec<&str> = rows.iter().map(|row| row.0.as_str()).collect();
    assert_eq!(shown, order);
    // The totals cards and the lists.
    let total = |key: &str| {
        tags_with(&dom, &format!("data-total=\"{key}\""))
            .first()
            .map(|tag| attr(tag, "data-value").to_owned())
            .unwrap_or_else(|| panic!("a {key} card"))
    };
    assert_eq!(total("tasks"), expected.len().to_string());
    assert_eq!(
        total("detections"),
        dashboard["totals"]["detections"].to_string()
    );
    let listed = tags_with(&dom, "class=\"detection\"").len();
    assert_eq!(
        listed,
        dashboard["recent_detections"]
            .as_array()
            .map_or(0, Vec::len)
            .min(40)
    );
    let cells = tags_with(&dom, "data-a=\"");
    let agents = dashboard["agents"]["agents"].as_array().map_or(0, Vec::len);
    assert_eq!(
        cells.len(),
        agents * agents,
        "the matrix has a cell per pair"
    );
    let bars: u64 = tags_with(&dom, "<rect ")
        .iter()
        .map(|rect| attr(rect, "data-count").parse::<u64>().expect("a count"))
        .sum();
    let charted: u64 = dashboard["timeline"]["series"]
        .as_array()
        .expect("series")
        .iter()
        .filter_map(|series| series["total"].as_u64())
        .sum();
    assert_eq!(bars, charted, "the chart draws every detection of its hour");
    // Markup in a task id is text: no element was made of it.
    assert!(!dom.contains("<img"), "a task id became markup");
    assert!(
        dom.contains("<title>loopguard · dashboard</title>"),
        "no script ran from the data"
    );
    assert!(!dom.contains("<b>error"), "a reason became markup");
    assert!(
        rows.iter().any(|row| row.0.starts_with("<img src=x")),
        "the markup task is listed as text"
    );

    // The task page: its status, counters, timeline and cycle log.
    let task = "human_gate:T1";
    let report = server.json(&format!("/v1/tasks/{task}")).await;
    let url = format!("{}/tasks/{}", server.url, "human_gate:T1");
    let page = tokio::task::spawn_blocking(move || rendered(&url, LOADED))
        .await
        .expect("chromium ran");
    let head = tags_with(&page, "id=\"task\"");
    let head = head.first().expect("the task section");
    assert_eq!(attr(head, "data-task"), task);
    assert_eq!(
        attr(head, "data-status"),
        report["status"].as_str().expect("a status")
    );
    assert_eq!(
        attr(head, "data-loop-count"),
        report["loop_count"].to_string()
    );
    let detections = report["detections"].as_array().map_or(0, Vec::len);
    assert_eq!(attr(head, "data-detections"), detections.to_string());
    let timeline = server.json(&format!("/v1/tasks/{task}/timeline")).await;
    let entries = timeline["entries"].as_array().expect("entries");
    let resets = entries
        .iter()
        .filter(|entry| entry["record"]["entry"] == "reset")
        .count();
    assert_eq!(entries.len(), detections + resets);
    assert!(resets > 0, "the human event reset the counters: {timeline}");
    // Each detection item names its kind (resets and live decisions do not).
    assert_eq!(tags_with(&page, "data-kind=\"").len(), detections);
    assert_eq!(tags_with(&page, "data-reset=\"human\"").len(), resets);
    assert_eq!(
        tags_with(&page, "class=\"episode\"").len(),
        report["cycle_log"].as_array().map_or(0, Vec::len)
    );

    // Screenshots, for a person (and docs/serve.md).
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).expect("the screenshot folder");
    take_screenshots(
        &server,
        &dir,
        [
            ("dashboard.png", "/".to_owned(), (1400, 1800)),
            ("dashboard-task.png", format!("/tasks/{task}"), (1400, 1000)),
        ],
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_asks_for_the_token_or_takes_it_from_the_fragment() {
    let server = Running::with_store(with_token("s3 cr/et"), durable()).await;
    server
        .post_ndjson(&format!(
            "{}\n{}\n",
            r#"{"type":"failure","task":"secret-task","agent":"coder","error":"boom"}"#,
            r#"{"type":"failure","task":"team a/run 7","agent":"coder","error":"boom"}"#
        ))
        .await;

    // Without the token: the form, no data.
    let url = format!("{}/", server.url);
    let dom = tokio::task::spawn_blocking(move || rendered(&url, FORM_SHOWN))
        .await
        .expect("chromium ran");
    let form = tags_with(&dom, "id=\"token-form\"");
    let form = form.first().expect("the token form");
    assert!(
        !form.iter().any(|(name, _)| name == "hidden"),
        "the form is shown: {form:?}"
    );
    assert!(!dom.contains("secret-task"), "no data without the token");

    // With `#token=...`: the data, and the form stays hidden.
    let url = format!("{}/#token=s3%20cr%2Fet", server.url);
    let dom = tokio::task::spawn_blocking(move || rendered(&url, LOADED))
        .await
        .expect("chromium ran");
    assert!(dom.contains("data-loaded=\"true\""), "loaded:\n{dom}");
    assert!(
        dom.contains("id=\"live\" data-state=\"live\""),
        "the live stream is read with the token"
    );
    let mut rows: Vec<String> = tags_with(&dom, "class=\"task-row")
        .iter()
        .map(|row| attr(row, "data-task").to_owned())
        .collect();
    rows.sort();
    assert_eq!(rows, ["secret-task", "team a/run 7"]);
    let form = tags_with(&dom, "id=\"token-form\"");
    assert!(
        form.first()
            .is_some_and(|form| form.iter().any(|(name, _)| name == "hidden")),
        "the form stays hidden: {form:?}"
    );

    // A task page, for an id with a slash and a space, with the token.
    let url = format!("{}/tasks/team%20a%2Frun%207#token=s3%20cr%2Fet", server.url);
    let page = tokio::task::spawn_blocking(move || rendered(&url, LOADED))
        .await
        .expect("chromium ran");
    let head = tags_with(&page, "id=\"task\"");
    let head = head.first().expect("the task section");
    assert_eq!(attr(head, "data-task"), "team a/run 7");
    assert_eq!(attr(head, "data-detections"), "0");

    // What a person sees without the token.
    let file = screenshot_dir().join("dashboard-token.png");
    let url = format!("{}/", server.url);
    tokio::task::spawn_blocking(move || screenshot(&url, &file, (1200, 700)))
        .await
        .expect("chromium ran");
    server.stop().await;
}

/// Headless Chromium driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: commands in on fd 3, answers out on fd 4,
/// each message ending in a NUL byte), through two named pipes: no
/// WebSocket client needed. One page, attached in flat mode.
struct Browser {
    child: std::process::Child,
    commands: std::fs::File,
    answers: std::io::BufReader<std::fs::File>,
    session: String,
    next_id: u64,
    _dir: tempfile::TempDir,
}

impl Browser {
    /// Opens `url` in a new headless Chromium.
    fn open(url: &str) -> Browser {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let (commands_path, answers_path) = (dir.path().join("in"), dir.path().join("out"));
        for fifo in [&commands_path, &answers_path] {
            let made = Command::new("mkfifo")
                .arg(fifo)
                .status()
                .expect("mkfifo runs");
            assert!(made.success(), "mkfifo {}", fifo.display());
        }
        let profile = dir.path().join("profile");
        // The shell opens the pipes as fds 3 and 4, then becomes Chromium.
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<"$LG_IN" 4>"$LG_OUT""#)
            .arg(chromium())
            .args([
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--remote-debugging-pipe",
                "--window-size=1400,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .env("LG_IN", &commands_path)
            .env("LG_OUT", &answers_path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromium starts");
        // The same order as the shell's: fd 3 (our writer), then fd 4.
        let commands = std::fs::OpenOptions::new()
            .write(true)
            .open(&commands_path)
            .expect("the command pipe");
        let answers =
            std::io::BufReader::new(std::fs::File::open(&answers_path).expect("the answer pipe"));
        let mut browser = Browser {
            child,
            commands,
            answers,
            session: String::new(),
            next_id: 0,
            _dir: dir,
        };
        let target = browser.call(
            None,
            "Target.createTarget",
            serde_json::json!({ "url": url }),
        );
        let target = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = browser.call(
            None,
            "Target.attachToTarget",
            serde_json::json!({ "targetId": target, "flatten": true }),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        browser
    }

    /// Sends one command and returns its result (events in between are
    /// skipped).
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        use std::io::{BufRead, Write};
        self.next_id += 1;
        let id = self.next_id;
        let mut message = serde_json::json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::String(session.to_owned());
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        self.commands
            .write_all(&bytes)
            .expect("chromium reads commands");
        loop {
            let mut answer = Vec::new();
            let read = self
                .answers
                .read_until(0, &mut answer)
                .expect("chromium answers");
            assert!(read > 0, "chromium closed the pipe during {method}");
            answer.pop();
            let answer: Value = serde_json::from_slice(&answer).expect("a JSON message");
            if answer["id"] == id {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression on the page.
    fn eval(&mut self, expression: &str) -> Value {
        let session = self.session.clone();
        let result = self.call(
            Some(&session),
            "Runtime.evaluate",
            serde_json::json!({ "expression": expression, "returnByValue": true }),
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true on the page: asks again every
    /// 50 ms, and gives up (failing with `what`) after 1200 asks, a bound
    /// on a hang, not an assertion on time.
    fn wait_for(&mut self, expression: &str, what: &str) {
        for _ in 0..1200 {
            if self.eval(expression) == Value::Bool(true) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the page never showed {what} ({expression})");
    }
}

impl Drop for Browser {
    /// Asks Chromium to close; kills it if it has not after a while.
    fn drop(&mut self) {
        use std::io::Write;
        self.next_id += 1;
        let close = format!(r#"{{"id":{},"method":"Browser.close"}}"#, self.next_id);
        let _ = self.commands.write_all(format!("{close}\0").as_bytes());
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_shows_new_decisions_live_without_a_reload() {
    let server = Running::with_store(with_token("s3cret"), durable()).await;
    let failure = |task: &str| {
        format!(r#"{{"type":"failure","task":"{task}","agent":"coder","error":"boom"}}"#)
    };
    server.post_ndjson(&format!("{}\n", failure("early"))).await;
    let url = format!("{}/#token=s3cret", server.url);
    let mut browser = tokio::task::spawn_blocking(move || {
        let mut browser = Browser::open(&url);
        browser.wait_for(
            "document.body.dataset.loaded === 'true' && document.getElementById('live').dataset.state === 'live'",
            "its data and the live feed",
        );
        browser
    })
    .await
    .expect("chromium ran");
    assert_eq!(
        browser.eval("location.hash"),
        Value::String(String::new()),
        "the token left the address bar"
    );
    assert_eq!(
        browser.eval("sessionStorage.getItem('loopguard.token')"),
        Value::String("s3cret".into())
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('tr.task-row').length"),
        Value::from(1)
    );

    // Decisions answered now reach the page over /v1/live: a new task and
    // the second failure's detection show up without a reload.
    server
        .post_ndjson(&format!("{}\n{}\n", failure("late"), failure("early")))
        .await;
    let browser = tokio::task::spawn_blocking(move || {
        browser.wait_for(
            "document.querySelector('tr.task-row[data-task=\"late\"]') !== null \
             && document.querySelector('tr.task-row[data-task=\"early\"]').dataset.detections === '1'",
            "the new task and the new detection",
        );
        let live = browser.eval("document.getElementById('live-text').textContent");
        assert_eq!(live, Value::String("live · 2 decisions".into()));
        let kinds = browser.eval(
            "Array.from(document.querySelectorAll('li.detection')).map(li => li.dataset.kind).join()",
        );
        assert_eq!(kinds, Value::String("exact_failure".into()));
        browser
    })
    .await
    .expect("chromium ran");
    drop(browser);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_takes_the_token_from_its_form_and_asks_again_when_refused() {
    let server = Running::with_store(with_token("s3cret"), durable()).await;
    server
        .post_ndjson(&format!(
            "{}\n",
            r#"{"type":"failure","task":"T1","agent":"coder","error":"boom"}"#
        ))
        .await;
    let url = format!("{}/", server.url);
    let browser = tokio::task::spawn_blocking(move || {
        let mut browser = Browser::open(&url);
        let form_shown = "!document.getElementById('token-form').hidden";
        browser.wait_for(form_shown, "the token form");
        assert_eq!(
            browser.eval("document.querySelectorAll('tr.task-row').length"),
            Value::from(0)
        );
        let submit = |browser: &mut Browser, token: &str| {
            browser.eval(&format!(
                "document.getElementById('token-input').value = {token:?}; \
                 document.getElementById('token-form').requestSubmit(); true"
            ));
        };
        submit(&mut browser, "wrong");
        browser.wait_for(
            "!document.getElementById('token-error').hidden",
            "that the token was refused",
        );
        assert_eq!(
            browser.eval("document.getElementById('token-error').textContent"),
            Value::String("The token was refused; enter it again.".into())
        );
        submit(&mut browser, "s3cret");
        browser.wait_for(
            "document.body.dataset.loaded === 'true' \
             && document.querySelector('tr.task-row[data-task=\"T1\"]') !== null",
            "the tasks",
        );
        assert_eq!(browser.eval(form_shown), Value::Bool(false));
        assert_eq!(
            browser.eval("sessionStorage.getItem('loopguard.token')"),
            Value::String("s3cret".into())
        );
        browser
    })
    .await
    .expect("chromium ran");
    drop(browser);
    server.stop().await;
}

// ---- spend (trace format 1.2, ruling 18) -----------------------------------

/// A budget on the spend in loops and a price for the model the trace
/// names without a cost.
const SPEND_CONFIG: &str = "[budget]\nmax_loop_cost_usd = 0.05\n\
                            [pricing.gpt-4o-mini]\ninput_per_mtok = 0.15\noutput_per_mtok = 0.6\n";

/// tests/traces/spend_budget.jsonl and what its events spent, by hand:
/// (tokens, dollars), each event's own cost else its tokens at the price
/// of SPEND_CONFIG.
fn spend_trace() -> (String, u64, f64) {
    let text = std::fs::read_to_string(traces().join("spend_budget.jsonl")).expect("the trace");
    let (mut tokens, mut cost) = (0, 0.0);
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).expect("JSON");
        let usage = &event["usage"];
        let input = usage["input_tokens"].as_u64().unwrap_or(0);
        let output = usage["output_tokens"].as_u64().unwrap_or(0);
        tokens += input + output;
        cost += usage["cost_usd"]
            .as_f64()
            .unwrap_or((input as f64 * 0.15 + output as f64 * 0.6) / 1e6);
    }
    (text, tokens, cost)
}

/// `expression` evaluated on the page as JSON (it must return a string
/// from `JSON.stringify`).
fn json_of(browser: &mut Browser, expression: &str) -> Value {
    match browser.eval(&format!("JSON.stringify({expression})")) {
        Value::String(text) => serde_json::from_str(&text).expect("JSON from the page"),
        other => panic!("{expression}: {other}"),
    }
}

fn assert_near(got: &Value, expected: f64, what: &str) {
    let got = match got {
        Value::String(text) => text.parse::<f64>().ok(),
        other => other.as_f64(),
    };
    assert!(
        got.is_some_and(|got| (got - expected).abs() < 1e-9),
        "{what}: {got:?} != {expected}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_chromium_shows_the_spend_the_costliest_loops_and_spend_over_time() {
    let config = loopguard_config::Config::from_toml_str(SPEND_CONFIG).expect("a valid config");
    let server = Running::with_config(ServeOptions::default(), durable(), config).await;
    let (trace, tokens, cost) = spend_trace();
    server.post_ndjson(&trace).await;
    let dashboard = server.json("/v1/dashboard").await;
    let spend = &dashboard["spend"];
    assert_eq!(spend["tasks"], 2, "{spend}");
    assert_near(&spend["total"]["cost_usd"], cost, "the API's cost");
    let loops = spend["costliest_loops"].as_array().expect("loops");
    assert!(!loops.is_empty(), "{spend}");

    let url = format!("{}/", server.url);
    let (cards, rows) = tokio::task::spawn_blocking(move || {
        let mut browser = Browser::open(&url);
        browser.wait_for(LOADED, "its data and the live feed");
        let cards = json_of(
            &mut browser,
            "Object.fromEntries(Array.from(document.querySelectorAll('#spend-cards [data-spend]'))\
             .map(card => [card.dataset.spend, card.dataset.value]))",
        );
        let rows = json_of(
            &mut browser,
            "Array.from(document.querySelectorAll('#costliest tr.loop-row')).map(row => \
             [row.dataset.task, row.dataset.loopKind, row.dataset.evidence, row.dataset.cost])",
        );
        (cards, rows)
    })
    .await
    .expect("chromium ran");
    assert_eq!(cards["tokens"], tokens.to_string(), "{cards}");
    assert_near(&cards["cost"], cost, "the cost card");
    let in_loops = &spend["in_loops"];
    assert_near(
        &cards["loop-cost"],
        in_loops["cost_usd"].as_f64().expect("a loop cost"),
        "the cost in loops card",
    );
    let loop_tokens = in_loops["input_tokens"].as_u64().unwrap_or(0)
        + in_loops["output_tokens"].as_u64().unwrap_or(0);
    assert_eq!(cards["loop-tokens"], loop_tokens.to_string());
    let rows = rows.as_array().expect("rows").clone();
    assert_eq!(rows.len(), loops.len(), "a row per loop: {rows:?}");
    for (row, looped) in rows.iter().zip(loops) {
        assert_eq!(row[0], looped["task"]);
        assert_eq!(row[1], looped["kind"]);
        let evidence: Vec<String> = looped["evidence"]
            .as_array()
            .expect("lines")
            .iter()
            .map(Value::to_string)
            .collect();
        assert_eq!(row[2], evidence.join(","));
        assert_near(
            &row[3],
            looped["cost_usd"].as_f64().expect("a cost"),
            "a loop's cost",
        );
    }

    // The task page: its spend cards, and the chart of its running total.
    let task = "B";
    let report = server.json(&format!("/v1/tasks/{task}")).await;
    let events = report["spend"]["events"]
        .as_array()
        .expect("events")
        .clone();
    let url = format!("{}/tasks/{task}", server.url);
    let chart = tokio::task::spawn_blocking(move || {
        let mut browser = Browser::open(&url);
        browser.wait_for(LOADED, "its data and the live feed");
        json_of(
            &mut browser,
            "(() => { const svg = document.querySelector('#spend-chart svg'); return { \
             metric: svg.dataset.metric, last: svg.dataset.last, \
             points: Array.from(svg.querySelectorAll('circle.spend-point')).map(c => \
               [Number(c.dataset.line), Number(c.dataset.cumulative), c.dataset.inLoops === 'true']), \
             bands: svg.querySelectorAll('rect.episode-band').length, \
             cost: document.querySelector('#task-cards [data-spend=\"cost\"]').dataset.value, \
             hidden: document.getElementById('spend-panel').hidden }; })()",
        )
    })
    .await
    .expect("chromium ran");
    assert_eq!(chart["hidden"], false);
    assert_eq!(chart["metric"], "cost_usd");
    let usage_cost = report["usage"]["cost_usd"].as_f64().expect("a cost");
    assert_near(&chart["last"], usage_cost, "the chart's last point");
    assert_near(&chart["cost"], usage_cost, "the task's cost card");
    let points = chart["points"].as_array().expect("points");
    assert_eq!(points.len(), events.len(), "a point per event with usage");
    for (point, event) in points.iter().zip(&events) {
        assert_eq!(point[0], event["line"]);
        assert_near(
            &point[1],
            event["cumulative"]["cost_usd"].as_f64().expect("a total"),
            "a point's total",
        );
        assert_eq!(point[2], event["in_loops"]);
    }
    assert!(
        points.iter().any(|point| point[2] == true),
        "the loop's events are marked: {chart}"
    );
    let episodes = report["cycle_log"].as_array().map_or(0, Vec::len);
    assert!(episodes > 0, "the task looped: {report}");
    assert_eq!(chart["bands"], episodes, "a band per loop episode");

    // Screenshots, for a person (and docs/serve.md).
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).expect("the screenshot folder");
    take_screenshots(
        &server,
        &dir,
        [
            ("dashboard-spend.png", "/".to_owned(), (1400, 1250)),
            (
                "dashboard-spend-task.png",
                format!("/tasks/{task}"),
                (1400, 1000),
            ),
        ],
    )
    .await;
    server.stop().await;
}
