//! The differences one side explains: a word or identifier only one text
//! has, that the other writes another way, is no difference. One word
//! spelled as two ("signup" / "sign up"), a word shortened ("postgres" /
//! "postgresql"), an acronym spelled out ("PR" / "pull request"), a
//! reference spelled out ("INC-5120" / "incident 5120"), a dotted name
//! written in parts ("orders.created_at" / "created_at on the orders
//! table"), a path written in words ("alb-logs/" / "the ALB logs"), a
//! duration in other units ("3 months" / "90 days") and an hour alone
//! ("9:00" / "9").

use super::{multiset_difference, unmatched_identifiers};
use crate::normalize::{one_word_family, same_or_shortened, stem};
use crate::text::{Tokens, same_length};

/// What each side has that the other lacks and does not write another
/// way: content words (stems) and identifier keys, each pair the first
/// text's then the second's.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Differences {
    /// The differing content words.
    pub(crate) words: (Vec<String>, Vec<String>),
    /// The unmatched identifiers.
    pub(crate) identifiers: (Vec<String>, Vec<String>),
}

/// The differences of `ta` and `tb`, each explained one taken out.
pub(crate) fn differences(ta: &Tokens, tb: &Tokens) -> Differences {
    let (mut only_a, mut only_b) = multiset_difference(&ta.words, &tb.words);
    join_compounds(&mut only_a, &mut only_b, tb);
    join_compounds(&mut only_b, &mut only_a, ta);
    shortened_forms(&mut only_a, &mut only_b, ta, tb);
    let (mut extra_a, mut extra_b) = unmatched_identifiers(ta, tb);
    spell_out_acronyms(&mut extra_a, &mut only_b, tb);
    spell_out_acronyms(&mut extra_b, &mut only_a, ta);
    spell_out_references(&mut extra_a, &mut extra_b, &mut only_b);
    spell_out_references(&mut extra_b, &mut extra_a, &mut only_a);
    spell_out_dotted(&mut extra_a, &mut extra_b, &mut only_b);
    spell_out_dotted(&mut extra_b, &mut extra_a, &mut only_a);
    spell_out_paths(&mut extra_a, &mut extra_b, &mut only_b, tb);
    spell_out_paths(&mut extra_b, &mut extra_a, &mut only_a, ta);
    same_durations(
        (ta, tb),
        (&mut extra_a, &mut extra_b),
        (&mut only_a, &mut only_b),
    );
    hours_alone(&mut extra_a, &mut extra_b);
    hours_alone(&mut extra_b, &mut extra_a);
    Differences {
        words: (only_a, only_b),
        identifiers: (extra_a, extra_b),
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
        let joined = stem(&format!("{first}{second}")).into_owned();
        if let Some(at) = mine.iter().position(|word| *word == joined) {
            mine.remove(at);
            for part in pair {
                let stem = stem(part);
                if let Some(at) = theirs.iter().position(|word| *word == stem) {
                    theirs.remove(at);
                }
            }
        }
    }
}

/// Drops the pairs of differing words where one is the other shortened
/// ([`same_or_shortened`]: "postgres" and "postgresql"), as written, or
/// two stems of one word family ([`one_word_family`]).
fn shortened_forms(only_a: &mut Vec<String>, only_b: &mut Vec<String>, a: &Tokens, b: &Tokens) {
    let mut i = 0;
    while i < only_a.len() {
        let Some(wa) = a.written_as(&only_a[i]) else {
            i += 1;
            continue;
        };
        let stem_a = &only_a[i];
        let partner = only_b.iter().position(|stem| {
            b.written_as(stem)
                .is_some_and(|wb| same_or_shortened(wa, wb))
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
            let stem = stem(part);
            if let Some(at) = their_words.iter().position(|word| *word == stem) {
                their_words.remove(at);
            }
        }
        false
    });
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
/// "billingservice.applydiscounts") whose every part the other side has,
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
            let stem = stem(part);
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
        let written = path_spellings(path).into_iter().any(|candidate| {
            let (mut names_left, mut words_left) = (their_names.clone(), their_words.clone());
            let written = candidate
                .iter()
                .all(|part| takes_part(part, (&mut names_left, &mut words_left), theirs));
            if written {
                *their_names = names_left;
                *their_words = words_left;
            }
            written
        });
        !written
    });
}

/// The ways a path may be written in words: all the parts of the path
/// without its scheme, then, for a path of more than one segment, those of
/// its last segment; each non-empty.
fn path_spellings(path: &str) -> Vec<Vec<String>> {
    let without_scheme = path.split_once("://").map_or(path, |(_, rest)| rest);
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
    candidates.retain(|parts| !parts.is_empty());
    candidates
}

/// Whether the other side writes `part` of a path: as one of its names
/// or differing words (taken out of `names` and `words`), or as a content
/// word or name this side writes too (no difference of either side's). A
/// stop word ("a", "for") names no part of a path.
fn takes_part(
    part: &str,
    (names, words): (&mut Vec<String>, &mut Vec<String>),
    theirs: &Tokens,
) -> bool {
    if let Some(at) = names.iter().position(|name| name == part) {
        names.remove(at);
        return true;
    }
    let stem = stem(part);
    if let Some(at) = words.iter().position(|word| *word == stem) {
        words.remove(at);
        return true;
    }
    theirs
        .keys
        .iter()
        .zip(&theirs.shown)
        .any(|(key, (_, content))| *content && (*key == stem || key == part))
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
    use crate::text::WrittenDuration;
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
