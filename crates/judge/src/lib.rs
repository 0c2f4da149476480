//! The same-request judge without a model: "are these two texts the same
//! request?", as far as their words tell, and how the calibrated judge
//! weighs that with the cosines an embedding model gives.
//!
//! - [`ReadText`] reads one text once: its identifiers and content words
//!   ([`tokenize`]: stop words out, Snowball stems, British spellings, short
//!   forms and irregular verbs read as one), whether it reports or asks
//!   ([`reads_as_report`], [`reads_as_statement`]), and its WordNet senses
//!   ([`related`]).
//! - [`compare_read`] (or [`compare`]) gives what two texts differ in, as a
//!   [`Contrast`]: the words only one side has, and the first [`Veto`] of
//!   the rules of [`VETOES`], asked in order (an identifier changed, a word
//!   swapped for its opposite, another platform named, ...).
//! - [`WordLook`] is the calibrated judge's first look at a pair: what the
//!   words and the cosine settle, and which texts are left to embed (the
//!   residual texts and the templates).
//! - [`Features`] and [`JudgeWeights`] score a pair once its cosines are in:
//!   a logistic model over [`FEATURE_NAMES`], fitted on labelled pairs and
//!   shipped as JSON ([`JudgeWeights::shipped`]): a weights file names
//!   each weight by its feature, and the [`Cutoffs`] the features were
//!   computed with, which the judge then reads and scores pairs with.
//!
//! The word lists are data files under `data/`, each naming its source
//! and licence on its first line; the WordNet relations ship there
//! compressed (`data/wordnet-related.txt.gz`). `loopguard-semantic` adds
//! the embeddings, the judge that asks for them, and the second opinion.
//!
//! ```
//! use loopguard_judge::{Veto, compare};
//!
//! let contrast = compare("Merge PR #233 after the review", "Merge PR #238 after the review");
//! assert!(matches!(contrast.veto, Some(Veto::Identifiers { .. })));
//! assert_eq!(
//!     contrast.veto.map(|veto| veto.to_string()).as_deref(),
//!     Some("different numbers (233 vs 238)")
//! );
//! // A rewording leaves its differing words, and no veto.
//! let reworded = compare(
//!     "Can you check the retry handling in net/client.go?",
//!     "Would you go over the way net/client.go retries failed calls?",
//! );
//! assert_eq!(reworded.veto, None);
//! ```
#![deny(missing_docs)]

pub use compare::{Contrast, compare, compare_read, compare_read_with, compare_with_rule};
pub use cutoffs::Cutoffs;
pub use error::{JudgeError, Result};
pub use features::{
    FEATURE_NAMES, FEATURES, Features, Residuals, TEMPLATE_JACCARD_CEILING, TUNED_FEATURE,
};
pub use look::{RESIDUAL_FLOOR, WordLook, residual_texts, same_text};
pub use templates::{TEMPLATE_PLACEHOLDER, templates};
pub use text::{
    IdentifierClass, ReadText, Tokens, adds_to_earlier_work, model_input, reads_as_report,
    reads_as_statement, tokenize,
};
pub use veto::{VETOES, Veto, VetoRule};
pub use weights::{
    CANDIDATE_FLOOR, CUTOFFS, DEFAULT_WEIGHTS_JSON, JudgeWeights, MINILM_TUNED_ENCODER,
    MPNET_TUNED_ENCODER, MPNET_WEIGHTS_JSON, TUNED_CANDIDATE_FLOOR, TUNED_WEIGHTS_JSON,
};

mod compare;
mod cutoffs;
mod error;
mod features;
mod intents;
mod look;
mod normalize;
pub mod related;
mod templates;
mod text;
mod veto;
mod weights;
mod words;
