//! Taking a text apart: pieces split at whitespace (and at a slash
//! between words, or a hyphen after a number), each read in turn as a
//! time of day, a large number, a Roman numeral, a year, an identifier or
//! words, with what it needs of the pieces around it.

use std::mem;

use super::identifiers::{
    IdentifierClass, abbreviated_year, identifier, is_unit, is_word_pair, number_and_word,
    number_key, roman_numeral,
};
use super::times::{is_how_often, percent_written_out, time_of_day, times_a_large_number};
use super::{Tokens, model_input, trim_punctuation};
use crate::normalize::{
    again_for_its_phrases, alias, american_spelling, irregular_base, is_stop_stem, is_stop_word,
    number_word, stem, strip_possessive, without_contraction,
};
use crate::veto::{ends, kind_of, named_kinds, placed_periods};
use crate::words::NUMBERED;

/// Takes a text apart into identifiers and content words: the words of
/// what the model reads of it ([`model_input`]), so that a text of
/// megabytes costs what a page does.
pub fn tokenize(text: &str) -> Tokens {
    let text = again_for_its_phrases(model_input(text));
    let pieces = pieces(&text);
    let mut reader = Reader {
        tokens: Tokens::default(),
        sentence_start: true,
        previous: "",
        skip_next: false,
    };
    for (at, piece) in pieces.iter().enumerate() {
        let next = pieces.get(at + 1).map_or("", |next| next.text);
        reader.read(piece, next);
    }
    let mut tokens = reader.tokens;
    tokens.periods = placed_periods(&tokens.keys);
    tokens.ends = ends(&tokens.keys);
    tokens.kinds = named_kinds(&tokens);
    tokens
}

/// A piece of a text: a whitespace-separated token without the
/// punctuation around it, or a part of one.
#[derive(Debug, Clone)]
struct Piece<'t> {
    /// The piece, punctuation trimmed.
    text: &'t str,
    /// Whether its raw token ends a sentence (and the piece is its last).
    ends_sentence: bool,
    /// The year its raw token stands for, when it is one written short
    /// ("'23").
    year: Option<String>,
}

/// The pieces of `text`, in order. Words joined by a slash ("REST/JSON",
/// "and/or") are taken one by one, and a number joined to its word by a
/// hyphen ("45-minute") as the number and the word.
fn pieces(text: &str) -> Vec<Piece<'_>> {
    text.split_whitespace()
        .flat_map(|raw| {
            let trimmed = trim_punctuation(raw);
            let ends_sentence = raw.ends_with(['.', '?', '!', ':', ';']);
            let year = abbreviated_year(raw);
            let parts: Vec<&str> = if is_word_pair(trimmed) {
                trimmed.split('/').collect()
            } else if let Some((number, word)) = number_and_word(trimmed) {
                vec![number, word]
            } else {
                vec![trimmed]
            };
            let last = parts.len().saturating_sub(1);
            parts.into_iter().enumerate().map(move |(at, text)| Piece {
                text,
                ends_sentence: at == last && ends_sentence,
                year: year.clone(),
            })
        })
        .collect()
}

/// The tokens read so far, and what reading the next piece needs of the
/// ones before it.
struct Reader<'t> {
    tokens: Tokens,
    /// Whether the next piece opens a sentence.
    sentence_start: bool,
    /// The piece before, as written.
    previous: &'t str,
    /// Whether the next piece was read with this one ("a.m." after "9").
    skip_next: bool,
}

impl<'t> Reader<'t> {
    /// Reads `piece`, followed by `next` (empty at the end).
    fn read(&mut self, piece: &Piece<'t>, next: &'t str) {
        if mem::take(&mut self.skip_next) {
            self.moved_past(piece);
            return;
        }
        if self.time_of_day(piece, next) {
            return;
        }
        if percent_written_out(piece.text, next) {
            // "60 percent" is "60%": the number, as "60%" is read.
            self.skip_next = true;
        }
        if self.large_number(piece, next) || self.how_often(piece, next) {
            return;
        }
        let first_of_sentence = mem::replace(&mut self.sentence_start, piece.ends_sentence);
        let before = mem::replace(&mut self.previous, piece.text);
        if self.numeral_or_year(piece, before) {
            return;
        }
        let trimmed = strip_possessive(piece.text);
        if trimmed.is_empty() {
            return;
        }
        // A unit written apart from its number ("100 MB", "2 GHz") is the
        // number's, as it is written joined ("100MB"): a word, neither an
        // acronym nor a name.
        let unit_after_number = is_unit(trimmed) && number_key(before).is_some();
        if !self.identifier(trimmed, unit_after_number, next) {
            self.words(trimmed, first_of_sentence, unit_after_number, next);
        }
    }

    /// Steps past `piece`, read with the one before.
    fn moved_past(&mut self, piece: &Piece<'t>) {
        self.sentence_start = piece.ends_sentence;
        self.previous = piece.text;
    }

