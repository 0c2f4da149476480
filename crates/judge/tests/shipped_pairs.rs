//! Every shipped labelled pair, scored as recorded in
//! `tests/fixtures/shipped_pairs_scores.jsonl`: the judge's verdicts do not
//! change unless the fixture is regenerated on purpose.
//!
//! Each pair of the `data/pairs/` files that hold texts is read and
//! compared, and scored with each of the three shipped weights: its
//! features (14 of them, to the bit), its veto, the residual texts and
//! templates it leaves to embed (hashed), and each score and verdict. The
//! model's cosines are those of a model-free stand-in
//! ([`stand_in_vector`]), so the scores are not the shipped judge's scores
//! of these pairs; what is pinned is everything the judge computes from
//! the words, and how it weighs it. The tuned encoders' cosines are their
//! out-of-fold cosines (`data/pairs/tuned-oof-cosines*.jsonl`); a pair
//! without one has no tuned score.
//!
//! After a change that is meant to change verdicts, regenerate the
//! fixture and review its diff:
//!
//! ```text
//! cargo test -p loopguard-judge --test tests -- --ignored regenerate_shipped_pair_scores
//! ```

use std::collections::HashMap;

use loopguard_judge::{
    FEATURES, Features, JudgeWeights, ReadText, Residuals, TUNED_FEATURE, WordLook,
};
use serde::{Deserialize, Serialize};

use crate::support::{Pair, fixture, fnv, pairs_dir, shipped_pairs, stand_in_vector};

/// The fixture's file name.
const FIXTURE: &str = "shipped_pairs_scores.jsonl";

/// One pair as scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Recorded {
    /// `file:line` of the pair in `data/pairs/`.
    pair: String,
    /// The hash of its two texts ([`texts_hash`]): the pair it was.
    texts: String,
    /// The veto, as its reason reads.
    veto: Option<String>,
    /// The features but `tuned_cosine`, each an `f32`'s bits in hex.
    features: String,
    /// The score and verdict with the shipped weights.
    shipped: Scored,
    /// With the weights for the tuned encoder, and its cosine.
    tuned: Option<TunedScored>,
    /// With the weights for the larger tuned encoder, and its cosine.
    mpnet: Option<TunedScored>,
    /// The hash of the residual texts, when they are embedded.
    residual_texts: Option<String>,
    /// The hash of the templates, when they are embedded.
    templates: Option<String>,
}

/// A score (an `f32`'s bits in hex) and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scored {
    score: String,
    same: bool,
}

/// A score and verdict with a tuned encoder's cosine (bits in hex).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TunedScored {
    cosine: String,
    score: String,
    same: bool,
}

/// An `f32`'s bits, in hex.
fn bits(value: f32) -> String {
    format!("{:08x}", value.to_bits())
}

/// The hash of a pair's two texts.
fn texts_hash(a: &str, b: &str) -> String {
    let mut bytes = a.as_bytes().to_vec();
    bytes.push(0xff);
    bytes.extend_from_slice(b.as_bytes());
    fnv(&bytes)
}

/// The hash of two texts joined by a line break.
fn two_texts_hash((a, b): (&str, &str)) -> String {
    fnv(format!("{a}\n{b}").as_bytes())
}

/// A tuned encoder's out-of-fold cosine of each pair it has one for.
fn tuned_cosines(file: &str) -> HashMap<(String, String), f32> {
    let path = pairs_dir().join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    text.lines()
        .map(|line| {
            let value: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|err| panic!("{file}: {err}"));
            let text_of = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
            let cosine = value["tuned_cosine"].as_f64().unwrap_or(f64::NAN) as f32;
            ((text_of("a"), text_of("b")), cosine)
        })
        .collect()
}

/// The features and score of `look` with `weights`: the same words score
/// 1; otherwise the residuals the words settled or `residuals`, and the
/// tuned encoder's cosine when the weights want it for this cosine.
fn scored(
    weights: &JudgeWeights,
    look: &WordLook,
    (cosine, residuals): (f32, Option<Residuals>),
    tuned: Option<f32>,
) -> (Features, f32) {
    let wants_tuned = weights.wants_tuned_cosine(cosine);
    let mut features = Features {
        cosine,
        contrast: look.contrast.clone(),
        residuals,
        tuned_cosine: tuned.filter(|_| wants_tuned && !look.same_words),
    };
    if look.same_words {
        features.residuals = Some(Residuals::SAME);
        return (features, 1.0);
    }
    let score = weights.score(&features);
    (features, score)
}

/// The residual cosines of `look`: those the words settled, or the
/// stand-in's cosines of its residual texts and templates.
fn residuals(look: &WordLook, texts: (&str, &str)) -> Option<Residuals> {
    if let Some(known) = look.known_residuals {
        return known;
    }
    let (ra, rb) = look.residual_texts(texts);
    let vectors = |(a, b): (&str, &str)| (stand_in_vector(a), stand_in_vector(b));
    let residual = vectors((&ra, &rb));
    let whole = vectors(texts);
    let templates = look.templates.as_ref().map(|(ta, tb)| vectors((ta, tb)));
    let residuals = Residuals::of(
        (&residual.0, &residual.1),
        (&whole.0, &whole.1),
        templates.as_ref().map(|(ta, tb)| (&ta[..], &tb[..])),
    );
    Some(residuals.unwrap_or_else(|err| panic!("{}: {err}", ra)))
}

