//! The lexical side of the same-request judge: what two texts differ in,
//! word by word.
//!
//! Cosine similarity of sentence embeddings cannot see that one word
//! changes the work: "scale the brokers up" and "scale the brokers down"
//! score above 0.95, higher than many true rewordings. This module finds
//! such contrasts without a model:
//!
//! - **identifiers** are classified (a reference such as `#412` or
//!   `INC-4471`, a number, a path, an acronym, a piece of code) and
//!   compared per class: `#412` against `#418` is a contrast, `#412`
//!   against `PR 412` is not (a reference's digits are its number);
//! - **content words** (stop words out, Snowball-stemmed) are compared as
//!   multisets: the words only one side has are its *differing words*;
//! - **directions**: the same words with `to`/`from`/`into`/`before`/`after`
//!   pointing at different words ("UTC to local" / "local to UTC");
//! - **intents**: what each text asks for (review, fix, test, deploy, ...).
//!
//! [`compare`] gives all of it as a [`Contrast`]; the judge combines it with
//! the cosine.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

use super::related::{self, Reading};
use crate::embedding_input;

/// The class of an identifier-like token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IdentifierClass {
    /// A ticket, PR, issue, user, flag or other named id (`INC-4471`,
    /// `@alice`, `--force`, `us-east-1`, `v2.3`).
    Reference,
    /// A number, with a unit or as a word (`30`, `30s`, `60%`, `thirty`);
    /// `#412` keys to its number.
    Number,
    /// A file or module path (`src/api/list.rs`, `auth::session`).
    Path,
    /// An acronym of two or more capitals (`UTC`, `SQL`).
    Acronym,
    /// Code: `snake_case`, `camelCase`, `call()`, `object.method`.
    Code,
}

impl IdentifierClass {
    fn noun(self) -> &'static str {
        match self {
            IdentifierClass::Reference => "identifiers",
            IdentifierClass::Number => "numbers",
            IdentifierClass::Path => "paths",
            IdentifierClass::Acronym => "acronyms",
            IdentifierClass::Code => "code names",
        }
    }
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
    written: Vec<String>,
    /// Every token's key (a word's stem, an identifier's key, a stop word
    /// as written), in order: what direction markers point at.
    keys: Vec<String>,
    /// Every word as written (lowercase, stop words too, hyphenated words
    /// in parts), in order: what compounds ("sign up" for "signup") and
    /// acronyms ("pull request" for "PR") are spelled from.
    raw: Vec<String>,
    /// What may name a party: identifiers and capitalized words, each with
    /// its place in `keys`, its key, and whether it surely is a name (an
    /// identifier, or capitalized inside a sentence).
    parties: Vec<(usize, String, bool)>,
    /// The durations written ("3 months", "90-day", "30s", "an hour"),
    /// in order: [`same_durations`] matches one against the same length
    /// written in other units.
    durations: Vec<WrittenDuration>,
    /// Each period placed relative to now ("next year", "last sprint"):
    /// the place as [`PERIOD_PLACES`] means it, and the period's stem,
    /// for [`period_veto`].
    periods: Vec<(&'static str, String)>,
    /// Where the text moves something, if it does ("from X into Y": X
    /// and Y's keys), for [`swapped_ends`].
    ends: Option<(String, String)>,
    /// The names of [`NAMES_OF_A_KIND`] the text writes, each with its
    /// kind, in order, for [`kind_veto`].
    kinds: Vec<(&'static str, &'static str)>,
    /// Beside each of `keys`, the token as written (lowercase) and whether
    /// it is content (a word or an identifier, no stop word): what
    /// [`templates`] writes.
    shown: Vec<(String, bool)>,
}

/// A length of time as a text writes it.
#[derive(Debug, Clone, PartialEq)]
struct WrittenDuration {
    /// The number's key ("3", "90"); `None` for "a" or "an".
    number: Option<String>,
    /// The unit's stem when written as a word of its own ("month").
    unit: Option<String>,
    /// The length, in seconds.
    seconds: f64,
}

/// The most durations a text keeps: a text of the model's 4 KB could
/// write hundreds, and [`same_durations`] compares every pair.
const DURATIONS_KEPT: usize = 16;

/// Why two texts are different requests, found without a model.
#[derive(Debug, Clone, PartialEq)]
pub enum Veto {
    /// Some class of identifier has one on each side that the other lacks.
    Identifiers {
        /// The class.
        class: IdentifierClass,
        /// The first text's.
        a: String,
        /// The second text's.
        b: String,
    },
    /// Each side names something the other does not, of different classes
    /// ("PR #481" vs "base64(order_id)"): the texts are about different
    /// things.
    Named {
        /// The first text's.
        a: String,
        /// The second text's.
        b: String,
    },
    /// One or two content words swapped for as many others in otherwise
    /// much the same words, the shared ones in the same order ("open" vs
    /// "closed").
    Words {
        /// The first text's differing words.
        a: Vec<String>,
        /// The second text's.
        b: Vec<String>,
    },
    /// A word on one side and its opposite on the other ("up" vs "down",
    /// "enable" vs "disable"), whatever else differs, unless the other
    /// side has the word too ("release the lock" / "the lock is stuck;
    /// unlock it").
    Opposites {
        /// The first text's word (as a stem).
        a: String,
        /// Its opposite in the second.
        b: String,
    },
    /// The same words, with two parties trading places ("Bob reviews
    /// Alice's PR" vs "Alice reviews Bob's PR").
    Roles {
        /// One party.
        a: String,
        /// The other.
        b: String,
    },
    /// Each side names a thing of one kind that the other does not
    /// ("Android" vs "iOS", "Gmail" vs "Outlook"), however else the two
    /// are worded.
    Kind {
        /// The kind, as a plural noun ("platforms").
        kind: &'static str,
        /// The first text's name.
        a: &'static str,
        /// The second text's.
        b: &'static str,
    },
    /// The same words, with a direction marker pointing at different ones
    /// ("UTC to local" vs "local to UTC").
    Direction {
        /// The marker (`to`, `from`, ...).
        marker: &'static str,
        /// What it points at in the first text.
        a: String,
        /// And in the second.
        b: String,
    },
}

impl fmt::Display for Veto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Veto::Identifiers { class, a, b } => {
                write!(f, "different {} ({a} vs {b})", class.noun())
            }
            Veto::Named { a, b } => {
                // A call's key keeps its open parenthesis: close it to show.
                let shown = |key: &str| {
                    let open = key.matches('(').count() > key.matches(')').count();
                    format!("{key}{}", if open { ")" } else { "" })
                };
                write!(f, "different things named ({} vs {})", shown(a), shown(b))
            }
            Veto::Words { a, b } => {
                write!(f, "different words ({} vs {})", a.join(" "), b.join(" "))
            }
            Veto::Roles { a, b } => write!(f, "swapped roles ({a} and {b})"),
            Veto::Kind { kind, a, b } => write!(f, "different {kind} ({a} vs {b})"),
            Veto::Opposites { a, b } => write!(f, "opposite words ({a} vs {b})"),
            Veto::Direction { marker, a, b } => {
                write!(f, "opposite direction ({marker} {a} vs {marker} {b})")
            }
        }
    }
}

/// What two texts share and where they differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Contrast {
    /// The first veto found, if any.
    pub veto: Option<Veto>,
    /// The first text's differing words, in order, as written (for the
    /// residual embedding).
    pub only_a: Vec<String>,
    /// The second text's.
    pub only_b: Vec<String>,
    /// Jaccard similarity of the two content-word sets (1 when both have
    /// none).
    pub word_jaccard: f32,
    /// Both texts ask for something recognizable and share no intent.
    pub intent_mismatch: bool,
    /// One text reads as a report of work done or found ("the export
    /// failed because the credentials expired; I rotated them") and the
    /// other as a request: an answer is not a repeat of its question. Two
    /// statements are never that ("I ran the query: 1,284 rows" / "The
    /// query gives 1,284 rows"): two replies, however each is phrased.
    pub report_vs_request: bool,
    /// The share of the differing words (of those WordNet knows) that
    /// have a related word on the other side ([`related::related_cover`]).
    pub related_cover: f32,
    /// The swapped words WordNet calls synonyms, one of each side, as
    /// written ("clean", "tidy"), when a words veto was weighed: they
    /// lifted it, or were left out of the swap it weighed.
    pub synonyms: Vec<(String, String)>,
    /// One text asks for the same work somewhere else and says so ("the
    /// iOS app crashes at startup too", "the April run is due as well",
    /// "Oakridge is also getting 409s") and the other does not
    /// ([`adds_to_earlier_work`]): the work of the other text, for another
    /// target.
    pub adds_on_one_side: bool,
}

/// Takes a text apart into identifiers and content words: the words of
/// its first [`EMBEDDING_INPUT_BYTES`](crate::EMBEDDING_INPUT_BYTES), what
/// the model reads of it ([`embedding_input`]), so that a text of
/// megabytes costs what a page does.
pub fn tokenize(text: &str) -> Tokens {
    let text = again_for_its_phrases(embedding_input(text));
    let text = text.as_ref();
    let mut tokens = Tokens::default();
    // Words joined by a slash ("REST/JSON", "and/or") are taken one by one.
    // Each piece with whether its raw token ends a sentence, and the year
    // it stands for when it is one written short ("'23").
    let pieces = text.split_whitespace().flat_map(|raw| {
        let trimmed = trim_punctuation(raw);
        let ends_sentence = raw.ends_with(['.', '?', '!', ':', ';']);
        let year = abbreviated_year(raw);
        let parts: Vec<(&str, bool)> = if is_word_pair(trimmed) {
            trimmed.split('/').map(|part| (part, false)).collect()
        } else if let Some((number, word)) = number_and_word(trimmed) {
            vec![(number, false), (word, false)]
        } else {
            vec![(trimmed, false)]
        };
        let last = parts.len().saturating_sub(1);
        parts
            .into_iter()
            .enumerate()
            .map(move |(at, (part, _))| (part, at == last && ends_sentence, year.clone()))
    });
    let pieces: Vec<(&str, bool, Option<String>)> = pieces.collect();
    let mut sentence_start = true;
    let mut previous = "";
    let mut skip_next = false;
    for (at, (trimmed, raw_end, year)) in pieces.iter().cloned().enumerate() {
        if std::mem::take(&mut skip_next) {
            sentence_start = raw_end;
            previous = trimmed;
            continue;
        }
        let next = pieces.get(at + 1).map_or("", |(next, _, _)| *next);
        if let Some((time, with_next)) = time_of_day(trimmed, next) {
            // "9 a.m.", "9am", "09:00": one time of day, 9:00.
            skip_next = with_next;
            sentence_start = !with_next && raw_end;
            previous = trimmed;
            tokens.push_key(time.clone(), trimmed, true);
            tokens.identifiers.push((IdentifierClass::Number, time));
            continue;
        }
        if next.eq_ignore_ascii_case("percent") && number_key(trimmed).is_some() {
            // "60 percent" is "60%": the number, as "60%" is read.
            skip_next = true;
        }
        if let Some(number) = times_a_large_number(trimmed, next) {
            // "200 thousand" is 200000, as "200k" and "200,000" are.
            skip_next = true;
            sentence_start = false;
            previous = trimmed;
            tokens.push_key(number.clone(), trimmed, true);
            tokens.identifiers.push((IdentifierClass::Number, number));
            continue;
        }
        // "keeps restarting", "repeatedly fails": how often, not what;
        // filler as "still" is.
        if is_how_often(trimmed, next) {
            sentence_start = raw_end;
            previous = trimmed;
            tokens.push_key(trimmed.to_lowercase(), trimmed, false);
            continue;
        }
        let first_of_sentence = std::mem::replace(&mut sentence_start, raw_end);
        let before = std::mem::replace(&mut previous, trimmed);
        let numbered = || {
            NUMBERED
                .iter()
                .any(|word| word.eq_ignore_ascii_case(before))
        };
        if let Some(number) = roman_numeral(trimmed).filter(|_| numbered()) {
            // "SOC 2 Type II", "Phase III": a number written in Roman
            // numerals after what is numbered.
            tokens.push_key(number.to_string(), trimmed, true);
            tokens
                .identifiers
                .push((IdentifierClass::Number, number.to_string()));
            continue;
        }
        if let Some(year) = year {
            tokens.push_key(year.clone(), trimmed, true);
            tokens.identifiers.push((IdentifierClass::Number, year));
            continue;
        }
        let trimmed = strip_possessive(trimmed);
        if trimmed.is_empty() {
            continue;
        }
        // A unit written apart from its number ("100 MB", "2 GHz") is the
        // number's, as it is written joined ("100MB"): a word, neither an
        // acronym nor a name.
        let unit_after_number = is_unit(trimmed) && number_key(before).is_some();
        // An acronym or a reference with a common long form ("DB", "PROD",
        // "k8s") is that word; code ("min()") stays code.
        let identified = identifier(trimmed)
            .filter(|(class, key)| {
                !matches!(class, IdentifierClass::Acronym | IdentifierClass::Reference)
                    || alias(key) == key.as_str()
            })
            .filter(|_| !unit_after_number);
        if let Some((class, key)) = identified {
            if matches!(class, IdentifierClass::Reference | IdentifierClass::Code) {
                tokens.parties.push((tokens.keys.len(), key.clone(), true));
            }
            if class == IdentifierClass::Number {
                tokens.add_duration(Some(&key), trimmed, next);
            }
            tokens.push_key(key.clone(), trimmed, true);
            tokens.identifiers.push((class, key));
            continue;
        }
        let lower: String = without_contraction(&trimmed.to_lowercase())
            .chars()
            .filter(|c| *c != '\'' && *c != '’')
            .collect();
        // A capitalized word inside a sentence is a name ("Go", "Notion"),
        // as is a word with a capital inside ("iOS", "HubSpot"), and the
        // parts of a hyphenated word ("prod-us") are its own: never stop
        // words. "I" is a pronoun wherever it stands.
        let compound = lower.contains('-');
        let name = lower != "i"
            && !unit_after_number
            && ((!first_of_sentence && trimmed.starts_with(char::is_uppercase))
                || trimmed.chars().skip(1).any(char::is_uppercase));
        // Words joined by a hyphen without digits ("read-only") are taken
        // word by word.
        // A range of months or days written with a hyphen ("April-June")
        // is one written with "to".
        let parts: Vec<&str> = lower.split('-').filter(|w| !w.is_empty()).collect();
        let range = parts.len() == 2
            && parts.iter().all(|part| {
                kind_of(alias(part)).is_some_and(|(kind, _)| matches!(kind, "months" | "weekdays"))
            });
        for (at, word) in parts.into_iter().enumerate() {
            if range && at == 1 {
                tokens.push_key("to".to_owned(), "to", false);
            }
            tokens.raw.push(word.to_owned());
            let written = word;
            let spelled = american_spelling(word);
            // An irregular form is its verb ("wrote", "written": "write").
            let word = alias(irregular_base(&spelled).unwrap_or(&spelled));
            if let Some(number) = number_word(word) {
                tokens.add_duration(Some(number), number, next);
                tokens.push_key(number.to_owned(), written, true);
                tokens
                    .identifiers
                    .push((IdentifierClass::Number, number.to_owned()));
                continue;
            }
            if (is_stop_word(word) && !compound && !name) || !word.chars().any(char::is_alphabetic)
            {
                if word == "a" || word == "an" {
                    // "a day", "an hour".
                    tokens.add_duration(None, word, next);
                }
                tokens.push_key(word.to_owned(), written, false);
                continue;
            }
            let stem = stemmer().stem(word).into_owned();
            if STOP_STEMS.contains(&stem.as_str()) && !compound && !name {
                tokens.push_key(stem, written, false);
                continue;
            }
            if trimmed.starts_with(char::is_uppercase) && !compound {
                tokens.parties.push((tokens.keys.len(), stem.clone(), name));
            }
            tokens.push_key(stem.clone(), written, true);
            tokens.written.push(word.to_owned());
            tokens.words.push(stem);
        }
    }
    tokens.periods = placed_periods(&tokens.keys);
    tokens.ends = ends(&tokens.keys);
    tokens.kinds = named_kinds(&tokens);
    tokens
}

impl Tokens {
    /// Appends a token's `key`, with the token as `written` and whether it
    /// is content (see `shown`).
    fn push_key(&mut self, key: String, written: &str, content: bool) {
        self.keys.push(key);
        self.shown.push((written.to_lowercase(), content));
    }

    /// Keeps the duration that a number (`number`, its key; `None` for
    /// "a"/"an") written as `token` makes with its unit: a suffix of the
    /// token ("30s", "24h", "15min") or the next word ("3 months").
    fn add_duration(&mut self, number: Option<&str>, token: &str, next: &str) {
        if self.durations.len() >= DURATIONS_KEPT {
            return;
        }
        let count = number.map_or(Some(1.0), |key| key.parse::<f64>().ok());
        let Some(count) = count else { return };
        let suffix = token.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ',');
        let (unit, seconds) = match suffix_seconds(suffix) {
            Some(seconds) if number.is_some() => (None, seconds),
            _ => {
                let next = next.to_lowercase();
                let unit = alias(&next);
                let Some(seconds) = unit_seconds(unit) else {
                    return;
                };
                (Some(stemmer().stem(unit).into_owned()), seconds)
            }
        };
        self.durations.push(WrittenDuration {
            number: number.map(str::to_owned),
            unit,
            seconds: count * seconds,
        });
    }
}

/// The seconds of a unit of time written as a word ("months", "day").
fn unit_seconds(word: &str) -> Option<f64> {
    const DAY: f64 = 86_400.0;
    Some(match word {
        "second" | "seconds" => 1.0,
        "minute" | "minutes" => 60.0,
        "hour" | "hours" => 3_600.0,
        "day" | "days" => DAY,
        "week" | "weeks" => 7.0 * DAY,
        // The mean month and year of the Gregorian calendar: "3 months"
        // is about 90 days, "12 months" a year.
        "month" | "months" => 30.436_875 * DAY,
        "year" | "years" => 365.242_5 * DAY,
        _ => return None,
    })
}

/// The seconds of a unit written after a number's digits ("30s", "24h",
/// "15min", "2hrs", "3d"). A lowercase "m" is minutes, as in
/// [`number_key`].
fn suffix_seconds(suffix: &str) -> Option<f64> {
    match suffix {
        "s" | "sec" | "secs" => Some(1.0),
        "m" | "min" | "mins" => Some(60.0),
        "h" | "hr" | "hrs" => Some(3_600.0),
        "d" => Some(86_400.0),
        _ => None,
    }
}

/// Whether two durations are the same length: within 3%, so that "3
/// months" is "90 days" and "52 weeks" a year.
fn same_length(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.03 * a.max(b)
}

/// Removes from each side's unmatched numbers (`extra`) and words
/// (`words`, stems) the parts of a duration the other side writes with
/// the same length in other units ("3 months" / "90 days", "24 hours" / "a
/// day", "30s" / "30 seconds").
fn same_durations(
    (ta, tb): (&Tokens, &Tokens),
    (extra_a, extra_b): (&mut Vec<String>, &mut Vec<String>),
    (words_a, words_b): (&mut Vec<String>, &mut Vec<String>),
) {
    fn unexplained(duration: &WrittenDuration, extra: &[String], words: &[String]) -> bool {
        duration.number.as_ref().is_some_and(|n| extra.contains(n))
            || duration.unit.as_ref().is_some_and(|u| words.contains(u))
    }
    fn explain(duration: &WrittenDuration, extra: &mut Vec<String>, words: &mut Vec<String>) {
        let remove = |list: &mut Vec<String>, item: &Option<String>| {
            if let Some(item) = item
                && let Some(at) = list.iter().position(|x| x == item)
            {
                list.remove(at);
            }
        };
        remove(extra, &duration.number);
        remove(words, &duration.unit);
    }
    for da in &ta.durations {
        for db in &tb.durations {
            if same_length(da.seconds, db.seconds)
                && (unexplained(da, extra_a, words_a) || unexplained(db, extra_b, words_b))
            {
                explain(da, extra_a, words_a);
                explain(db, extra_b, words_b);
            }
        }
    }
}

