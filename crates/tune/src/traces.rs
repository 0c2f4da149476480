//! Tuning on recorded traces: each trace replayed through the real engine
//! at every threshold, its semantic detections scored against the ones a
//! sidecar file expects.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use loopguard_config::Config;
use loopguard_core_types::{Event, EventKind, kinds};
use loopguard_host::{LoopGuard, ReplayItem, replay_each};
use loopguard_semantic::{
    Embedder, EmbeddingService, JudgeKind, SemanticDetectors, ServiceOptions,
};
use serde_json::Value;

use crate::embed::{EmbedStats, Prepared, Vectors};
use crate::error::{LineIssue, Result, TuneError};
use crate::pairs::type_name;
use crate::report::{
    Choice, Configured, Counts, EmbedderInfo, Example, MinPrecision, Mistakes, Mode, RULE,
    TraceDetection, TuneOptions, TuneReport,
};
use crate::sweep::{Confusion, SweepRow, best_f1, min_precision};

/// The detection kinds a similarity threshold decides, and the key of
/// each one's threshold.
pub const SEMANTIC_KINDS: [(&str, &str); 3] = [
    (kinds::COLLABORATION_LOOP, "similarity.request_threshold"),
    (kinds::REPEATED_QUERY, "similarity.request_threshold"),
    (kinds::TOPIC_CYCLE, "similarity.topic_threshold"),
];

/// The suffix of a sidecar: `NAME.jsonl` expects `NAME.expected.jsonl`.
pub const SIDECAR_SUFFIX: &str = ".expected.jsonl";

/// A detection the sidecar expects: on which line, of which kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Expected {
    /// The 1-based trace line the detection fires on.
    pub line: u64,
    /// `collaboration_loop`, `repeated_query` or `topic_cycle`.
    pub kind: String,
}

/// A trace and the detections expected on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The trace file.
    pub path: PathBuf,
    /// Its sidecar.
    pub sidecar: PathBuf,
    /// The trace's bytes (JSON Lines in the trace format).
    pub bytes: Vec<u8>,
    /// The expected detections, in line order.
    pub expected: Vec<Expected>,
}

/// Traces with their expected detections, and the sidecar lines that were
/// skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceSet {
    /// The file or directory read.
    pub source: PathBuf,
    /// The traces, by file name.
    pub traces: Vec<Trace>,
    /// Sidecar lines that were skipped, each with what is wrong.
    pub issues: Vec<LineIssue>,
}

impl TraceSet {
    /// Reads a trace `NAME.jsonl` and its sidecar `NAME.expected.jsonl`, or
    /// every trace of a directory (its `*.jsonl` files that are not
    /// sidecars), each with its sidecar.
    ///
    /// A sidecar holds one JSON object a line, `{"line": N, "kind": K}`:
    /// the 1-based trace line on which a detection of kind K
    /// (`collaboration_loop`, `repeated_query` or `topic_cycle`) should
    /// fire. Other fields (a `note`) are ignored; a bad line is listed and
    /// skipped. A missing sidecar is an error: with none, every detection
    /// would count as a false alarm.
    pub fn read(path: &Path) -> Result<TraceSet> {
        let meta =
            fs::metadata(path).map_err(|e| TuneError::io("cannot read the traces", path, e))?;
        let files = if meta.is_dir() {
            let entries = fs::read_dir(path)
                .map_err(|e| TuneError::io("cannot list the traces in", path, e))?;
            let mut files = Vec::new();
            for entry in entries {
                let entry =
                    entry.map_err(|e| TuneError::io("cannot list the traces in", path, e))?;
                let file = entry.path();
                let name = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                if name.ends_with(".jsonl") && !name.ends_with(SIDECAR_SUFFIX) && file.is_file() {
                    files.push(file);
                }
            }
            files.sort();
            if files.is_empty() {
                return Err(TuneError::NoData(format!(
                    "{} holds no trace (NAME.jsonl, each with NAME{SIDECAR_SUFFIX})",
                    path.display()
                )));
            }
            files
        } else {
            vec![path.to_path_buf()]
        };
        let mut set = TraceSet {
            source: path.to_path_buf(),
            ..TraceSet::default()
        };
        for file in files {
            let trace = read_trace(&file, &mut set.issues)?;
            set.traces.push(trace);
        }
        Ok(set)
    }