    /// Pushes a number read from `written`.
    fn push_number(&mut self, number: String, written: &str) {
        self.tokens.push_key(number.clone(), written, true);
        self.tokens
            .identifiers
            .push((IdentifierClass::Number, number));
    }

    /// "9 a.m.", "9am", "09:00": one time of day, 9:00.
    fn time_of_day(&mut self, piece: &Piece<'t>, next: &str) -> bool {
        let Some((time, with_next)) = time_of_day(piece.text, next) else {
            return false;
        };
        self.skip_next = with_next;
        self.sentence_start = !with_next && piece.ends_sentence;
        self.previous = piece.text;
        self.push_number(time, piece.text);
        true
    }

    /// "200 thousand" is 200000, as "200k" and "200,000" are.
    fn large_number(&mut self, piece: &Piece<'t>, next: &str) -> bool {
        let Some(number) = times_a_large_number(piece.text, next) else {
            return false;
        };
        self.skip_next = true;
        self.sentence_start = false;
        self.previous = piece.text;
        self.push_number(number, piece.text);
        true
    }

    /// "keeps restarting", "repeatedly fails": how often, not what;
    /// filler as "still" is.
    fn how_often(&mut self, piece: &Piece<'t>, next: &str) -> bool {
        if !is_how_often(piece.text, next) {
            return false;
        }
        self.moved_past(piece);
        self.tokens
            .push_key(piece.text.to_lowercase(), piece.text, false);
        true
    }

    /// "SOC 2 Type II", "Phase III": a number written in Roman numerals
    /// after what is numbered; "'23": a year written short.
    fn numeral_or_year(&mut self, piece: &Piece<'t>, before: &str) -> bool {
        let numbered = || {
            NUMBERED
                .iter()
                .any(|word| word.eq_ignore_ascii_case(before))
        };
        if let Some(number) = roman_numeral(piece.text).filter(|_| numbered()) {
            self.push_number(number.to_string(), piece.text);
            return true;
        }
        if let Some(year) = &piece.year {
            self.push_number(year.clone(), piece.text);
            return true;
        }
        false
    }

    /// Reads `trimmed` as an identifier, when it is one. An acronym or a
    /// reference with a common long form ("DB", "PROD", "k8s") is that
    /// word, and a unit after its number is no acronym; code ("min()")
    /// stays code.
    fn identifier(&mut self, trimmed: &str, unit_after_number: bool, next: &str) -> bool {
        let identified = identifier(trimmed)
            .filter(|(class, key)| {
                !matches!(class, IdentifierClass::Acronym | IdentifierClass::Reference)
                    || alias(key) == key.as_str()
            })
            .filter(|_| !unit_after_number);
        let Some((class, key)) = identified else {
            return false;
        };
        let tokens = &mut self.tokens;
        if matches!(class, IdentifierClass::Reference | IdentifierClass::Code) {
            tokens.parties.push((tokens.keys.len(), key.clone(), true));
        }
        if class == IdentifierClass::Number {
            tokens.add_duration(Some(&key), trimmed, next);
        }
        tokens.push_key(key.clone(), trimmed, true);
        tokens.identifiers.push((class, key));
        true
    }

    /// Reads `trimmed`, no identifier, as words: a word, or the parts of
    /// a hyphenated one.
    fn words(
        &mut self,
        trimmed: &str,
        first_of_sentence: bool,
        unit_after_number: bool,
        next: &str,
    ) {
        let lower: String = without_contraction(&trimmed.to_lowercase())
            .chars()
            .filter(|c| *c != '\'' && *c != '’')
            .collect();
        // A capitalized word inside a sentence is a name ("Go", "Notion"),
        // as is a word with a capital inside ("iOS", "HubSpot"), and the
        // parts of a hyphenated word ("prod-us") are its own: never stop
        // words. "I" is a pronoun wherever it stands.
        let word = Word {
            capitalized: trimmed.starts_with(char::is_uppercase),
            compound: lower.contains('-'),
            name: lower != "i"
                && !unit_after_number
                && ((!first_of_sentence && trimmed.starts_with(char::is_uppercase))
                    || trimmed.chars().skip(1).any(char::is_uppercase)),
        };
        // Words joined by a hyphen without digits ("read-only") are taken
        // word by word. A range of months or days written with a hyphen
        // ("April-June") is one written with "to".
        let parts: Vec<&str> = lower.split('-').filter(|w| !w.is_empty()).collect();
        let range = parts.len() == 2
            && parts.iter().all(|part| {
                kind_of(alias(part)).is_some_and(|(kind, _)| matches!(kind, "months" | "weekdays"))
            });
        for (at, part) in parts.into_iter().enumerate() {
            if range && at == 1 {
                self.tokens.push_key("to".to_owned(), "to", false);
            }
            self.word(part, &word, next);
        }
    }