/// Removes from `times` each time on the hour ("9:00") whose hour alone
/// ("9") is among `numbers`, and that number.
fn hours_alone(times: &mut Vec<String>, numbers: &mut Vec<String>) {
    times.retain(|time| {
        let Some(hour) = time.strip_suffix(":00") else {
            return true;
        };
        match numbers.iter().position(|number| number == hour) {
            Some(at) => {
                numbers.remove(at);
                false
            }
            None => true,
        }
    });
}

/// A time of day written as "H:MM" on a 24-hour clock ("09:00" is
/// "9:00", "9:30pm" is "21:30"), with whether it took `next` too ("9"
/// before "a.m."). A number alone is no time; one before "am"/"pm", or
/// with a colon and two digits, is.
fn time_of_day(token: &str, next: &str) -> Option<(String, bool)> {
    let meridiem = |text: &str| -> Option<bool> {
        match text.to_ascii_lowercase().trim_end_matches('.') {
            "am" | "a.m" => Some(false),
            "pm" | "p.m" => Some(true),
            _ => None,
        }
    };
    if !token.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let digits_end = token
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(token.len());
    let (clock, suffix) = token.split_at(digits_end);
    let (pm, with_next) = if suffix.is_empty() {
        match meridiem(next) {
            Some(pm) => (Some(pm), true),
            None => (None, false),
        }
    } else {
        (Some(meridiem(suffix)?), false)
    };
    let (hour, minute) = match clock.split_once(':') {
        Some((hour, minute)) if minute.len() == 2 => (hour, minute.parse::<u32>().ok()?),
        Some(_) => return None,
        None if pm.is_some() => (clock, 0),
        None => return None,
    };
    let hour: u32 = hour.parse().ok()?;
    if hour > 23 || minute > 59 {
        return None;
    }
    let hour = match pm {
        Some(_) if !(1..=12).contains(&hour) => return None,
        Some(pm) => hour % 12 + if pm { 12 } else { 0 },
        None => hour,
    };
    Some((format!("{hour}:{minute:02}"), with_next))
}

/// The number `token` and `next` write together when `next` is
/// "thousand", "million" or "billion" ("200 thousand" is 200000).
fn times_a_large_number(token: &str, next: &str) -> Option<String> {
    let times = [("thousand", 1e3), ("million", 1e6), ("billion", 1e9)]
        .into_iter()
        .find(|(word, _)| next.eq_ignore_ascii_case(word))?
        .1;
    // "ten thousand" is 10000 too.
    let token = number_word(&token.to_lowercase()).unwrap_or(token);
    if !token.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let number: f64 = token.replace(',', "").parse().ok()?;
    Some(number_text(number * times))
}

/// A number's key, as digits: "2300" for 2.3 thousand, whatever the last
/// bit of the product.
fn number_text(value: f64) -> String {
    let rounded = (value * 1e6).round() / 1e6;
    format!("{rounded}")
}

/// Whether `word` (before `next`) says how often something happens,
/// not what: "keep"/"keeps" before a gerund ("keeps restarting"),
/// "repeated", "repeatedly", "constantly", "continually".
fn is_how_often(word: &str, next: &str) -> bool {
    // Compared without lowercasing: this runs for every word of a text.
    let is = |words: &[&str]| words.iter().any(|w| word.eq_ignore_ascii_case(w));
    if is(&["keep", "keeps", "kept"]) {
        let gerund = next.len() > 4
            && next
                .get(next.len() - 3..)
                .is_some_and(|end| end.eq_ignore_ascii_case("ing"));
        return gerund;
    }
    is(&[
        "repeated",
        "repeatedly",
        "constantly",
        "continually",
        "continuously",
    ])
}

/// What is numbered, in Roman numerals too ("Type II", "Phase III",
/// "Tier I"): a Roman numeral after one of these is a number.
const NUMBERED: &[&str] = &[
    "type",
    "phase",
    "tier",
    "level",
    "stage",
    "part",
    "class",
    "grade",
    "gen",
    "generation",
    "chapter",
    "volume",
    "vol",
    "season",
    "series",
    "step",
    "round",
    "category",
    "article",
    "title",
    "section",
    "appendix",
    "schedule",
    "annex",
    "book",
];

/// The value of a Roman numeral from I to XX, written in capitals.
fn roman_numeral(token: &str) -> Option<u32> {
    const NUMERALS: [&str; 20] = [
        "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV",
        "XV", "XVI", "XVII", "XVIII", "XIX", "XX",
    ];
    NUMERALS
        .iter()
        .position(|numeral| *numeral == token)
        .and_then(|at| u32::try_from(at + 1).ok())
}

/// A reference on one side and the same number on the other, with the
/// reference's letters beginning a word there ("INC-5120" and "incident
/// 5120", "TKT-88" and "ticket 88"): one thing, written two ways. Both
/// leave the unmatched identifiers, and the word leaves the other side's
/// differing words.
fn spell_out_references(
    references: &mut Vec<String>,
    their_numbers: &mut Vec<String>,
    their_words: &mut Vec<String>,
) {
    references.retain(|reference| {
        let letters: String = reference
            .chars()
            .take_while(char::is_ascii_alphabetic)
            .collect();
        let digits = reference[letters.len()..].trim_start_matches(['-', '_', '#']);
        if letters.len() < 2 || digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return true;
        }
        let (Some(number_at), Some(word_at)) = (
            their_numbers.iter().position(|number| number == digits),
            their_words
                .iter()
                .position(|word| word.starts_with(&letters)),
        ) else {
            return true;
        };
        their_numbers.remove(number_at);
        their_words.remove(word_at);
        false
    });
}

/// Removes from `names` each dotted name ("orders.created_at",
/// "orderservice.calculatetotals") whose every part the other side has,
/// as an identifier of its own (`their_names`) or as a word
/// (`their_words`, stems), and those parts from the other side.
fn spell_out_dotted(
    names: &mut Vec<String>,
    their_names: &mut Vec<String>,
    their_words: &mut Vec<String>,
) {
    names.retain(|name| {
        let parts: Vec<&str> = name.split('.').filter(|part| !part.is_empty()).collect();
        if parts.len() < 2 || parts.iter().any(|part| part.contains('/')) {
            return true;
        }
        // The qualifier left out ("analytics.store_locations" /
        // "store_locations"): the same name.
        if let Some(at) = parts
            .last()
            .and_then(|last| their_names.iter().position(|theirs| theirs == last))
        {
            their_names.remove(at);
            return false;
        }
        let (mut names_left, mut words_left) = (their_names.clone(), their_words.clone());
        for part in &parts {
            if let Some(at) = names_left.iter().position(|theirs| theirs == part) {
                names_left.remove(at);
                continue;
            }
            let stem = stemmer().stem(part);
            match words_left.iter().position(|word| *word == stem) {
                Some(at) => {
                    words_left.remove(at);
                }
                None => return true,
            }
        }
        *their_names = names_left;
        *their_words = words_left;
        false
    });
}

/// Whether an identifier's key is a path or an address (`alb-logs/`,
/// `s3://bucket`, `auth::session`).
fn is_path_key(key: &str) -> bool {
    key.contains('/') || key.contains('\\') || key.contains("::")
}

/// Takes out of `paths` each path or address that the other text writes
/// in words or names ("alb-logs/" / "the ALB logs"): all its parts, the
/// scheme aside ("s3://", "https://"), or all those of its last segment
/// ("modules/vpc-peering" / "the vpc-peering module"). The other side's
/// differing words and names it takes are taken out with it. Only when
/// the other side names no path of its own that differs, since two paths
/// are compared as paths.
fn spell_out_paths(
    paths: &mut Vec<String>,
    their_names: &mut Vec<String>,
    their_words: &mut Vec<String>,
    theirs: &Tokens,
) {
    if their_names.iter().any(|key| is_path_key(key)) {
        return;
    }
    paths.retain(|path| {
        if !is_path_key(path) {
            return true;
        }
        let without_scheme = path
            .split_once("://")
            .map_or(path.as_str(), |(_, rest)| rest);
        let segments: Vec<&str> = without_scheme
            .split(['/', '\\', ':'])
            .filter(|segment| !segment.is_empty())
            .collect();
        let parts = |text: &str| -> Vec<String> {
            text.split(|c: char| !c.is_alphanumeric())
                .filter(|part| !part.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let mut candidates = vec![parts(without_scheme)];
        if segments.len() > 1
            && let Some(last) = segments.last()
        {
            candidates.push(parts(last));
        }
        for candidate in candidates.into_iter().filter(|parts| !parts.is_empty()) {
            let (mut names_left, mut words_left) = (their_names.clone(), their_words.clone());
            let written = candidate.iter().all(|part| {
                if let Some(at) = names_left.iter().position(|name| name == part) {
                    names_left.remove(at);
                    return true;
                }
                let stem = stemmer().stem(part);
                if let Some(at) = words_left.iter().position(|word| *word == stem) {
                    words_left.remove(at);
                    return true;
                }
                // A content word or name of the other side that this side
                // writes too: no difference of either side's. A stop word
                // ("a", "for") names no part of a path.
                theirs
                    .keys
                    .iter()
                    .zip(&theirs.shown)
                    .any(|(key, (_, content))| *content && (*key == stem || key == part))
            });
            if written {
                *their_names = names_left;
                *their_words = words_left;
                return false;
            }
        }
        true
    });
}

/// Phrases that mean "again" ("once more", "one more time"): a re-asked
/// request adds them, and their words ("once", "more", "one") would
/// otherwise count as a difference, "one" even as a number.
const AGAIN_PHRASES: [&str; 3] = ["once more", "once again", "one more time"];

/// `text` with each phrase of [`AGAIN_PHRASES`] (any case, whole words)
/// written as "again".
fn again_for_its_phrases(text: &str) -> std::borrow::Cow<'_, str> {
    // Every phrase starts with an "o" at the start of a word: look there
    // only, without lowercasing the text.
    let bytes = text.as_bytes();
    let at_word_end = |at: usize| bytes.get(at).is_none_or(|b| !b.is_ascii_alphanumeric());
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let starts_word = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        if starts_word && bytes[at].eq_ignore_ascii_case(&b'o') {
            let phrase_end = AGAIN_PHRASES.iter().find_map(|phrase| {
                let end = at + phrase.len();
                (bytes.get(at..end)?.eq_ignore_ascii_case(phrase.as_bytes()) && at_word_end(end))
                    .then_some(end)
            });
            if let Some(end) = phrase_end {
                found.push((at, end));
                at = end;
                continue;
            }
        }
        at += 1;
    }
    if found.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (at, end) in found {
        // Both ends are ASCII bytes of the phrase, so char boundaries.
        out.push_str(&text[from..at]);
        out.push_str("again");
        from = end;
    }
    out.push_str(&text[from..]);
    std::borrow::Cow::Owned(out)
}

/// One text as the judge reads it, everything [`compare_read`] needs of it
/// alone: its tokens, its WordNet reading, whether it reads as a report or
/// a statement, and its intents. A detector compares a text with many
/// earlier ones; read once, it is compared with each for the pairwise
/// work alone.
#[derive(Debug, Clone)]
pub struct ReadText {
    tokens: Tokens,
    wordnet: related::Reading,
    report: bool,
    statement: bool,
    intents: u32,
    adds_on: bool,
}

impl ReadText {
    /// Reads `text`.
    pub fn new(text: &str) -> ReadText {
        let tokens = tokenize(text);
        let intents = intents(&tokens);
        let report = reads_as_report(text);
        ReadText {
            tokens,
            wordnet: related::read(text),
            report,
            statement: report || states_without_reporting(text),
            intents,
            adds_on: adds_to_earlier_work(text),
        }
    }

    /// Whether the text reads as a statement ([`reads_as_statement`]).
    pub fn reads_as_statement(&self) -> bool {
        self.statement
    }
}

/// Compares two texts: their vetoes, differing words and intents.
pub fn compare(a: &str, b: &str) -> Contrast {
    compare_read(&ReadText::new(a), &ReadText::new(b))
}

/// Compares two texts read already ([`ReadText`]): what [`compare`] does
/// after reading them.
pub fn compare_read(a: &ReadText, b: &ReadText) -> Contrast {
    let (ta, tb) = (&a.tokens, &b.tokens);
    let (mut only_a_words, mut only_b_words) = multiset_difference(&ta.words, &tb.words);
    // One word on one side, spelled as two on the other ("signup", "sign
    // up"): no difference.
    join_compounds(&mut only_a_words, &mut only_b_words, tb);
    join_compounds(&mut only_b_words, &mut only_a_words, ta);
    shortened_forms(&mut only_a_words, &mut only_b_words, ta, tb);
    let (mut extra_a, mut extra_b) = unmatched_identifiers(ta, tb);
    // An acronym on one side, its words on the other ("PR", "pull
    // request"): no difference.
    spell_out_acronyms(&mut extra_a, &mut only_b_words, tb);
    spell_out_acronyms(&mut extra_b, &mut only_a_words, ta);
    spell_out_references(&mut extra_a, &mut extra_b, &mut only_b_words);
    spell_out_references(&mut extra_b, &mut extra_a, &mut only_a_words);
    // A dotted name on one side, its parts on the other
    // ("orders.created_at", "created_at on the orders table"): no
    // difference.
    spell_out_dotted(&mut extra_a, &mut extra_b, &mut only_b_words);
    spell_out_dotted(&mut extra_b, &mut extra_a, &mut only_a_words);
    // A path or address on one side, its parts in words on the other
    // ("alb-logs/", "the ALB logs"; "s3://corp-log-archive", "the
    // corp-log-archive bucket"): no difference.
    spell_out_paths(&mut extra_a, &mut extra_b, &mut only_b_words, tb);
    spell_out_paths(&mut extra_b, &mut extra_a, &mut only_a_words, ta);
    // A duration on one side, the same length in other units on the
    // other ("3 months", "90 days"): no difference.
    same_durations(
        (ta, tb),
        (&mut extra_a, &mut extra_b),
        (&mut only_a_words, &mut only_b_words),
    );
    // A time on the hour on one side, its hour alone on the other ("9:00
    // UTC", "9 UTC"): no difference.
    hours_alone(&mut extra_a, &mut extra_b);
    hours_alone(&mut extra_b, &mut extra_a);
    let word_jaccard = jaccard(&ta.words, &tb.words);
    // WordNet's reading of each text, for synonyms and `related_cover`.
    let (reading_a, reading_b) = (&a.wordnet, &b.wordnet);
    // The synonyms among the swapped words, when a words veto is weighed.
    let mut synonyms = Vec::new();
    let veto = identifier_veto(ta, tb, (&extra_a, &extra_b))
        .or_else(|| {
            // Identifiers of different classes, one on each side, that no
            // spelled-out acronym explains (numbers aside: "one day" is
            // not a name).
            let named = |extra: &[String]| {
                extra
                    .iter()
                    .find(|key| !key.chars().all(|c| c.is_ascii_digit() || c == '.'))
                    .cloned()
            };
            match (named(&extra_a), named(&extra_b)) {
                (Some(a), Some(b)) => Some(Veto::Named { a, b }),
                _ => None,
            }
        })
        .or_else(|| opposites_veto(&only_a_words, &only_b_words, ta, tb, word_jaccard))
        .or_else(|| period_veto(ta, tb, word_jaccard))
        .or_else(|| {
            // A word may stand against an identifier of any class ("unit"
            // tests, "e2e" tests): both count as what a side swapped.
            let swapped_a: Vec<String> = only_a_words.iter().chain(&extra_a).cloned().collect();
            let swapped_b: Vec<String> = only_b_words.iter().chain(&extra_b).cloned().collect();
            words_veto(&swapped_a, &swapped_b, word_jaccard)?;
            // Synonyms by WordNet are no swap ("clean up" / "tidy up"):
            // they can lift the veto, never make one (cancelling them out
            // of a longer rewording would leave a short swap behind).
            let (kept_a, kept_b, found) = without_synonyms(
                (reading_a, reading_b),
                (ta, tb),
                &only_a_words,
                &only_b_words,
            );
            synonyms = found;
            let kept_a: Vec<String> = kept_a.into_iter().chain(extra_a.iter().cloned()).collect();
            let kept_b: Vec<String> = kept_b.into_iter().chain(extra_b.iter().cloned()).collect();
            // A swap says "the same text, one or two words changed": a
            // text written anew, whose shared words stand in another
            // order, is no such edit, and its differing words are weighed
            // instead ("Drop support for iOS 15 in the next release" /
            // "Starting with the next release, stop supporting iOS 15").
            words_veto(&kept_a, &kept_b, word_jaccard).filter(|_| shared_words_in_order(ta, tb))
        })
        // A one-word swap of names is a words veto above; a thing of one
        // kind, or a name in one place, on each side is a contrast however
        // else the texts differ.
        .or_else(|| kind_veto(ta, tb))
        .or_else(|| names_in_one_place(ta, tb))
        .or_else(|| direction_veto(ta, tb, &only_a_words, &only_b_words))
        .or_else(|| swapped_ends(ta, tb))
        .or_else(|| {
            (only_a_words.is_empty() && only_b_words.is_empty())
                .then(|| roles_veto(ta, tb))
                .flatten()
        })
        .or_else(|| {
            (only_a_words.is_empty() && only_b_words.is_empty())
                .then(|| marker_veto(ta, tb))
                .flatten()
        });
    let only_a = as_written(ta, &only_a_words);
    let only_b = as_written(tb, &only_b_words);
    let related_cover = related::cover(reading_a, reading_b);
    let (intents_a, intents_b) = (a.intents, b.intents);
    let intent_mismatch = intents_a != 0 && intents_b != 0 && intents_a & intents_b == 0;
    Contrast {
        veto,
        only_a,
        only_b,
        word_jaccard,
        intent_mismatch,
        report_vs_request: a.report != b.report && !(a.statement && b.statement),
        related_cover,
        synonyms,
        adds_on_one_side: a.adds_on != b.adds_on,
    }
}

/// The placeholder [`templates`] writes for a word both texts have.
pub const TEMPLATE_PLACEHOLDER: &str = "X";

/// Each text as written (lowercase, punctuation out), with every content
/// word and identifier the other text has too written as
/// [`TEMPLATE_PLACEHOLDER`]: what is left is what each does with what
/// both name. "Prepare the Q2 VAT return" and "Pay the Q2 VAT bill once
/// the return is submitted" become "prepare the X X X" and "pay the X X
/// bill once the X is submitted": their cosine tells another action on the
/// same thing from the same action reworded, which the whole texts'
/// cosine, dominated by the shared names, cannot.
pub fn templates(a: &ReadText, b: &ReadText) -> (String, String) {
    fn template(mine: &Tokens, theirs: &Tokens) -> String {
        let shared: std::collections::HashSet<&str> = theirs
            .keys
            .iter()
            .zip(&theirs.shown)
            .filter(|(_, (_, content))| *content)
            .map(|(key, _)| key.as_str())
            .collect();
        let mut out = String::new();
        for (key, (written, content)) in mine.keys.iter().zip(&mine.shown) {
            if !out.is_empty() {
                out.push(' ');
            }
            if *content && shared.contains(key.as_str()) {
                out.push_str(TEMPLATE_PLACEHOLDER);
            } else {
                out.push_str(written);
            }
        }
        out
    }
    (
        template(&a.tokens, &b.tokens),
        template(&b.tokens, &a.tokens),
    )
}