    /// The texts the semantic detectors embed: every collaboration request
    /// and handoff content, once each, in trace order.
    pub fn texts(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut texts = Vec::new();
        for trace in &self.traces {
            for line in trace.bytes.split(|&b| b == b'\n') {
                let Ok(line) = std::str::from_utf8(line) else {
                    continue;
                };
                let Ok(event) = Event::from_json(line.trim()) else {
                    continue;
                };
                let text = match event.kind {
                    EventKind::Collaboration { request, .. } => Some(request),
                    EventKind::Handoff {
                        content: Some(content),
                        ..
                    } => Some(content),
                    _ => None,
                };
                if let Some(text) = text.filter(|t| !t.trim().is_empty())
                    && seen.insert(text.clone())
                {
                    texts.push(text);
                }
            }
        }
        texts
    }

    /// Expected detections over all traces.
    pub fn expected_count(&self) -> usize {
        self.traces.iter().map(|t| t.expected.len()).sum()
    }
}

fn read_trace(path: &Path, issues: &mut Vec<LineIssue>) -> Result<Trace> {
    let bytes = fs::read(path).map_err(|e| TuneError::io("cannot read the trace", path, e))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(name);
    let sidecar = path.with_file_name(format!("{stem}{SIDECAR_SUFFIX}"));
    let text = match fs::read_to_string(&sidecar) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(TuneError::MissingSidecar {
                trace: path.to_path_buf(),
                sidecar,
            });
        }
        Err(err) => return Err(TuneError::io("cannot read the sidecar", &sidecar, err)),
    };
    let lines = bytes.split(|&b| b == b'\n').count() as u64
        - u64::from(bytes.ends_with(b"\n") || bytes.is_empty());
    let mut expected = BTreeSet::new();
    for (index, line) in text.lines().enumerate() {
        let number = index as u64 + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match parse_expected(line, lines) {
            Ok(item) => {
                if !expected.insert(item.clone()) {
                    issues.push(LineIssue::new(
                        &sidecar,
                        number,
                        format!("line {} {} is listed twice", item.line, item.kind),
                    ));
                }
            }
            Err(message) => issues.push(LineIssue::new(&sidecar, number, message)),
        }
    }
    Ok(Trace {
        path: path.to_path_buf(),
        sidecar,
        bytes,
        expected: expected.into_iter().collect(),
    })
}

fn parse_expected(text: &str, trace_lines: u64) -> std::result::Result<Expected, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|err| format!("not a JSON object: {err}"))?;
    let Value::Object(object) = value else {
        return Err(format!(
            "not a JSON object but {} (one expected detection a line: {{\"line\": N, \"kind\": \"collaboration_loop\"}})",
            type_name(&value)
        ));
    };
    let line = match object.get("line") {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(line) if line >= 1 => line,
            _ => return Err(format!("`line` must be a line number (1 or more), not {n}")),
        },
        Some(other) => return Err(format!("`line` must be a number, not {}", type_name(other))),
        None => return Err("`line` is missing (the trace line the detection fires on)".into()),
    };
    if line > trace_lines {
        return Err(format!(
            "`line` {line} is past the end of the trace ({trace_lines} lines)"
        ));
    }
    let kind = match object.get("kind") {
        Some(Value::String(kind)) => kind.clone(),
        Some(other) => return Err(format!("`kind` must be a string, not {}", type_name(other))),
        None => return Err("`kind` is missing".into()),
    };
    if !SEMANTIC_KINDS.iter().any(|(k, _)| *k == kind) {
        return Err(format!(
            "`kind` {kind:?} is not decided by a similarity threshold \
             (collaboration_loop, repeated_query or topic_cycle)"
        ));
    }
    Ok(Expected { line, kind })
}

