//! The pipe protocol between the host and a plugin's worker process
//! (process isolation): frames of a `u32` little-endian length and that
//! many bytes, each a request or an answer. Safe code, no I/O policy: the
//! frames are read and written by [`child`](super::child) (the host's side,
//! async) and [`process_worker`](super::process_worker) (the worker's side,
//! blocking).
//!
//! A request is an operation byte, the task (a `u32` length and its bytes;
//! empty when the operation has none) and its payload: the plugin's config
//! (`create`), the observe request exactly as the ABI carries it
//! (`observe`), a task state (`import`). An answer is a status byte and its
//! payload: for `OK`, the answer's bytes; for a fault, its message.
//!
//! The worker's first frame, before any request, says whether it loaded
//! the library: `OK` and its [`Hello`] as JSON, or `LOAD_ERROR` and the
//! loader's message.
#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

use super::error::PluginFault;

/// The largest frame either side accepts: a length above it is garbage on
/// the pipe, not a frame to allocate for.
pub(super) const MAX_FRAME: usize = 256 << 20;

/// Request operations.
pub(super) mod op {
    /// Create the instance with the payload as its config.
    pub(crate) const CREATE: u8 = b'C';
    /// Observe the payload (an encoded observe request); answered with the
    /// detections and, when asked ([`super::EXPORT`] flag), the task's
    /// state after it.
    pub(crate) const OBSERVE: u8 = b'O';
    /// Reset the task; answered like an observe without detections.
    pub(crate) const RESET: u8 = b'R';
    /// Export the task's state.
    pub(crate) const EXPORT: u8 = b'E';
    /// Import the payload as the task's state.
    pub(crate) const IMPORT: u8 = b'I';
}

/// Added to [`op::OBSERVE`] or [`op::RESET`]: answer with the task's state
/// after the call too.
pub(super) const EXPORT: u8 = 0x80;

/// Answer statuses.
pub(super) mod answer {
    /// Done; the payload is the answer.
    pub(crate) const OK: u8 = 0;
    /// The plugin panicked (the SDK caught it).
    pub(crate) const PANICKED: u8 = 1;
    /// The plugin returned an error.
    pub(crate) const FAILED: u8 = 2;
    /// The plugin's answer was not valid.
    pub(crate) const INVALID: u8 = 3;
    /// The worker could not run the call.
    pub(crate) const HOST: u8 = 4;
    /// The first frame: the library could not be loaded.
    pub(crate) const LOAD_ERROR: u8 = 5;
}

/// What the worker says once it has loaded the library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Hello {
    pub(super) name: String,
    pub(super) version: String,
    pub(super) description: String,
    pub(super) kinds: Vec<String>,
    pub(super) abi_major: u32,
    pub(super) abi_minor: u32,
    pub(super) sdk_version: String,
    pub(super) rustc_version: String,
    pub(super) supports_reset: bool,
    pub(super) supports_state: bool,
}

/// A request: `op`, `task` and `payload` in one frame body.
pub(super) fn encode_request(op: u8, task: &str, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let body = 1 + 4 + task.len() + payload.len();
    out.reserve(4 + body);
    out.extend_from_slice(&frame_len(body).to_le_bytes());
    out.push(op);
    out.extend_from_slice(&frame_len(task.len()).to_le_bytes());
    out.extend_from_slice(task.as_bytes());
    out.extend_from_slice(payload);
}

/// A frame's length as its `u32` (frames are bounded well below it).
fn frame_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// A request read back: its operation, task and payload.
pub(super) fn decode_request(body: &[u8]) -> Result<(u8, &str, &[u8]), String> {
    let (&op, rest) = body.split_first().ok_or("an empty request")?;
    let (task, payload) = split_prefixed(rest)?;
    let task = std::str::from_utf8(task).map_err(|_| "a task id that is not UTF-8")?;
    Ok((op, task, payload))
}

/// An answer frame: `status` and `payload`.
pub(super) fn encode_answer(status: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(5 + payload.len());
    out.extend_from_slice(&frame_len(1 + payload.len()).to_le_bytes());
    out.push(status);
    out.extend_from_slice(payload);
}

