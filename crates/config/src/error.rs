//! What goes wrong reading a config, and where: [`ConfigError`],
//! [`ConfigLocation`] and [`TextPosition`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A configuration that could not be read or is not valid.
///
/// Every variant but [`ConfigError::Read`] says where the problem is (a
/// [`ConfigLocation`]), and its message starts there, as compilers write
/// it: `loopguard.toml:3:1: `phases.max_visit`: unknown field ...`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read the config {}", path.display())]
    Read {
        /// The file, as it was named.
        path: PathBuf,
        /// Why it could not be read (shared, so that the error stays
        /// `Clone`).
        #[source]
        source: Arc<io::Error>,
    },
    /// The TOML does not parse, names a key loopguard does not know, or
    /// gives a key a value of the wrong type.
    #[error("{location}: {}{message}", key_prefix(key.as_deref()))]
    Parse {
        /// Where: the file, and the line and column toml's span points at.
        location: ConfigLocation,
        /// The dotted key at fault, when the error is about one, e.g.
        /// `cycles.window_sec` for an unknown key in `[cycles]`, or `phase`
        /// for an unknown table. `None` for a syntax error.
        key: Option<String>,
        /// toml's own description of the problem, on one line.
        message: String,
    },
    /// A key has a value loopguard cannot use.
    #[error("{location}: `{key}` = {value} is not valid: {reason}")]
    Invalid {
        /// The dotted key, e.g. `cycles.window_secs`.
        key: String,
        /// The value as written.
        value: String,
        /// What a valid value looks like.
        reason: String,
        /// Where the key is written. When the config leaves the key at its
        /// default (a limit that must exceed another one that was raised),
        /// the position is that of the nearest table the config does write;
        /// none for a config that was never text.
        location: ConfigLocation,
    },
}

fn key_prefix(key: Option<&str>) -> String {
    key.map(|key| format!("`{key}`: ")).unwrap_or_default()
}

// Not derived: `io::Error` is not `PartialEq`. Two read errors are equal
// when they name the same file and failed the same way.
impl PartialEq for ConfigError {
    fn eq(&self, other: &ConfigError) -> bool {
        use ConfigError::*;
        match (self, other) {
            (
                Read { path, source },
                Read {
                    path: other_path,
                    source: other_source,
                },
            ) => {
                path == other_path
                    && source.kind() == other_source.kind()
                    && source.to_string() == other_source.to_string()
            }
            (
                Parse {
                    location,
                    key,
                    message,
                },
                Parse {
                    location: other_location,
                    key: other_key,
                    message: other_message,
                },
            ) => location == other_location && key == other_key && message == other_message,
            (
                Invalid {
                    key,
                    value,
                    reason,
                    location,
                },
                Invalid {
                    key: other_key,
                    value: other_value,
                    reason: other_reason,
                    location: other_location,
                },
            ) => {
                key == other_key
                    && value == other_value
                    && reason == other_reason
                    && location == other_location
            }
            _ => false,
        }
    }
}

/// Where in a config a problem is.
///
/// Displayed as `FILE:LINE:COLUMN`, or `FILE` when the position is not
/// known; a config given as text (no file) is called `config`:
/// `config:2:1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigLocation {
    /// The file the config was read from; `None` for a config parsed from
    /// a string ([`Config::from_toml_str`](crate::Config::from_toml_str)).
    pub file: Option<PathBuf>,
    /// The line and column in that text, when known.
    pub position: Option<TextPosition>,
}

/// A 1-based line and column in a text; the column counts characters, not
/// bytes (as editors and toml's own messages do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextPosition {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

impl TextPosition {
    /// The position of byte `offset` of `text`. An offset past the end (an
    /// error at the end of the input) is placed just after the last
    /// character; one inside a character, at that character.
    pub fn of_offset(text: &str, offset: usize) -> TextPosition {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        TextPosition {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for ConfigLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}", file.display())?,
            None => f.write_str("config")?,
        }
        if let Some(TextPosition { line, column }) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// Where the problem is; `None` for a file that could not be read.
    pub fn location(&self) -> Option<&ConfigLocation> {
        match self {
            ConfigError::Parse { location, .. } | ConfigError::Invalid { location, .. } => {
                Some(location)
            }
            ConfigError::Read { .. } => None,
        }
    }

    /// The dotted key at fault, when the problem is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Parse { key, .. } => key.as_deref(),
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Read { .. } => None,
        }
    }

    /// `self` with the file it came from in its location.
    pub(crate) fn in_file(mut self, path: &Path) -> ConfigError {
        if let ConfigError::Parse { location, .. } | ConfigError::Invalid { location, .. } =
            &mut self
        {
            location.file = Some(path.to_owned());
        }
        self
    }
}
