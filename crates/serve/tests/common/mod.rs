//! The server the route tests run against: the router on a listener bound
//! to 127.0.0.1:0 over a store, reqwest as the client, stopped (and
//! finished) through `stop`. Each test binary adds the requests it needs.
#![allow(dead_code, reason = "each test binary uses a part of it")]

use std::sync::Arc;

use loopguard_config::Config;
use loopguard_host::{LoopGuard, MemoryStore, Store};
use loopguard_serve::{Finished, ServeError, ServeOptions, Server};
use reqwest::{Method, RequestBuilder};
use tokio::sync::oneshot;

/// A server on a free loopback port.
pub(crate) struct Running {
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// The client every request goes through (keep-alive).
    pub(crate) client: reqwest::Client,
    /// The server's token, if it has one.
    pub(crate) token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<Result<Finished, ServeError>>,
}

impl Running {
    /// Over the durable memory store, which keeps what SQLite would (the
    /// audit log too), so the task routes see everything.
    pub(crate) async fn start(options: ServeOptions) -> Running {
        Running::with_store(options, Arc::new(MemoryStore::durable())).await
    }

    /// Over `store`.
    pub(crate) async fn with_store(options: ServeOptions, store: Arc<dyn Store>) -> Running {
        Running::with_config(options, store, Config::default()).await
    }

    /// Over `store`, the engine set up by `config`.
    pub(crate) async fn with_config(
        options: ServeOptions,
        store: Arc<dyn Store>,
        config: Config,
    ) -> Running {
        let token = options.token.clone();
        let engine = LoopGuard::builder(config)
            .store(store)
            .build()
            .expect("the config is valid");
        let server = Server::start(engine, options)
            .await
            .expect("the server starts");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("an address");
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(server.run(listener, async {
            let _ = stopped.await;
        }));
        Running {
            url: format!("http://{addr}"),
            client: reqwest::Client::new(),
            token,
            stop: Some(stop),
            done,
        }
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// A request to `path`, without the token.
    pub(crate) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, format!("{}{path}", self.url))
    }

    /// A request to `path` with the token, if the server has one.
    pub(crate) fn authed(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.request(method, path);
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `/metrics` as text (asked with the token, if the server has one).
    pub(crate) async fn metrics(&self) -> String {
        let answer = self
            .authed(Method::GET, "/metrics")
            .send()
            .await
            .expect("an answer");
        assert!(answer.status().is_success(), "{}", answer.status());
        answer.text().await.expect("a body")
    }

    /// Stops the server; what shutdown committed.
    pub(crate) async fn stop(mut self) -> Finished {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.done)
            .await
            .expect("the server task ends")
            .expect("the server stops cleanly")
    }
}