/// Which thresholds a trace sweep moves, and which detections it scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scope {
    request: bool,
    topic: bool,
}

impl Scope {
    fn of(kind: Option<&str>) -> Result<Scope> {
        match kind {
            None => Ok(Scope {
                request: true,
                topic: true,
            }),
            Some("request") => Ok(Scope {
                request: true,
                topic: false,
            }),
            Some("topic") => Ok(Scope {
                request: false,
                topic: true,
            }),
            Some(other) => Err(TuneError::Kind(other.to_owned())),
        }
    }

    fn scores(self, kind: &str) -> bool {
        SEMANTIC_KINDS.iter().any(|(k, key)| {
            *k == kind
                && ((self.request && key.ends_with("request_threshold"))
                    || (self.topic && key.ends_with("topic_threshold")))
        })
    }

    /// `base` with the swept thresholds set to `threshold` everywhere
    /// (task-type overrides of those keys are cleared, so one threshold
    /// applies to every event). A swept request threshold is the cosine
    /// judge's, so every replay runs with `similarity.judge = "cosine"`
    /// (the calibrated judge does not decide by that threshold, and its
    /// residual texts are not among the prepared vectors).
    fn config_at(self, base: &Config, threshold: f64) -> Config {
        let mut config = base.clone();
        let t = threshold as f32;
        let similarity = &mut config.similarity;
        similarity.judge = JudgeKind::Cosine;
        if self.request {
            similarity.request_threshold = t;
            for task_type in similarity.task_types.values_mut() {
                task_type.request_threshold = None;
            }
        }
        if self.topic {
            similarity.topic_threshold = t;
            for task_type in similarity.task_types.values_mut() {
                task_type.topic_threshold = None;
            }
        }
        config
    }
}

/// One semantic detection of a replay.
#[derive(Debug, Clone, PartialEq)]
struct Fired {
    trace: usize,
    line: u64,
    kind: String,
    similarity: Option<f32>,
}

type Key = (usize, u64, String);

/// The shared machinery of a trace sweep: the traces, the embedding
/// service every engine uses, the base config.
struct Replayer<'a> {
    base: &'a Config,
    scope: Scope,
    service: Arc<EmbeddingService>,
}

/// What replaying a set at one threshold gave.
struct Replayed {
    fired: Vec<Fired>,
    errors: Vec<LineIssue>,
}

