//! A bounded loopback load test of `loopguard serve` (not criterion: it
//! measures throughput and tail latency under concurrent clients, then
//! memory over a million distinct tasks). It stops by itself:
//!
//! ```text
//! cargo bench -p loopguard-serve --bench load
//! LOAD_CLIENTS=8 LOAD_SECS=10 LOAD_TASKS=1000000 cargo bench -p loopguard-serve --bench load
//! ```
//!
//! 1. **Throughput and latency**: for the memory store and a SQLite file,
//!    `LOAD_CLIENTS` (default 8) keep-alive clients each POST one event at a
//!    time for `LOAD_SECS` (default 10) seconds. Each client works on its
//!    own 50 tasks and repeats a failure now and then, so detectors fire as
//!    in a real run. It prints the events per second held and the p50, p99
//!    and maximum latency of a request.
//! 2. **Memory over distinct tasks**: `LOAD_TASKS` (default 1,000,000)
//!    events, each of a task never seen before, in NDJSON batches of 1,000,
//!    into a SQLite file with `engine.task_ttl_secs = 60`; the events'
//!    times advance 1 ms per event, so the engine holds at most the last
//!    minute's tasks (about 60,000) and evicts the rest. It prints the
//!    process's resident memory (this process: the server and its client)
//!    and the tasks the engine holds, at each quarter.
//!
//! Built-in detectors only (as `--no-semantic`): the embedding model's cost
//! per event is measured by the semantic crate's benches.
use std::sync::Arc;
use std::time::{Duration, Instant};

use loopguard_config::Config;
use loopguard_host::{LoopGuard, MemoryStore, Store};
use loopguard_serve::{ServeOptions, Server};

/// The environment variable `name` as a number, or `default`.
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// This process's resident memory in MiB (Linux), from /proc.
fn resident_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A server on 127.0.0.1:0 over `store`; its base URL and its engine's
/// handle for counting live tasks.
async fn start(
    store: Arc<dyn Store>,
    config: Config,
) -> Result<(String, Arc<Server>), Box<dyn std::error::Error>> {
    let engine = LoopGuard::builder(config).store(store).build()?;
    let server = Server::start(engine, ServeOptions::default()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let server = Arc::new(server);
    let router = server.router();
    tokio::spawn(async move { axum_serve(listener, router).await });
    Ok((url, server))
}

async fn axum_serve(listener: tokio::net::TcpListener, router: axum::Router) {
    if let Err(err) = axum::serve(listener, router).await {
        eprintln!("the server stopped: {err}");
    }
}

fn config(ttl_secs: u64) -> Config {
    let mut config = Config::default();
    config.semantic.enabled = false;
    config.engine.task_ttl_secs = ttl_secs;
    config.serve.queue = 1024;
    config
}

/// The event client `client` sends `n`th: a failure of one of its 50
/// tasks, the same error as that task's last one time in four.
fn event(client: u64, n: u64) -> String {
    let task = n % 50;
    let error = if n % 4 == 0 { n / 200 } else { n };
    format!(
        r#"{{"type":"failure","task":"c{client}-t{task}","agent":"coder","error":"assertion failed: total == {error}"}}"#
    )
}

/// Part 1 over `store`: events per second and latency percentiles.
async fn throughput(name: &str, store: Arc<dyn Store>) -> Result<(), Box<dyn std::error::Error>> {
    let clients = setting("LOAD_CLIENTS", 8);
    let seconds = setting("LOAD_SECS", 10);
    let (url, _server) = start(store, config(86_400)).await?;
    let events_url = format!("{url}/v1/events");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut handles = Vec::new();
    for client in 0..clients {
        let http = reqwest::Client::new();
        let events_url = events_url.clone();
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(100_000);
            let mut failures = 0u64;
            let mut n = 0u64;
            while Instant::now() < deadline {
                let sent = Instant::now();
                let answer = http
                    .post(&events_url)
                    .header("content-type", "application/json")
                    .body(event(client, n))
                    .send()
                    .await;
                match answer {
                    Ok(answer) if answer.status().is_success() => {
                        let _ = answer.bytes().await;
                        latencies.push(sent.elapsed());
                    }
                    _ => failures += 1,
                }
                n += 1;
            }
            (latencies, failures)
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    for handle in handles {
        let (mut some, failed) = handle.await?;
        latencies.append(&mut some);
        failures += failed;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |share: f64| {
        let index =
            ((latencies.len() as f64 * share) as usize).min(latencies.len().saturating_sub(1));
        latencies.get(index).copied().unwrap_or_default()
    };
    println!(
        "{name:>8}: {clients} clients, {seconds} s: {:.0} events/s; p50 {:.0} µs, p99 {:.0} µs, max {:.1} ms; {failures} failed requests",
        latencies.len() as f64 / elapsed,
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    Ok(())
}

/// Part 2: resident memory over `LOAD_TASKS` distinct tasks with TTL
/// eviction, on a SQLite file.
async fn distinct_tasks(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let total = setting("LOAD_TASKS", 1_000_000);
    let url = format!("sqlite://{}", dir.join("tasks.sqlite").display());
    let store = loopguard_store_sqlx::open_store(&url).await?;
    let (url, server) = start(store, config(60)).await?;
    let events_url = format!("{url}/v1/events");
    let http = reqwest::Client::new();
    const BATCH: u64 = 1_000;
    // 2026-01-01T00:00:00Z, then 1 ms per event.
    const START_MS: i64 = 1_767_225_600_000;
    println!(
        "distinct tasks: {total} events of new tasks, TTL 60 s, 1 ms apart; before: {:.0} MiB resident",
        resident_mib().unwrap_or(f64::NAN)
    );
    let started = Instant::now();
    let mut sent = 0u64;
    while sent < total {
        let mut body = String::with_capacity(150 * BATCH as usize);
        for n in sent..(sent + BATCH).min(total) {
            let ts = loopguard_core_types::Timestamp(START_MS + n as i64).to_rfc3339();
            body.push_str(&format!(
                r#"{{"type":"failure","task":"distinct-{n}","agent":"coder","error":"assertion failed: x == {n}","ts":"{ts}"}}"#
            ));
            body.push('\n');
        }
        let answer = http
            .post(&events_url)
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await?;
        if !answer.status().is_success() {
            return Err(format!("a batch was answered {}", answer.status()).into());
        }
        let _ = answer.bytes().await?;
        sent = (sent + BATCH).min(total);
        if sent % (total / 4).max(1) == 0 || sent == total {
            println!(
                "  after {sent:>9} tasks: {:>6.0} MiB resident, {:>7} tasks held by the engine, {:.0} events/s",
                resident_mib().unwrap_or(f64::NAN),
                server.engine().live_tasks(),
                sent as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`; a filter argument other than the
    // part's name skips it.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let wanted = |part: &str| filter.as_deref().is_none_or(|filter| part.contains(filter));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    runtime.block_on(async {
        if wanted("throughput") {
            throughput("memory", Arc::new(MemoryStore::durable())).await?;
            let url = format!("sqlite://{}", dir.path().join("load.sqlite").display());
            throughput("sqlite", loopguard_store_sqlx::open_store(&url).await?).await?;
        }
        if wanted("distinct_tasks") {
            distinct_tasks(dir.path()).await?;
        }
        Ok(())
    })
}
