//! Word knowledge for the same-request judge: how many of the words two
//! texts differ in have a related word on the other side, by WordNet.
//!
//! The embedding model scores a rewording with other words ("migrating the
//! cron jobs" / "moving our scheduled tasks") about as low as a different
//! request, and a
//! one-word contrast as high as a rewording. WordNet knows that "migrate"
//! and "move", "bug" and "defect", "check" and "verify" are related:
//! synonyms, one a kind of the other, one derived from the other.
//! [`related_cover`] is the share of the differing words (of those WordNet
//! knows) that have such a relative among the other text's words: high for
//! a rewording, low for different work. Two words WordNet knows as one
//! verb are read as that verb ("clean up", "go over", "look into").
//! `synonym_swaps` finds the differing words that share a sense with one
//! on the other side, which can lift the words veto.
//!
//! The relations are derived from WordNet 3.1 (Princeton University; see
//! `data/WORDNET-LICENSE`) by `data/derive_wordnet.py` and shipped,
//! compressed, in the crate (`data/wordnet-related.txt.gz`, 1.25 MB). They
//! are read once per process, in about 0.1 s (optimized build): on a
//! thread of their own when a calibrated judge is built ([`warm_up`]), or
//! on the first use.

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

use crate::normalize::irregular_base;
use crate::text::model_input;
use crate::words::{FILLER_WORDS, WORDNET_INFLECTIONS};

/// The compressed relations (see `data/derive_wordnet.py` for the format).
const RELATIONS_GZ: &[u8] = include_bytes!("../data/wordnet-related.txt.gz");

/// WordNet's lemmas and synsets, as the judge needs them.
#[derive(Debug, Default)]
struct Lexicon {
    /// Each lemma's synsets: single words, and verbs of two words joined
    /// by an underscore ("clean_up", "look_into").
    synsets: HashMap<Box<str>, Box<[u32]>>,
    /// The second words of the two-word verbs ("up", "into"), sorted: a
    /// pair of words is looked up as one only when its second is one.
    particles: Vec<Box<str>>,
    /// Each synset's related synsets (hypernyms, hyponyms, derivations,
    /// "similar to", verb groups), at its synset number (WordNet 3.1's are
    /// numbered from 0 to some 91,000; an empty list where a number has
    /// no relatives): a look-up per synset of every differing word of
    /// every judged pair, so an index, not a hash.
    related: Vec<Box<[u32]>>,
}

/// The highest synset number the relations may use: WordNet 3.1 has some
/// 117,000 synsets. A larger one in the file is skipped rather than
/// allocated for.
const MAX_SYNSET: usize = 1 << 20;

impl Lexicon {
    /// Reads the shipped relations. The file is ours and checked by a
    /// test; were it unreadable, the lexicon would be empty and every
    /// text unknown to it.
    fn shipped() -> Lexicon {
        let mut text = String::new();
        let read = flate2::read::GzDecoder::new(RELATIONS_GZ).read_to_string(&mut text);
        if read.is_err() {
            return Lexicon::default();
        }
        Lexicon::parse(&text)
    }

    fn parse(text: &str) -> Lexicon {
        let mut lexicon = Lexicon::default();
        let mut in_relations = false;
        for line in text.lines() {
            if line == "#" {
                in_relations = true;
                continue;
            }
            let mut fields = line.split(' ');
            let Some(head) = fields.next() else { continue };
            let numbers: Box<[u32]> = fields.filter_map(|n| n.parse().ok()).collect();
            if in_relations {
                if let Ok(synset) = head.parse::<usize>()
                    && synset <= MAX_SYNSET
                {
                    if lexicon.related.len() <= synset {
                        lexicon.related.resize(synset + 1, Box::default());
                    }
                    lexicon.related[synset] = numbers;
                }
            } else {
                if let Some((_, particle)) = head.split_once('_') {
                    lexicon.particles.push(particle.into());
                }
                lexicon.synsets.insert(head.into(), numbers);
            }
        }
        lexicon.particles.sort_unstable();
        lexicon.particles.dedup();
        lexicon
    }