impl<'a> Replayer<'a> {
    /// A replayer of `base` with `scope`'s thresholds swept, its engines
    /// sharing one embedding service that answers from `prepared`.
    fn new(base: &'a Config, scope: Scope, prepared: &Arc<Prepared>) -> Result<Replayer<'a>> {
        let capacity = prepared.vectors.len() + 1024;
        let service = EmbeddingService::with_options(
            Arc::clone(prepared) as Arc<dyn Embedder>,
            ServiceOptions::new().cache_capacity(capacity),
        )?;
        Ok(Replayer {
            base,
            scope,
            service: Arc::new(service),
        })
    }

    async fn replay(&self, set: &TraceSet, threshold: f64) -> Result<Replayed> {
        let config = self.scope.config_at(self.base, threshold);
        let mut replayed = Replayed {
            fired: Vec::new(),
            errors: Vec::new(),
        };
        for (index, trace) in set.traces.iter().enumerate() {
            // A fresh engine per trace and threshold: no state carries over.
            let detectors = SemanticDetectors::with_service(&config, Arc::clone(&self.service));
            let engine: LoopGuard = detectors
                .install(LoopGuard::builder(config.clone()))
                .build()
                .map_err(|e| TuneError::Engine(e.to_string()))?;
            let scope = self.scope;
            replay_each(&engine, trace.bytes.as_slice(), |item| match item {
                ReplayItem::Decision(decision) => {
                    for detection in &decision.detections {
                        if scope.scores(&detection.kind) {
                            replayed.fired.push(Fired {
                                trace: index,
                                line: decision.line,
                                kind: detection.kind.to_string(),
                                similarity: detection.similarity,
                            });
                        }
                    }
                    for error in &decision.errors {
                        replayed.errors.push(LineIssue::new(
                            &trace.path,
                            decision.line,
                            error.clone(),
                        ));
                    }
                }
                ReplayItem::Error(error) => {
                    replayed.errors.push(LineIssue::new(
                        &trace.path,
                        error.line,
                        error.error.clone(),
                    ));
                }
            })
            .await
            .map_err(|e| TuneError::Engine(format!("{}: {e}", trace.path.display())))?;
        }
        Ok(replayed)
    }

    /// The counts of `fired` against what `set` expects.
    fn confusion(&self, set: &TraceSet, fired: &[Fired]) -> Confusion {
        let expected = expected_keys(set, self.scope);
        let fired: HashSet<Key> = fired
            .iter()
            .map(|f| (f.trace, f.line, f.kind.clone()))
            .collect();
        let tp = fired.intersection(&expected).count() as u64;
        Confusion {
            tp,
            fp: fired.len() as u64 - tp,
            tn: None,
            fn_: expected.len() as u64 - tp,
        }
    }

    async fn score(&self, set: &TraceSet, threshold: f64) -> Result<SweepRow> {
        let replayed = self.replay(set, threshold).await?;
        Ok(SweepRow::new(
            threshold,
            self.confusion(set, &replayed.fired),
        ))
    }

    /// The row of each threshold (scored on `set`), and what the lowest
    /// one let through: it lets the most through, so only its detections
    /// are kept.
    async fn sweep(&self, set: &TraceSet, thresholds: &[f64]) -> Result<(Vec<SweepRow>, Replayed)> {
        let mut rows = Vec::with_capacity(thresholds.len());
        let mut first: Option<Replayed> = None;
        for &threshold in thresholds {
            let replayed = self.replay(set, threshold).await?;
            rows.push(SweepRow::new(
                threshold,
                self.confusion(set, &replayed.fired),
            ));
            if first.is_none() {
                first = Some(replayed);
            }
        }
        let first = first.unwrap_or(Replayed {
            fired: Vec::new(),
            errors: Vec::new(),
        });
        Ok((rows, first))
    }

    /// What the train traces get wrong at `threshold`: the detections that
    /// fired unexpected (highest similarity first), and the expected ones
    /// that did not fire (lowest similarity at the lowest threshold,
    /// `lowest`, first).
    async fn mistakes(
        &self,
        train: &TraceSet,
        threshold: f64,
        expected: &HashSet<Key>,
        lowest: &[Fired],
    ) -> Result<Mistakes> {
        let replayed = self.replay(train, threshold).await?;
        let similarity_at = similarities(lowest);
        let fired = similarities(&replayed.fired);
        let mut fps: Vec<(&Key, Option<f32>)> = fired
            .iter()
            .filter(|(key, _)| !expected.contains(*key))
            .map(|(key, s)| (key, *s))
            .collect();
        fps.sort_by(|x, y| {
            y.1.unwrap_or(f32::NEG_INFINITY)
                .total_cmp(&x.1.unwrap_or(f32::NEG_INFINITY))
                .then_with(|| x.0.cmp(y.0))
        });
        let mut fns: Vec<(&Key, Option<f32>)> = expected
            .iter()
            .filter(|key| !fired.contains_key(*key))
            .map(|key| (key, similarity_at.get(key).copied().flatten()))
            .collect();
        fns.sort_by(|x, y| {
            x.1.unwrap_or(f32::NEG_INFINITY)
                .total_cmp(&y.1.unwrap_or(f32::NEG_INFINITY))
                .then_with(|| x.0.cmp(y.0))
        });
        let example = |(key, cosine): (&Key, Option<f32>)| mistake(train, key, cosine);
        Ok(Mistakes {
            threshold,
            false_positives: fps.into_iter().map(example).collect(),
            false_negatives: fns.into_iter().map(example).collect(),
        })
    }
}

fn expected_keys(set: &TraceSet, scope: Scope) -> HashSet<Key> {
    set.traces
        .iter()
        .enumerate()
        .flat_map(|(index, trace)| {
            trace
                .expected
                .iter()
                .filter(move |e| scope.scores(&e.kind))
                .map(move |e| (index, e.line, e.kind.clone()))
        })
        .collect()
}

/// Sweeps recorded traces: at every threshold, each trace of `train` is
/// replayed through a fresh engine (built from `config`, with the semantic
/// detectors at that threshold) and its semantic detections are scored
/// against the sidecar's: a true positive is an expected detection that
/// fired (same line, same kind), a false positive one that fired
/// unexpected, a false negative one expected that did not fire. There are
/// no true negatives, so no false-positive rate.
///
/// `options.kind`: `None` sweeps `similarity.request_threshold` and
/// `similarity.topic_threshold` together and scores all three kinds;
/// `request` sweeps the first and scores `collaboration_loop` and
/// `repeated_query`; `topic` the second and `topic_cycle`. Task-type
/// overrides of a swept key are cleared during the sweep.
///
/// Every text is embedded beforehand (`vectors`, from [`crate::embed_texts`]
/// over [`TraceSet::texts`]); all engines share one embedding service
/// answering from them, so no text is embedded twice. A text that was
/// missed goes to `fallback` and is counted in
/// [`EmbedStats::embedded`].
///
/// `holdout` traces are replayed only at the chosen and configured
/// thresholds, and never influence a choice.
pub async fn tune_traces(
    train: &TraceSet,
    holdout: Option<&TraceSet>,
    vectors: Vectors,
    stats: &EmbedStats,
    fallback: Arc<dyn Embedder>,
    config: &Config,
    options: &TuneOptions,
) -> Result<TuneReport> {
    let scope = Scope::of(options.kind.as_deref())?;
    let info = EmbedderInfo {
        name: options.embedder.clone(),
        model_id: vectors.model_id().to_owned(),
        dimension: vectors.dimension(),
    };
    let prepared = Arc::new(Prepared {
        vectors,
        fallback,
        misses: AtomicUsize::new(0),
    });
    let replayer = Replayer::new(config, scope, &prepared)?;
    let (rows, first) = replayer.sweep(train, options.thresholds.values()).await?;

    let chooser = Chooser {
        replayer: &replayer,
        train,
        holdout,
        rows: &rows,
    };
    let best = chooser.best_f1().await?;
    let floor = chooser.min_precision(options.min_precision).await?;
    let configured = chooser.configured(&options.configured).await?;

    // What the lowest threshold lets through, with similarities: the
    // histogram, and the cosines of the mistakes below.
    let expected = expected_keys(train, scope);
    let detections = lowest_detections(train, &first.fired, &expected);
    let mistakes = match &best {
        Some(best) => Some(
            replayer
                .mistakes(train, best.threshold, &expected, &first.fired)
                .await?,
        ),
        None => None,
    };

    let mut issues = train.issues.clone();
    issues.extend(first.errors);
    if let Some(holdout) = holdout {
        issues.extend(holdout.issues.iter().cloned());
    }
    let mut embedding = stats.clone();
    let misses = prepared.misses.load(Ordering::Relaxed);
    embedding.texts += misses;
    embedding.embedded += misses;
    Ok(TuneReport {
        mode: Mode::Traces,
        input: train.source.clone(),
        holdout: holdout.map(|h| h.source.clone()),
        kind: options.kind.clone(),
        rule: RULE,
        embedder: info,
        embedding,
        issues,
        train: trace_counts(train, scope),
        test: holdout.map(|set| trace_counts(set, scope)),
        thresholds: options.thresholds.clone(),
        rows,
        best_f1: best,
        min_precision: floor,
        configured,
        mistakes,
        pairs: Vec::new(),
        detections,
    })
}

/// Chooses thresholds from a sweep's rows, and scores each choice on the
/// train traces and the held-out ones.
struct Chooser<'a> {
    replayer: &'a Replayer<'a>,
    train: &'a TraceSet,
    holdout: Option<&'a TraceSet>,
    rows: &'a [SweepRow],
}