/// A fault as an answer frame.
pub(super) fn encode_fault(fault: &PluginFault, out: &mut Vec<u8>) {
    let (status, message) = match fault {
        PluginFault::Panicked(message) => (answer::PANICKED, message.clone()),
        PluginFault::Failed(message) => (answer::FAILED, message.clone()),
        PluginFault::InvalidAnswer(message) => (answer::INVALID, message.clone()),
        PluginFault::Host(message) => (answer::HOST, message.clone()),
        other => (answer::HOST, other.to_string()),
    };
    encode_answer(status, message.as_bytes(), out);
}

/// An answer frame's body read back: the payload of an `OK`, or the fault.
pub(super) fn decode_answer(body: &[u8]) -> Result<&[u8], PluginFault> {
    let Some((&status, payload)) = body.split_first() else {
        return Err(PluginFault::Crashed(
            "its worker sent an empty frame".to_owned(),
        ));
    };
    let message = || String::from_utf8_lossy(payload).into_owned();
    match status {
        answer::OK => Ok(payload),
        answer::PANICKED => Err(PluginFault::Panicked(message())),
        answer::FAILED => Err(PluginFault::Failed(message())),
        answer::INVALID => Err(PluginFault::InvalidAnswer(message())),
        answer::HOST | answer::LOAD_ERROR => Err(PluginFault::Host(message())),
        other => Err(PluginFault::Crashed(format!(
            "its worker sent an answer of unknown status {other}"
        ))),
    }
}

/// Two parts of a payload: a `u32`-length-prefixed one and the rest.
pub(super) fn split_prefixed(bytes: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let (len, rest) = bytes.split_first_chunk::<4>().ok_or("a frame cut short")?;
    let len = usize::try_from(u32::from_le_bytes(*len)).map_err(|err| err.to_string())?;
    if len > rest.len() {
        return Err(format!(
            "a field of {len} bytes in a frame of {} bytes",
            rest.len()
        ));
    }
    Ok(rest.split_at(len))
}

/// `first` with its `u32` length, then `rest`.
pub(super) fn join_prefixed(first: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + first.len() + rest.len());
    out.extend_from_slice(&frame_len(first.len()).to_le_bytes());
    out.extend_from_slice(first);
    out.extend_from_slice(rest);
    out
}

/// A frame length read from the pipe, checked against [`MAX_FRAME`].
pub(super) fn checked_len(header: [u8; 4]) -> Result<usize, String> {
    let len = usize::try_from(u32::from_le_bytes(header)).unwrap_or(usize::MAX);
    if len == 0 || len > MAX_FRAME {
        return Err(format!(
            "{:?} read as a frame of {len} bytes",
            String::from_utf8_lossy(&header)
        ));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_read_back_and_garbage_is_refused() {
        let mut frame = Vec::new();
        encode_request(op::OBSERVE | EXPORT, "T1", b"{\"line\":1}", &mut frame);
        let (header, body) = frame.split_first_chunk::<4>().expect("a header");
        assert_eq!(checked_len(*header), Ok(body.len()));
        assert_eq!(
            decode_request(body),
            Ok((op::OBSERVE | EXPORT, "T1", &b"{\"line\":1}"[..]))
        );
        encode_fault(&PluginFault::Panicked("boom".to_owned()), &mut frame);
        assert_eq!(
            decode_answer(&frame[4..]),
            Err(PluginFault::Panicked("boom".to_owned()))
        );
        encode_answer(answer::OK, b"[]", &mut frame);
        assert_eq!(decode_answer(&frame[4..]), Ok(&b"[]"[..]));
        // "garbage\n" read as a header: far too long a frame.
        assert!(checked_len(*b"garb").is_err());
        assert!(checked_len([0; 4]).is_err());
        assert!(decode_answer(b"xyz").is_err());
        assert!(decode_request(&[op::OBSERVE, 9, 0, 0, 0, b'T']).is_err());
        let joined = join_prefixed(b"[1]", b"{}");
        assert_eq!(split_prefixed(&joined), Ok((&b"[1]"[..], &b"{}"[..])));
    }
}
