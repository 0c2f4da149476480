//! The vetoes: reasons, found without a model, that two texts are
//! different requests however close their embeddings are.
//!
//! [`VETOES`] lists the rules in the order they are asked; the first that
//! finds a veto decides, and the later ones are not asked. Each rule is a
//! file of this module, which opens with what it vetoes, why, an example
//! it vetoes and a near miss it lets through. To add one: write its file,
//! add one line to [`VETOES`] where it belongs in the order, and add cases
//! to `tests/fixtures/veto_cases.jsonl`.

mod direction;
mod identifiers;
mod kind;
mod markers;
mod name_in_one_place;
mod named_things;
mod opposites;
mod period;
mod roles;
mod swapped_ends;
mod words;

use std::fmt;

pub(crate) use self::kind::{kind_of, named_kinds};
pub(crate) use self::period::placed_periods;
pub(crate) use self::swapped_ends::ends;
use crate::related::Reading;
use crate::text::{IdentifierClass, Tokens};

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
    /// Each side names something the other does not: of different classes
    /// ("PR #77" vs "sha256(session_id)"), or in the same place ("the
    /// Bristol office" vs "the Glasgow office"): the texts are about
    /// different things.
    Named {
        /// The first text's.
        a: String,
        /// The second text's.
        b: String,
    },
    /// One or two content words swapped for as many others in otherwise
    /// much the same words, the shared ones in the same order ("stale" vs
    /// "blocked"); or a direction marker or a period placed otherwise
    /// ("before" vs "after", "this year" vs "next year").
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
    /// The same words, with two parties trading places ("Dana mentors
    /// Omar" vs "Omar mentors Dana").
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
    /// ("EUR to local" vs "local to EUR"), or something moved the other
    /// way ("from X into Y" vs "from Y into X").
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

/// How much of their words two texts must share (Jaccard of their content
/// words) for a swap of one or two words, an opposite word or a period
/// placed otherwise to be a contrast rather than two different texts.
pub(crate) const WORDS_VETO_JACCARD: f32 = 0.3;

/// Two texts as the vetoes see them: their tokens and WordNet readings,
/// and what each has that the other lacks once the differences the other
/// side explains are out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Compared<'a> {
    /// The first text's tokens.
    pub(crate) a: &'a Tokens,
    /// The second text's.
    pub(crate) b: &'a Tokens,
    /// Each text's WordNet reading.
    pub(crate) wordnet: (&'a Reading, &'a Reading),
    /// The first text's differing content words (stems).
    pub(crate) only_a: &'a [String],
    /// The second text's.
    pub(crate) only_b: &'a [String],
    /// The first text's unmatched identifier keys.
    pub(crate) extra_a: &'a [String],
    /// The second text's.
    pub(crate) extra_b: &'a [String],
    /// The Jaccard similarity of the two texts' content words.
    pub(crate) word_jaccard: f32,
    /// The share of content words two texts need for a word swapped, an
    /// opposite word or a period placed otherwise to veto
    /// ([`WORDS_VETO_JACCARD`] unless a weights file gives another).
    pub(crate) words_veto_jaccard: f32,
}

impl Compared<'_> {
    /// Whether neither side has a differing content word.
    pub(crate) fn same_words(&self) -> bool {
        self.only_a.is_empty() && self.only_b.is_empty()
    }

    /// Whether the texts share too few of their words for a word veto
    /// (`words_veto_jaccard`).
    pub(crate) fn too_few_shared_words(&self) -> bool {
        self.word_jaccard < self.words_veto_jaccard
    }
}

/// What a rule found on its way besides a veto: the synonyms the words
/// veto weighed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notes {
    /// The swapped words WordNet calls synonyms, as written.
    pub(crate) synonyms: Vec<(String, String)>,
}

/// A veto rule: its name, and what it checks.
#[derive(Debug, Clone, Copy)]
pub struct VetoRule {
    /// The rule's name, as the veto cases name it (its file under
    /// `src/veto/`).
    pub name: &'static str,
    check: fn(&Compared<'_>, &mut Notes) -> Option<Veto>,
}

/// The veto rules, in the order they are asked.
///
/// Identifiers come first: a changed number or reference decides whatever
/// the words say. The words-based rules follow, those that weigh the
/// texts' shared words (opposites, periods, swaps) before those that hold
/// however else the texts are worded (kinds, names in one place); the
/// rules about word order (directions, moves, roles, markers) come last,
/// and roles and markers only for texts with the same words.
pub const VETOES: &[VetoRule] = &[
    VetoRule {
        name: "identifiers",
        check: identifiers::check,
    },
    VetoRule {
        name: "named_things",
        check: named_things::check,
    },
    VetoRule {
        name: "opposites",
        check: opposites::check,
    },
    VetoRule {
        name: "period",
        check: period::check,
    },
    VetoRule {
        name: "words",
        check: words::check,
    },
    VetoRule {
        name: "kind",
        check: kind::check,
    },
    VetoRule {
        name: "name_in_one_place",
        check: name_in_one_place::check,
    },
    VetoRule {
        name: "direction",
        check: direction::check,
    },
    VetoRule {
        name: "swapped_ends",
        check: swapped_ends::check,
    },
    VetoRule {
        name: "roles",
        check: roles::check,
    },
    VetoRule {
        name: "markers",
        check: markers::check,
    },
];

/// The first veto of [`VETOES`] on `compared`, with its rule's name.
pub(crate) fn first(compared: &Compared<'_>, notes: &mut Notes) -> Option<(&'static str, Veto)> {
    VETOES
        .iter()
        .find_map(|rule| (rule.check)(compared, notes).map(|veto| (rule.name, veto)))
}