/// Whether `text` says it asks for work done or asked for already, once
/// more for something else: "too" closing a clause ("the iOS build
/// crashes at startup too; track that down"), "as well" (not "as well
/// as", which is "and"), "likewise", or "also" inside a sentence ("Oakridge
/// Bank's Okta is also getting 409s"). An "Also" that opens a sentence
/// adds a part to the same request ("Also point out the ones that bill
/// per connection"), and "too" before a word is a degree ("way too big").
/// Like [`tokenize`], it reads what the model reads of the text.
pub fn adds_to_earlier_work(text: &str) -> bool {
    let lower = embedding_input(text).to_lowercase();
    let tokens: Vec<&str> = lower.split_whitespace().collect();
    let word = |at: usize| tokens.get(at).map(|raw| trim_punctuation(raw));
    tokens.iter().enumerate().any(|(at, raw)| {
        let opens_sentence = at
            .checked_sub(1)
            .and_then(|before| tokens.get(before))
            .is_none_or(|before| before.ends_with(['.', '?', '!', ':', ';']));
        match trim_punctuation(raw) {
            "too" => raw.ends_with([',', '.', ';', ':', '!', '?', ')']) || at + 1 == tokens.len(),
            "likewise" => true,
            "also" => !opens_sentence,
            "as" => word(at + 1) == Some("well") && word(at + 2) != Some("as"),
            _ => false,
        }
    })
}

/// Whether `text` reads as a report (of work done, a cause found or a
/// figure measured) rather than a request or a topic: it asks nothing
/// (no question mark, no "please", no "can you", no "I need", no
/// imperative first word) and states a cause, an outcome, what someone
/// did, or what a figure was. Like [`tokenize`], it reads what the model
/// reads of the text.
pub fn reads_as_report(text: &str) -> bool {
    let lower = embedding_input(text).to_lowercase();
    let Some(words) = words_if_no_question(&lower) else {
        return false;
    };
    // A text that opens with an identifier ("test_checkout_concurrency is
    // flaky because ...") does not open with a verb, whatever the
    // identifier's first part is.
    let opens_with_identifier = embedding_input(text)
        .split_whitespace()
        .next()
        .is_some_and(|first| identifier(trim_punctuation(first)).is_some());
    let asks = |w: &[&str]| {
        matches!(
            w.first().copied(),
            Some("please" | "can" | "could" | "would" | "will" | "pls" | "kindly" | "let's")
        ) || !opens_with_identifier && w.first().is_some_and(|first| is_imperative(first))
    };
    if asks(&words)
        || instructs_after_context(&lower)
        || words.iter().any(|w| matches!(*w, "please" | "pls" | "plz"))
        || words.windows(2).any(|pair| {
            matches!(pair[0], "i" | "we") && matches!(pair[1], "need" | "want" | "would")
        })
        || someone_wants(&words)
    {
        return false;
    }
    const CAUSES: [&str; 9] = [
        "because", "caused", "turned", "found", "root", "fixed", "done", "resolved", "explains",
    ];
    // "due to" gives a cause; "due by Nov 22" a deadline.
    let due_to = words.windows(2).any(|pair| pair == ["due", "to"]);
    if due_to || words.iter().any(|w| CAUSES.contains(w)) {
        return true;
    }
    // "p99 was 412 ms", "spend in May was $48,300": a figure measured.
    let measured = words.windows(2).any(|pair| {
        matches!(pair[0], "was" | "were" | "is" | "are")
            && pair[1].starts_with(|c: char| c.is_ascii_digit())
    });
    // "is live", "is now on", "are still rolling out": a state reached.
    let state = words.windows(2).any(|pair| {
        matches!(pair[0], "is" | "are" | "was" | "were")
            && matches!(pair[1], "live" | "now" | "ready" | "complete" | "finished")
    });
    // "I rotated", "we merged", "I've added", "I couldn't": a first
    // person and a past.
    let did = words.windows(2).any(|pair| {
        matches!(
            pair[0],
            "i" | "we" | "i've" | "we've" | "ive" | "i’ve" | "we’ve"
        ) && (pair[1].ends_with("ed")
            || matches!(
                pair[1],
                "ran"
                    | "made"
                    | "wrote"
                    | "took"
                    | "put"
                    | "set"
                    | "got"
                    | "did"
                    | "gave"
                    | "couldn't"
                    | "couldnt"
                    | "didn't"
                    | "didnt"
                    | "found"
                    | "sent"
            ))
    });
    measured || state || did || reports_in_short(&lower, &words)
}

/// Whether someone else's need is passed on ("Sales wants a CSV of ...",
/// "Finance needs the figures by Friday", "Legal wants us to check"): a
/// request, as "I need" is. "wants" or "needs" before a figure ("the job
/// needs 4 GB") states a fact.
fn someone_wants(words: &[&str]) -> bool {
    words.windows(2).any(|pair| {
        matches!(pair[0], "wants" | "needs")
            && matches!(
                pair[1],
                "a" | "an" | "the" | "to" | "us" | "you" | "them" | "someone" | "every" | "all"
            )
    })
}

/// Whether a clause after the first opens with a verb in its plain form,
/// as an instruction does ("The config errors are vague. Make every
/// message name the file"): context first, then the request. "See" and
/// "let" are left out: a report ends with them as often ("see PR #412",
/// "let me know").
fn instructs_after_context(lower: &str) -> bool {
    clauses(lower).skip(1).any(|clause| {
        let mut words = clause.split_whitespace().map(trim_punctuation);
        let (Some(opening), next) = (words.next(), words.next()) else {
            return false;
        };
        // A verb of the list used as a noun is followed by a verb ("Fix
        // is deployed", "Build passed"), an instruction by its object.
        let noun_then_verb = next.is_some_and(|next| {
            matches!(
                next,
                "is" | "are"
                    | "was"
                    | "were"
                    | "has"
                    | "had"
                    | "passes"
                    | "passed"
                    | "fails"
                    | "failed"
                    | "works"
                    | "worked"
            )
        });
        !matches!(opening, "see" | "let") && !noun_then_verb && IMPERATIVE_VERBS.contains(&opening)
    })
}

/// Whether a text that asks nothing at its start (no question mark, no
/// "please", no imperative first word) reports in a form of its own: it
/// opens with a verb in the past ("Restarted the consumer; lag dropped to
/// 0") or gives figures after a label ("Open P1s by team: payments 4,
/// search 2"), and no clause of it asks ("...; review it before Friday",
/// "...: why 2 and not 3", "it should exit cleanly"). A topic ("debugging
/// the failed payments job") opens with a gerund and reports nothing.
fn reports_in_short(lower: &str, words: &[&str]) -> bool {
    const ASKING_OPENERS: [&str; 16] = [
        "what", "why", "how", "which", "who", "when", "where", "whether", "is", "are", "do",
        "does", "did", "should", "need", "want",
    ];
    let Some(first) = words.first().copied() else {
        return false;
    };
    if first.ends_with("ing") {
        return false;
    }
    let clause_asks = clauses(lower)
        .filter_map(|clause| clause.split_whitespace().next())
        .map(trim_punctuation)
        .any(|opening| ASKING_OPENERS.contains(&opening) || is_imperative(opening))
        || words.iter().any(|word| matches!(*word, "should" | "must"));
    if clause_asks {
        return false;
    }
    // "Restarted", "Deployed".
    let opens_in_past = is_past_form(first);
    // "Load test at 500 RPS: error rate 0.2%, p95 640 ms".
    // The label ends at a colon, not at one inside a time ("02:10").
    let figures_after_label = label_colon(lower).is_some_and(|at| {
        let rest = &lower[at + 1..];
        rest.split_whitespace()
            .filter(|word| word.starts_with(|c: char| c.is_ascii_digit() || c == '$'))
            .count()
            >= 2
    });
    opens_in_past || figures_after_label
}

/// Whether the colon at byte `at` of `text` is inside a time or a ratio
/// ("02:10", "16:9"): digits on both sides.
fn colon_between_digits(text: &str, at: usize) -> bool {
    let bytes = text.as_bytes();
    at > 0 && bytes[at - 1].is_ascii_digit() && bytes.get(at + 1).is_some_and(u8::is_ascii_digit)
}

/// The clauses of a lowercase text: split at sentence ends, semicolons,
/// colons and line breaks, but not at a colon between digits ("from
/// 02:10 to 02:40 UTC. See if ..." is two clauses, not four).
fn clauses(lower: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut out = Vec::new();
    for (at, c) in lower.char_indices() {
        let splits = match c {
            '.' | ';' | '!' | '\n' => true,
            ':' => !colon_between_digits(lower, at),
            _ => false,
        };
        if splits {
            out.push(&lower[start..at]);
            start = at + c.len_utf8();
        }
    }
    out.push(&lower[start..]);
    out.into_iter()
}

/// Where the label of "label: figures" ends: the first colon of a
/// lowercase text that is not between digits.
fn label_colon(lower: &str) -> Option<usize> {
    lower
        .match_indices(':')
        .map(|(at, _)| at)
        .find(|&at| !colon_between_digits(lower, at))
}

/// The words of a lowercase text (apostrophes kept), or `None` when it
/// has a question mark: a question asks, whatever its words.
fn words_if_no_question(lower: &str) -> Option<Vec<&str>> {
    (!lower.contains('?')).then(|| {
        lower
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
            .filter(|w| !w.is_empty())
            .collect()
    })
}

/// Whether `text` states something rather than asks for it: it
/// [reads as a report](reads_as_report), or it asks nothing (no question
/// mark, no "please", no "can you", no "I need") and opens as a statement
/// does, with an article, a pronoun, "there" or a number ("The 2024 model
/// tows 2,000 kg", "I clicked 'Pricing'", "5,500 - 3,500 = 2,000"), never
/// as an instruction does, with its verb. It reads what the model reads of
/// the text ([`embedding_input`]).
pub fn reads_as_statement(text: &str) -> bool {
    reads_as_report(text) || states_without_reporting(text)
}

/// Whether `text`, read as no report, still [states](reads_as_statement)
/// rather than asks.
fn states_without_reporting(text: &str) -> bool {
    let lower = embedding_input(text).to_lowercase();
    let Some(words) = words_if_no_question(&lower) else {
        return false;
    };
    let asks = words.iter().any(|w| matches!(*w, "please" | "pls" | "plz"))
        || words.windows(2).any(|pair| {
            matches!(pair[0], "can" | "could" | "would" | "will")
                && matches!(pair[1], "you" | "we" | "someone")
                || matches!(pair[0], "i" | "we") && matches!(pair[1], "need" | "want")
        });
    let opens_as_statement = words.first().is_some_and(|first| {
        first.starts_with(|c: char| c.is_ascii_digit())
            || matches!(
                *first,
                "the"
                    | "a"
                    | "an"
                    | "this"
                    | "that"
                    | "these"
                    | "those"
                    | "it"
                    | "its"
                    | "i"
                    | "i'm"
                    | "i’m"
                    | "im"
                    | "we"
                    | "we're"
                    | "they"
                    | "he"
                    | "she"
                    | "there"
                    | "here"
                    | "our"
                    | "my"
                    | "their"
                    | "his"
                    | "her"
                    | "no"
                    | "nothing"
                    | "none"
                    | "both"
                    | "all"
                    | "each"
                    | "every"
            )
    });
    !asks && opens_as_statement
}

/// The verbs a request starts with ("Summarize ...", "Close out ...",
/// "Give me ..."): a text starting with one, in its plain form, asks for
/// work. Words that as often open a statement as nouns ("Open P1s by
/// team: ...", "Load test at 500 RPS: ...", "Page views dropped") are not
/// here.
const IMPERATIVE_VERBS: &[&str] = &[
    "add",
    "address",
    "adjust",
    "allow",
    "analyze",
    "answer",
    "apply",
    "approve",
    "archive",
    "ask",
    "assess",
    "assign",
    "attach",
    "audit",
    "backfill",
    "benchmark",
    "bisect",
    "block",
    "build",
    "bump",
    "calculate",
    "cancel",
    "change",
    "check",
    "clean",
    "clear",
    "close",
    "collect",
    "combine",
    "compare",
    "compile",
    "complete",
    "compute",
    "configure",
    "confirm",
    "connect",
    "consolidate",
    "convert",
    "copy",
    "create",
    "debug",
    "decide",
    "decrease",
    "deduplicate",
    "delete",
    "deny",
    "deploy",
    "describe",
    "detach",
    "diagnose",
    "dig",
    "disable",
    "disconnect",
    "double",
    "download",
    "downgrade",
    "draft",
    "drop",
    "edit",
    "enable",
    "encrypt",
    "ensure",
    "escalate",
    "estimate",
    "evaluate",
    "examine",
    "expand",
    "explain",
    "export",
    "extend",
    "extract",
    "fetch",
    "figure",
    "find",
    "finish",
    "fix",
    "flag",
    "follow",
    "gather",
    "generate",
    "get",
    "give",
    "go",
    "grant",
    "handle",
    "help",
    "identify",
    "implement",
    "import",
    "improve",
    "inspect",
    "install",
    "investigate",
    "invite",
    "kill",
    "let",
    "list",
    "look",
    "lower",
    "make",
    "measure",
    "merge",
    "migrate",
    "move",
    "notify",
    "optimize",
    "outline",
    "parse",
    "patch",
    "pause",
    "pin",
    "ping",
    "polish",
    "prepare",
    "prioritize",
    "produce",
    "proofread",
    "propose",
    "provide",
    "prune",
    "publish",
    "pull",
    "purge",
    "put",
    "raise",
    "read",
    "rebuild",
    "recommend",
    "reconcile",
    "redeploy",
    "reduce",
    "refactor",
    "reindex",
    "reject",
    "remind",
    "remove",
    "rename",
    "renew",
    "rephrase",
    "replace",
    "reply",
    "reproduce",
    "rerun",
    "research",
    "resolve",
    "respond",
    "restart",
    "restore",
    "resume",
    "retry",
    "revert",
    "review",
    "revise",
    "revoke",
    "reword",
    "rewrite",
    "roll",
    "rotate",
    "run",
    "sanitize",
    "scale",
    "schedule",
    "see",
    "send",
    "set",
    "share",
    "show",
    "shut",
    "simplify",
    "skim",
    "speed",
    "split",
    "stop",
    "study",
    "suggest",
    "summarize",
    "switch",
    "sync",
    "take",
    "tell",
    "test",
    "tidy",
    "translate",
    "triage",
    "trim",
    "troubleshoot",
    "try",
    "tune",
    "turn",
    "uninstall",
    "unlock",
    "update",
    "upgrade",
    "upload",
    "validate",
    "verify",
    "walk",
    "wipe",
    "work",
    "write",
];

/// Whether `word` is a verb in the past ("restarted", "fixed"): it ends
/// in "ed" and the stemmer shortens it ("need" and "speed" it does not;
/// "embed" and "shred" are plain verbs it does).
fn is_past_form(word: &str) -> bool {
    word.len() >= 5
        && word.ends_with("ed")
        && !matches!(word, "embed" | "imbed" | "shred")
        && stemmer().stem(word).as_ref() != word
}

/// Whether `word` (lowercase) opens an instruction: one of
/// [`IMPERATIVE_VERBS`] in its plain form ("review", not "reviewed"; a
/// gerund is a topic's opening and is left to the caller).
fn is_imperative(word: &str) -> bool {
    static STEMS: OnceLock<Vec<String>> = OnceLock::new();
    let stems = STEMS.get_or_init(|| {
        let mut stems: Vec<String> = IMPERATIVE_VERBS
            .iter()
            .map(|verb| stemmer().stem(verb).into_owned())
            .collect();
        stems.sort_unstable();
        stems.dedup();
        stems
    });
    if is_past_form(word) {
        return false;
    }
    let stem = stemmer().stem(word);
    stems
        .binary_search_by(|known| known.as_str().cmp(stem.as_ref()))
        .is_ok()
}

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// Strips what surrounds a token but is not part of it (quotes, brackets,
/// sentence punctuation), keeping a trailing `()` of a call.
fn trim_punctuation(raw: &str) -> &str {
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

/// The year a raw token stands for when it is one written with two digits
/// after an apostrophe ("'23", "’98", "'23,"): 2000 to 2069, 1970 to 1999.
fn abbreviated_year(raw: &str) -> Option<String> {
    let rest = raw
        .strip_prefix('\'')
        .or_else(|| raw.strip_prefix('’'))
        .or_else(|| raw.strip_prefix('‘'))?;
    let digits = rest.trim_end_matches(|c: char| c.is_ascii_punctuation() || c == '’');
    if digits.len() != 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let century = if digits < "70" { "20" } else { "19" };
    Some(format!("{century}{digits}"))
}

/// An identifier's class and comparison key, when `token` is one.
fn identifier(token: &str) -> Option<(IdentifierClass, String)> {
    if let Some(singular) = plural_of_capitals(token) {
        return identifier(singular);
    }
    let has_digit = token.chars().any(|c| c.is_ascii_digit());
    let lower = token.to_lowercase();
    if let Some(rest) = token.strip_prefix('#')
        && !rest.is_empty()
    {
        return Some(match number_key(rest) {
            Some(number) => (IdentifierClass::Number, number),
            None => (IdentifierClass::Reference, lower),
        });
    }
    if token.starts_with('@') || (token.starts_with("--") && token.len() > 2) {
        return Some((IdentifierClass::Reference, lower));
    }
    if let Some(number) = number_key(token) {
        return Some((IdentifierClass::Number, number));
    }
    // "$6k" and "$6,000" are the sum 6000; the currency is read alone.
    if let Some(number) = token.strip_prefix(['$', '€', '£']).and_then(number_key) {
        return Some((IdentifierClass::Number, number));
    }
    if token.contains('/') && token.chars().any(char::is_alphanumeric) && !is_word_pair(token)
        || token.contains('\\')
        || token.contains("::")
        || has_file_extension(token)
    {
        return Some((IdentifierClass::Path, lower));
    }
    if has_digit {
        return Some((IdentifierClass::Reference, lower));
    }
    let letters: Vec<char> = token.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() >= 2 && letters.iter().all(|c| c.is_uppercase()) {
        return Some((IdentifierClass::Acronym, lower));
    }
    let inner_dot = token
        .trim_end_matches("()")
        .split('.')
        .filter(|part| !part.is_empty())
        .count()
        > 1;
    let camel = token
        .chars()
        .zip(token.chars().skip(1))
        .any(|(x, y)| x.is_lowercase() && y.is_uppercase());
    // A word with a capital inside and nothing else of code ("iOS",
    // "HubSpot", "WebSocket") is a name, compared as a word.
    let plain_word = token.chars().all(char::is_alphabetic);
    if token.contains('_') || token.ends_with("()") || inner_dot || (camel && !plain_word) {
        return Some((
            IdentifierClass::Code,
            lower.trim_end_matches("()").to_owned(),
        ));
    }
    None
}

/// Units of size, rate and frequency that follow a number ("100 MB",
/// "500 RPS", "2.4 GHz"), in lowercase. Currencies are not here: "100
/// USD" and "100 EUR" are different sums.
const UNITS: [&str; 19] = [
    "kb", "mb", "gb", "tb", "pb", "kib", "mib", "gib", "tib", "kbps", "mbps", "gbps", "rps", "qps",
    "tps", "fps", "khz", "mhz", "ghz",
];

/// Whether `token` is one of [`UNITS`], in any case.
fn is_unit(token: &str) -> bool {
    UNITS.iter().any(|unit| unit.eq_ignore_ascii_case(token))
}

/// An acronym or a capitalized reference written in the plural, without
/// its `s` ("APIs" is "API", "P1s" is "P1", "VMs" is "VM"): the same
/// identifier, one or more of it. A number with an `s` ("30s", "1990s")
/// opens with a digit and is no such plural.
fn plural_of_capitals(token: &str) -> Option<&str> {
    let singular = token.strip_suffix('s')?;
    let first_capital = singular.chars().next().is_some_and(char::is_uppercase);
    let capitals = singular
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    (singular.len() >= 2 && first_capital && capitals).then_some(singular)
}

/// `token` without a possessive `'s` ("GitHub's" is GitHub).
fn strip_possessive(token: &str) -> &str {
    token
        .strip_suffix("'s")
        .or_else(|| token.strip_suffix("’s"))
        .filter(|rest| rest.chars().count() > 1)
        .unwrap_or(token)
}

/// A lowercase word without the contracted auxiliary it carries ("i've",
/// "we're", "you'll": the pronoun alone). Negations ("don't") stay.
fn without_contraction(lower: &str) -> &str {
    for suffix in [
        "'ve", "'re", "'ll", "'d", "'m", "’ve", "’re", "’ll", "’d", "’m",
    ] {
        if let Some(rest) = lower.strip_suffix(suffix)
            && !rest.is_empty()
        {
            return rest;
        }
    }
    lower
}

/// Irregular past forms and participles of English verbs, and the verb
/// each is a form of ("wrote" and "written" are "write"), sorted by form:
/// the forms no suffix rule reaches. Forms that are as often other words
/// are left out ("left", "bit", "bound", "ground", "wound", "rose",
/// "spoke", "felt", "lit", "lay").
const IRREGULAR_FORMS: [(&str, &str); 130] = [
    ("arisen", "arise"),
    ("arose", "arise"),
    ("ate", "eat"),
    ("awoke", "awake"),
    ("became", "become"),
    ("began", "begin"),
    ("begun", "begin"),
    ("bent", "bend"),
    ("bitten", "bite"),
    ("blew", "blow"),
    ("blown", "blow"),
    ("bought", "buy"),
    ("bred", "breed"),
    ("broke", "break"),
    ("broken", "break"),
    ("brought", "bring"),
    ("built", "build"),
    ("came", "come"),
    ("caught", "catch"),
    ("chose", "choose"),
    ("chosen", "choose"),
    ("dealt", "deal"),
    ("did", "do"),
    ("done", "do"),
    ("drawn", "draw"),
    ("drew", "draw"),
    ("driven", "drive"),
    ("drove", "drive"),
    ("dug", "dig"),
    ("eaten", "eat"),
    ("fallen", "fall"),
    ("fed", "feed"),
    ("fell", "fall"),
    ("fled", "flee"),
    ("flew", "fly"),
    ("flown", "fly"),
    ("forbade", "forbid"),
    ("forbidden", "forbid"),
    ("forgave", "forgive"),
    ("forgiven", "forgive"),
    ("forgot", "forget"),
    ("forgotten", "forget"),
    ("fought", "fight"),
    ("found", "find"),
    ("froze", "freeze"),
    ("frozen", "freeze"),
    ("gave", "give"),
    ("given", "give"),
    ("gone", "go"),
    ("got", "get"),
    ("gotten", "get"),
    ("grew", "grow"),
    ("grown", "grow"),
    ("had", "have"),
    ("heard", "hear"),
    ("held", "hold"),
    ("hid", "hide"),
    ("hidden", "hide"),
    ("hung", "hang"),
    ("kept", "keep"),
    ("knew", "know"),
    ("known", "know"),
    ("led", "lead"),
    ("lent", "lend"),
    ("lost", "lose"),
    ("made", "make"),
    ("meant", "mean"),
    ("met", "meet"),
    ("overridden", "override"),
    ("overrode", "override"),
    ("overwritten", "overwrite"),
    ("overwrote", "overwrite"),
    ("paid", "pay"),
    ("ran", "run"),
    ("rang", "ring"),
    ("rebuilt", "rebuild"),
    ("rewritten", "rewrite"),
    ("rewrote", "rewrite"),
    ("risen", "rise"),
    ("said", "say"),
    ("sang", "sing"),
    ("sank", "sink"),
    ("sat", "sit"),
    ("saw", "see"),
    ("seen", "see"),
    ("sent", "send"),
    ("shaken", "shake"),
    ("shook", "shake"),
    ("shown", "show"),
    ("shrank", "shrink"),
    ("shrunk", "shrink"),
    ("slept", "sleep"),
    ("slid", "slide"),
    ("sold", "sell"),
    ("sped", "speed"),
    ("spent", "spend"),
    ("spoken", "speak"),
    ("spun", "spin"),
    ("stole", "steal"),
    ("stolen", "steal"),
    ("stood", "stand"),
    ("struck", "strike"),
    ("stuck", "stick"),
    ("sung", "sing"),
    ("sunk", "sink"),
    ("swept", "sweep"),
    ("swore", "swear"),
    ("sworn", "swear"),
    ("taken", "take"),
    ("taught", "teach"),
    ("thought", "think"),
    ("threw", "throw"),
    ("thrown", "throw"),
    ("told", "tell"),
    ("took", "take"),
    ("tore", "tear"),
    ("torn", "tear"),
    ("understood", "understand"),
    ("undid", "undo"),
    ("undone", "undo"),
    ("went", "go"),
    ("withdrawn", "withdraw"),
    ("withdrew", "withdraw"),
    ("woke", "wake"),
    ("woken", "wake"),
    ("won", "win"),
    ("wore", "wear"),
    ("worn", "wear"),
    ("written", "write"),
    ("wrote", "write"),
];

/// The verb an irregular form is a form of ("got" is "get"), by
/// [`IRREGULAR_FORMS`]; `None` for any other word.
pub(crate) fn irregular_base(word: &str) -> Option<&'static str> {
    IRREGULAR_FORMS
        .binary_search_by(|(form, _)| (*form).cmp(word))
        .ok()
        .map(|at| IRREGULAR_FORMS[at].1)
}

