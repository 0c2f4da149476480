//! The cache and the batching worker, with toy embedders (no model).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use loopguard_semantic::{Embedder, EmbeddingService, Result, SemanticError, ServiceOptions};

/// Maps a text to a 3-d vector from its bytes; counts its calls.
#[derive(Default)]
struct Toy {
    calls: AtomicUsize,
}

fn toy_vector(text: &str) -> Vec<f32> {
    let sum: u32 = text.bytes().map(u32::from).sum();
    vec![1.0 + text.len() as f32, (sum % 17) as f32, 3.0]
}

impl Embedder for Toy {
    fn model_id(&self) -> &str {
        "toy"
    }
    fn dimension(&self) -> usize {
        3
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if texts.contains(&"boom") {
            return Err(SemanticError::Inference {
                model: "toy".into(),
                texts: texts.len(),
                detail: "boom".into(),
            });
        }
        if texts.contains(&"panic") {
            panic!("toy embedder panics on purpose");
        }
        Ok(texts.iter().map(|t| toy_vector(t)).collect())
    }
}

#[tokio::test]
async fn cached_text_costs_no_call() -> Result<()> {
    let toy = Arc::new(Toy::default());
    let service = EmbeddingService::new(Arc::clone(&toy) as Arc<dyn Embedder>)?;
    let a = service.embed("hello").await?;
    let b = service.embed("hello").await?;
    assert_eq!(toy.calls.load(Ordering::SeqCst), 1);
    assert!(Arc::ptr_eq(&a, &b));
    let s = service.stats();
    assert_eq!(
        (s.requests, s.cache_hits, s.batches, s.texts_embedded),
        (2, 1, 1, 1)
    );
    assert!(service.cached("hello").is_some());
    assert!(service.cached("other").is_none());
    Ok(())
}

#[tokio::test]
async fn vectors_are_normalized_once() -> Result<()> {
    let service = EmbeddingService::new(Arc::new(Toy::default()))?;
    let v = service.embed("abc").await?;
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-6, "{norm}");
    let raw = toy_vector("abc");
    let raw_norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((v[0] - raw[0] / raw_norm).abs() < 1e-6);
    Ok(())
}

#[tokio::test]
async fn embed_many_keeps_order_and_dedupes() -> Result<()> {
    let toy = Arc::new(Toy::default());
    let service = EmbeddingService::new(Arc::clone(&toy) as Arc<dyn Embedder>)?;
    service.embed("b").await?;
    let out = service.embed_many(&["a", "b", "a", "cc"]).await?;
    assert_eq!(out.len(), 4);
    assert!(
        Arc::ptr_eq(&out[0], &out[2]),
        "a duplicate is embedded once"
    );
    assert_eq!(*out[1], *service.embed("b").await?);
    assert_ne!(*out[0], *out[3]);
    let s = service.stats();
    assert_eq!(s.texts_embedded, 3, "b, then a and cc: {s:?}");
    assert_eq!(toy.calls.load(Ordering::SeqCst), 2);
    assert!(service.embed_many(&[]).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn lru_evicts_the_least_recent() -> Result<()> {
    let toy = Arc::new(Toy::default());
    let service = EmbeddingService::with_options(
        Arc::clone(&toy) as Arc<dyn Embedder>,
        ServiceOptions::new().cache_capacity(2),
    )?;
    service.embed("a").await?;
    service.embed("b").await?;
    service.embed("a").await?; // a is now the most recent
    service.embed("c").await?; // evicts b
    assert!(service.cached("a").is_some());
    assert!(service.cached("b").is_none());
    assert_eq!(service.stats().texts_embedded, 3);
    service.embed("b").await?;
    assert_eq!(service.stats().texts_embedded, 4);
    Ok(())
}

#[tokio::test]
async fn zero_capacity_disables_the_cache() -> Result<()> {
    let service = EmbeddingService::with_options(
        Arc::new(Toy::default()),
        ServiceOptions::new().cache_capacity(0),
    )?;
    service.embed("a").await?;
    service.embed("a").await?;
    assert_eq!(service.stats().texts_embedded, 2);
    assert_eq!(service.stats().cache_hits, 0);
    Ok(())
}

#[tokio::test]
async fn a_failing_text_does_not_fail_its_batch_mates() -> Result<()> {
    let service = EmbeddingService::new(Arc::new(Toy::default()))?;
    let err = service
        .embed_many(&["fine", "boom"])
        .await
        .expect_err("boom fails");
    assert!(err.to_string().contains("boom"), "{err}");
    // "fine" was retried alone and cached.
    assert!(service.cached("fine").is_some());
    assert!(service.cached("boom").is_none());
    Ok(())
}

#[tokio::test]
async fn a_panicking_embedder_is_an_error_and_the_worker_lives_on() -> Result<()> {
    let service = EmbeddingService::new(Arc::new(Toy::default()))?;
    let err = service
        .embed("panic")
        .await
        .expect_err("the embedder panics");
    assert!(matches!(err, SemanticError::BadEmbedding { .. }), "{err:?}");
    service.embed("after").await?;
    Ok(())
}

struct Broken(Vec<Vec<f32>>);

impl Embedder for Broken {
    fn model_id(&self) -> &str {
        "broken"
    }
    fn dimension(&self) -> usize {
        3
    }
    fn embed_batch(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(self.0.clone())
    }
}

#[tokio::test]
async fn contract_breaches_are_errors() {
    let cases: [(Vec<Vec<f32>>, &str); 4] = [
        (vec![vec![1.0, 0.0]], "dimensions"),
        (vec![vec![0.0, 0.0, 0.0]], "normalized"),
        (vec![vec![f32::NAN, 0.0, 1.0]], "normalized"),
        (vec![], "0 vectors for 1 texts"),
    ];
    for (output, expected) in cases {
        let service = EmbeddingService::new(Arc::new(Broken(output))).expect("service");
        let err = service.embed("x").await.expect_err("a broken result");
        assert!(err.to_string().contains(expected), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_callers_each_get_their_own_vector() -> Result<()> {
    let toy = Arc::new(Toy::default());
    let service = Arc::new(EmbeddingService::with_options(
        Arc::clone(&toy) as Arc<dyn Embedder>,
        ServiceOptions::new().max_batch(8),
    )?);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let service = Arc::clone(&service);
        tasks.push(tokio::spawn(async move {
            let text = format!("t{}", i % 50);
            let v = service.embed(&text).await?;
            Ok::<_, SemanticError>((text, v))
        }));
    }
    for task in tasks {
        let (text, v) = task.await.expect("task")?;
        let mut want = toy_vector(&text);
        loopguard_semantic::normalize(&mut want);
        assert_eq!(*v, *want, "{text}");
    }
    let s = service.stats();
    assert!(s.texts_embedded <= 100 && s.texts_embedded >= 50, "{s:?}");
    assert_eq!(s.requests, 100);
    Ok(())
}
