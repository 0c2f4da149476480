//! A lexical baseline: bag-of-words term-frequency vectors. Not semantic.

use loopguard_semantic::{Embedder, normalize};

/// The id [`LexicalEmbedder`] reports.
pub const LEXICAL_MODEL_ID: &str = "lexical-bow-tf-4096";

/// The vector length of [`LexicalEmbedder`].
pub const LEXICAL_DIMENSION: usize = 4096;

/// A lexical baseline, **not a semantic model**: the cosine of two texts'
/// bag-of-words term-frequency vectors, to compare a real model against.
///
/// Words are what loopguard's exact-text matching uses: runs of letters and
/// digits, lowercased ("Can you review the auth-code?" has the words `can`,
/// `you`, `review`, `the`, `auth`, `code`); each counts once per
/// occurrence. So "review the auth code" and "review the authentication
/// code" share three words of four (cosine 0.75), while "look at the login
/// logic" and "review the auth code" share one, however close their
/// meanings. A threshold tuned on it says how far word overlap alone gets.
///
/// The vectors are hashed (the "hashing trick"): each word is one of
/// [`LEXICAL_DIMENSION`] coordinates, with a sign, chosen by a 64-bit
/// FNV-1a hash, so the embedder needs no vocabulary and a text's vector
/// does not depend on other texts. Two different words rarely share a
/// coordinate; when they do, a cosine moves by about one over the number
/// of words. A text without any word is the unit vector of coordinate 0,
/// which no word uses.
///
/// ```
/// use loopguard_semantic::{Embedder, cosine};
/// use loopguard_tune::LexicalEmbedder;
///
/// let lexical = LexicalEmbedder::new();
/// let v = lexical.embed_batch(&["review the auth code", "Review the AUTH code!"])?;
/// assert!((cosine(&v[0], &v[1])? - 1.0).abs() < 1e-6);
/// let w = lexical.embed_batch(&["review the authentication code"])?;
/// assert!((cosine(&v[0], &w[0])? - 0.75).abs() < 1e-6);
/// # Ok::<(), loopguard_semantic::SemanticError>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct LexicalEmbedder;

impl LexicalEmbedder {
    /// The embedder (it has no state).
    pub fn new() -> Self {
        LexicalEmbedder
    }

    /// The unit term-frequency vector of `text`.
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; LEXICAL_DIMENSION];
        let mut any = false;
        for word in words(text) {
            let hash = fnv1a(&word);
            // Coordinate 0 is kept for "no words".
            let slot = 1 + (hash % (LEXICAL_DIMENSION as u64 - 1)) as usize;
            let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
            v[slot] += sign;
            any = true;
        }
        let norm = normalize(&mut v);
        if !any || !norm.is_finite() || norm == 0.0 {
            v.iter_mut().for_each(|x| *x = 0.0);
            v[0] = 1.0;
        }
        v
    }
}

impl Embedder for LexicalEmbedder {
    fn model_id(&self) -> &str {
        LEXICAL_MODEL_ID
    }

    fn dimension(&self) -> usize {
        LEXICAL_DIMENSION
    }

    fn embed_batch(&self, texts: &[&str]) -> loopguard_semantic::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|text| LexicalEmbedder::vector(text))
            .collect())
    }
}

/// The words of `text`: runs of letters and digits, lowercased.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// 64-bit FNV-1a: stable across runs and platforms (the vectors may be
/// compared with cached ones).
fn fnv1a(word: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in word.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_semantic::cosine;

    fn cos(a: &str, b: &str) -> f32 {
        let (a, b) = (LexicalEmbedder::vector(a), LexicalEmbedder::vector(b));
        cosine(&a, &b).unwrap_or(f32::NAN)
    }

    #[test]
    fn word_overlap_is_the_cosine() {
        assert!((cos("a b", "a c") - 0.5).abs() < 1e-6);
        assert!(cos("the flaky test", "deploy to staging").abs() < 1e-6);
        // Term frequency: "a a b" is (2, 1), "a b" is (1, 1): 3 / (√5 √2).
        let expected = 3.0 / (5.0f32.sqrt() * 2.0f32.sqrt());
        assert!((cos("a a b", "a b") - expected).abs() < 1e-6);
    }

    #[test]
    fn texts_without_words_are_unit_vectors_too() {
        let v = LexicalEmbedder::vector("?!");
        assert_eq!(v[0], 1.0);
        assert!((cos("?!", "...") - 1.0).abs() < 1e-6);
        assert!(cos("?!", "words").abs() < 1e-6);
    }
}
