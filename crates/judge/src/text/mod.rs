//! One text as the judge reads it: taken apart into identifiers and
//! content words ([`tokenize`]), read for whether it reports or asks
//! ([`reads_as_report`], [`reads_as_statement`]), and for its WordNet
//! senses, once ([`ReadText`]).
//!
//! Only what the model reads of a text is read ([`model_input`]), so that
//! a text of megabytes costs what a page does.

mod identifiers;
mod statement;
mod times;
mod tokenize;

use loopguard_core_types::{EMBEDDING_INPUT_BYTES, truncate_to_char_boundary};

pub use self::identifiers::IdentifierClass;
pub use self::statement::{adds_to_earlier_work, reads_as_report, reads_as_statement};
pub(crate) use self::times::{WrittenDuration, same_length};
pub use self::tokenize::tokenize;
use crate::intents::intents_of;
use crate::normalize::is_stop_word;
use crate::related::{self, Reading};

/// What the model reads of `text`: its first
/// [`EMBEDDING_INPUT_BYTES`] bytes, cut on a character boundary. Every
/// reading of the judge reads this much of a text, no more.
pub fn model_input(text: &str) -> &str {
    truncate_to_char_boundary(text, EMBEDDING_INPUT_BYTES)
}

/// One text, taken apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tokens {
    /// Identifier-like tokens, each with its class and comparison key, in
    /// order.
    pub identifiers: Vec<(IdentifierClass, String)>,
    /// Content words (lowercase, stop words out, stemmed), in order.
    pub words: Vec<String>,
    /// Each content word as written (lowercase), beside its stem in
    /// `words`: the residual text is made of these.
    pub(crate) written: Vec<String>,
    /// Every token's key (a word's stem, an identifier's key, a stop word
    /// as written), in order: what direction markers point at.
    pub(crate) keys: Vec<String>,
    /// Every word as written (lowercase, stop words too, hyphenated words
    /// in parts), in order: what compounds ("sign up" for "signup") and
    /// acronyms ("pull request" for "PR") are spelled from.
    pub(crate) raw: Vec<String>,
    /// What may name a party: identifiers and capitalized words, each with
    /// its place in `keys`, its key, and whether it surely is a name (an
    /// identifier, or capitalized inside a sentence).
    pub(crate) parties: Vec<(usize, String, bool)>,
    /// The durations written ("3 months", "90-day", "30s", "an hour"),
    /// in order: the comparison matches one against the same length
    /// written in other units.
    pub(crate) durations: Vec<WrittenDuration>,
    /// Each period placed relative to now ("next year", "last sprint"):
    /// the place and the period's stem, for the period veto.
    pub(crate) periods: Vec<(&'static str, String)>,
    /// Where the text moves something, if it does ("from X into Y": X
    /// and Y's keys), for the swapped-ends veto.
    pub(crate) ends: Option<(String, String)>,
    /// The names of `data/names-of-a-kind.txt` the text writes, each with
    /// its kind, in order, for the kind veto.
    pub(crate) kinds: Vec<(&'static str, &'static str)>,
    /// Beside each of `keys`, the token as written (lowercase) and whether
    /// it is content (a word or an identifier, no stop word): what
    /// [`templates`](crate::templates) writes.
    pub(crate) shown: Vec<(String, bool)>,
}

impl Tokens {
    /// The content words of these tokens whose stems are `stems` (a
    /// sub-multiset of its words), as written and in order.
    pub(crate) fn as_written(&self, stems: &[String]) -> Vec<String> {
        let mut left: Vec<&str> = stems.iter().map(String::as_str).collect();
        let mut out = Vec::with_capacity(stems.len());
        for (stem, written) in self.words.iter().zip(&self.written) {
            if let Some(at) = left.iter().position(|word| *word == stem) {
                left.swap_remove(at);
                out.push(written.clone());
            }
        }
        out
    }

    /// The first word a stem of `words` is written as, or the stem itself.
    pub(crate) fn written_as(&self, stem: &str) -> Option<&String> {
        self.words
            .iter()
            .zip(&self.written)
            .find(|(word, _)| *word == stem)
            .map(|(_, written)| written)
    }
}

/// The first key after `keys[at]` that is no stop word: what a direction
/// marker there points at.
pub(crate) fn word_after(keys: &[String], at: usize) -> Option<&String> {
    keys.get(at + 1..)?.iter().find(|key| !is_stop_word(key))
}

/// Strips what surrounds a token but is not part of it (quotes, brackets,
/// sentence punctuation), keeping a trailing `()` of a call.
pub(crate) fn trim_punctuation(raw: &str) -> &str {
    let start = raw.trim_start_matches(|c: char| {
        matches!(
            c,
            '"' | '\'' | '`' | '(' | '[' | '{' | '<' | '“' | '‘' | '*' | '_' | ','
        )
    });
    if start.ends_with("()") {
        return start;
    }
    start.trim_end_matches(|c: char| {
        matches!(
            c,
            '"' | '\''
                | '`'
                | ')'
                | ']'
                | '}'
                | '>'
                | '”'
                | '’'
                | '*'
                | '.'
                | ','
                | ';'
                | ':'
                | '!'
                | '?'
        )
    })
}

/// One text as the judge reads it, everything the comparison needs of it
/// alone: its tokens, its WordNet reading, whether it reads as a report or
/// a statement, and its intents. A detector compares a text with many
/// earlier ones; read once, it is compared with each for the pairwise
/// work alone.
#[derive(Debug, Clone)]
pub struct ReadText {
    pub(crate) tokens: Tokens,
    pub(crate) wordnet: Reading,
    pub(crate) report: bool,
    pub(crate) statement: bool,
    pub(crate) intents: u32,
    pub(crate) adds_on: bool,
}

impl ReadText {
    /// Reads `text`.
    pub fn new(text: &str) -> ReadText {
        let tokens = tokenize(text);
        let intents = intents_of(&tokens.words);
        let report = reads_as_report(text);
        ReadText {
            tokens,
            wordnet: related::read(text),
            report,
            statement: report || statement::states_without_reporting(text),
            intents,
            adds_on: adds_to_earlier_work(text),
        }
    }

    /// Whether the text reads as a statement ([`reads_as_statement`]).
    pub fn reads_as_statement(&self) -> bool {
        self.statement
    }

    /// The text's tokens ([`tokenize`]).
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_model_reads_of_a_text_is_read() {
        let long = "é".repeat(EMBEDDING_INPUT_BYTES);
        assert_eq!(model_input(&long).len(), EMBEDDING_INPUT_BYTES);
        assert_eq!(model_input("short"), "short");
        let filler = "look over the cache settings ".repeat(200);
        assert!(filler.len() > EMBEDDING_INPUT_BYTES);
        let text = format!("{filler} then merge PR #207");
        assert_eq!(tokenize(&text).words, tokenize(model_input(&filler)).words);
        assert!(!reads_as_report(&format!(
            "Please check. {filler} We fixed it."
        )));
    }
}
