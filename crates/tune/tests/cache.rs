//! The disk cache: a second run performs no inference, and a damaged file
//! costs only the texts it lost.

use std::fs::{self, OpenOptions};

use loopguard_tune::{EmbedOptions, EmbedStats, EmbeddingCache, Vectors, embed_texts};
use tempfile::TempDir;

use crate::common::{BASE, Counting, Toy};

/// Twelve texts, three batches of five at most.
fn texts() -> Vec<String> {
    std::iter::once(BASE.to_owned())
        .chain((1..12).map(|i| format!("cos {}", f64::from(i) / 12.0)))
        .collect()
}

fn run(toy: &Counting<Toy>, dir: &TempDir) -> (Vectors, EmbedStats) {
    let texts = texts();
    let options = EmbedOptions::new()
        .batch(5)
        .cache(EmbeddingCache::new(dir.path()));
    let mut progress = Vec::new();
    let result = embed_texts(
        toy,
        texts.iter().map(String::as_str),
        &options,
        &mut |done, total| progress.push((done, total)),
    )
    .expect("embedding works");
    let last = progress.last().copied().expect("progress is reported");
    assert_eq!(
        last.0, last.1,
        "the last report says all done: {progress:?}"
    );
    result
}

fn cache_file(dir: &TempDir) -> std::path::PathBuf {
    EmbeddingCache::new(dir.path()).file_for("toy-2d", 2)
}

#[test]
fn a_second_run_performs_no_inference() {
    let dir = TempDir::new().expect("a temporary directory");
    let toy = Counting::new(Toy::default());
    let (first, stats) = run(&toy, &dir);
    assert_eq!((stats.texts, stats.cached, stats.embedded), (12, 0, 12));
    assert_eq!((toy.texts(), toy.calls(), stats.batches), (12, 3, 3));
    assert!(
        stats.cache_warnings.is_empty(),
        "{:?}",
        stats.cache_warnings
    );
    assert!(cache_file(&dir).exists());

    let again = Counting::new(Toy::default());
    let (second, stats) = run(&again, &dir);
    assert_eq!((stats.cached, stats.embedded, stats.batches), (12, 0, 0));
    assert_eq!(
        (again.texts(), again.calls()),
        (0, 0),
        "no inference at all"
    );
    // The very same vectors come back.
    for text in texts() {
        assert_eq!(first.get(&text), second.get(&text), "{text}");
    }
}

#[test]
fn duplicates_are_embedded_once() {
    let toy = Counting::new(Toy::default());
    let texts = [BASE, "cos 0.5", BASE, "cos 0.5", "cos 0.25"];
    let (vectors, stats) =
        embed_texts(&toy, texts, &EmbedOptions::new(), &mut |_, _| {}).expect("embedding works");
    assert_eq!((stats.texts, toy.texts(), vectors.len()), (3, 3, 3));
    assert_eq!(vectors.cosine(BASE, "cos 0.5"), Some(0.5));
}

#[test]
fn a_cut_short_record_is_dropped_and_the_file_repaired() {
    let dir = TempDir::new().expect("a temporary directory");
    run(&Counting::new(Toy::default()), &dir);
    let file = cache_file(&dir);
    let len = fs::metadata(&file).expect("the cache file").len();
    // A run killed in the middle of its last write.
    OpenOptions::new()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_len(len - 7))
        .expect("truncate the cache");

    let toy = Counting::new(Toy::default());
    let (_, stats) = run(&toy, &dir);
    assert_eq!(
        (stats.cached, stats.embedded),
        (11, 1),
        "only the lost text"
    );
    assert_eq!(toy.texts(), 1);
    assert_eq!(stats.cache_warnings.len(), 1, "warned once");
    assert!(
        stats.cache_warnings[0].contains("cut-short last record"),
        "{}",
        stats.cache_warnings[0]
    );

    // Repaired (and the lost text appended again): nothing more to do.
    let toy = Counting::new(Toy::default());
    let (_, stats) = run(&toy, &dir);
    assert_eq!((stats.cached, stats.embedded), (12, 0));
    assert!(
        stats.cache_warnings.is_empty(),
        "{:?}",
        stats.cache_warnings
    );
}

#[test]
fn a_damaged_record_costs_only_its_own_text() {
    let dir = TempDir::new().expect("a temporary directory");
    run(&Counting::new(Toy::default()), &dir);
    let file = cache_file(&dir);
    let mut bytes = fs::read(&file).expect("the cache file");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&file, &bytes).expect("write the damaged cache");

    let toy = Counting::new(Toy::default());
    let (vectors, stats) = run(&toy, &dir);
    assert_eq!((stats.cached, stats.embedded), (11, 1));
    assert_eq!(stats.cache_warnings.len(), 1);
    assert!(stats.cache_warnings[0].contains("1 damaged record"));
    // The re-embedded text has its right vector.
    assert_eq!(vectors.len(), 12);
    let toy = Counting::new(Toy::default());
    let (_, stats) = run(&toy, &dir);
    assert_eq!((stats.cached, stats.embedded, toy.texts()), (12, 0, 0));
}

#[test]
fn a_file_that_is_not_a_cache_is_started_afresh() {
    let dir = TempDir::new().expect("a temporary directory");
    fs::write(cache_file(&dir), b"not a cache at all").expect("write garbage");
    let toy = Counting::new(Toy::default());
    let (_, stats) = run(&toy, &dir);
    assert_eq!((stats.cached, stats.embedded), (0, 12));
    assert_eq!(stats.cache_warnings.len(), 1);
    let toy = Counting::new(Toy::default());
    let (_, stats) = run(&toy, &dir);
    assert_eq!((stats.cached, stats.embedded), (12, 0));
}

#[test]
fn an_unwritable_cache_warns_and_the_run_goes_on() {
    let dir = TempDir::new().expect("a temporary directory");
    // A file where the cache directory should be.
    let blocked = dir.path().join("cache");
    fs::write(&blocked, b"").expect("write a file");
    let toy = Counting::new(Toy::default());
    let texts = texts();
    let options = EmbedOptions::new().cache(EmbeddingCache::new(&blocked));
    let (vectors, stats) = embed_texts(
        &toy,
        texts.iter().map(String::as_str),
        &options,
        &mut |_, _| {},
    )
    .expect("the run goes on");
    assert_eq!((vectors.len(), stats.embedded), (12, 12));
    assert_eq!(stats.cache_warnings.len(), 1, "{:?}", stats.cache_warnings);
}

#[test]
fn other_models_never_share_vectors() {
    let dir = TempDir::new().expect("a temporary directory");
    run(&Counting::new(Toy::default()), &dir);
    let lexical = Counting::new(loopguard_tune::LexicalEmbedder::new());
    let texts = texts();
    let options = EmbedOptions::new().cache(EmbeddingCache::new(dir.path()));
    let (_, stats) = embed_texts(
        &lexical,
        texts.iter().map(String::as_str),
        &options,
        &mut |_, _| {},
    )
    .expect("embedding works");
    assert_eq!((stats.cached, lexical.texts()), (0, 12));
}