/// The weights the pairs are scored with, and the tuned encoders'
/// cosines.
struct Scorers {
    shipped: JudgeWeights,
    tuned: (JudgeWeights, HashMap<(String, String), f32>),
    mpnet: (JudgeWeights, HashMap<(String, String), f32>),
}

impl Scorers {
    fn new() -> Scorers {
        Scorers {
            shipped: JudgeWeights::shipped(),
            tuned: (
                JudgeWeights::shipped_tuned(),
                tuned_cosines("tuned-oof-cosines.jsonl"),
            ),
            mpnet: (
                JudgeWeights::shipped_mpnet(),
                tuned_cosines("tuned-oof-cosines-mpnet.jsonl"),
            ),
        }
    }

    /// `pair`, scored.
    fn record(&self, pair: &Pair) -> Recorded {
        let texts = (pair.a.as_str(), pair.b.as_str());
        let cosine = crate::support::stand_in_cosine(&pair.a, &pair.b);
        let read = (ReadText::new(&pair.a), ReadText::new(&pair.b));
        let look = self.shipped.look((&read.0, &read.1), texts, cosine);
        let settled = (cosine, residuals(&look, texts));
        let (features, score) = scored(&self.shipped, &look, settled, None);
        let vector = features.vector();
        let with_tuned = |(weights, cosines): &(JudgeWeights, HashMap<(String, String), f32>)| {
            let tuned = *cosines.get(&(pair.a.clone(), pair.b.clone()))?;
            let (features, score) = scored(weights, &look, settled, Some(tuned));
            let tuned_vector = features.vector();
            assert_eq!(
                tuned_vector[..TUNED_FEATURE]
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>(),
                vector[..TUNED_FEATURE]
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>(),
                "{}:{}: the tuned encoder's cosine changes only its own feature",
                pair.file,
                pair.line
            );
            Some(TunedScored {
                cosine: bits(tuned_vector[TUNED_FEATURE]),
                score: bits(score),
                same: score > weights.threshold,
            })
        };
        let wanted = look.known_residuals.is_none();
        Recorded {
            pair: format!("{}:{}", pair.file, pair.line),
            texts: texts_hash(&pair.a, &pair.b),
            veto: look.contrast.veto.as_ref().map(ToString::to_string),
            features: vector[..FEATURES - 1]
                .iter()
                .map(|x| bits(*x))
                .collect::<Vec<_>>()
                .join(" "),
            shipped: Scored {
                score: bits(score),
                same: score > self.shipped.threshold,
            },
            tuned: with_tuned(&self.tuned),
            mpnet: with_tuned(&self.mpnet),
            residual_texts: wanted.then(|| {
                let (ra, rb) = look.residual_texts(texts);
                two_texts_hash((&ra, &rb))
            }),
            templates: look
                .templates
                .as_ref()
                .filter(|_| wanted)
                .map(|(ta, tb)| two_texts_hash((ta, tb))),
        }
    }
}

/// Every shipped pair, scored.
fn score_every_pair() -> Vec<Recorded> {
    let scorers = Scorers::new();
    shipped_pairs()
        .iter()
        .map(|pair| scorers.record(pair))
        .collect()
}

#[test]
fn every_shipped_pair_scores_as_recorded() {
    let path = fixture(FIXTURE);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let recorded: Vec<Recorded> = text
        .lines()
        .enumerate()
        .map(|(at, line)| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("{FIXTURE}:{}: {err}", at + 1))
        })
        .collect();
    let scored = score_every_pair();
    assert_eq!(
        scored.len(),
        recorded.len(),
        "{} pairs in data/pairs, {} recorded",
        scored.len(),
        recorded.len()
    );
    let differ: Vec<String> = scored
        .iter()
        .zip(&recorded)
        .filter(|(now, then)| now != then)
        .map(|(now, then)| format!("now  {now:?}\nthen {then:?}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} pairs score otherwise than recorded; the first:\n{}",
        differ.len(),
        scored.len(),
        differ[..differ.len().min(5)].join("\n")
    );
    // Every shipped weights' verdicts are pinned, the tuned ones on the
    // pairs with an out-of-fold cosine.
    assert_eq!(scored.len(), 2241);
    assert_eq!(
        scored.iter().filter(|pair| pair.tuned.is_some()).count(),
        1263
    );
    assert_eq!(
        scored.iter().filter(|pair| pair.mpnet.is_some()).count(),
        1263
    );
}

/// Writes the fixture anew from the judge as it is now.
#[test]
#[ignore = "writes tests/fixtures/shipped_pairs_scores.jsonl: run it when verdicts change on purpose"]
fn regenerate_shipped_pair_scores() {
    let mut out = String::new();
    for record in score_every_pair() {
        out.push_str(&serde_json::to_string(&record).expect("a record is JSON"));
        out.push('\n');
    }
    let path = fixture(FIXTURE);
    std::fs::write(&path, out).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
}
