//! `[limits]`: bounds on input, so that no line, id or text can make
//! loopguard's memory or stored state grow with its length. The type is
//! the trace contract's ([`LimitsConfig`]), since events are read within
//! it; its values are checked here.

use loopguard_core_types::{EMBEDDING_INPUT_BYTES, LimitsConfig};

use crate::ConfigError;
use crate::check::within;

/// Checks every `limits.*` value.
pub(crate) fn validate_limits(limits: &LimitsConfig) -> Result<(), ConfigError> {
    within(
        "limits.max_line_bytes",
        limits.max_line_bytes,
        64..=1 << 30,
        "must be between 64 and 1073741824 (1 GiB)",
    )?;
    within(
        "limits.max_task_id_bytes",
        limits.max_task_id_bytes,
        1..=1 << 20,
        "must be between 1 and 1048576 (1 MiB)",
    )?;
    within(
        "limits.max_text_bytes",
        limits.max_text_bytes,
        EMBEDDING_INPUT_BYTES..=1 << 30,
        "must be between 4096 (what the semantic model reads of a text, so that a kept \
         text embeds as the whole text) and 1073741824 (1 GiB)",
    )
}