    /// Reads one word (a part of `word`), written as `written`.
    fn word(&mut self, written: &str, word: &Word, next: &str) {
        let tokens = &mut self.tokens;
        tokens.raw.push(written.to_owned());
        let spelled = american_spelling(written);
        // An irregular form is its verb ("wrote", "written": "write").
        let base = alias(irregular_base(&spelled).unwrap_or(&spelled));
        if let Some(number) = number_word(base) {
            tokens.add_duration(Some(number), number, next);
            tokens.push_key(number.to_owned(), written, true);
            tokens
                .identifiers
                .push((IdentifierClass::Number, number.to_owned()));
            return;
        }
        let plain = !word.compound && !word.name;
        if (is_stop_word(base) && plain) || !base.chars().any(char::is_alphabetic) {
            if base == "a" || base == "an" {
                // "a day", "an hour".
                tokens.add_duration(None, base, next);
            }
            tokens.push_key(base.to_owned(), written, false);
            return;
        }
        let stem = stem(base).into_owned();
        if is_stop_stem(&stem) && plain {
            tokens.push_key(stem, written, false);
            return;
        }
        if word.capitalized && !word.compound {
            tokens
                .parties
                .push((tokens.keys.len(), stem.clone(), word.name));
        }
        tokens.push_key(stem.clone(), written, true);
        tokens.written.push(base.to_owned());
        tokens.words.push(stem);
    }
}

/// What a word's writing says of it, for each of its parts.
struct Word {
    /// It starts with a capital.
    capitalized: bool,
    /// It is hyphenated.
    compound: bool,
    /// It is a name (see [`Reader::words`]).
    name: bool,
}

impl Tokens {
    /// Appends a token's `key`, with the token as `written` and whether it
    /// is content (see `shown`).
    pub(crate) fn push_key(&mut self, key: String, written: &str, content: bool) {
        self.keys.push(key);
        self.shown.push((written.to_lowercase(), content));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys of a text's numbers, in order.
    fn numbers(text: &str) -> Vec<String> {
        tokenize(text)
            .identifiers
            .into_iter()
            .filter(|(class, _)| *class == IdentifierClass::Number)
            .map(|(_, key)| key)
            .collect()
    }

    #[test]
    fn identifiers_are_classified() {
        let tokens = tokenize(
            "Patch OPS-1207 in lib/core/cache.py: flush() and max_age, @dana, #90, 45s, GMT, iPadOS, getValue()",
        );
        let classes: Vec<(IdentifierClass, &str)> = tokens
            .identifiers
            .iter()
            .map(|(class, key)| (*class, key.as_str()))
            .collect();
        assert_eq!(
            classes,
            [
                (IdentifierClass::Reference, "ops-1207"),
                (IdentifierClass::Path, "lib/core/cache.py"),
                (IdentifierClass::Code, "flush"),
                (IdentifierClass::Code, "max_age"),
                (IdentifierClass::Reference, "@dana"),
                (IdentifierClass::Number, "90"),
                (IdentifierClass::Number, "45"),
                (IdentifierClass::Acronym, "gmt"),
                (IdentifierClass::Code, "getvalue"),
            ]
        );
        // A word with a capital inside and nothing else of code is a name.
        assert_eq!(tokens.words, ["patch", "ipado"]);
    }

    #[test]
    fn a_number_joined_to_its_word_or_written_large_is_that_number() {
        assert_eq!(numbers("Schedule a 30-minute sync"), ["30"]);
        assert_eq!(
            tokenize("Schedule a 30-minute sync").words,
            ["schedul", "minut", "sync"]
        );
        assert_eq!(numbers("over 25k images"), ["25000"]);
        assert_eq!(numbers("4.6K rows"), ["4600"]);
        assert_eq!(numbers("about 300 thousand events"), ["300000"]);
        assert_eq!(numbers("2.5 million sessions"), ["2500000"]);
        assert_eq!(
            numbers("2.5M sessions, a 13B model, 4m of waiting"),
            ["2500000", "13000000000", "4"]
        );
        // Other hyphenated tokens with digits stay whole.
        assert_eq!(
            numbers("the sars-2 report for 2021-22"),
            Vec::<String>::new()
        );
        assert_eq!(numbers("NaN thousand, inf million"), Vec::<String>::new());
    }

    #[test]
    fn a_time_of_day_is_one_however_written() {
        assert_eq!(numbers("ship it at 7 a.m. GMT"), ["7:00"]);
        assert_eq!(numbers("ship it at 7am or 07:00"), ["7:00", "7:00"]);
        assert_eq!(
            numbers("at 8:15pm, not 20:15 or 12 AM"),
            ["20:15", "20:15", "0:00"]
        );
        // A number alone is no time, nor is a colon without two digits.
        assert_eq!(numbers("7 GMT, 4:5, 26:00"), ["7"]);
    }

    #[test]
    fn how_often_something_happens_is_filler_but_keep_with_an_object_is_a_word() {
        assert_eq!(
            tokenize("the download keeps stalling").words,
            ["download", "stall"]
        );
        assert!(
            tokenize("keep the old builds")
                .words
                .contains(&"keep".to_owned())
        );
    }

    #[test]
    fn an_irregular_form_is_read_as_its_verb() {
        assert_eq!(
            tokenize("who wrote the broken migration").words,
            tokenize("who writes the break migration").words
        );
    }
}
