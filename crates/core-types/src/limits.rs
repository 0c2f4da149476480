//! Bounds on input events: the `[limits]` section of loopguard's config,
//! which [`Event::from_json_within`](crate::Event::from_json_within)
//! enforces while it reads a line.

use serde::{Deserialize, Serialize};

/// Most bytes of a text the semantic model reads: its input is cut there
/// (on a character boundary) before it is tokenized. The model reads 256
/// tokens; English averages 4 to 5 bytes a token, so 4096 bytes (16 a
/// token) hold the model's whole input for any text of ordinary words, and
/// a text longer than this embeds like its first 4096 bytes. It is also
/// the least `limits.max_text_bytes`, so that a text kept for a restart
/// embeds as the whole text did.
pub const EMBEDDING_INPUT_BYTES: usize = 4096;

/// `[limits]`: bounds on input, so that no line, id or text can make
/// loopguard's memory or stored state grow with its length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Longest input line in bytes, newline excluded (default 1 MiB). A
    /// longer line is a line error naming its length; it is skipped
    /// without being held in memory.
    pub max_line_bytes: usize,
    /// Longest `task` id in bytes (default 1024). A longer one is a line
    /// error naming the field.
    pub max_task_id_bytes: usize,
    /// Most bytes of one text field (a request, a handoff's content) a
    /// detector keeps in its windows and stored state (default 8192; at
    /// least [`EMBEDDING_INPUT_BYTES`]). A longer text is kept cut on a
    /// character boundary, with its length noted; detectors that compare
    /// hashes hash the whole text.
    pub max_text_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_line_bytes: 1024 * 1024,
            max_task_id_bytes: 1024,
            max_text_bytes: 8192,
        }
    }
}