/// British spellings the American way, the same on both sides of every
/// comparison ("summarise", "prioritising", "behaviour", "analyse"), so
/// spelling is never a differing word.
fn american_spelling(word: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    const ENDINGS: [(&str, &str); 12] = [
        ("isations", "izations"),
        ("isation", "ization"),
        ("ising", "izing"),
        ("ised", "ized"),
        ("ises", "izes"),
        ("iser", "izer"),
        ("isers", "izers"),
        ("ise", "ize"),
        ("ysing", "yzing"),
        ("ysed", "yzed"),
        ("yse", "yze"),
        ("our", "or"),
    ];
    if word.len() < 6 {
        return Cow::Borrowed(word);
    }
    for (british, american) in ENDINGS {
        if let Some(stem) = word.strip_suffix(british) {
            if spelled_alike_everywhere(stem, british) {
                return Cow::Borrowed(word);
            }
            return Cow::Owned(format!("{stem}{american}"));
        }
    }
    Cow::Borrowed(word)
}

/// Words that end like a British spelling but are spelled so in American
/// English too ("promise", "enterprise", "raising", "advertised",
/// "detour"): left as written, so a differing word is never a misspelling
/// ("promizes") that WordNet and the embedding model do not know.
fn spelled_alike_everywhere(stem: &str, british: &str) -> bool {
    // Each the word before its "-ise" ("prom" of "promise").
    const BEFORE_ISE: [&str; 44] = [
        "adv", "advert", "appra", "ar", "bru", "chast", "circumc", "clockw", "compr", "comprom",
        "conc", "cru", "dem", "desp", "dev", "disgu", "enterpr", "exc", "exerc", "expert",
        "franch", "gu", "improv", "inc", "likew", "merchand", "no", "otherw", "parad", "po", "pra",
        "prec", "prem", "prom", "r", "ra", "repr", "rev", "superv", "surm", "surpr", "telev",
        "treat", "w",
    ];
    // Each the word before its "-our" ("det" of "detour").
    const BEFORE_OUR: [&str; 7] = ["am", "cont", "det", "dev", "param", "troubad", "vel"];
    let before = match british {
        "our" => &BEFORE_OUR[..],
        "ise" | "ises" | "ised" | "ising" | "iser" | "isers" => &BEFORE_ISE[..],
        _ => return false,
    };
    // The root alone, or after a prefix that keeps it one word ("unrev" of
    // "unrevised"; "unprom" is no word).
    const PREFIXES: [&str; 10] = [
        "", "un", "re", "pre", "over", "under", "mis", "dis", "self", "non",
    ];
    before.iter().any(|root| {
        stem.strip_suffix(root)
            .is_some_and(|head| PREFIXES.contains(&head))
    })
}

/// Words joined by a slash ("and/or", "read/write"): not a path.
fn is_word_pair(token: &str) -> bool {
    let parts: Vec<&str> = token.split('/').collect();
    parts.len() == 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(char::is_alphabetic))
}

/// A number and a word joined by a hyphen ("45-minute", "3-node",
/// "10-day"): the number and the word, as "45 minute" is written. Other
/// hyphenated tokens with digits ("covid-19", "2022-23", "x86-64") stay
/// whole.
fn number_and_word(token: &str) -> Option<(&str, &str)> {
    let (number, word) = token.split_once('-')?;
    let is_number = !number.is_empty()
        && number
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        && number.starts_with(|c: char| c.is_ascii_digit());
    let is_word = word.chars().count() >= 2 && word.chars().all(char::is_alphabetic);
    (is_number && is_word).then_some((number, word))
}

fn has_file_extension(token: &str) -> bool {
    const EXTENSIONS: [&str; 24] = [
        "rs", "go", "py", "js", "ts", "tsx", "jsx", "java", "kt", "rb", "c", "h", "cpp", "cs",
        "json", "yaml", "yml", "toml", "md", "sql", "sh", "html", "css", "csv",
    ];
    token.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && EXTENSIONS.contains(&ext.to_lowercase().as_str())
    })
}

/// The number a token stands for: digits (with `,` thousands or a decimal
/// point), optionally with a unit or `%` (`30s`, `5GB`, `2x`), as a key of
/// digits.
fn number_key(token: &str) -> Option<String> {
    // "v1.8" and "v16" are the versions 1.8 and 16.
    let token = match token.strip_prefix(['v', 'V']) {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => token,
    };
    let digits_end = token
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == ',' || *c == '.'))
        .map_or(token.len(), |(index, _)| index);
    let (number, unit) = token.split_at(digits_end);
    let number = number.trim_end_matches(['.', ',']);
    if number.is_empty() || !number.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    // "10k" is 10,000, as "10,000" and "10 thousand" are written; "2.3M"
    // is 2.3 million, "7B" 7 billion (a lowercase "m" is minutes or
    // metres).
    let times = match unit {
        "k" | "K" => Some(1e3),
        "M" => Some(1e6),
        "B" | "bn" => Some(1e9),
        _ => None,
    };
    if let Some(times) = times.filter(|_| !number.contains(',')) {
        return number
            .parse::<f64>()
            .ok()
            .map(|value| number_text(value * times));
    }
    let unit_ok = unit.is_empty()
        || unit == "%"
        || (unit.len() <= 5 && unit.chars().all(|c| c.is_ascii_alphabetic()));
    unit_ok.then(|| number.replace(',', ""))
}

/// A number word as digits.
fn number_word(word: &str) -> Option<&'static str> {
    const WORDS: [(&str, &str); 28] = [
        ("zero", "0"),
        ("one", "1"),
        ("two", "2"),
        ("three", "3"),
        ("four", "4"),
        ("five", "5"),
        ("six", "6"),
        ("seven", "7"),
        ("eight", "8"),
        ("nine", "9"),
        ("ten", "10"),
        ("eleven", "11"),
        ("twelve", "12"),
        ("thirteen", "13"),
        ("fourteen", "14"),
        ("fifteen", "15"),
        ("sixteen", "16"),
        ("seventeen", "17"),
        ("eighteen", "18"),
        ("nineteen", "19"),
        ("twenty", "20"),
        ("thirty", "30"),
        ("forty", "40"),
        ("fifty", "50"),
        ("sixty", "60"),
        ("seventy", "70"),
        ("eighty", "80"),
        ("ninety", "90"),
    ];
    WORDS
        .iter()
        .find(|(name, _)| *name == word)
        .map(|(_, digits)| *digits)
}

/// Common short forms, and words for "most recent", read as the word they
/// stand for.
fn alias(word: &str) -> &str {
    match word {
        "prod" => "production",
        "stg" => "staging",
        "dev" => "development",
        "db" => "database",
        "repo" => "repository",
        "config" | "cfg" | "conf" => "configuration",
        "env" => "environment",
        "docs" | "doc" => "documentation",
        "msg" => "message",
        "k8s" => "kubernetes",
        "perf" => "performance",
        "auth" => "authentication",
        "latest" | "newest" => "recent",
        "deps" => "dependencies",
        "info" => "information",
        "pls" | "plz" => "please",
        "jan" => "january",
        "feb" => "february",
        "mar" => "march",
        "apr" => "april",
        "jun" => "june",
        "jul" => "july",
        "aug" => "august",
        "sep" | "sept" => "september",
        "oct" => "october",
        "nov" => "november",
        "dec" => "december",
        "min" | "mins" => "minutes",
        "sec" | "secs" => "seconds",
        "hr" | "hrs" => "hours",
        other => other,
    }
}

/// Words that carry no request of their own: articles, pronouns,
/// auxiliaries, politeness, "again", the light verbs of "take a look". The
/// direction markers are here too, compared on their own
/// ([`DIRECTION_MARKERS`]): "look into" is not a different request from
/// "investigate", but "before" is from "after". Negations, comparisons,
/// quantities and directions such as up/down are NOT stop words: they
/// change the work.
fn is_stop_word(word: &str) -> bool {
    // A match, not a list scan: the compiler dispatches on length and bytes.
    matches!(
        word,
        "a" | "an"
            | "the"
            | "this"
            | "that"
            | "these"
            | "those"
            | "it"
            | "its"
            | "it's"
            | "i"
            | "me"
            | "my"
            | "we"
            | "us"
            | "our"
            | "you"
            | "your"
            | "he"
            | "she"
            | "they"
            | "them"
            | "their"
            | "is"
            | "are"
            | "was"
            | "were"
            | "be"
            | "been"
            | "being"
            | "am"
            | "do"
            | "does"
            | "did"
            | "done"
            | "have"
            | "has"
            | "had"
            | "can"
            | "could"
            | "would"
            | "will"
            | "shall"
            | "should"
            | "may"
            | "might"
            | "must"
            | "please"
            | "kindly"
            | "thanks"
            | "thank"
            | "again"
            | "also"
            | "just"
            | "quick"
            | "quickly"
            | "now"
            | "then"
            | "so"
            | "of"
            | "for"
            | "in"
            | "on"
            | "at"
            | "by"
            | "with"
            | "within"
            | "and"
            | "or"
            | "as"
            | "if"
            | "there"
            | "here"
            | "what"
            | "which"
            | "who"
            | "whom"
            | "how"
            | "why"
            | "when"
            | "where"
            | "some"
            | "any"
            | "let"
            | "lets"
            | "let's"
            | "go"
            | "ahead"
            | "hey"
            | "hi"
            | "ok"
            | "okay"
            | "sure"
            | "another"
            | "look"
            | "take"
            | "give"
            | "to"
            | "from"
            | "into"
            | "onto"
            | "before"
            | "after"
            | "than"
            | "about"
            | "through"
            | "across"
            | "whether"
            | "all"
            | "every"
            | "each"
            | "other"
            | "via"
            | "per"
            | "instead"
            | "rather"
            | "such"
            | "very"
    )
}

/// What each of the two multisets has that the other lacks.
fn multiset_difference(a: &[String], b: &[String]) -> (Vec<String>, Vec<String>) {
    fn count(words: &[String]) -> BTreeMap<&str, i32> {
        let mut counts: BTreeMap<&str, i32> = BTreeMap::new();
        for word in words {
            *counts.entry(word.as_str()).or_default() += 1;
        }
        counts
    }
    let (ca, cb) = (count(a), count(b));
    let only = |words: &[String], mine: &BTreeMap<&str, i32>, theirs: &BTreeMap<&str, i32>| {
        let mut left: BTreeMap<&str, i32> = mine
            .iter()
            .map(|(word, n)| (*word, n - theirs.get(word).copied().unwrap_or(0)))
            .collect();
        let mut out = Vec::new();
        for word in words {
            if let Some(n) = left.get_mut(word.as_str())
                && *n > 0
            {
                *n -= 1;
                out.push(word.clone());
            }
        }
        out
    };
    (only(a, &ca, &cb), only(b, &cb, &ca))
}

fn jaccard(a: &[String], b: &[String]) -> f32 {
    use std::collections::BTreeSet;
    let (sa, sb): (BTreeSet<&str>, BTreeSet<&str>) = (
        a.iter().map(String::as_str).collect(),
        b.iter().map(String::as_str).collect(),
    );
    let union = sa.union(&sb).count();
    if union == 0 {
        return 1.0;
    }
    sa.intersection(&sb).count() as f32 / union as f32
}

/// The identifier classes, in the order a veto names them and
/// [`unmatched_identifiers`] lists them.
const IDENTIFIER_CLASSES: [IdentifierClass; 5] = [
    IdentifierClass::Reference,
    IdentifierClass::Number,
    IdentifierClass::Path,
    IdentifierClass::Code,
    IdentifierClass::Acronym,
];

/// An identifier class with an unmatched identifier on both sides, of
/// those the other side does not spell out: `unmatched_a` and
/// `unmatched_b` are [`unmatched_identifiers`] after
/// [`spell_out_acronyms`], [`spell_out_references`] and
/// [`spell_out_dotted`] ("GC" / "garbage collection" is no difference).
fn identifier_veto(
    a: &Tokens,
    b: &Tokens,
    (unmatched_a, unmatched_b): (&[String], &[String]),
) -> Option<Veto> {
    let first_of = |tokens: &Tokens, unmatched: &[String], class: IdentifierClass| {
        unmatched
            .iter()
            .find(|key| {
                tokens
                    .identifiers
                    .iter()
                    .any(|(c, k)| *c == class && k == *key)
            })
            .cloned()
    };
    IDENTIFIER_CLASSES.into_iter().find_map(|class| {
        match (
            first_of(a, unmatched_a, class),
            first_of(b, unmatched_b, class),
        ) {
            (Some(a), Some(b)) => Some(Veto::Identifiers { class, a, b }),
            _ => None,
        }
    })
}

