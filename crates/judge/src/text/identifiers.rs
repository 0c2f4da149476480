//! Identifier-like tokens and their classes: references (`#412`,
//! `INC-4471`), numbers however written (`30s`, `10k`, `$6,000`, "'23"),
//! paths, acronyms and code, each with the key it is compared by.

use crate::words::{FILE_EXTENSIONS, UNITS};

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
    /// The class as a plural noun, as a veto names it ("numbers").
    pub(crate) fn noun(self) -> &'static str {
        match self {
            IdentifierClass::Reference => "identifiers",
            IdentifierClass::Number => "numbers",
            IdentifierClass::Path => "paths",
            IdentifierClass::Acronym => "acronyms",
            IdentifierClass::Code => "code names",
        }
    }
}

/// An identifier's class and comparison key, when `token` is one.
pub(crate) fn identifier(token: &str) -> Option<(IdentifierClass, String)> {
    if let Some(singular) = plural_of_capitals(token) {
        return identifier(singular);
    }
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
    if is_path(token) {
        return Some((IdentifierClass::Path, lower));
    }
    if token.chars().any(|c| c.is_ascii_digit()) {
        return Some((IdentifierClass::Reference, lower));
    }
    let letters: Vec<char> = token.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() >= 2 && letters.iter().all(|c| c.is_uppercase()) {
        return Some((IdentifierClass::Acronym, lower));
    }
    is_code(token).then(|| {
        (
            IdentifierClass::Code,
            lower.trim_end_matches("()").to_owned(),
        )
    })
}

/// Whether `token` is a path or an address: it has a slash (and is no
/// pair of words), a backslash, a `::`, or a file extension.
fn is_path(token: &str) -> bool {
    token.contains('/') && token.chars().any(char::is_alphanumeric) && !is_word_pair(token)
        || token.contains('\\')
        || token.contains("::")
        || has_file_extension(token)
}

/// Whether `token` is code: `snake_case`, `call()`, `object.method`, or
/// `camelCase` with something else of code. A word with a capital inside
/// and nothing else of code ("iOS", "HubSpot", "WebSocket") is a name,
/// compared as a word.
fn is_code(token: &str) -> bool {
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
    let plain_word = token.chars().all(char::is_alphabetic);
    token.contains('_') || token.ends_with("()") || inner_dot || (camel && !plain_word)
}

/// Whether `token` is one of the units that follow a number
/// (`data/units.txt`), in any case.
pub(crate) fn is_unit(token: &str) -> bool {
    UNITS.iter().any(|unit| unit.eq_ignore_ascii_case(token))
}

/// An acronym or a capitalized reference written in the plural, without
/// its `s` ("APIs" is "API", "P1s" is "P1", "VMs" is "VM"): the same
/// identifier, one or more of it. A number with an `s` ("30s", "1990s")
/// opens with a digit and is no such plural.
pub(crate) fn plural_of_capitals(token: &str) -> Option<&str> {
    let singular = token.strip_suffix('s')?;
    let first_capital = singular.chars().next().is_some_and(char::is_uppercase);
    let capitals = singular
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    (singular.len() >= 2 && first_capital && capitals).then_some(singular)
}

/// Words joined by a slash ("and/or", "read/write"): not a path.
pub(crate) fn is_word_pair(token: &str) -> bool {
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
pub(crate) fn number_and_word(token: &str) -> Option<(&str, &str)> {
    let (number, word) = token.split_once('-')?;
    let is_number = !number.is_empty()
        && number
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        && number.starts_with(|c: char| c.is_ascii_digit());
    let is_word = word.chars().count() >= 2 && word.chars().all(char::is_alphabetic);
    (is_number && is_word).then_some((number, word))
}

/// Whether `token` ends in a file extension of `data/file-extensions.txt`
/// after a stem ("list.rs").
fn has_file_extension(token: &str) -> bool {
    token.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && FILE_EXTENSIONS.contains(&ext.to_lowercase())
    })
}

/// The number a token stands for: digits (with `,` thousands or a decimal
/// point), optionally with a unit or `%` (`30s`, `5GB`, `2x`), as a key of
/// digits.
pub(crate) fn number_key(token: &str) -> Option<String> {
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

/// A number's key, as digits: "2300" for 2.3 thousand, whatever the last
/// bit of the product.
pub(crate) fn number_text(value: f64) -> String {
    let rounded = (value * 1e6).round() / 1e6;
    format!("{rounded}")
}

/// The year a raw token stands for when it is one written with two digits
/// after an apostrophe ("'23", "’98", "'23,"): 2000 to 2069, 1970 to 1999.
pub(crate) fn abbreviated_year(raw: &str) -> Option<String> {
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

/// The value of a Roman numeral from I to XX, written in capitals.
pub(crate) fn roman_numeral(token: &str) -> Option<u32> {
    const NUMERALS: [&str; 20] = [
        "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV",
        "XV", "XVI", "XVII", "XVIII", "XIX", "XX",
    ];
    NUMERALS
        .iter()
        .position(|numeral| *numeral == token)
        .and_then(|at| u32::try_from(at + 1).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn years_written_short_are_years() {
        assert_eq!(abbreviated_year("'21"), Some("2021".to_owned()));
        assert_eq!(abbreviated_year("’87,"), Some("1987".to_owned()));
        assert_eq!(abbreviated_year("'210"), None);
        assert_eq!(abbreviated_year("21"), None);
    }

    #[test]
    fn a_number_with_an_s_is_no_plural_of_capitals() {
        assert_eq!(plural_of_capitals("45s"), None);
        assert_eq!(plural_of_capitals("SDKs"), Some("SDK"));
    }

    #[test]
    fn a_unit_is_read_in_any_case_and_a_currency_is_none() {
        assert!(is_unit("MHz"));
        assert!(!is_unit("EUR"));
    }
}