impl Chooser<'_> {
    /// `threshold` scored: its sweep row (or a replay of the train traces
    /// when it is not one), and a replay of the held-out traces.
    async fn choose(&self, threshold: f64, key: Option<String>) -> Result<Choice> {
        let train_row = match self
            .rows
            .iter()
            .find(|r| (r.threshold - threshold).abs() < 1e-9)
        {
            Some(row) => *row,
            None => self.replayer.score(self.train, threshold).await?,
        };
        let test = match self.holdout {
            Some(set) => Some(self.replayer.score(set, threshold).await?),
            None => None,
        };
        Ok(Choice {
            threshold,
            key,
            train: train_row,
            test,
        })
    }

    /// The threshold with the best train F1, if any.
    async fn best_f1(&self) -> Result<Option<Choice>> {
        match best_f1(self.rows) {
            Some(row) => Ok(Some(self.choose(row.threshold, None).await?)),
            None => Ok(None),
        }
    }

    /// With a precision `floor`, the lowest threshold that meets it, if
    /// any.
    async fn min_precision(&self, floor: Option<f64>) -> Result<Option<MinPrecision>> {
        let Some(floor) = floor else {
            return Ok(None);
        };
        let choice = match min_precision(self.rows, floor) {
            Some(row) => Some(self.choose(row.threshold, None).await?),
            None => None,
        };
        Ok(Some(MinPrecision { floor, choice }))
    }

    /// The thresholds configured today, each under its key.
    async fn configured(&self, configured: &[Configured]) -> Result<Vec<Choice>> {
        let mut choices = Vec::with_capacity(configured.len());
        for c in configured {
            choices.push(self.choose(c.threshold, Some(c.key.clone())).await?);
        }
        Ok(choices)
    }
}

