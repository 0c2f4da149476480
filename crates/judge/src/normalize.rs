//! Words written two ways read as one: Snowball stems, British spellings
//! the American way, short forms as their long form, irregular verb forms
//! as their verb, phrases for "again" as "again", and the stop words that
//! carry no request of their own.

use std::borrow::Cow;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::words::{
    ALIASES, BRITISH_ENDINGS, IRREGULAR_VERBS, NUMBER_WORDS, SPELLED_ALIKE, STOP_STEMS, STOP_WORDS,
};

/// The English Snowball stemmer, built once.
pub(crate) fn stemmer() -> &'static Stemmer {
    static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));
    &STEMMER
}

/// `word`'s Snowball stem.
pub(crate) fn stem(word: &str) -> Cow<'_, str> {
    stemmer().stem(word)
}

/// Whether `word` (lowercase, as written) is a stop word
/// (`data/stop-words.txt`).
pub(crate) fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(word)
}

/// Whether `stem` is the stem of a re-asked request's filler
/// (`data/stop-stems.txt`).
pub(crate) fn is_stop_stem(stem: &str) -> bool {
    STOP_STEMS.contains(stem)
}

/// A common short form, or a word for "most recent", read as the word it
/// stands for (`data/aliases.txt`); any other word as it is.
pub(crate) fn alias(word: &str) -> &str {
    ALIASES.get(word).unwrap_or(word)
}

/// A number word as digits (`data/number-words.txt`).
pub(crate) fn number_word(word: &str) -> Option<&'static str> {
    NUMBER_WORDS.get(word)
}

/// The verb an irregular form is a form of ("got" is "get",
/// `data/irregular-verbs.txt`); `None` for any other word.
pub(crate) fn irregular_base(word: &str) -> Option<&'static str> {
    IRREGULAR_VERBS.get(word)
}

/// British spellings the American way, the same on both sides of every
/// comparison ("summarise", "prioritising", "behaviour", "analyse"), so
/// spelling is never a differing word (`data/british-endings.txt`).
pub(crate) fn american_spelling(word: &str) -> Cow<'_, str> {
    if word.len() < 6 {
        return Cow::Borrowed(word);
    }
    for (british, american) in BRITISH_ENDINGS.iter() {
        if let Some(stem) = word.strip_suffix(british) {
            if spelled_alike_everywhere(stem, british) {
                return Cow::Borrowed(word);
            }
            return Cow::Owned(format!("{stem}{american}"));
        }
    }
    Cow::Borrowed(word)
}

/// Whether a word that ends like a British spelling is spelled so in
/// American English too ("promise", "enterprise", "raising", "advertised",
/// "detour", `data/spelled-alike.txt`): its `stem` before the `british`
/// ending is a root of the list, alone or after a prefix that keeps it one
/// word ("unrev" of "unrevised"; "unprom" is no word).
fn spelled_alike_everywhere(stem: &str, british: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "", "un", "re", "pre", "over", "under", "mis", "dis", "self", "non",
    ];
    let roots = match british {
        "our" => &SPELLED_ALIKE.before_our,
        "ise" | "ises" | "ised" | "ising" | "iser" | "isers" => &SPELLED_ALIKE.before_ise,
        _ => return false,
    };
    roots.iter().any(|root| {
        stem.strip_suffix(root)
            .is_some_and(|head| PREFIXES.contains(&head))
    })
}

/// A lowercase word without the contracted auxiliary it carries ("i've",
/// "we're", "you'll": the pronoun alone). Negations ("don't") stay.
pub(crate) fn without_contraction(lower: &str) -> &str {
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

/// `token` without a possessive `'s` ("GitHub's" is GitHub).
pub(crate) fn strip_possessive(token: &str) -> &str {
    token
        .strip_suffix("'s")
        .or_else(|| token.strip_suffix("’s"))
        .filter(|rest| rest.chars().count() > 1)
        .unwrap_or(token)
}

/// Whether two words (or stems) are one, or one is the other shortened
/// by at most four letters ("postgres", "postgresql").
pub(crate) fn same_or_shortened(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long || (short.len() >= 5 && long.starts_with(short) && long.len() - short.len() <= 4)
}

/// Whether two stems are forms of one word that the stemmer left apart
/// ("reconcil" for reconciling, "reconcili" for reconciliation): one
/// begins with the other, of at least six letters, and adds at most two.
pub(crate) fn one_word_family(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 6 && long.starts_with(short) && long.len() - short.len() <= 2
}

/// Phrases that mean "again" ("once more", "one more time"): a re-asked
/// request adds them, and their words ("once", "more", "one") would
/// otherwise count as a difference, "one" even as a number.
const AGAIN_PHRASES: [&str; 3] = ["once more", "once again", "one more time"];

/// `text` with each phrase of [`AGAIN_PHRASES`] (any case, whole words)
/// written as "again".
pub(crate) fn again_for_its_phrases(text: &str) -> Cow<'_, str> {
    let found = again_phrases(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
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
    Cow::Owned(out)
}

/// Where `text` writes a phrase of [`AGAIN_PHRASES`]: each one's start and
/// end bytes, in order.
fn again_phrases(text: &str) -> Vec<(usize, usize)> {
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
    found
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_irregular_form_is_its_verb() {
        assert_eq!(irregular_base("wrote"), Some("write"));
        assert_eq!(irregular_base("written"), Some("write"));
        assert_eq!(irregular_base("left"), None, "as often a direction");
        assert_eq!(irregular_base("write"), None);
    }

    #[test]
    fn again_phrases_are_whole_words_in_any_case() {
        assert_eq!(
            again_for_its_phrases("Build it ONCE MORE, then once again."),
            "Build it again, then again."
        );
        assert_eq!(
            again_for_its_phrases("Give the team more time"),
            "Give the team more time"
        );
        assert_eq!(again_for_its_phrases("once moreover"), "once moreover");
    }

    #[test]
    fn short_forms_stop_words_and_numbers_read_from_their_lists() {
        assert_eq!(alias("k8s"), "kubernetes");
        assert_eq!(alias("newest"), "recent");
        assert_eq!(alias("kettle"), "kettle");
        assert!(is_stop_word("within") && !is_stop_word("not"));
        assert!(is_stop_stem("alreadi"));
        assert_eq!(number_word("forty"), Some("40"));
        assert_eq!(number_word("hundred"), None);
    }
}