    /// The synsets of the two-word verb `first particle` with `first` in
    /// any of its inflections ("cleaning up" → "clean_up"); empty when
    /// WordNet has no such verb.
    fn phrase_synsets(&self, first: &str, particle: &str) -> Vec<u32> {
        if self
            .particles
            .binary_search_by(|known| known.as_ref().cmp(particle))
            .is_err()
        {
            return Vec::new();
        }
        self.synsets_with(first, Some(particle))
    }

    /// The synsets of `word` in any of its inflections ("migrating" →
    /// "migrate", "comments" → "comment"), or of the two-word verb it
    /// begins when `particle` is given; empty when WordNet does not know
    /// it.
    fn synsets_with(&self, word: &str, particle: Option<&str>) -> Vec<u32> {
        let mut found: Vec<u32> = Vec::new();
        // One buffer for every candidate lemma of the word.
        let mut lemma = String::with_capacity(word.len() + 16);
        let mut add = |stem: &str, replacement: &str| {
            lemma.clear();
            lemma.push_str(stem);
            lemma.push_str(replacement);
            if let Some(particle) = particle {
                lemma.push('_');
                lemma.push_str(particle);
            }
            if let Some(synsets) = self.synsets.get(lemma.as_str()) {
                found.extend(synsets.iter());
            }
        };
        add(word, "");
        // An irregular form is its verb ("wrote": "write").
        if let Some(base) = irregular_base(word) {
            add(base, "");
        }
        for (suffix, replacement) in WORDNET_INFLECTIONS.iter() {
            if let Some(stem) = word.strip_suffix(suffix)
                && stem.len() > 1
            {
                add(stem, replacement);
            }
        }
        // A doubled final consonant: "stopped", "planning".
        for suffix in ["ed", "ing"] {
            if let Some(stem) = word.strip_suffix(suffix) {
                let bytes = stem.as_bytes();
                if bytes.len() > 2 && bytes[bytes.len() - 1] == bytes[bytes.len() - 2] {
                    add(&stem[..stem.len() - 1], "");
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Whether one of `synsets`, or a synset related to one of them, is
    /// in `theirs` (sorted): what [`cover`] asks of each differing word,
    /// without collecting and sorting the relatives first.
    fn reaches(&self, synsets: &[u32], theirs: &[u32]) -> bool {
        let in_theirs = |synset: &u32| theirs.binary_search(synset).is_ok();
        synsets.iter().any(|synset| {
            in_theirs(synset)
                || usize::try_from(*synset)
                    .ok()
                    .and_then(|at| self.related.get(at))
                    .is_some_and(|related| related.iter().any(in_theirs))
        })
    }
}

static LEXICON: OnceLock<Lexicon> = OnceLock::new();

/// Whether [`warm_up`] has started its thread.
static WARMING: std::sync::Once = std::sync::Once::new();

fn lexicon() -> &'static Lexicon {
    LEXICON.get_or_init(Lexicon::shipped)
}

/// Reads the relations on a thread of their own, if no one has yet, so
/// that the first judgement does not wait for them (the calibrated judge
/// calls this when it is built).
pub fn warm_up() {
    // One thread however many judges are built.
    WARMING.call_once(|| {
        if LEXICON.get().is_none() {
            // A failed spawn only means the first judgement reads them.
            let _ = std::thread::Builder::new()
                .name("loopguard-wordnet".into())
                .spawn(|| {
                    lexicon();
                });
        }
    });
}

/// The content words of `text` (what the model reads of it), lowercase
/// ASCII letters only, in order, each with its synsets. Words of
/// `data/filler-words.txt` are left out: WordNet has nothing useful to say
/// about function words, quantifiers, modal and light verbs ("go
/// through", "tell me", "get", "make", "take a look"). Two words that
/// WordNet knows as one verb ("clean up", "looking into") are one word,
/// read whole even when both are filler.
fn content_words(lexicon: &Lexicon, text: &str) -> Reading {
    let lower = model_input(text).to_lowercase();
    let all: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_lowercase())
        .filter(|word| !word.is_empty())
        .collect();
    let (mut words, mut synsets) = (Vec::new(), Vec::new());
    let mut at = 0;
    while at < all.len() {
        let word = all[at];
        if let Some(&particle) = all.get(at + 1) {
            let phrase = lexicon.phrase_synsets(word, particle);
            if !phrase.is_empty() {
                words.push(format!("{word}_{particle}"));
                synsets.push(phrase);
                at += 2;
                continue;
            }
        }
        let filler = |word: &str| FILLER_WORDS.contains(word);
        let is_filler = filler(word) || irregular_base(word).is_some_and(filler);
        if word.len() > 1 && !is_filler {
            words.push(word.to_owned());
            synsets.push(lexicon.synsets_with(word, None));
        }
        at += 1;
    }
    let mut sorted_words = words.clone();
    sorted_words.sort_unstable();
    let mut synset_set: Vec<u32> = synsets.iter().flatten().copied().collect();
    synset_set.sort_unstable();
    synset_set.dedup();
    Reading {
        words,
        synsets,
        sorted_words,
        synset_set,
    }
}

/// A text's content words and their synsets ([`content_words`]), read once
/// per text for [`cover`] and [`synonym_swaps`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Reading {
    /// The content words, in order; a two-word verb joined by `_`.
    words: Vec<String>,
    /// Each word's synsets, sorted.
    synsets: Vec<Vec<u32>>,
    /// The content words again, sorted for binary search: [`cover`] asks
    /// whether the other text has a word, per pair, and the cost grows
    /// with the words, not with their product (a text is up to the model's
    /// 4096 bytes, some 700 words).
    sorted_words: Vec<String>,
    /// Every synset of every word, sorted, each once: what [`cover`]
    /// looks the other text's relatives up in.
    synset_set: Vec<u32>,
}

/// Reads `text`'s content words and their synsets (what the model reads
/// of it).
pub(crate) fn read(text: &str) -> Reading {
    content_words(lexicon(), text)
}

/// The share of the words only one of `a` and `b` has (of those WordNet
/// knows) that are related, by WordNet, to some word of the other text:
/// the same lemma in another form, a synonym, a more general or more
/// specific word, a derived word, a "similar" adjective or a verb of the
/// same group. 1 when no differing word is known to WordNet (nothing to
/// weigh), 0 when none has a relative.
pub fn related_cover(a: &str, b: &str) -> f32 {
    cover(&read(a), &read(b))
}

/// [`related_cover`] of two texts already read.
pub(crate) fn cover(a: &Reading, b: &Reading) -> f32 {
    let lexicon = lexicon();
    let (mut known, mut covered) = (0usize, 0usize);
    // Each side's words against the other's sorted words and synsets
    // (sorted once, when the text was read).
    for (mine, theirs) in [(a, b), (b, a)] {
        for (word, synsets) in mine.words.iter().zip(&mine.synsets) {
            if theirs.sorted_words.binary_search(word).is_ok() || synsets.is_empty() {
                continue;
            }
            known += 1;
            if lexicon.reaches(synsets, &theirs.synset_set) {
                covered += 1;
            }
        }
    }
    if known == 0 {
        1.0
    } else {
        covered as f32 / known as f32
    }
}

/// The most differing words per side [`synonym_swaps`] reads.
const SYNONYM_SWAPS_READ: usize = 6;

/// The pairs of a word only `a` has (`only_a`, as written, lowercase) and
/// a word only `b` has that are synonyms, by their indexes: the two share
/// a WordNet synset, each read in the text it stands in, so that a word of
/// a two-word verb is read as that verb ("clean up" / "tidy up": "clean"
/// and "tidy" are each the verb they begin).
pub(crate) fn synonym_swaps(
    a: &Reading,
    b: &Reading,
    only_a: &[String],
    only_b: &[String],
) -> Vec<(usize, usize)> {
    let mut matched = Vec::new();
    // The words veto asks only about swaps of one or two words a side;
    // more than `SYNONYM_SWAPS_READ` are not read, so the cost stays
    // bounded whoever asks.
    if only_a.is_empty()
        || only_b.is_empty()
        || only_a.len() > SYNONYM_SWAPS_READ
        || only_b.len() > SYNONYM_SWAPS_READ
    {
        return matched;
    }
    // Each differing word's synsets: those of every word of its text that
    // is it or a two-word verb it is part of.
    let senses = |text: &Reading, only: &[String]| -> Vec<Vec<u32>> {
        only.iter()
            .map(|wanted| {
                let mut found: Vec<u32> = text
                    .words
                    .iter()
                    .zip(&text.synsets)
                    .filter(|(word, _)| word.split('_').any(|part| part == wanted))
                    .flat_map(|(_, synsets)| synsets.iter().copied())
                    .collect();
                found.sort_unstable();
                found.dedup();
                found
            })
            .collect()
    };
    let (senses_a, senses_b) = (senses(a, only_a), senses(b, only_b));
    for (at_a, mine) in senses_a.iter().enumerate() {
        for (at_b, theirs) in senses_b.iter().enumerate() {
            if mine.iter().any(|s| theirs.binary_search(s).is_ok()) {
                matched.push((at_a, at_b));
            }
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_relations_read() {
        let lexicon = lexicon();
        assert!(lexicon.synsets.len() > 70_000, "{}", lexicon.synsets.len());
        let with_relatives = lexicon.related.iter().filter(|r| !r.is_empty()).count();
        assert!(with_relatives > 50_000, "{with_relatives}");
        assert!(!lexicon.synsets_with("migrating", None).is_empty());
    }

    #[test]
    fn a_rewording_is_covered_and_different_work_is_not() {
        // "migrating" / "moving" and "schedulers" / "scheduler" are the
        // rewording.
        let reworded = related_cover(
            "migrating the cron jobs to managed schedulers",
            "moving our scheduled tasks onto a hosted scheduler",
        );
        let different = related_cover(
            "Add churn rate to the monthly board report.",
            "Schedule the monthly board report to go out on Fridays at 8.",
        );
        assert!(reworded > different, "{reworded} vs {different}");
        assert!(different < 0.5, "{different}");
    }

    #[test]
    fn inflections_and_synonyms_relate() {
        for (a, b) in [
            (
                "fix the rounding bug in invoices",
                "repairing the rounding bug in invoices",
            ),
            ("comments on the design doc", "commenting on the design doc"),
            (
                "fix the rounding bug in invoices",
                "fix the rounding defect in invoices",
            ),
            ("check the balances", "verify the balances"),
            ("migrate the queues", "move the queues"),
            ("scale the brokers", "scale the brokers"),
            // An irregular form is read as its verb: "sent" is "send".
            ("sent the invoice", "mailed the invoice"),
        ] {
            assert_eq!(related_cover(a, b), 1.0, "{a} / {b}");
        }
        assert_eq!(related_cover("restart nginx", "write the hiring plan"), 0.0);
    }

    #[test]
    fn two_word_verbs_are_read_whole() {
        let lexicon = lexicon();
        let reading = content_words(lexicon, "Cleaning up the changelog; go over it again");
        assert_eq!(reading.words, ["cleaning_up", "changelog", "go_over"]);
        // "up" begins no verb with "changelog".
        assert!(lexicon.phrase_synsets("changelog", "up").is_empty());
        assert!(!lexicon.phrase_synsets("tidying", "up").is_empty());
        assert_eq!(
            related_cover("go over the billing code", "review the billing code"),
            1.0
        );
    }

    #[test]
    fn synonyms_are_matched_across_the_differing_words() {
        let owned = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            synonym_swaps(
                &read("Clean up the changelog"),
                &read("Tidy up the changelog"),
                &owned(&["clean"]),
                &owned(&["tidy"]),
            ),
            [(0, 0)]
        );
        assert_eq!(
            synonym_swaps(
                &read("the price of storing recordings"),
                &read("the legal side of recording storage"),
                &owned(&["price", "storing"]),
                &owned(&["legal", "side", "storage"]),
            ),
            [(1, 2)]
        );
        assert_eq!(
            synonym_swaps(
                &read("push to staging"),
                &read("push to production"),
                &owned(&["staging"]),
                &owned(&["production"]),
            ),
            []
        );
        // Too many differing words to matter to the words veto: not read.
        let many = owned(&["one", "two", "three", "four", "five", "six", "seven"]);
        assert_eq!(
            synonym_swaps(&read("a"), &read("b"), &many, &owned(&["keep"])),
            []
        );
    }

    /// `cover` as it would be computed per pair: the other side's words
    /// and synsets sorted, and each differing word's relatives collected,
    /// sorted and looked up one by one.
    fn cover_collecting_every_relative(a: &Reading, b: &Reading) -> f32 {
        let lexicon = lexicon();
        let (mut known, mut covered) = (0usize, 0usize);
        for (mine, theirs) in [(a, b), (b, a)] {
            let mut words: Vec<&String> = theirs.words.iter().collect();
            words.sort_unstable();
            let mut synsets: Vec<u32> = theirs.synsets.iter().flatten().copied().collect();
            synsets.sort_unstable();
            for (word, my_synsets) in mine.words.iter().zip(&mine.synsets) {
                if words.binary_search(&word).is_ok() || my_synsets.is_empty() {
                    continue;
                }
                known += 1;
                let mut reach = my_synsets.clone();
                for synset in my_synsets {
                    if let Some(related) = lexicon.related.get(*synset as usize) {
                        reach.extend(related.iter());
                    }
                }
                if reach.iter().any(|s| synsets.binary_search(s).is_ok()) {
                    covered += 1;
                }
            }
        }
        if known == 0 {
            1.0
        } else {
            covered as f32 / known as f32
        }
    }

    #[test]
    fn the_cover_read_per_text_is_the_cover_collected_per_pair() {
        let texts = [
            "migrating the cron jobs to managed schedulers",
            "moving our scheduled tasks onto a hosted scheduler",
            "Check whether Initech's MSA allows subcontractors outside the US.",
            "Does the Initech MSA let us use subcontractors based outside the US?",
            "Renew the TLS certificate for shop.example.org before it lapses.",
            "Set up alerting for certificate expiry on every internal endpoint.",
            "Clean up the changelog of the staging release tooling",
            "",
        ];
        let readings: Vec<Reading> = texts.iter().map(|text| read(text)).collect();
        let mut compared = 0;
        for a in &readings {
            for b in &readings {
                assert_eq!(cover(a, b), cover_collecting_every_relative(a, b));
                compared += 1;
            }
        }
        assert_eq!(compared, texts.len() * texts.len());
        // Not all alike: the pairs above cover some words and miss others.
        let covers: Vec<f32> = readings
            .iter()
            .flat_map(|a| readings.iter().map(move |b| cover(a, b)))
            .collect();
        assert!(covers.iter().any(|c| *c > 0.0 && *c < 1.0), "{covers:?}");
    }

    #[test]
    fn words_wordnet_does_not_know_are_not_weighed() {
        assert_eq!(related_cover("xyzzy plugh", "frobnicate quux"), 1.0);
    }

    #[test]
    fn only_what_the_model_reads_is_read() {
        let long = format!("deploy the service {}", "padding ".repeat(1000));
        let tail_differs = format!("{long} rollback");
        assert_eq!(related_cover(&long, &tail_differs), 1.0);
    }
}