/// Each detection that `fired`, by key, with its similarity.
fn similarities(fired: &[Fired]) -> HashMap<Key, Option<f32>> {
    fired
        .iter()
        .map(|f| ((f.trace, f.line, f.kind.clone()), f.similarity))
        .collect()
}

/// The trace file at `index` of `set`, for people.
fn trace_name(set: &TraceSet, index: usize) -> String {
    set.traces
        .get(index)
        .map(|t| t.path.display().to_string())
        .unwrap_or_default()
}

/// What fired at the lowest threshold (`fired`), each detection with its
/// similarity and whether the sidecar expects it.
fn lowest_detections(
    train: &TraceSet,
    fired: &[Fired],
    expected: &HashSet<Key>,
) -> Vec<TraceDetection> {
    fired
        .iter()
        .map(|f| TraceDetection {
            trace: trace_name(train, f.trace),
            line: f.line,
            kind: f.kind.clone(),
            similarity: f.similarity,
            expected: expected.contains(&(f.trace, f.line, f.kind.clone())),
        })
        .collect()
}

/// A wrong detection, or a missed one, as the report lists it: where and
/// of which kind, with its similarity.
fn mistake(train: &TraceSet, (trace, line, kind): &Key, cosine: Option<f32>) -> Example {
    Example {
        at: format!("{}:{line}", trace_name(train, *trace)),
        kind: Some(kind.clone()),
        cosine,
        a: None,
        b: None,
    }
}

/// How many traces `set` has, and how many detections it expects of the
/// kinds `scope` scores.
fn trace_counts(set: &TraceSet, scope: Scope) -> Counts {
    Counts {
        items: set.traces.len(),
        same: expected_keys(set, scope).len(),
        different: None,
    }
}
