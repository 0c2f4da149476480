//! The worker process's side of process isolation: [`run_worker`] loads
//! one plugin library with the same [`Plugin::load`] and
//! [`PluginInstance`] code as in-process mode, and answers the host's
//! requests, one at a time, over its stdin and stdout
//! ([`protocol`](super::protocol) frames). `loopguard plugin-worker
//! LIBRARY` runs it. Safe code: the calls themselves go through the
//! typed and C-call layers.
#![forbid(unsafe_code)]

use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use loopguard_plugin_api::wire;

use super::error::PluginFault;
use super::instance::PluginInstance;
use super::library::Plugin;
use super::protocol::{self, Hello, answer, op};
use super::sandbox;

/// Serves the plugin library at `library` on stdin and stdout until the
/// host closes stdin. The first frame says whether the library loaded (a
/// library that does not load is answered with why, then the worker ends
/// without a word of its own: the host reports it). An I/O error on the
/// pipes ends the worker with that error.
///
/// Before it loads the library, the worker closes every descriptor it
/// inherited but stdin, stdout and stderr, and limits its address space to
/// `memory_limit_mb` megabytes when given (`plugin_host.memory_limit_mb`).
/// Started by a host (which sets `LOOPGUARD_PLUGIN_HOST_PID`), it ends
/// itself once that host is no longer its parent.
pub fn run_worker(library: &Path, memory_limit_mb: Option<u64>) -> io::Result<()> {
    sandbox::close_inherited_fds();
    let host_pid = std::env::var(super::child::HOST_PID_ENV).ok();
    sandbox::watch_parent(host_pid.as_deref());
    if let Some(megabytes) = memory_limit_mb {
        sandbox::limit_memory(megabytes).map_err(|err| {
            io::Error::other(format!(
                "cannot limit the worker's memory to {megabytes} MB \
                 (plugin_host.memory_limit_mb): {err}"
            ))
        })?;
    }
    let stdin = io::stdin().lock();
    let stdout = io::stdout().lock();
    serve(library, BufReader::new(stdin), stdout)
}

/// [`run_worker`] over any pipes.
pub(super) fn serve(
    library: &Path,
    mut input: impl Read,
    mut output: impl Write,
) -> io::Result<()> {
    let mut frame = Vec::with_capacity(4096);
    let plugin = match Plugin::load(library) {
        Ok(plugin) => plugin,
        Err(err) => {
            // The host reports it (it shares this worker's stderr): saying
            // it here too would print it twice, interleaved.
            protocol::encode_answer(answer::LOAD_ERROR, err.to_string().as_bytes(), &mut frame);
            output.write_all(&frame)?;
            output.flush()?;
            return Ok(());
        }
    };
    let info = plugin.info();
    let hello = Hello {
        name: info.name.clone(),
        version: info.version.clone(),
        description: info.description.clone(),
        kinds: info.kinds.clone(),
        abi_major: info.abi.major,
        abi_minor: info.abi.minor,
        sdk_version: info.sdk_version.clone(),
        rustc_version: info.rustc_version.clone(),
        supports_reset: plugin.functions.supports_reset(),
        supports_state: plugin.functions.supports_state(),
    };
    let hello = serde_json::to_vec(&hello).map_err(io::Error::other)?;
    protocol::encode_answer(answer::OK, &hello, &mut frame);
    output.write_all(&frame)?;
    output.flush()?;

    let mut instance: Option<PluginInstance> = None;
    let mut body = Vec::with_capacity(4096);
    loop {
        let mut header = [0u8; 4];
        match input.read_exact(&mut header) {
            Ok(()) => {}
            // The host closed the pipe: done.
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(err) => return Err(err),
        }
        let len = protocol::checked_len(header).map_err(io::Error::other)?;
        body.resize(len, 0);
        input.read_exact(&mut body)?;
        let result = match protocol::decode_request(&body) {
            Ok((op, task, payload)) => handle(&plugin, &mut instance, op, task, payload),
            Err(reason) => Err(PluginFault::Host(format!("a bad request: {reason}"))),
        };
        match result {
            Ok(payload) => protocol::encode_answer(answer::OK, &payload, &mut frame),
            Err(fault) => protocol::encode_fault(&fault, &mut frame),
        }
        output.write_all(&frame)?;
        output.flush()?;
    }
}

/// One request: its answer's payload.
fn handle(
    plugin: &Plugin,
    instance: &mut Option<PluginInstance>,
    request: u8,
    task: &str,
    payload: &[u8],
) -> Result<Vec<u8>, PluginFault> {
    if request == op::CREATE {
        let config: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|err| PluginFault::Host(format!("a config that is not JSON: {err}")))?;
        let created = plugin.instantiate(&config).map_err(|err| match err {
            super::PluginError::Start { fault, .. } => fault,
            other => PluginFault::Host(other.to_string()),
        })?;
        *instance = Some(created);
        return Ok(Vec::new());
    }
    let instance = instance
        .as_mut()
        .ok_or_else(|| PluginFault::Host("no instance: create it first".to_owned()))?;
    let export = request & protocol::EXPORT != 0;
    let state = |instance: &mut PluginInstance| -> Result<Vec<u8>, PluginFault> {
        if !export {
            return Ok(Vec::new());
        }
        match instance.export_task(task)? {
            Some(state) => serde_json::to_vec(&state)
                .map_err(|err| PluginFault::Host(format!("cannot encode a task state: {err}"))),
            None => Ok(Vec::new()),
        }
    };
    match request & !protocol::EXPORT {
        op::OBSERVE => {
            let detections = instance.observe_encoded(payload)?;
            let detections = wire::encode_detections(&detections);
            Ok(protocol::join_prefixed(&detections, &state(instance)?))
        }
        op::RESET => {
            instance.reset_task(task)?;
            Ok(protocol::join_prefixed(&[], &state(instance)?))
        }
        op::EXPORT => match instance.export_task(task)? {
            Some(state) => serde_json::to_vec(&state)
                .map_err(|err| PluginFault::Host(format!("cannot encode a task state: {err}"))),
            None => Ok(Vec::new()),
        },
        op::IMPORT => {
            let state: serde_json::Value = serde_json::from_slice(payload).map_err(|err| {
                PluginFault::Host(format!("a task state that is not JSON: {err}"))
            })?;
            instance.import_task(task, &state)?;
            Ok(Vec::new())
        }
        other => Err(PluginFault::Host(format!("an unknown request {other}"))),
    }
}