/// Names of things of one kind, where one named on each side makes two
/// requests different work however they are worded: the same step for
/// another platform, vendor, store, language or month ("Fix the crash at
/// launch in the Android app" / "The iOS app crashes at startup too").
/// Each entry: the kind (a plural noun), then each thing's name as shown
/// and the lowercase forms it is written in. Only names that are seldom
/// anything else are here ("Go", "Windows", "Edge", "Teams", "React",
/// "Rails", "Polish", "May" and "development" are not): a word of other
/// meanings on one side would make a contrast of a rewording.
const NAMES_OF_A_KIND: &[(&str, &[NamedThing])] = &[
    (
        "platforms",
        &[
            ("Android", &["android"]),
            ("iOS", &["ios", "iphone", "ipados", "ipad"]),
            ("macOS", &["macos", "osx"]),
            ("Linux", &["linux"]),
            ("ChromeOS", &["chromeos"]),
            ("watchOS", &["watchos"]),
            ("tvOS", &["tvos"]),
        ],
    ),
    (
        "browsers",
        &[
            ("Chrome", &["chrome", "chromium"]),
            ("Firefox", &["firefox"]),
            ("Safari", &["safari"]),
        ],
    ),
    (
        "mail services",
        &[
            ("Gmail", &["gmail"]),
            ("Outlook", &["outlook", "hotmail"]),
            ("Yahoo", &["yahoo"]),
            ("iCloud", &["icloud"]),
            ("Proton Mail", &["protonmail"]),
        ],
    ),
    (
        "clouds",
        &[
            ("AWS", &["aws"]),
            ("GCP", &["gcp"]),
            ("Azure", &["azure"]),
            ("DigitalOcean", &["digitalocean"]),
            ("Heroku", &["heroku"]),
            ("Vercel", &["vercel"]),
            ("Netlify", &["netlify"]),
        ],
    ),
    (
        "databases",
        &[
            ("PostgreSQL", &["postgres", "postgresql"]),
            ("MySQL", &["mysql"]),
            ("MariaDB", &["mariadb"]),
            ("SQLite", &["sqlite"]),
            ("MongoDB", &["mongodb", "mongo"]),
            ("Redis", &["redis"]),
            ("Cassandra", &["cassandra"]),
            ("DynamoDB", &["dynamodb"]),
            ("Elasticsearch", &["elasticsearch"]),
            ("OpenSearch", &["opensearch"]),
            ("ClickHouse", &["clickhouse"]),
            ("Snowflake", &["snowflake"]),
            ("BigQuery", &["bigquery"]),
            ("Redshift", &["redshift"]),
            ("Memcached", &["memcached"]),
            ("CockroachDB", &["cockroachdb"]),
        ],
    ),
    (
        "programming languages",
        &[
            ("Python", &["python"]),
            ("Rust", &["rust"]),
            ("Java", &["java"]),
            ("JavaScript", &["javascript", "js"]),
            ("TypeScript", &["typescript", "ts"]),
            ("Ruby", &["ruby"]),
            ("Kotlin", &["kotlin"]),
            ("Scala", &["scala"]),
            ("PHP", &["php"]),
            ("Go", &["golang"]),
            ("Elixir", &["elixir"]),
            ("Haskell", &["haskell"]),
        ],
    ),
    (
        "web frameworks",
        &[
            ("Vue", &["vue"]),
            ("Angular", &["angular"]),
            ("Svelte", &["svelte"]),
            ("Django", &["django"]),
            ("Flask", &["flask"]),
            ("FastAPI", &["fastapi"]),
            ("Laravel", &["laravel"]),
        ],
    ),
    (
        "chat tools",
        &[
            ("Slack", &["slack"]),
            ("Discord", &["discord"]),
            ("Mattermost", &["mattermost"]),
            ("Telegram", &["telegram"]),
            ("WhatsApp", &["whatsapp"]),
        ],
    ),
    (
        "CI services",
        &[
            ("Jenkins", &["jenkins"]),
            ("CircleCI", &["circleci"]),
            ("Travis CI", &["travis"]),
            ("Buildkite", &["buildkite"]),
            ("TeamCity", &["teamcity"]),
        ],
    ),
    (
        "code hosts",
        &[
            ("GitHub", &["github"]),
            ("GitLab", &["gitlab"]),
            ("Bitbucket", &["bitbucket"]),
        ],
    ),
    (
        "trackers",
        &[
            ("Jira", &["jira"]),
            ("Asana", &["asana"]),
            ("Trello", &["trello"]),
        ],
    ),
    (
        "payment providers",
        &[
            ("Stripe", &["stripe"]),
            ("PayPal", &["paypal"]),
            ("Adyen", &["adyen"]),
            ("Braintree", &["braintree"]),
            ("Klarna", &["klarna"]),
        ],
    ),
    (
        "CRM and support tools",
        &[
            ("Salesforce", &["salesforce"]),
            ("HubSpot", &["hubspot"]),
            ("Zendesk", &["zendesk"]),
            ("Intercom", &["intercom"]),
            ("Freshdesk", &["freshdesk"]),
            ("Pipedrive", &["pipedrive"]),
        ],
    ),
    (
        "monitoring tools",
        &[
            ("Datadog", &["datadog"]),
            ("Grafana", &["grafana"]),
            ("Prometheus", &["prometheus"]),
            ("Splunk", &["splunk"]),
            ("Sentry", &["sentry"]),
            ("Honeycomb", &["honeycomb"]),
            ("Kibana", &["kibana"]),
            ("PagerDuty", &["pagerduty"]),
            ("Opsgenie", &["opsgenie"]),
        ],
    ),
    (
        "message queues",
        &[
            ("Kafka", &["kafka"]),
            ("RabbitMQ", &["rabbitmq"]),
            ("SQS", &["sqs"]),
            ("Kinesis", &["kinesis"]),
            ("Pulsar", &["pulsar"]),
            ("Redpanda", &["redpanda"]),
        ],
    ),
    (
        "infrastructure tools",
        &[
            ("Terraform", &["terraform"]),
            ("Pulumi", &["pulumi"]),
            ("Ansible", &["ansible"]),
            ("CloudFormation", &["cloudformation"]),
        ],
    ),
    (
        "model providers",
        &[
            ("OpenAI", &["openai"]),
            ("Anthropic", &["anthropic"]),
            ("Cohere", &["cohere"]),
            ("Mistral", &["mistral"]),
        ],
    ),
    (
        "environments",
        &[
            ("staging", &["staging"]),
            ("production", &["production", "prod"]),
            ("sandbox", &["sandbox"]),
        ],
    ),
    (
        "languages",
        &[
            ("English", &["english"]),
            ("German", &["german"]),
            ("French", &["french"]),
            ("Spanish", &["spanish"]),
            ("Italian", &["italian"]),
            ("Portuguese", &["portuguese"]),
            ("Dutch", &["dutch"]),
            ("Swedish", &["swedish"]),
            ("Russian", &["russian"]),
            ("Turkish", &["turkish"]),
            ("Arabic", &["arabic"]),
            ("Hindi", &["hindi"]),
            ("Chinese", &["chinese", "mandarin"]),
            ("Japanese", &["japanese"]),
            ("Korean", &["korean"]),
        ],
    ),
    (
        "months",
        &[
            ("January", &["january"]),
            ("February", &["february"]),
            ("March", &["march"]),
            ("April", &["april"]),
            ("June", &["june"]),
            ("July", &["july"]),
            ("August", &["august"]),
            ("September", &["september"]),
            ("October", &["october"]),
            ("November", &["november"]),
            ("December", &["december"]),
        ],
    ),
    (
        "weekdays",
        &[
            ("Monday", &["monday"]),
            ("Tuesday", &["tuesday"]),
            ("Wednesday", &["wednesday"]),
            ("Thursday", &["thursday"]),
            ("Friday", &["friday"]),
            ("Saturday", &["saturday"]),
            ("Sunday", &["sunday"]),
        ],
    ),
];

/// A thing of [`NAMES_OF_A_KIND`]: its name as shown, and the lowercase
/// forms it is written in.
type NamedThing = (&'static str, &'static [&'static str]);

/// Each lowercase form of [`NAMES_OF_A_KIND`], with its kind and name.
fn kind_of(form: &str) -> Option<(&'static str, &'static str)> {
    static FORMS: OnceLock<HashMap<&'static str, (&'static str, &'static str)>> = OnceLock::new();
    FORMS
        .get_or_init(|| {
            NAMES_OF_A_KIND
                .iter()
                .flat_map(|(kind, names)| {
                    names.iter().flat_map(move |(name, forms)| {
                        forms.iter().map(move |form| (*form, (*kind, *name)))
                    })
                })
                .collect()
        })
        .get(form)
        .copied()
}

/// The names of [`NAMES_OF_A_KIND`] a text writes: its content words as
/// written and its acronyms and references ("AWS", "neo4j"), each once.
fn named_kinds(tokens: &Tokens) -> Vec<(&'static str, &'static str)> {
    let forms = tokens.written.iter().chain(
        tokens
            .identifiers
            .iter()
            .filter(|(class, _)| {
                matches!(class, IdentifierClass::Acronym | IdentifierClass::Reference)
            })
            .map(|(_, key)| key),
    );
    let mut kinds: Vec<(&'static str, &'static str)> = Vec::new();
    for found in forms.filter_map(|form| kind_of(form)) {
        if !kinds.contains(&found) {
            kinds.push(found);
        }
    }
    // A month after "before", "by" or "until" is a deadline, and one
    // deadline is written in more ways than one ("before December" / "by
    // the end of November"): no thing of its kind.
    let deadline = |month: &str| {
        tokens.raw.windows(2).any(|pair| {
            DEADLINE_MARKERS.contains(&pair[0].as_str())
                && kind_of(&pair[1]).is_some_and(|(_, name)| name == month)
        })
    };
    kinds.retain(|(kind, name)| *kind != "months" || !deadline(name));
    kinds
}

/// A name on each side that the other side lacks, standing in the same
/// place: beside the same content word ("the third floor of the Leeds
/// office" / "Over in the Manchester office", "Globex's admin team" /
/// "Initech's admins"). Two names where one would do are the same step
/// for another office, customer or vendor, however else the texts are
/// worded. Only names surely so count (capitalized inside a sentence,
/// or an identifier), not a sentence's first word.
fn names_in_one_place(a: &Tokens, b: &Tokens) -> Option<Veto> {
    let names_b = names_and_neighbours(b, a);
    names_and_neighbours(a, b)
        .into_iter()
        .find_map(|(name_a, neighbours_a)| {
            names_b.iter().find_map(|(name_b, neighbours_b)| {
                let beside = |x: &Option<&String>, y: &Option<&String>| x.is_some() && x == y;
                (beside(&neighbours_a.0, &neighbours_b.0)
                    || beside(&neighbours_a.1, &neighbours_b.1))
                .then(|| Veto::Named {
                    a: shown(a, name_a),
                    b: shown(b, name_b),
                })
            })
        })
}

/// A name's key as the text writes it (its stem's word, lowercase), or
/// the key itself for an identifier.
fn shown(tokens: &Tokens, key: &str) -> String {
    as_written(tokens, &[key.to_owned()])
        .pop()
        .unwrap_or_else(|| key.to_owned())
}

/// The content words right before and after a word, where there are.
type Neighbours<'t> = (Option<&'t String>, Option<&'t String>);

/// The names `tokens` surely writes that `other` lacks, each with the
/// content words right before and after it (`None` where a stop word or
/// nothing stands).
fn names_and_neighbours<'t>(
    tokens: &'t Tokens,
    other: &Tokens,
) -> Vec<(&'t String, Neighbours<'t>)> {
    let content = |key: &&String| {
        !is_stop_word(key)
            && !STOP_STEMS.contains(&key.as_str())
            && key.chars().any(char::is_alphabetic)
    };
    tokens
        .parties
        .iter()
        .filter(|(_, key, surely)| *surely && !other.keys.contains(key))
        .map(|(at, key, _)| {
            let before = at.checked_sub(1).and_then(|place| tokens.keys.get(place));
            let after = tokens.keys.get(at + 1);
            (key, (before.filter(content), after.filter(content)))
        })
        .collect()
}

/// The words before a month that make it a deadline.
const DEADLINE_MARKERS: [&str; 4] = ["before", "by", "until", "till"];

/// A thing of one kind named on each side that the other side does not
/// name ("the Android app" / "the iOS app too"), whatever else differs:
/// the same step for another platform, vendor or month is other work.
/// A side naming both ("from Memcached to Redis" / "to Redis") is no
/// such contrast.
fn kind_veto(a: &Tokens, b: &Tokens) -> Option<Veto> {
    let lacks = |tokens: &Tokens, name: &str| !tokens.kinds.iter().any(|(_, n)| *n == name);
    a.kinds
        .iter()
        .filter(|(_, name)| lacks(b, name))
        .find_map(|(kind, name_a)| {
            let (_, name_b) = b
                .kinds
                .iter()
                .find(|(k, name)| k == kind && lacks(a, name))?;
            Some(Veto::Kind {
                kind,
                a: name_a,
                b: name_b,
            })
        })
}

/// Pairs of words that ask for opposite work, as Snowball stems: one on
/// each side is a contrast whatever else differs ("scale the brokers up to
/// handle the load" vs "scale the brokers down to save cost").
const OPPOSITES: &[(&str, &str)] = &[
    ("up", "down"),
    ("open", "close"),
    ("enabl", "disabl"),
    ("start", "stop"),
    ("increas", "decreas"),
    ("add", "remov"),
    ("import", "export"),
    ("upload", "download"),
    ("instal", "uninstal"),
    ("lock", "unlock"),
    ("show", "hide"),
    ("expand", "collaps"),
    ("inbound", "outbound"),
    ("ingress", "egress"),
    ("input", "output"),
    ("encrypt", "decrypt"),
    ("grant", "revok"),
    ("accept", "reject"),
    ("approv", "reject"),
    ("allow", "deni"),
    ("allow", "block"),
    ("includ", "exclud"),
    ("attach", "detach"),
    ("connect", "disconnect"),
    ("mount", "unmount"),
    ("subscrib", "unsubscrib"),
    ("follow", "unfollow"),
    ("pin", "unpin"),
    ("archiv", "unarchiv"),
    ("pass", "fail"),
    ("success", "failur"),
    ("buy", "sell"),
    ("credit", "debit"),
    ("ascend", "descend"),
    ("asc", "desc"),
    ("horizont", "vertic"),
    ("left", "right"),
    ("intern", "extern"),
    ("public", "privat"),
    ("synchron", "asynchron"),
    ("sync", "async"),
    ("min", "max"),
    ("minimum", "maximum"),
    ("upper", "lower"),
    ("higher", "lower"),
    ("more", "less"),
    ("more", "fewer"),
    ("first", "last"),
    ("oldest", "newest"),
    ("earliest", "latest"),
    ("upgrad", "downgrad"),
    ("promot", "demot"),
    ("merg", "split"),
    ("read", "write"),
    ("push", "pull"),
    ("send", "receiv"),
    ("encod", "decod"),
    ("serial", "deseri"),
    ("compress", "decompress"),
    ("zip", "unzip"),
    ("freez", "unfreez"),
    ("mute", "unmut"),
    ("hire", "fire"),
    ("win", "loss"),
    ("gain", "loss"),
    ("profit", "loss"),
    ("rise", "fall"),
    ("jump", "drop"),
    ("grow", "shrink"),
    ("shorten", "lengthen"),
    ("shorten", "extend"),
    ("upsampl", "downsampl"),
];

/// A word on one side whose opposite ([`OPPOSITES`]) is on the other.
fn opposites_veto(
    only_a: &[String],
    only_b: &[String],
    a: &Tokens,
    b: &Tokens,
    word_jaccard: f32,
) -> Option<Veto> {
    // Opposites contrast texts that otherwise say much the same ("scale
    // the brokers up" / "down"). In two texts that share few words, an
    // "up" and a "down" are as likely parts of other phrases ("lines up
    // with", "scaling nodes down"): the same overlap the words veto asks.
    if word_jaccard < WORDS_VETO_JACCARD {
        return None;
    }
    // A word the other text also has, beside its opposite, is no contrast:
    // "release the lock" against "the lock is stuck; unlock it".
    let has = |words: &[String], stem: &str| words.iter().any(|word| word == stem);
    let contrast = |x: &str, y: &str| {
        has(only_a, x) && has(only_b, y) && !has(&b.words, x) && !has(&a.words, y)
    };
    let opposite = OPPOSITES.iter().find_map(|(x, y)| {
        if contrast(x, y) {
            Some(((*x).to_owned(), (*y).to_owned()))
        } else if contrast(y, x) {
            Some(((*y).to_owned(), (*x).to_owned()))
        } else {
            None
        }
    });
    // A stop word against its opposite, which is none ("retrain with the
    // new features" / "without"; "giving the runners access" /
    // "removing"): the stop word is among the other text's keys.
    let against_stop_word = || {
        STOP_WORD_OPPOSITES.iter().find_map(|(stop, opposite)| {
            let stands = |only: &[String], mine: &Tokens, other: &Tokens| {
                has(only, opposite)
                    && other.keys.iter().any(|key| key == stop)
                    && !mine.keys.iter().any(|key| key == stop)
                    && !has(&other.words, opposite)
            };
            if stands(only_b, b, a) {
                Some(((*stop).to_owned(), (*opposite).to_owned()))
            } else if stands(only_a, a, b) {
                Some(((*opposite).to_owned(), (*stop).to_owned()))
            } else {
                None
            }
        })
    };
    opposite
        .or_else(against_stop_word)
        .map(|(a, b)| Veto::Opposites { a, b })
}

/// A stop word (or stop stem) and its opposite, which is a content word
/// (stem).
const STOP_WORD_OPPOSITES: [(&str, &str); 3] =
    [("with", "without"), ("give", "remov"), ("give", "revok")];

/// Words that place a period in time relative to now, each with the
/// one it means ("coming" week is the "next").
const PERIOD_PLACES: [(&str, &str); 8] = [
    ("this", "this"),
    ("current", "this"),
    ("next", "next"),
    ("come", "next"),
    ("upcom", "next"),
    ("last", "last"),
    ("previous", "last"),
    ("past", "last"),
];

/// Periods that [`PERIOD_PLACES`] place, as stems.
const PERIODS: [&str; 7] = [
    "day", "week", "month", "quarter", "year", "sprint", "releas",
];

/// The periods a text's keys place relative to now: a word of
/// [`PERIOD_PLACES`] right before one of [`PERIODS`] ("next year's").
fn placed_periods(keys: &[String]) -> Vec<(&'static str, String)> {
    keys.windows(2)
        .filter_map(|pair| {
            let (_, place) = PERIOD_PLACES.iter().find(|(word, _)| *word == pair[0])?;
            PERIODS
                .contains(&pair[1].as_str())
                .then(|| (*place, pair[1].clone()))
        })
        .collect()
}

/// The same period placed differently ("this year's traffic" / "next
/// year's"), in texts that otherwise share their words as an opposites
/// veto asks.
fn period_veto(a: &Tokens, b: &Tokens, word_jaccard: f32) -> Option<Veto> {
    if word_jaccard < WORDS_VETO_JACCARD {
        return None;
    }
    let (placed_a, placed_b) = (&a.periods, &b.periods);
    placed_a.iter().find_map(|(place_a, period)| {
        let differs = |placed: &[(&str, String)], place: &str| {
            placed.iter().any(|(p, q)| q == period && *p != place)
                && !placed.iter().any(|(p, q)| q == period && *p == place)
        };
        let (place_b, _) = placed_b.iter().find(|(_, q)| q == period)?;
        (differs(placed_b, place_a) && differs(placed_a, place_b)).then(|| Veto::Words {
            a: vec![format!("{place_a} {period}")],
            b: vec![format!("{place_b} {period}")],
        })
    })
}

/// The identifier keys each side has that the other lacks, class by
/// class.
fn unmatched_identifiers(a: &Tokens, b: &Tokens) -> (Vec<String>, Vec<String>) {
    let keys = |tokens: &Tokens, class: IdentifierClass| -> Vec<String> {
        tokens
            .identifiers
            .iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, key)| key.clone())
            .collect()
    };
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    for class in IDENTIFIER_CLASSES {
        let (a_only, b_only) = multiset_difference(&keys(a, class), &keys(b, class));
        only_a.extend(a_only);
        only_b.extend(b_only);
    }
    (only_a, only_b)
}

/// Whether two words (or stems) are one, or one is the other shortened
/// by at most four letters ("postgres", "postgresql").
fn same_or_shortened(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.len() >= 5 && long.starts_with(short) && long.len() - short.len() <= 4)
}

/// Whether two stems are forms of one word that the stemmer left apart
/// ("reconcil" for reconciling, "reconcili" for reconciliation): one
/// begins with the other, of at least six letters, and adds at most two.
fn one_word_family(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 6 && long.starts_with(short) && long.len() - short.len() <= 2
}

/// Drops the pairs of differing words where one is the other shortened
/// ([`same_or_shortened`]: "postgres" and "postgresql"), as written.
fn shortened_forms(only_a: &mut Vec<String>, only_b: &mut Vec<String>, a: &Tokens, b: &Tokens) {
    let written = |tokens: &Tokens, stem: &str| -> Option<String> {
        tokens
            .words
            .iter()
            .zip(&tokens.written)
            .find(|(s, _)| *s == stem)
            .map(|(_, w)| w.clone())
    };
    let mut i = 0;
    while i < only_a.len() {
        let Some(wa) = written(a, &only_a[i]) else {
            i += 1;
            continue;
        };
        let stem_a = &only_a[i];
        let partner = only_b.iter().position(|stem| {
            written(b, stem).is_some_and(|wb| same_or_shortened(&wa, &wb))
                || one_word_family(stem_a, stem)
        });
        match partner {
            Some(at) => {
                only_b.remove(at);
                only_a.remove(i);
            }
            None => i += 1,
        }
    }
}

