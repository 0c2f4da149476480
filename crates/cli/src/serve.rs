//! `loopguard serve`: the engine over HTTP (the `loopguard-serve` crate),
//! set up like every other command.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use loopguard_host::{MemoryStore, Store};
use loopguard_serve::{ServeOptions, Server};

use crate::cli::ServeArgs;
use crate::outcome::Outcome;
use crate::setup::{self, ConfigSource, Setup};

/// The default store's file in the data folder.
const STORE_FILE: &str = "serve.sqlite";

/// Runs `loopguard serve`: config, address check (before the model loads),
/// model, store, engine; then serves until SIGTERM or SIGINT and commits.
pub(crate) async fn run(args: &ServeArgs, no_semantic: bool) -> anyhow::Result<Outcome> {
    let config = setup::config(ConfigSource {
        file: args.config.as_deref(),
        no_semantic,
        plugins: &args.plugins,
        isolation: args.plugin_isolation.map(Into::into),
    })?;
    let listen =
        match args.listen {
            Some(listen) => listen,
            None => config.serve.listen.parse::<SocketAddr>().with_context(|| {
                format!("serve.listen {:?} is not an address", config.serve.listen)
            })?,
        };
    loopguard_serve::check_listen(listen, config.serve.token.as_deref())?;
    let options = ServeOptions::from_config(&config.serve);
    let setup = Setup::start(config)?;
    let url = match &args.store {
        Some(url) => url.clone(),
        None => default_store(|name| std::env::var_os(name))?,
    };
    // `memory` keeps what a database would (the audit log too), so the
    // task routes show detections; it is gone when the server stops.
    let store: Arc<dyn Store> = if url == "memory" {
        Arc::new(MemoryStore::durable())
    } else {
        setup::open_store(&url).await?
    };
    let engine = setup.engine(Some(store))?;
    let server = Server::start(engine, options)
        .await
        .context("cannot start the server")?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr().context("cannot read the address")?;
    eprintln!("loopguard: store {url}");
    eprintln!("loopguard: listening on http://{address}");
    let finished = server
        .run(listener, loopguard_serve::shutdown_signal())
        .await?;
    if finished.lost > 0 {
        eprintln!(
            "loopguard: {} answered event(s) were not written to the store",
            finished.lost
        );
        return Ok(Outcome::LostWrites);
    }
    eprintln!(
        "loopguard: stopped; every answered event is committed (last line {})",
        finished.last_line
    );
    Ok(Outcome::Clean)
}

/// `sqlite://DATA/serve.sqlite`, DATA being `$LOOPGUARD_DATA_DIR`, else
/// `$XDG_DATA_HOME/loopguard`, else `$HOME/.local/share/loopguard`
/// (created when missing).
fn default_store(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> anyhow::Result<String> {
    let dir = data_dir(env)?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the data folder {}", dir.display()))?;
    Ok(format!("sqlite://{}", dir.join(STORE_FILE).display()))
}

/// The data folder (see [`default_store`]); an empty variable counts as
/// unset.
fn data_dir(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> anyhow::Result<PathBuf> {
    let var = |name: &str| {
        env(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var("LOOPGUARD_DATA_DIR") {
        return Ok(dir);
    }
    if let Some(dir) = var("XDG_DATA_HOME") {
        return Ok(dir.join("loopguard"));
    }
    if let Some(home) = var("HOME") {
        return Ok(home.join(".local/share/loopguard"));
    }
    bail!("no data folder: set LOOPGUARD_DATA_DIR (or HOME), or pass --store URL")
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::Path;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn the_data_folder_is_found_in_the_documented_order() {
        let all = [
            ("LOOPGUARD_DATA_DIR", "/d"),
            ("XDG_DATA_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(data_dir(env(&all)).ok().as_deref(), Some(Path::new("/d")));
        assert_eq!(
            data_dir(env(&all[1..])).ok().as_deref(),
            Some(Path::new("/x/loopguard"))
        );
        assert_eq!(
            data_dir(env(&[("LOOPGUARD_DATA_DIR", ""), ("HOME", "/h")]))
                .ok()
                .as_deref(),
            Some(Path::new("/h/.local/share/loopguard"))
        );
        assert!(data_dir(env(&[])).is_err());
    }
}
