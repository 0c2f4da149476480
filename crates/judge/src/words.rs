//! The word lists the judge reads with, each a data file under `data/`
//! (its source and licence on its first line), parsed once on first use.
//!
//! A file is lines of words: `#` starts a comment line, blank lines are
//! skipped. A list of pairs has two words a line; a list of sections opens
//! each with `[name]`.

use std::sync::LazyLock;

use foldhash::{HashMap, HashMapExt, HashSet};

/// The lines of a list file that are not comments or blank, trimmed.
fn entries(text: &'static str) -> impl Iterator<Item = &'static str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// A list's words in the file's order.
fn in_order(text: &'static str) -> Vec<&'static str> {
    entries(text).collect()
}

/// A line's two words; `-` stands for the empty word.
fn pair(line: &'static str) -> Option<(&'static str, &'static str)> {
    let mut words = line.split_whitespace();
    let (first, second) = (words.next()?, words.next()?);
    let word = |word: &'static str| if word == "-" { "" } else { word };
    Some((word(first), word(second)))
}

/// A list of pairs in the file's order.
fn pairs(text: &'static str) -> Vec<(&'static str, &'static str)> {
    entries(text).filter_map(pair).collect()
}

/// A list's sections, in order: each `[name]` line and the entries under
/// it.
fn sections(text: &'static str) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for line in entries(text) {
        match line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            Some(name) => out.push((name, Vec::new())),
            None => {
                if let Some((_, lines)) = out.last_mut() {
                    lines.push(line);
                }
            }
        }
    }
    out
}

/// A set of words, hashed: the stop words are looked up for every word
/// of every text read.
#[derive(Debug)]
pub(crate) struct WordSet(HashSet<&'static str>);

impl WordSet {
    fn of(words: impl IntoIterator<Item = &'static str>) -> WordSet {
        WordSet(words.into_iter().collect())
    }

    /// Whether `word` is in the set.
    pub(crate) fn contains(&self, word: &str) -> bool {
        self.0.contains(word)
    }
}

/// Words mapped to words.
#[derive(Debug)]
pub(crate) struct WordMap(HashMap<&'static str, &'static str>);

impl WordMap {
    fn of(pairs: Vec<(&'static str, &'static str)>) -> WordMap {
        let mut map = HashMap::with_capacity(pairs.len());
        for (word, to) in pairs {
            // Of two entries for one word, the file's first wins.
            map.entry(word).or_insert(to);
        }
        WordMap(map)
    }

    /// What `word` maps to.
    pub(crate) fn get(&self, word: &str) -> Option<&'static str> {
        self.0.get(word).copied()
    }

    /// How many words are mapped.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// `data/stop-words.txt`: the comparison's stop words.
pub(crate) static STOP_WORDS: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::of(entries(include_str!("../data/stop-words.txt"))));

/// `data/stop-stems.txt`: stems of a re-asked request's filler.
pub(crate) static STOP_STEMS: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::of(entries(include_str!("../data/stop-stems.txt"))));

/// `data/filler-words.txt`: the words WordNet is not asked about.
pub(crate) static FILLER_WORDS: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::of(entries(include_str!("../data/filler-words.txt"))));

/// `data/imperative-verbs.txt`: the verbs a request opens with.
pub(crate) static IMPERATIVE_VERBS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| in_order(include_str!("../data/imperative-verbs.txt")));

/// `data/statement-openers.txt`: the first words of a statement.
pub(crate) static STATEMENT_OPENERS: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::of(entries(include_str!("../data/statement-openers.txt"))));

/// `data/irregular-verbs.txt`: irregular forms and their verbs.
pub(crate) static IRREGULAR_VERBS: LazyLock<WordMap> =
    LazyLock::new(|| WordMap::of(pairs(include_str!("../data/irregular-verbs.txt"))));

/// `data/aliases.txt`: short forms and the words they stand for.
pub(crate) static ALIASES: LazyLock<WordMap> =
    LazyLock::new(|| WordMap::of(pairs(include_str!("../data/aliases.txt"))));

/// `data/number-words.txt`: number words and their digits.
pub(crate) static NUMBER_WORDS: LazyLock<WordMap> =
    LazyLock::new(|| WordMap::of(pairs(include_str!("../data/number-words.txt"))));

/// `data/numbered.txt`: what is numbered in Roman numerals too.
pub(crate) static NUMBERED: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| in_order(include_str!("../data/numbered.txt")));

/// `data/units.txt`: units that follow a number.
pub(crate) static UNITS: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| in_order(include_str!("../data/units.txt")));

/// `data/file-extensions.txt`: the extensions of a path.
pub(crate) static FILE_EXTENSIONS: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::of(entries(include_str!("../data/file-extensions.txt"))));

/// `data/british-endings.txt`: British endings and their American
/// spelling, longest first.
pub(crate) static BRITISH_ENDINGS: LazyLock<Vec<(&'static str, &'static str)>> =
    LazyLock::new(|| pairs(include_str!("../data/british-endings.txt")));