/// Drops from `mine` each word the other text writes as two adjacent
/// words ("signup" against "sign up" or "sign-up", "cronjobs" against "cron
/// jobs"), and those two words from `theirs`.
fn join_compounds(mine: &mut Vec<String>, theirs: &mut Vec<String>, their_tokens: &Tokens) {
    if mine.is_empty() {
        return;
    }
    for pair in their_tokens.raw.windows(2) {
        // Only a word that starts with the first part and goes on with the
        // second's first letter can be the two joined: stem the joined form
        // only then.
        let (first, second) = (pair[0].as_str(), pair[1].as_str());
        let could_be = |word: &String| {
            word.len() > first.len()
                && word.starts_with(first)
                && second.as_bytes().first() == word.as_bytes().get(first.len())
        };
        if !mine.iter().any(could_be) {
            continue;
        }
        let joined = stemmer().stem(&format!("{first}{second}")).into_owned();
        if let Some(at) = mine.iter().position(|word| *word == joined) {
            mine.remove(at);
            for part in pair {
                let stem = stemmer().stem(part);
                if let Some(at) = theirs.iter().position(|word| *word == stem) {
                    theirs.remove(at);
                }
            }
        }
    }
}

/// Drops from `acronyms` (one side's unmatched identifier keys) each
/// acronym the other text spells out as adjacent words ("pr": "pull
/// request") or writes as a word, and those words from `their_words`.
fn spell_out_acronyms(
    acronyms: &mut Vec<String>,
    their_words: &mut Vec<String>,
    their_tokens: &Tokens,
) {
    acronyms.retain(|acronym| {
        let letters = acronym.chars().count();
        if !(2..=5).contains(&letters) || !acronym.chars().all(char::is_alphabetic) {
            return true;
        }
        let spelled = their_tokens.raw.windows(letters).find(|words| {
            words
                .iter()
                .zip(acronym.chars())
                .all(|(word, letter)| word.starts_with(letter))
        });
        let parts: Vec<&str> = match spelled {
            Some(words) => words.iter().map(String::as_str).collect(),
            None if their_tokens.raw.iter().any(|word| word == acronym) => vec![acronym.as_str()],
            None => return true,
        };
        for part in parts {
            let stem = stemmer().stem(part);
            if let Some(at) = their_words.iter().position(|word| *word == stem) {
                their_words.remove(at);
            }
        }
        false
    });
}

/// The differing words (stems) of each side, less those with a WordNet
/// synonym among the other side's ([`related::synonym_swaps`]): "clean
/// up" / "tidy up", "twice" / "double"; and the synonym pairs, as written.
fn without_synonyms(
    (reading_a, reading_b): (&Reading, &Reading),
    (ta, tb): (&Tokens, &Tokens),
    only_a: &[String],
    only_b: &[String],
) -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
    let written = |tokens: &Tokens, stems: &[String]| -> Vec<String> {
        stems
            .iter()
            .map(|stem| {
                tokens
                    .words
                    .iter()
                    .zip(&tokens.written)
                    .find(|(word, _)| *word == stem)
                    .map_or_else(|| stem.clone(), |(_, written)| written.clone())
            })
            .collect()
    };
    let (written_a, written_b) = (written(ta, only_a), written(tb, only_b));
    let pairs = related::synonym_swaps(reading_a, reading_b, &written_a, &written_b);
    let (mut matched_a, mut matched_b) = (vec![false; only_a.len()], vec![false; only_b.len()]);
    for &(a, b) in &pairs {
        matched_a[a] = true;
        matched_b[b] = true;
    }
    let keep = |stems: &[String], matched: &[bool]| -> Vec<String> {
        stems
            .iter()
            .zip(matched)
            .filter(|(_, matched)| !**matched)
            .map(|(stem, _)| stem.clone())
            .collect()
    };
    let (kept_a, kept_b) = (keep(only_a, &matched_a), keep(only_b, &matched_b));
    let synonyms = pairs
        .iter()
        .map(|&(a, b)| (written_a[a].clone(), written_b[b].clone()))
        .collect();
    (kept_a, kept_b, synonyms)
}

/// How much of their words two texts must share (Jaccard of their content
/// words) for a swap of one or two words, or of opposite words, to be a
/// contrast rather than two different texts.
const WORDS_VETO_JACCARD: f32 = 0.3;

/// One or two words swapped for one or two others in much the same words,
/// unless the swapped words ask for the same thing (both in one intent:
/// "review" and "audit").
fn words_veto(only_a: &[String], only_b: &[String], jaccard: f32) -> Option<Veto> {
    let swapped = (1..=2).contains(&only_a.len()) && (1..=2).contains(&only_b.len());
    let synonyms = intents_of(only_a) & intents_of(only_b) != 0;
    (swapped && jaccard >= WORDS_VETO_JACCARD && !synonyms).then(|| Veto::Words {
        a: only_a.to_vec(),
        b: only_b.to_vec(),
    })
}

/// Whether the content words and identifiers two texts share stand in
/// the same order in both: a text edited in one place keeps them so
/// ("Deploy build 5812 to staging" / "... to production"), a text written
/// anew moves some ("making the Docker image for the api service
/// smaller" / "shrinking the api service's Docker image").
fn shared_words_in_order(a: &Tokens, b: &Tokens) -> bool {
    let content = |tokens: &Tokens| -> Vec<String> {
        tokens
            .keys
            .iter()
            .filter(|key| !is_stop_word(key))
            .cloned()
            .collect()
    };
    moved_words(&content(a), &content(b)) == 0
}

/// How many of the words two sequences share stand out of order: the
/// shared words less the most of them that both have in one order (the
/// longest common subsequence of the shared words). The k-th time a word
/// is shared in `b` stands for the k-th in `a`, so that subsequence is
/// the longest increasing one of `a`'s places read in `b`'s order, found
/// by patience sorting in O(n log n).
fn moved_words(a: &[String], b: &[String]) -> usize {
    let (only_a, only_b) = multiset_difference(a, b);
    // Each sequence without its own words (their first occurrences).
    let shared = |seq: &[String], only: &[String]| -> Vec<String> {
        let mut left: BTreeMap<&str, usize> = BTreeMap::new();
        for word in only {
            *left.entry(word.as_str()).or_default() += 1;
        }
        seq.iter()
            .filter(|word| match left.get_mut(word.as_str()) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .cloned()
            .collect()
    };
    let (shared_a, shared_b) = (shared(a, &only_a), shared(b, &only_b));
    let mut places: BTreeMap<&str, std::collections::VecDeque<usize>> = BTreeMap::new();
    for (at, word) in shared_a.iter().enumerate() {
        places.entry(word.as_str()).or_default().push_back(at);
    }
    let positions: Vec<usize> = shared_b
        .iter()
        .filter_map(|word| places.get_mut(word.as_str())?.pop_front())
        .collect();
    // The smallest last place of an increasing run of each length.
    let mut tails: Vec<usize> = Vec::new();
    for &place in &positions {
        let at = tails.partition_point(|&tail| tail < place);
        if at == tails.len() {
            tails.push(place);
        } else {
            tails[at] = place;
        }
    }
    positions.len() - tails.len()
}

/// Stems of the filler a re-asked request adds ("it's still happening",
/// "I still need it", "looking into"): no request of their own, in any
/// form.
const STOP_STEMS: &[&str] = &[
    "look", "take", "give", "still", "need", "want", "happen", "alreadi", "yet", "realli",
    "actual", "anymor", "ever",
];

/// Words that point from one thing to another.
const DIRECTION_MARKERS: [&str; 7] = ["to", "from", "into", "onto", "before", "after", "than"];

/// The direction markers each text has that the other lacks, when both
/// have some ("before" vs "after", "to" vs "from").
fn marker_veto(a: &Tokens, b: &Tokens) -> Option<Veto> {
    let markers = |tokens: &Tokens| -> Vec<String> {
        tokens
            .keys
            .iter()
            .filter(|key| DIRECTION_MARKERS.contains(&key.as_str()))
            .cloned()
            .collect()
    };
    let (only_a, only_b) = multiset_difference(&markers(a), &markers(b));
    (!only_a.is_empty() && !only_b.is_empty()).then_some(Veto::Words {
        a: only_a,
        b: only_b,
    })
}

/// The same words, with a direction marker pointing at different ones.
fn direction_veto(a: &Tokens, b: &Tokens, only_a: &[String], only_b: &[String]) -> Option<Veto> {
    if !only_a.is_empty() || !only_b.is_empty() {
        return None;
    }
    for marker in DIRECTION_MARKERS {
        let target = |tokens: &Tokens| {
            let at = tokens.keys.iter().position(|key| key == marker)?;
            word_after(&tokens.keys, at).cloned()
        };
        // The numbers of one length in other units ("after 90 mins" /
        // "after 1.5 hours") point at the same.
        let same_duration = |ta: &str, tb: &str| {
            a.durations.iter().any(|da| {
                da.number.as_deref() == Some(ta)
                    && b.durations.iter().any(|db| {
                        db.number.as_deref() == Some(tb) && same_length(da.seconds, db.seconds)
                    })
            })
        };
        if let (Some(ta), Some(tb)) = (target(a), target(b))
            && !same_or_shortened(&ta, &tb)
            && !same_duration(&ta, &tb)
        {
            return Some(Veto::Direction {
                marker,
                a: ta,
                b: tb,
            });
        }
    }
    None
}

/// The first key after `keys[at]` that is no stop word: what a marker
/// there points at.
fn word_after(keys: &[String], at: usize) -> Option<&String> {
    keys.get(at + 1..)?.iter().find(|key| !is_stop_word(key))
}

/// Where a text moves something: the first word after "from" and the
/// first after a "to", "into" or "onto" that follows it. Read once per
/// text, in [`tokenize`].
fn ends(keys: &[String]) -> Option<(String, String)> {
    let from = keys.iter().position(|key| key == "from")?;
    let to = keys[from + 1..]
        .iter()
        .position(|key| matches!(key.as_str(), "to" | "into" | "onto"))?
        + from
        + 1;
    let (source, destination) = (word_after(keys, from)?, word_after(keys, to)?);
    (!same_or_shortened(source, destination)).then(|| (source.clone(), destination.clone()))
}

/// Each text moves something from where the other moves it to, whatever
/// else differs ("from LaunchDarkly into the config file" / "from the
/// config file into LaunchDarkly").
fn swapped_ends(a: &Tokens, b: &Tokens) -> Option<Veto> {
    let ((source_a, destination_a), (source_b, destination_b)) =
        (a.ends.as_ref()?, b.ends.as_ref()?);
    (same_or_shortened(source_a, destination_b) && same_or_shortened(destination_a, source_b)).then(
        || Veto::Direction {
            marker: "from",
            a: source_a.clone(),
            b: source_b.clone(),
        },
    )
}

/// The same words, with two parties trading places across a word that
/// relates them ("Bob reviews Alice's PR" vs "Alice reviews Bob's PR",
/// "promote db-2 and demote db-1" vs the other way round). Parties joined
/// only by "and", "or" or a comma ("compare X and Y") may trade places.
fn roles_veto(a: &Tokens, b: &Tokens) -> Option<Veto> {
    let once = |tokens: &Tokens, key: &str| {
        let mut at = tokens
            .parties
            .iter()
            .filter(|(_, k, _)| k == key)
            .map(|(at, _, _)| *at);
        match (at.next(), at.next()) {
            (Some(at), None) => Some(at),
            _ => None,
        }
    };
    let surely = |key: &str| {
        a.parties
            .iter()
            .chain(&b.parties)
            .any(|(_, k, sure)| k == key && *sure)
    };
    let parties: Vec<&str> = a
        .parties
        .iter()
        .map(|(_, key, _)| key.as_str())
        .filter(|key| surely(key))
        .collect();
    for (i, x) in parties.iter().enumerate() {
        for y in &parties[i + 1..] {
            if x == y {
                continue;
            }
            let (Some(ax), Some(ay), Some(bx), Some(by)) =
                (once(a, x), once(a, y), once(b, x), once(b, y))
            else {
                continue;
            };
            if (ax < ay) == (bx < by) {
                continue;
            }
            let (from, to) = (ax.min(ay), ax.max(ay));
            let related = a.keys[from + 1..to].iter().any(|key| {
                !is_stop_word(key) && !matches!(key.as_str(), "and" | "or" | "vs" | "versus")
            });
            if related {
                return Some(Veto::Roles {
                    a: (*x).to_owned(),
                    b: (*y).to_owned(),
                });
            }
        }
    }
    None
}

/// The content words of `tokens` whose stems are `stems` (a sub-multiset
/// of its words), as written and in order.
fn as_written(tokens: &Tokens, stems: &[String]) -> Vec<String> {
    let mut left: Vec<&str> = stems.iter().map(String::as_str).collect();
    let mut out = Vec::with_capacity(stems.len());
    for (stem, written) in tokens.words.iter().zip(&tokens.written) {
        if let Some(at) = left.iter().position(|word| *word == stem) {
            left.swap_remove(at);
            out.push(written.clone());
        }
    }
    out
}

/// The intents a text asks for, as a bit set over [`INTENTS`].
fn intents(tokens: &Tokens) -> u32 {
    intents_of(&tokens.words)
}

/// The intents of some stems, as a bit set over [`INTENTS`].
fn intents_of(stems: &[String]) -> u32 {
    let mut bits = 0;
    for (bit, (_, intent_stems)) in INTENTS.iter().enumerate() {
        if stems
            .iter()
            .any(|word| intent_stems.contains(&word.as_str()))
        {
            bits |= 1 << bit;
        }
    }
    bits
}

/// What a request can ask for, each with the stems that ask for it.
const INTENTS: [(&str, &[&str]); 14] = [
    (
        "review",
        &["review", "audit", "inspect", "critiqu", "assess"],
    ),
    ("fix", &["fix", "repair", "patch", "resolv", "correct"]),
    ("test", &["test", "verifi", "validat"]),
    (
        "deploy",
        &["deploy", "releas", "ship", "rollout", "publish"],
    ),
    (
        "explain",
        &["explain", "describ", "clarifi", "summar", "summari"],
    ),
    (
        "search",
        &["search", "find", "look", "lookup", "research", "googl"],
    ),
    (
        "refactor",
        &["refactor", "restructur", "simplifi", "cleanup"],
    ),
    ("document", &["document", "documentation"]),
    ("optimize", &["optim", "speed", "acceler", "tune"]),
    (
        "investigate",
        &["investig", "debug", "diagnos", "troubleshoot"],
    ),
    (
        "build",
        &[
            "implement",
            "build",
            "creat",
            "add",
            "write",
            "draft",
            "compos",
        ],
    ),
    ("remove", &["remov", "delet", "drop", "purg"]),
    ("update", &["updat", "upgrad", "bump", "migrat"]),
    ("translate", &["translat", "local"]),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn veto(a: &str, b: &str) -> Option<String> {
        compare(a, b).veto.map(|veto| veto.to_string())
    }

    #[test]
    fn only_what_the_model_reads_of_a_text_is_compared() {
        let filler = "review the code again ".repeat(300);
        let (a, b) = (
            format!("{filler} then deploy PR #412"),
            format!("{filler} then deploy PR #418"),
        );
        assert!(filler.len() > crate::EMBEDDING_INPUT_BYTES);
        // Past the model's input the texts differ; within it they do not.
        let contrast = compare(&a, &b);
        assert_eq!(contrast.veto, None);
        assert!(contrast.only_a.is_empty() && contrast.only_b.is_empty());
        assert_eq!(tokenize(&a).words, tokenize(embedding_input(&filler)).words);
        // Within it, the same texts differ as they should.
        let short = veto("then deploy PR #412", "then deploy PR #418");
        assert!(
            short
                .as_deref()
                .is_some_and(|veto| veto.contains("412") && veto.contains("418")),
            "{short:?}"
        );
        assert!(!reads_as_report(&format!(
            "Please check. {filler} We fixed it."
        )));
    }

    #[test]
    fn statements_are_told_from_requests_by_how_they_open_and_whether_they_ask() {
        for statement in [
            "The 2024 Kaskade Tour can tow 2,000 kg braked with the 160 hp engine",
            "5,500 - 3,500 = 2,000 kg, so the van can still pull the trailer",
            "I clicked 'Pricing'. The price table did not load.",
            "There is no Discography section on the page",
        ] {
            assert!(reads_as_statement(statement), "{statement}");
        }
        for request in [
            "Go to the 'Studio albums' subsection and list every album",
            "The pricing page: can you find the Pro plan's price?",
            "The table, please, with one row per plan",
            "Find the monthly price of the Pro plan",
            "I need the monthly price of the Pro plan",
        ] {
            assert!(!reads_as_statement(request), "{request}");
        }
    }

    #[test]
    fn identifiers_are_classified() {
        let tokens = tokenize(
            "Fix INC-4471 in src/api/list.rs: paginate() and user_id, @alice, #412, 30s, UTC, iOS, fooBar()",
        );
        let classes: Vec<(IdentifierClass, &str)> = tokens
            .identifiers
            .iter()
            .map(|(class, key)| (*class, key.as_str()))
            .collect();
        assert_eq!(
            classes,
            [
                (IdentifierClass::Reference, "inc-4471"),
                (IdentifierClass::Path, "src/api/list.rs"),
                (IdentifierClass::Code, "paginate"),
                (IdentifierClass::Code, "user_id"),
                (IdentifierClass::Reference, "@alice"),
                (IdentifierClass::Number, "412"),
                (IdentifierClass::Number, "30"),
                (IdentifierClass::Acronym, "utc"),
                (IdentifierClass::Code, "foobar"),
            ]
        );
        // A word with a capital inside and nothing else of code is a name.
        assert_eq!(tokens.words, ["fix", "io"]);
    }

    #[test]
    fn names_of_different_classes_on_each_side_are_a_veto_numbers_aside() {
        assert_eq!(
            veto(
                "PR #481 ready: cursor = last order id",
                "Cursor is now base64(order_id)"
            )
            .as_deref(),
            Some("different things named (pr vs base64(order_id))")
        );
        // A number word against an acronym is no name against a name.
        let numbers = veto(
            "Rerun the job for one day",
            "Rerun the job for the day in UTC",
        );
        assert!(
            !numbers
                .as_deref()
                .is_some_and(|v| v.starts_with("different things named")),
            "{numbers:?}"
        );
        // A name on one side only is no veto of this kind.
        assert_eq!(
            veto("Fix the login bug", "Fix the login bug in auth_service"),
            None
        );
    }

    #[test]
    fn words_for_most_recent_are_one_word() {
        assert_eq!(
            veto(
                "Find recent papers on retrieval augmented generation",
                "Find the latest papers on retrieval augmented generation"
            ),
            None
        );
        assert_eq!(
            compare("Show the newest logs", "Show the recent logs").only_a,
            Vec::<String>::new()
        );
    }

    #[test]
    fn one_identifier_changed_is_a_veto_and_the_same_one_written_otherwise_is_not() {
        assert_eq!(
            veto(
                "Review PR #412 for the login bug.",
                "Review PR #418 for the login bug."
            ),
            Some("different numbers (412 vs 418)".into())
        );
        assert_eq!(
            veto(
                "Page the on-call for INC-4471.",
                "Page the on-call for INC-4417."
            ),
            Some("different identifiers (inc-4471 vs inc-4417)".into())
        );
        assert_eq!(veto("Review PR 412 please", "Can you review #412?"), None);
        assert_eq!(veto("keep logs thirty days", "keep logs 30 days"), None);
        assert_eq!(
            veto("keep logs 30 days", "keep logs 60 days"),
            Some("different numbers (30 vs 60)".into())
        );
    }

    #[test]
    fn one_word_contrasts_are_vetoed() {
        assert_eq!(
            veto("List the open P1 bugs", "List the urgent P1 bugs"),
            Some("different words (open vs urgent)".into())
        );
        assert_eq!(
            veto("Scale the Kafka brokers up", "Scale the Kafka brokers out"),
            Some("different words (up vs out)".into())
        );
        assert!(
            veto(
                "Check the code that parses the config",
                "Check the code that writes the config"
            )
            .is_some()
        );
        assert!(
            veto(
                "Deploy build 5812 to staging.",
                "Deploy build 5812 to production."
            )
            .is_some()
        );
        // A prod/production alias is not a contrast.
        assert_eq!(
            veto(
                "Deploy build 5812 to prod",
                "deploy build 5812 to production"
            ),
            None
        );
    }

    #[test]
    fn a_reversed_direction_is_vetoed() {
        assert_eq!(
            veto(
                "Convert the timestamps from UTC to local time",
                "Convert the timestamps from local time to UTC"
            ),
            Some("opposite direction (to local vs to utc)".into())
        );
        assert_eq!(
            veto(
                "Copy the rows from orders into archive",
                "Copy the rows from archive into orders"
            ),
            Some("opposite direction (from order vs from archiv)".into())
        );
    }

    #[test]
    fn a_move_the_other_way_is_vetoed_whatever_else_differs() {
        assert_eq!(
            veto(
                "Move the feature flags of the billing page from LaunchDarkly into the config file and drop the SDK.",
                "Move the billing page's feature flags from the config file into LaunchDarkly, then delete the old ones."
            ),
            Some("opposite direction (from launchdark vs from configur)".into())
        );
        // The same move in other words is none.
        assert_eq!(
            veto(
                "Migrate the user sessions from Memcached to Redis.",
                "Move our sessions off Memcached: from Memcached into Redis, please."
            ),
            None
        );
    }

    #[test]
    fn a_thing_of_one_kind_on_each_side_is_vetoed_however_worded() {
        assert_eq!(
            veto(
                "Fix the crash on launch in the Android app.",
                "The iOS build crashes at startup too; track that down."
            ),
            Some("different platforms (Android vs iOS)".into())
        );
        assert_eq!(
            veto(
                "Resend the invoice emails that bounced for Gmail users.",
                "Some Outlook addresses never got their invoices; send those again."
            ),
            Some("different mail services (Gmail vs Outlook)".into())
        );
        // A month as a deadline is written in more ways than one.
        assert_eq!(
            veto(
                "Tell every manager about the new PTO rule before December.",
                "Make sure all managers hear about the PTO change by the end of November."
            ),
            None
        );
        assert_eq!(
            veto(
                "Run the March contractor payroll in Gusto.",
                "Gusto's April run for contractors is due too; get it out."
            ),
            Some("different months (March vs April)".into())
        );
        // Another form of the same name is the same thing.
        assert_eq!(
            veto(
                "Add an index on orders.created_at in Postgres.",
                "Add an index on orders.created_at in PostgreSQL."
            ),
            None
        );
        // A side that names both is no contrast: it moves from one to
        // the other.
        assert_eq!(
            veto(
                "Migrate the user sessions to Redis.",
                "Move the user sessions off Memcached and onto Redis."
            ),
            None
        );
        // Only names seldom anything else: "react" is a verb here.
        assert_eq!(
            veto(
                "How should the on-call react when Kafka lag alerts fire?",
                "What should the on-call do about Kafka lag alerts?"
            ),
            None
        );
    }

    #[test]
    fn sums_ranges_and_qualified_names_written_two_ways_are_one() {
        // A sum with a currency sign, short or in full.
        assert_eq!(
            veto(
                "Put $6k into LinkedIn ads for the Chicago roadshow.",
                "Put $6,000 into LinkedIn ads for the Chicago roadshow, please."
            ),
            None
        );
        assert_eq!(
            veto("Refund $120 to order 5512.", "Refund $210 to order 5512."),
            Some("different numbers (120 vs 210)".into())
        );
        // A number word times a thousand.
        assert_eq!(
            veto(
                "Only the first ten thousand rows of the CSV import came through.",
                "The CSV import stops at 10,000 rows."
            ),
            None
        );
        // A range of months with a hyphen or with "to".
        assert_eq!(
            veto(
                "Prepare the VAT return for Q2 (April to June) and have it ready for Sarah to submit.",
                "Prepare the VAT return for Q2 (April-June) and have it ready for Sarah to submit."
            ),
            None
        );
        // A table named with its schema or without.
        assert_eq!(
            veto(
                "Geocode the rows in analytics.store_locations.",
                "Look up coordinates for every row of store_locations."
            ),
            None
        );
        assert_eq!(
            veto(
                "Add an index on orders.created_at.",
                "Add an index on users.created_at."
            ),
            Some("different code names (orders.created_at vs users.created_at)".into())
        );
    }

    #[test]
    fn due_to_gives_a_cause_but_due_by_a_deadline() {
        assert!(reads_as_report(
            "The nightly export failed due to expired S3 credentials."
        ));
        assert!(!reads_as_report(
            "In Lattice, create the H2 review cycle with self-assessments starting on Nov 4 and manager write-ups due by Nov 22."
        ));
    }

    #[test]
    fn a_unit_written_apart_from_its_number_is_no_acronym() {
        // "MB" after a number is no name against the other side's code.
        assert_eq!(
            veto(
                "Raise client_max_body_size for uploads.example.com to 100m; large uploads get 413s.",
                "Uploads over 1 MB to uploads.example.com fail with 413; bump the body size limit to 100 MB."
            ),
            None
        );
        // Another unit is still another size.
        assert_eq!(
            veto(
                "Raise the upload limit to 100 MB.",
                "Raise the upload limit to 100 GB."
            ),
            Some("different words (mb vs gb)".into())
        );
        assert!(is_unit("GHz"));
        assert!(!is_unit("USD"));
    }

    #[test]
    fn a_name_on_each_side_in_one_place_is_vetoed() {
        assert_eq!(
            veto(
                "Push firmware 4.2.1 to all the HP LaserJet printers on the third floor of the Leeds office.",
                "Over in the Manchester office, the second-floor LaserJets should get the 4.2.1 firmware as well."
            ),
            Some("different things named (leeds vs manchester)".into())
        );
        assert_eq!(
            veto(
                "preparing the onboarding call agenda for Globex's admin team on Tuesday",
                "planning what to walk Initech's admins through in their first onboarding session"
            ),
            Some("different things named (globex vs initech)".into())
        );
        // Names in different places are no such contrast: the Leeds office
        // and Priya may well be one request's.
        assert_eq!(
            veto(
                "Order toner for the Leeds office printers.",
                "Priya asked for new toner cartridges for the office printers."
            ),
            None
        );
        // A name first in its sentence is not surely one.
        assert_eq!(
            veto(
                "Leeds office printers need toner.",
                "Order toner for the office printers in Leeds."
            ),
            None
        );
    }

    #[test]
    fn an_acronym_or_reference_in_the_plural_is_the_same_identifier() {
        assert_eq!(
            veto(
                "List the P1 tickets that breached the 4-hour target.",
                "Which P1s went past the 4-hour target?"
            ),
            None
        );
        assert_eq!(
            veto(
                "Document the public API of the billing service.",
                "Document the billing service's public APIs."
            ),
            None
        );
        // Another id in the plural is still another id.
        assert_eq!(
            veto(
                "List the open P1s for the payments team.",
                "List the open P2s for the payments team."
            ),
            Some("different identifiers (p1 vs p2)".into())
        );
        // A number with an s is no plural of capitals.
        assert_eq!(plural_of_capitals("30s"), None);
        assert_eq!(plural_of_capitals("VMs"), Some("VM"));
    }

    #[test]
    fn before_and_after_are_a_contrast_but_look_into_is_not_one() {
        assert_eq!(
            veto(
                "Run the migrations before the deploy",
                "Run the migrations after the deploy"
            ),
            Some("different words (before vs after)".into())
        );
        assert_eq!(
            veto(
                "Can you look into the flaky login test?",
                "Could you investigate the flaky login test?"
            ),
            None
        );
        // Synonyms of one intent are no contrast.
        assert_eq!(
            veto("Review the auth middleware", "Audit the auth middleware"),
            None
        );
    }

    #[test]
    fn rewordings_leave_differing_words_and_no_veto() {
        let contrast = compare(
            "Can you review the session timeout handling in auth/session.go?",
            "Could you take a look at how auth/session.go handles session timeouts?",
        );
        assert_eq!(contrast.veto, None);
        assert!(!contrast.only_a.is_empty() || !contrast.only_b.is_empty());
        let same = compare(
            "Restart the Redis cluster.",
            "restart the redis cluster again please",
        );
        assert_eq!(same.veto, None);
        assert!(same.only_a.is_empty() && same.only_b.is_empty());
        assert!((same.word_jaccard - 1.0).abs() < 1e-6);
    }

    #[test]
    fn intents_that_share_nothing_mismatch() {
        assert!(
            compare(
                "Review the SQL in get_orders for injection",
                "Speed up the SQL in get_orders"
            )
            .intent_mismatch
        );
        assert!(
            !compare(
                "Review the SQL in get_orders",
                "Audit the SQL in get_orders"
            )
            .intent_mismatch
        );
        assert!(
            !compare("the SQL in get_orders", "Speed up the SQL in get_orders").intent_mismatch
        );
    }

    #[test]
    fn british_spellings_read_the_american_way_and_words_spelled_alike_stay_as_written() {
        for (british, american) in [
            ("summarise", "summarize"),
            ("prioritising", "prioritizing"),
            ("localisation", "localization"),
            ("analysed", "analyzed"),
            ("behaviour", "behavior"),
            ("optimisers", "optimizers"),
        ] {
            assert_eq!(american_spelling(british), american, "{british}");
        }
        for word in [
            "promises",
            "enterprise",
            "raising",
            "advertised",
            "advisers",
            "premises",
            "compromised",
            "exercise",
            "otherwise",
            "unrevised",
            "detour",
            "contour",
            "noise",
        ] {
            assert_eq!(american_spelling(word), word, "{word}");
        }
        // So the differing words are English ones the model and WordNet know.
        let found = compare(
            "Rewrite fs-watcher.js so it uses promises with async/await",
            "Can you convert the callbacks in fs-watcher.js to async/await?",
        );
        assert!(
            found.only_a.iter().any(|word| word == "promises"),
            "{:?}",
            found.only_a
        );
    }

    #[test]
    fn spelling_compounds_acronyms_possessives_and_versions_are_no_difference() {
        for (a, b) in [
            (
                "Can you summarise the pricing tiers?",
                "Can you summarize the pricing tiers?",
            ),
            (
                "Review accessibility of the new signup modal.",
                "Review the accessibility of the new sign-up modal.",
            ),
            (
                "migrating the remaining cronjobs",
                "migrating the remaining cron jobs",
            ),
            (
                "Review the PR for the cache layer",
                "Review the pull request for the cache layer",
            ),
            (
                "Move the runners off GitHub's machines",
                "Move the runners off GitHub machines",
            ),
            (
                "Upgrade the notifications service to v1.8.",
                "Upgrade the notifications service to 1.8.",
            ),
            (
                "Re-review PR #903 now that I addressed your comments.",
                "Re-review PR #903 now that I've addressed your comments.",
            ),
            (
                "Pull the DAU numbers for Jan and Mar.",
                "Pull the DAU numbers for January and March.",
            ),
            ("upgrading to PostgreSQL 16", "upgrading to Postgres 16"),
            // A short form written as an identifier is its long form.
            (
                "Restart the k8s deployment ingest-api.",
                "Restart the Kubernetes deployment ingest-api.",
            ),
            // A year written short.
            ("reconciling Q4 2023 revenue", "reconciling Q4 '23 revenue"),
            // Two forms of one word the stemmer leaves apart.
            ("reconciling the revenue", "reconciliation of the revenue"),
            // A reference and its number spelled out.
            ("investigating incident 5120", "investigating INC-5120"),
            // Phrases that mean "again".
            (
                "Please review the authentication code once more.",
                "Review the authentication code again",
            ),
            ("Run it one more time", "Run it again"),
        ] {
            let contrast = compare(a, b);
            assert_eq!(contrast.veto, None, "{a} / {b}");
            assert!(
                contrast.only_a.is_empty() && contrast.only_b.is_empty(),
                "{a} / {b}: {contrast:?}"
            );
        }
        // "I" is a pronoun, and "Please" in a later sentence a stop word.
        let contrast = compare(
            "Look into why the websocket drops messages. Reproduce it.",
            "Look into why the WebSocket drops messages. Reproduce it. Please.",
        );
        assert!(
            contrast.only_a.is_empty() && contrast.only_b.is_empty(),
            "{contrast:?}"
        );
    }

    #[test]
    fn years_written_short_are_years_and_differ_as_years() {
        assert_eq!(abbreviated_year("'23"), Some("2023".to_owned()));
        assert_eq!(abbreviated_year("’98,"), Some("1998".to_owned()));
        assert_eq!(abbreviated_year("'230"), None);
        assert_eq!(abbreviated_year("23"), None);
        assert_eq!(
            compare("Q4 '23 revenue", "Q4 '24 revenue").veto,
            Some(Veto::Identifiers {
                class: IdentifierClass::Number,
                a: "2023".into(),
                b: "2024".into()
            })
        );
    }

    #[test]
    fn stems_of_one_word_family_are_one_word_but_short_ones_are_not() {
        assert!(one_word_family("reconcil", "reconcili"));
        assert!(!one_word_family("parti", "partit"), "party / partition");
        assert!(
            !one_word_family("deploy", "deployment"),
            "adds four letters"
        );
    }

    #[test]
    fn a_word_swapped_for_an_identifier_or_a_name_is_a_contrast() {
        for (a, b) in [
            (
                "Review the Android release build of the app.",
                "Review the iOS release build of the app.",
            ),
            (
                "customer interviews for the enterprise segment",
                "customer interviews for the SMB segment",
            ),
            (
                "investigating flaky CI unit tests",
                "investigating flaky CI e2e tests",
            ),
            (
                "importing contacts from the CSV into the CRM",
                "exporting contacts from the CRM into a CSV",
            ),
        ] {
            assert!(veto(a, b).is_some(), "{a} / {b}");
        }
    }

    #[test]
    fn parties_trading_places_across_a_relation_is_a_contrast() {
        assert_eq!(
            veto(
                "Bob should review Alice's PR for the cache layer.",
                "Alice should review Bob's PR for the cache layer."
            ),
            Some("swapped roles (bob and alic)".to_owned())
        );
        assert!(
            veto(
                "Promote the replica db-2 to primary and demote db-1.",
                "Promote db-1 to primary and demote the replica db-2."
            )
            .is_some()
        );
        // Listed, not related: the order does not matter.
        assert_eq!(
            veto(
                "Compare Pinecone and Weaviate for our vector search.",
                "Compare Weaviate and Pinecone for our vector search."
            ),
            None
        );
    }

    #[test]
    fn reports_and_requests_are_told_apart() {
        for report in [
            "The nightly export failed because the S3 credentials expired; I rotated them.",
            "p99 for the recommendations API over the last 7 days was 412 ms.",
            "2.7.0 is live in us-east-1; ap-southeast-2 is still rolling out.",
            "I couldn't reproduce #2231 on macOS 14.4; I've asked the reporter for a log.",
            // An identifier first is no imperative, whatever its first part.
            "test_checkout_concurrency is flaky because two tests share one Redis database.",
        ] {
            assert!(reads_as_report(report), "{report}");
        }
        for request in [
            "Can you check why the nightly export failed?",
            "Test the checkout flow again, because it broke after the deploy.",
            "Summarize the main findings of the papers I shared.",
            "We got another complaint today: the reset email isn't arriving. Please investigate.",
            "I need a list of accounts that moved to a paid plan.",
            "Close out the Slack channels for the projects we finished in 2023.",
        ] {
            assert!(!reads_as_report(request), "{request}");
        }
    }

    #[test]
    fn a_report_in_short_opens_in_the_past_or_gives_figures_after_a_label() {
        for report in [
            "Restarted the orders consumer; lag dropped from 240k to 0 within ten minutes.",
            "Open P1s by team: payments 4, search 2, mobile 5, platform 1.",
            "Load test at 500 RPS: error rate 0.2%, p95 640 ms.",
        ] {
            assert!(reads_as_report(report), "{report}");
        }
        for not_a_report in [
            // A clause that asks, an instruction or a question.
            "Updated the runbook; review it before the on-call handover.",
            "Deployed 2.7.0 to staging: why is p95 at 900 ms and not 400 ms",
            "Restarted the consumer, but it should drain 240k messages first.",
            // A topic opens with a gerund; "need", "embed", "speed" are no
            // past forms.
            "debugging the failed payments job: 3 retries, 2 timeouts",
            "Speed up the export job.",
            "Embed the status page in the wiki.",
            "Need the figures by region: 2023 and 2024.",
            // Figures in a request.
            "Set the memory limits: 512 MB for workers and 2 GB for the API.",
        ] {
            assert!(!reads_as_report(not_a_report), "{not_a_report}");
        }
    }

    #[test]
    fn a_word_both_texts_have_is_no_contrast_with_its_opposite() {
        assert_eq!(
            veto(
                "The Terraform state has been locked since the failed apply; release the lock.",
                "The Terraform lock is stuck after the apply that crashed; force-unlock it.",
            ),
            None
        );
        assert_eq!(
            veto("Lock the admin accounts.", "Unlock the admin accounts."),
            Some("opposite words (lock vs unlock)".to_owned())
        );
    }

    #[test]
    fn two_statements_are_never_a_report_against_a_request() {
        let report = "I ran the query: 1,284 rows for October.";
        let statement = "The query gives 1,284 rows for October.";
        let request = "Run the query for October.";
        // One reads as a report, the other only as a statement.
        assert!(reads_as_report(report));
        assert!(!reads_as_report(statement) && reads_as_statement(statement));
        assert!(!compare(report, statement).report_vs_request);
        assert!(compare(report, request).report_vs_request);
    }

    #[test]
    fn a_word_swapped_for_its_synonym_is_no_swap_and_what_is_left_is_weighed() {
        // WordNet: "clean up" and "tidy up" are one verb; "twice" and
        // "double" one sense.
        assert_eq!(
            veto(
                "Clean up the cli crate's README.",
                "Tidy up the README for the cli crate."
            ),
            None
        );
        assert_eq!(
            compare(
                "Clean up the cli crate's README.",
                "Tidy up the README for the cli crate."
            )
            .synonyms,
            [("clean".to_owned(), "tidy".to_owned())]
        );
        assert_eq!(
            veto(
                "ticket 90417: customer charged twice",
                "double charge on ticket #90417"
            ),
            None
        );
        // A synonym that cancels leaves the other swapped word weighed.
        assert_eq!(
            veto(
                "Clean up the README of the staging deploy scripts.",
                "Tidy up the README of the production deploy scripts."
            ),
            Some("different words (stage vs product)".to_owned())
        );
        // Synonyms never make a veto: "price" / "cost" cancelling out of a
        // longer rewording leaves "find" / "up much", no contrast.
        assert_eq!(
            veto(
                "Find the monthly price of the ACME Cloud Pro plan",
                "Look up how much ACME Cloud's Pro plan costs per month",
            ),
            None
        );
        // Related is not synonymous: one is a kind of the other.
        assert_eq!(
            veto("deploy to staging", "deploy to production"),
            Some("different words (stage vs product)".to_owned())
        );
    }

    #[test]
    fn roman_numerals_after_what_is_numbered_are_numbers() {
        assert_eq!(
            veto(
                "researching SOC 2 Type II requirements",
                "researching SOC 2 Type I requirements"
            ),
            Some("different numbers (2 vs 1)".to_owned())
        );
        assert_eq!(
            veto("Start the Phase III rollout.", "Start the phase 3 rollout."),
            None
        );
        // "I" after any other word is the pronoun.
        assert_eq!(
            veto(
                "Can I get the Type 2 report?",
                "Can I get the Type II report?"
            ),
            None
        );
    }

    #[test]
    fn a_reference_is_its_number_only_with_that_number_and_a_word_it_begins() {
        assert!(
            compare("investigating incident 4417", "investigating INC-4471")
                .veto
                .is_some()
        );
        assert!(
            !compare("investigating ticket 5120", "investigating INC-5120")
                .only_a
                .is_empty()
        );
    }

    #[test]
    fn again_phrases_are_whole_words_in_any_case() {
        assert_eq!(
            again_for_its_phrases("Try it ONCE MORE, then once again."),
            "Try it again, then again."
        );
        assert_eq!(
            again_for_its_phrases("Give someone more time"),
            "Give someone more time"
        );
        assert_eq!(again_for_its_phrases("once moreover"), "once moreover");
        assert!(
            compare("Run it one time", "Run it two times")
                .veto
                .is_some()
        );
    }

    #[test]
    fn a_verb_in_the_past_opens_no_instruction() {
        // "I shared" in a request is no report; "give" opens an instruction.
        assert!(!reads_as_report(
            "Give me a short digest of what the three papers I shared concluded."
        ));
        // "Fixed" is no instruction to fix.
        assert!(reads_as_report(
            "Fixed the flaky checkout test; it passed 50 runs in a row."
        ));
        assert!(!reads_as_report(
            "Fix the flaky checkout test; it failed twice today."
        ));
    }

    #[test]
    fn opposite_words_in_texts_that_share_few_words_are_no_contrast() {
        // "down" and "up" belong to other phrases here ("scaled the pool
        // down", "lines up with"), in two texts with little in common.
        let a = "The autoscaler scaled the worker pool down overnight; tell me what the drain logs say.";
        let b = "Find whether the spike of queue timeouts lines up with the nightly batch window.";
        let contrast = compare(a, b);
        assert!(contrast.word_jaccard < WORDS_VETO_JACCARD, "{contrast:?}");
        assert!(
            !matches!(contrast.veto, Some(Veto::Opposites { .. })),
            "{contrast:?}"
        );
    }

    #[test]
    fn within_is_a_function_word() {
        let contrast = compare(
            "Renew the certificates that expire within the next 30 days.",
            "Renew the certificates that expire in the next 30 days.",
        );
        assert_eq!(contrast.veto, None, "{contrast:?}");
        assert!(
            contrast.only_a.is_empty() && contrast.only_b.is_empty(),
            "{contrast:?}"
        );
    }

    #[test]
    fn a_colon_between_digits_is_a_time_not_a_label() {
        let label = |text: &'static str| label_colon(text).map(|at| &text[..at]);
        assert_eq!(
            label("load test at 500 rps: error rate 0.2%, p95 640 ms"),
            Some("load test at 500 rps")
        );
        assert_eq!(label("from 02:10 to 02:40 utc"), None);
        assert_eq!(
            label("between 02:10 and 02:40: 412 errors"),
            Some("between 02:10 and 02:40")
        );
        let split: Vec<&str> =
            clauses("lag grew from 02:10 to 02:40 utc. see if the lock was held").collect();
        assert_eq!(
            split,
            [
                "lag grew from 02:10 to 02:40 utc",
                " see if the lock was held"
            ]
        );
        // Times are no figures after a label, and "see" asks.
        assert!(!reads_as_report(
            "The export stalled from 02:10 to 02:40 UTC. See if the table lock was held."
        ));
        assert!(!reads_as_report(
            "The export stalled from 02:10 to 02:40 UTC, 3 retries each time."
        ));
        assert!(reads_as_report("Nightly export runs: 3 failed, 41 passed."));
        assert!(is_imperative("see"));
    }

    #[test]
    fn opposite_words_are_a_contrast_whatever_else_differs() {
        for (a, b, words) in [
            (
                "Scale the Kafka brokers up to handle the load.",
                "Scale the Kafka brokers down to save cost.",
                "up vs down",
            ),
            (
                "List the open P1 bugs in payments.",
                "List the closed P1 bugs in payments.",
                "open vs close",
            ),
            (
                "Enable the new_checkout flag in production.",
                "Disable the new_checkout flag in production.",
                "enabl vs disabl",
            ),
            (
                "Serialize the order events as Avro.",
                "Deserialize the order events from Avro.",
                "serial vs deseri",
            ),
            (
                "Sort the results in ascending order.",
                "Sort the results in descending order.",
                "ascend vs descend",
            ),
        ] {
            assert_eq!(
                veto(a, b),
                Some(format!("opposite words ({words})")),
                "{a} / {b}"
            );
        }
    }

    /// The keys of a text's numbers, in order.
    fn number_keys(text: &str) -> Vec<String> {
        tokenize(text)
            .identifiers
            .into_iter()
            .filter(|(class, _)| *class == IdentifierClass::Number)
            .map(|(_, key)| key)
            .collect()
    }

    #[test]
    fn a_number_joined_to_its_word_or_written_large_is_that_number() {
        let numbers = number_keys;
        assert_eq!(numbers("Book a 45-minute call"), ["45"]);
        assert_eq!(
            tokenize("Book a 45-minute call").words,
            ["book", "minut", "call"]
        );
        assert_eq!(numbers("over 10k files"), ["10000"]);
        assert_eq!(numbers("2.3K rows"), ["2300"]);
        assert_eq!(numbers("about 200 thousand messages"), ["200000"]);
        assert_eq!(numbers("1.5 million users"), ["1500000"]);
        assert_eq!(
            numbers("1.5M users, a 7B model, 5m of waiting"),
            ["1500000", "7000000000", "5"]
        );
        // Other hyphenated tokens with digits stay whole.
        assert_eq!(
            numbers("the covid-19 dashboard for 2022-23"),
            Vec::<String>::new()
        );
        assert_eq!(numbers("NaN thousand, inf million"), Vec::<String>::new());
        for (a, b) in [
            (
                "Book a 45-minute call with the partners",
                "Book a 45 minute call with the partners",
            ),
            (
                "Open the project with 10,000 files",
                "Open the project with 10k files",
            ),
            (
                "Size a pipeline for 200k msg/s",
                "Size a pipeline for 200 thousand msg/s",
            ),
            ("Load the 2.3 million events", "Load the 2.3M events"),
        ] {
            let contrast = compare(a, b);
            assert_eq!(contrast.veto, None, "{a} / {b}");
            assert!(
                contrast.only_a.is_empty() && contrast.only_b.is_empty(),
                "{a} / {b}"
            );
        }
        assert!(
            veto(
                "Open the project with 10k files",
                "Open the project with 20k files"
            )
            .is_some_and(|veto| veto.contains("10000") && veto.contains("20000"))
        );
    }

    #[test]
    fn how_often_something_happens_is_filler_but_keep_with_an_object_is_a_word() {
        let contrast = compare(
            "Investigate the repeated restarts of the billing-worker pods.",
            "Investigate why the billing-worker pods keep restarting.",
        );
        assert_eq!(contrast.veto, None);
        assert!(
            contrast.only_a.is_empty() && contrast.only_b.is_empty(),
            "{contrast:?}"
        );
        assert_eq!(
            tokenize("the upload keeps failing").words,
            ["upload", "fail"]
        );
        assert!(
            tokenize("keep the old logs")
                .words
                .contains(&"keep".to_owned())
        );
    }

    #[test]
    fn context_then_an_instruction_is_a_request_not_a_report() {
        for request in [
            "The config loader's errors are vague. Make every message name the file, and keep the exit codes as they are now.",
            "The export is down again; restart it and tell me when it is back.",
        ] {
            assert!(!reads_as_report(request), "{request}");
        }
        // A report may still end by pointing somewhere.
        for report in [
            "Fixed the race in the cache; see PR #412.",
            "The export failed because the credentials expired. Let me know if it fails again.",
            "The job failed because the token expired. Fix is deployed.",
        ] {
            assert!(reads_as_report(report), "{report}");
        }
    }

    #[test]
    fn drafting_is_writing() {
        assert!(
            !compare(
                "Write the customer an answer on ticket 58213",
                "Draft a reply to the customer on ticket 58213 explaining the hold"
            )
            .intent_mismatch
        );
    }

    #[test]
    fn an_irregular_form_is_its_verb() {
        assert!(
            IRREGULAR_FORMS.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "sorted, for the binary search"
        );
        assert_eq!(irregular_base("wrote"), Some("write"));
        assert_eq!(irregular_base("written"), Some("write"));
        assert_eq!(irregular_base("left"), None, "as often a direction");
        assert_eq!(irregular_base("write"), None);
        assert_eq!(
            tokenize("who wrote the broken migration").words,
            tokenize("who writes the break migration").words
        );
        // WordNet reads it as its verb too: "sent" is related to "send".
        assert_eq!(
            crate::judge::related::related_cover("sent the invoice", "mailed the invoice"),
            crate::judge::related::related_cover("send the invoice", "mail the invoice")
        );
    }

    #[test]
    fn someone_elses_need_passed_on_is_a_request() {
        for request in [
            "Sales wants a CSV of every lead we created between July and September.",
            "Finance needs the October figures we reported to the board.",
        ] {
            assert!(!reads_as_report(request), "{request}");
        }
        assert!(reads_as_report(
            "The import job needs 4 GB; I raised the limit and it finished."
        ));
    }

    #[test]
    fn an_acronym_the_other_side_spells_out_is_no_identifier_veto() {
        let spelled = veto(
            "tuning garbage collection on the ingest service's JVM",
            "reducing GC pauses in the ingest service",
        );
        assert!(
            !spelled
                .as_deref()
                .is_some_and(|veto| veto.contains("acronyms")),
            "{spelled:?}"
        );
        let unexplained = veto(
            "tune the JVM of the ingest service",
            "tune the GC of the ingest service",
        );
        assert!(
            unexplained
                .as_deref()
                .is_some_and(|veto| veto.contains("jvm") && veto.contains("gc")),
            "{unexplained:?}"
        );
    }

    #[test]
    fn a_dotted_name_whose_parts_the_other_side_has_is_no_difference() {
        let contrast = compare(
            "The orders table needs an index on its created_at column.",
            "Add an index on orders.created_at.",
        );
        assert_eq!(contrast.veto, None);
        // A part the other side lacks keeps the name a difference.
        assert!(
            veto(
                "Add an index on orders.created_at.",
                "Add an index on invoices.created_at."
            )
            .is_some()
        );
    }

    #[test]
    fn a_time_of_day_is_one_however_written() {
        let times = number_keys;
        assert_eq!(times("post it at 9 a.m. UTC"), ["9:00"]);
        assert_eq!(times("post it at 9am or 09:00"), ["9:00", "9:00"]);
        assert_eq!(
            times("at 9:30pm, not 21:30 or 12 AM"),
            ["21:30", "21:30", "0:00"]
        );
        // A number alone is no time, nor is a colon without two digits.
        assert_eq!(times("9 UTC, 3:5, 25:00"), ["9"]);
        // The piece after "a.m." still starts a sentence.
        assert_eq!(
            veto(
                "Run it at 9 a.m. Then page Bob.",
                "Run it at 09:00. Then page Bob."
            ),
            None
        );
        assert_eq!(
            veto(
                "Post the reminder at 9 a.m. UTC.",
                "Post the reminder at 10 a.m. UTC."
            ),
            Some("different numbers (9:00 vs 10:00)".to_owned())
        );
        // A time on the hour and its hour alone are one.
        assert_eq!(
            veto(
                "I need the login service's error logs from 9 to 10 UTC.",
                "Pull the login service's error logs between 09:00 and 10:00 UTC."
            ),
            None
        );
    }

    #[test]
    fn a_duration_in_other_units_is_no_difference() {
        let same = |a: &str, b: &str| {
            let contrast = compare(a, b);
            (contrast.veto, contrast.only_a, contrast.only_b)
        };
        for (a, b) in [
            ("Keep the logs for 3 months.", "Keep the logs for 90 days."),
            (
                "Keep the logs for three months.",
                "Keep the logs for a 90-day period.",
            ),
            ("Cache it for 24 hours.", "Cache it for a day."),
            ("Retry within 30s.", "Retry within 30 seconds."),
            ("Keep backups for 12 months.", "Keep backups for a year."),
            ("Time out after 90 mins.", "Time out after 1.5 hours."),
        ] {
            let (veto, only_a, only_b) = same(a, b);
            assert_eq!(veto, None, "{a} / {b}");
            assert!(
                only_a.iter().chain(&only_b).all(|word| word == "period"),
                "{a} / {b}: {only_a:?} {only_b:?}"
            );
        }
        // Another length stays a difference, in any units.
        assert_eq!(
            veto("Keep the logs for 3 months.", "Keep the logs for 30 days."),
            Some("different numbers (3 vs 30)".to_owned())
        );
        assert_eq!(
            veto("Keep the logs for 6 weeks.", "Keep the logs for 6 months."),
            Some("different words (week vs month)".to_owned())
        );
    }

    #[test]
    fn without_and_another_place_in_time_are_contrasts() {
        assert_eq!(
            veto(
                "Retrain the churn model with the new usage features.",
                "Retrain the churn model without the new usage features."
            ),
            Some("opposite words (with vs without)".to_owned())
        );
        assert_eq!(
            veto(
                "giving CI runners access to the staging registry",
                "removing CI runners' access to the staging registry"
            ),
            Some("opposite words (give vs remov)".to_owned())
        );
        // "without" on both sides, or no "with" against it: no contrast.
        assert_eq!(
            veto(
                "Deploy without downtime, with a canary.",
                "Deploy with a canary and without downtime."
            ),
            None
        );
        assert_eq!(
            veto(
                "sizing the Kafka cluster for this year's traffic",
                "sizing the Kafka cluster for next year's traffic"
            ),
            Some("different words (this year vs next year)".to_owned())
        );
        // "past" and "last" place a week alike (the words veto weighs
        // the two words apart).
        assert_eq!(
            period_veto(
                &tokenize("Summarize the incidents of the past week."),
                &tokenize("Summarize the incidents of the last week."),
                1.0
            ),
            None
        );
        assert_eq!(
            veto(
                "Plan the capacity for the coming quarter.",
                "Plan the capacity for the current quarter."
            ),
            Some("different words (next quarter vs this quarter)".to_owned())
        );
    }

    #[test]
    fn a_percent_written_out_is_the_sign() {
        let contrast = compare(
            "Set the CPU target to 60 percent.",
            "Set the CPU target to 60%.",
        );
        assert_eq!(
            (contrast.veto, contrast.only_a, contrast.only_b),
            (None, vec![], vec![])
        );
        assert_eq!(
            veto(
                "Set the CPU target to 60 percent.",
                "Set the CPU target to 80%."
            ),
            Some("different numbers (60 vs 80)".to_owned())
        );
    }

    #[test]
    fn a_text_written_anew_is_no_words_swap_but_one_edited_in_one_place_is() {
        // The shared words stand in another order: a rewording, weighed.
        assert_eq!(
            veto(
                "making the Docker image for the api service smaller",
                "shrinking the api service's Docker image"
            ),
            None
        );
        assert_eq!(
            veto(
                "Starting with the next release, stop supporting iOS 15.",
                "Drop support for iOS 15 in the next release."
            ),
            None
        );
        // The same words in the same order, one swapped: a contrast.
        assert_eq!(
            veto(
                "Rotate the Stripe webhook signing secret in staging.",
                "Rotate the Stripe webhook signing secret in production."
            ),
            Some("different words (stage vs product)".into())
        );
        // Words only one side has may stand anywhere.
        assert_eq!(
            veto(
                "Add screen reader labels to the login form inputs.",
                "Add screen reader labels to the form inputs of the signup page."
            ),
            Some("different words (login vs signup page)".into())
        );
    }

    #[test]
    fn moved_words_counts_the_shared_words_out_of_order() {
        let words = |text: &str| -> Vec<String> { text.split(' ').map(str::to_owned).collect() };
        assert_eq!(moved_words(&words("a b c"), &words("a b c")), 0);
        assert_eq!(moved_words(&words("a b c x"), &words("a y b c")), 0);
        assert_eq!(moved_words(&words("a b c"), &words("c a b")), 1);
        assert_eq!(moved_words(&words("a b c d"), &words("d c b a")), 3);
        // The k-th "a" of one side stands for the k-th of the other.
        assert_eq!(moved_words(&words("a b a"), &words("a a b")), 1);
        assert_eq!(moved_words(&words("a"), &words("b")), 0);
    }

    #[test]
    fn trends_and_lengths_the_other_way_are_opposites() {
        assert_eq!(
            veto(
                "Figure out why our Snowflake bill jumped 40% in October.",
                "Our Snowflake bill dropped 40% in October; find out what changed."
            ),
            Some("opposite words (jump vs drop)".into())
        );
        assert_eq!(
            veto(
                "Shorten the Postgres backup retention from 30 to 14 days.",
                "Extend the Postgres backup retention from 14 to 30 days."
            ),
            Some("opposite words (shorten vs extend)".into())
        );
    }

    #[test]
    fn a_template_writes_what_both_texts_name_as_a_placeholder() {
        let (a, b) = (
            ReadText::new("Prepare the Q2 VAT return."),
            ReadText::new("Pay the Q2 VAT bill once the return is submitted."),
        );
        assert_eq!(
            templates(&a, &b),
            (
                "prepare the X X X".to_owned(),
                "pay the X X bill once the X is submitted".to_owned()
            )
        );
        // Stop words stay as written, shared or not; a word only one side
        // has stays too.
        let (a, b) = (
            ReadText::new("Can you review PR #412?"),
            ReadText::new("Please review the tests in PR #412."),
        );
        assert_eq!(
            templates(&a, &b),
            (
                "can you X X X".to_owned(),
                "please X the tests in X X".to_owned()
            )
        );
    }

    #[test]
    fn work_added_for_another_target_is_read_from_too_also_and_as_well() {
        for adds in [
            "The iOS build crashes at startup too; track that down.",
            "Gusto's April run for contractors is due as well; get it out.",
            "Oakridge Bank's Okta is also getting 409s from our SCIM endpoint.",
            "The staging cluster needs the same fix, likewise.",
            "Make the VPC flow logs expire after 400 days too",
        ] {
            assert!(adds_to_earlier_work(adds), "{adds}");
        }
        for asks in [
            // A degree, not another target.
            "UserController has grown way too big; break it up.",
            // A part added to the same request.
            "Compare SSO pricing on WorkOS and Auth0. Also point out the ones that bill per connection.",
            "Also check the retry logic in the uploader.",
            // "As well as" is "and".
            "Compare Auth0 as well as Clerk on SSO pricing.",
            "Fix the crash on launch in the Android app.",
        ] {
            assert!(!adds_to_earlier_work(asks), "{asks}");
        }
        assert!(
            compare(
                "Set the lifecycle rule on corp-log-archive to expire CloudTrail logs after 400 days.",
                "The VPC flow logs in that bucket need an expiration too; delete them after 400 days."
            )
            .adds_on_one_side
        );
        assert!(
            !compare(
                "The iOS app crashes at startup too; fix it.",
                "The iOS app also crashes at startup; fix it."
            )
            .adds_on_one_side
        );
    }

    #[test]
    fn a_path_spelled_out_in_words_is_no_difference() {
        let contrast = compare(
            "Add a lifecycle rule on s3://corp-log-archive that moves objects under alb-logs/ to Glacier Deep Archive after 90 days.",
            "ALB logs in the corp-log-archive bucket shouldn't sit in Standard storage forever; after three months, transition them to Deep Archive with a lifecycle policy.",
        );
        assert_eq!(contrast.veto, None);
        assert!(
            !contrast.only_b.contains(&"corp".to_owned()),
            "{contrast:?}"
        );
        // The last segment of a path, written on the other side.
        assert_eq!(
            veto(
                "Can you unblock the Terraform plan for vpc-peering? CI has been red on it since yesterday.",
                "Repair modules/vpc-peering so that terraform plan succeeds again."
            ),
            None
        );
        // Its parts written on the other side, where this side writes them
        // too ("module").
        assert_eq!(
            veto(
                "terraform plan fails in modules/vpc-peering; can you fix the module?",
                "Please get the VPC peering module planning again."
            ),
            None
        );
        // Two paths are compared as paths, whatever words stand beside them.
        assert_eq!(
            veto(
                "Fix the off-by-one in src/api/list.rs.",
                "Fix the off-by-one in src/api/get.rs; the list endpoint is fine."
            ),
            Some("different paths (src/api/list.rs vs src/api/get.rs)".into())
        );
        // A stop word is no part of a path written in words.
        assert!(
            veto(
                "Open https://docs.example.com/guide/for in the browser.",
                "Open the docs for the browser extension."
            )
            .is_some()
        );
        // A path whose parts the other text does not all write stays one.
        assert!(
            veto(
                "Clean up old files under logs/archive/ on the build host.",
                "Clean up old files under the audit trail on the build host."
            )
            .is_some()
        );
    }
}