/// `data/spelled-alike.txt`: the roots spelled alike on both sides of the
/// Atlantic, before "-ise" and before "-our".
pub(crate) static SPELLED_ALIKE: LazyLock<SpelledAlike> = LazyLock::new(|| {
    let mut alike = SpelledAlike::default();
    for (name, roots) in sections(include_str!("../data/spelled-alike.txt")) {
        match name {
            "ise" => alike.before_ise = roots,
            "our" => alike.before_our = roots,
            _ => {}
        }
    }
    alike
});

/// The roots of `data/spelled-alike.txt`.
#[derive(Debug, Default)]
pub(crate) struct SpelledAlike {
    /// Each word's root before its "-ise" ("prom" of "promise").
    pub(crate) before_ise: Vec<&'static str>,
    /// Each word's root before its "-our" ("det" of "detour").
    pub(crate) before_our: Vec<&'static str>,
}

/// `data/opposites.txt`: stems that ask for opposite work, in order.
pub(crate) static OPPOSITES: LazyLock<Vec<(&'static str, &'static str)>> =
    LazyLock::new(|| pairs(include_str!("../data/opposites.txt")));

/// `data/intents.txt`: what a request can ask for, each with its stems,
/// in order (an intent's place is its bit).
pub(crate) static INTENTS: LazyLock<Vec<(&'static str, Vec<&'static str>)>> = LazyLock::new(|| {
    entries(include_str!("../data/intents.txt"))
        .filter_map(|line| {
            let (intent, stems) = line.split_once(':')?;
            Some((intent.trim(), stems.split_whitespace().collect()))
        })
        .collect()
});

/// `data/names-of-a-kind.txt`: each lowercase form of a name, with its
/// kind and its name as shown.
pub(crate) static NAMES_OF_A_KIND: LazyLock<HashMap<&'static str, (&'static str, &'static str)>> =
    LazyLock::new(|| {
        let mut forms = HashMap::new();
        for (kind, things) in sections(include_str!("../data/names-of-a-kind.txt")) {
            for thing in things {
                let Some((name, written)) = thing.split_once(':') else {
                    continue;
                };
                for form in written.split_whitespace() {
                    forms.insert(form, (kind, name.trim()));
                }
            }
        }
        forms
    });

/// `data/wordnet-inflections.txt`: inflectional endings and what replaces
/// them in a WordNet lemma.
pub(crate) static WORDNET_INFLECTIONS: LazyLock<Vec<(&'static str, &'static str)>> =
    LazyLock::new(|| pairs(include_str!("../data/wordnet-inflections.txt")));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_list_reads_whole() {
        assert_eq!(STOP_WORDS.0.len(), 118);
        assert_eq!(STOP_STEMS.0.len(), 13);
        assert_eq!(FILLER_WORDS.0.len(), 111);
        assert_eq!(IMPERATIVE_VERBS.len(), 200);
        assert_eq!(STATEMENT_OPENERS.0.len(), 32);
        assert_eq!(IRREGULAR_VERBS.len(), 130);
        assert_eq!(ALIASES.len(), 39);
        assert_eq!(NUMBER_WORDS.len(), 28);
        assert_eq!(NUMBERED.len(), 25);
        assert_eq!(UNITS.len(), 19);
        assert_eq!(FILE_EXTENSIONS.0.len(), 24);
        assert_eq!(BRITISH_ENDINGS.len(), 12);
        assert_eq!(SPELLED_ALIKE.before_ise.len(), 44);
        assert_eq!(SPELLED_ALIKE.before_our.len(), 7);
        assert_eq!(OPPOSITES.len(), 72);
        assert_eq!(INTENTS.len(), 14);
        assert!(INTENTS.len() <= 32, "an intent is a bit of a u32");
        assert_eq!(NAMES_OF_A_KIND.get("ipad"), Some(&("platforms", "iOS")));
        assert_eq!(
            NAMES_OF_A_KIND.get("protonmail"),
            Some(&("mail services", "Proton Mail"))
        );
        assert_eq!(WORDNET_INFLECTIONS.len(), 18);
        assert!(WORDNET_INFLECTIONS.contains(&("s", "")));
    }

    #[test]
    fn no_word_is_mapped_twice() {
        for (file, text) in [
            (
                "irregular-verbs",
                include_str!("../data/irregular-verbs.txt"),
            ),
            ("aliases", include_str!("../data/aliases.txt")),
            ("number-words", include_str!("../data/number-words.txt")),
        ] {
            let mut words: Vec<&str> = pairs(text).into_iter().map(|(word, _)| word).collect();
            let count = words.len();
            words.sort_unstable();
            words.dedup();
            assert_eq!(words.len(), count, "{file}");
        }
    }

    #[test]
    fn every_list_names_its_source_and_licence_first() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let mut lists = 0;
        for entry in std::fs::read_dir(&data).expect("the data directory") {
            let path = entry.expect("a data file").path();
            if path.extension().is_none_or(|ext| ext != "txt") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a list reads");
            let first = text.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("# Source: ") && first.contains(" Licence: "),
                "{}: {first}",
                path.display()
            );
            lists += 1;
        }
        assert_eq!(lists, 17);
    }
}
