//! Rephrased calls (ruling 19): an agent rewording the same query call
//! after call and using nothing that came back (kind `tool_rephrase`).
//!
//! Per task and agent, a successful `tool_call` that is not stale under
//! ruling 15 ([`ObservedEvent::stale_call`], set by `tool_calls` before
//! this detector runs) is a *rephrase* when its free-text argument (as
//! ruling 15 reads one: 3 to 64 words on one line, mostly letters; every
//! such argument of the call, in order) differs from that of the same
//! tool's previous call by this agent but is about the same thing:
//!
//! - with semantic matching on, the engine's argument matcher found the
//!   previous value at a cosine of at least `tools.rephrase_similarity`
//!   (0.70), or the same-request judge called it the same
//!   ([`crate::MatchedArgs::related`], [`crate::MatchedArgs::matches`]);
//! - without it, the two share their content words (stop words out,
//!   stemmed; the list is `data/stop-words-en.txt`, with its source) for at
//!   least half of the shorter text's.
//!
//! Rephrases in a row form a run, whose first wording is the call the first
//! rephrase rewords. A call of the same tool that is no rephrase (a new
//! question, the same words again to page on) ends it; so does a call of
//! another tool that uses what the run returned (an argument holding a URL,
//! path or id that one of the run's results contained), a `progress` event
//! that changed a metric, `completed` and `human` (the engine resets every
//! detector then). Calls of other tools that use nothing of it, stale calls
//! and failing calls neither count nor end it.
//!
//! The `tools.rephrase_after`th rephrase of a run (3: a query and three
//! rewordings) is the first detection (`inject_context`, low); the next one
//! is reported again (`inject_context`, medium); every later one
//! `escalate`s (high). The directive lists the wordings tried and says to
//! change the approach, not the wording. `tool_rephrase` never adds to the
//! loop count.
//!
//! ```text
//! web_search "EU AI act fines for startups"                 the first wording
//! web_search "penalties for startups under the EU AI act"   rephrase 1
//! web_search "EU AI act startup fines amount"               rephrase 2
//! web_search "how much are AI act fines for small firms"    rephrase 3: detected
//! ```
//!
//! A search refined once or twice and then a page opened from its results,
//! paging through one query, and one question asked of two tools stay
//! silent.
//!
//! State is bounded: per task at most 64 agents (the least recently active
//! forgotten first), per agent the previous query of at most 16 tools, the
//! newest 8 wordings of a run and the 64 newest URLs, paths and ids its
//! results held (as hashes). The cost of a call does not grow with the
//! task's history.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::sync::OnceLock;

use loopguard_config::{Config, ToolsConfig};
use loopguard_core_types::{Action, Detection, EventKind, Severity, kinds};
use regex::Regex;
use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bounded::{AGENTS_PER_TASK, hash128, most_recent_mut, push_bounded};
use crate::tool_calls::{is_free_text, ordinal, trimmed};
use crate::{Detector, EvidenceRef, ObservedEvent, evidence_of};

/// Tools whose previous query an agent keeps.
const TOOLS_KEPT: usize = 16;
/// Wordings of a run kept for its evidence and its directive (the first
/// and the newest).
const WORDINGS_KEPT: usize = 8;
/// URLs, paths and ids of a run's results kept (the newest).
const FOUND_KEPT: usize = 64;
/// References of one result looked at.
const REFERENCES_PER_RESULT: usize = 32;
/// Characters of a query kept and quoted.
const QUERY_CHARS: usize = 200;
/// Free-text arguments of one call read.
const FREE_TEXTS_READ: usize = 8;

/// Detects one query reworded over and over (ruling 19).
#[derive(Debug, Clone)]
pub struct ToolRephrase {
    config: ToolsConfig,
}

/// What the detector remembers of one task: its agents' queries, the least
/// recently active agent first.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolRephraseState {
    agents: VecDeque<AgentQueries>,
}

impl ToolRephraseState {
    /// How many agents are remembered.
    pub fn agents(&self) -> usize {
        self.agents.len()
    }
}

/// One agent's queries in one task.
#[derive(Debug, Serialize, Deserialize)]
struct AgentQueries {
    agent: String,
    /// Each tool's previous query, the least recently used tool first.
    last: VecDeque<Query>,
    /// The current run of rephrases.
    run: Run,
}

/// A call's free text, as the next call of its tool compares with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Query {
    tool: String,
    /// The free text as written (at most [`QUERY_CHARS`] characters).
    text: String,
    /// Where it was made.
    at: EvidenceRef,
    /// The lines whose value the matcher knows it as: its own, or the
    /// earlier one the judge called it the same as.
    lines: Vec<u64>,
    /// The URLs, paths and ids its result held (hashes).
    found: Vec<[u8; 16]>,
}

/// A run of rephrases of one tool's query.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Run {
    /// The tool, while a run is on.
    tool: Option<String>,
    /// Rephrases in the run.
    count: u32,
    /// The wordings tried: the first and the newest.
    wordings: VecDeque<Wording>,
    /// The URLs, paths and ids the run's results held (hashes).
    found: VecDeque<[u8; 16]>,
}

/// One wording of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Wording {
    text: String,
    at: EvidenceRef,
}

impl ToolRephrase {
    /// The detector with the `[tools]` settings of `config`.
    pub fn new(config: &Config) -> ToolRephrase {
        ToolRephrase {
            config: config.tools.clone(),
        }
    }
}

impl ToolRephraseState {
    /// The queries of `agent`, made the most recently active.
    fn agent_mut(&mut self, agent: &str) -> &mut AgentQueries {
        most_recent_mut(
            &mut self.agents,
            |queries| queries.agent == agent,
            || AgentQueries {
                agent: agent.to_owned(),
                last: VecDeque::new(),
                run: Run::default(),
            },
            AGENTS_PER_TASK,
        )
    }
}

impl Detector for ToolRephrase {
    type State = ToolRephraseState;
    const CONFIG_SECTION: &'static str = "tools";
    const KINDS: &'static [&'static str] = &[kinds::TOOL_REPHRASE];

    fn name(&self) -> &'static str {
        "tool_rephrase"
    }

    fn observe(
        &self,
        state: &mut ToolRephraseState,
        event: &ObservedEvent<'_>,
        out: &mut Vec<Detection>,
    ) {
        if event.progressed {
            // Progress ends every agent's run.
            for queries in &mut state.agents {
                queries.run = Run::default();
            }
            return;
        }
        let EventKind::ToolCall {
            agent,
            tool,
            args,
            result,
            error,
            ..
        } = &event.event.kind
        else {
            return;
        };
        let limits = self.config.limits_for(tool);
        if error.is_some() || limits.exclude {
            return;
        }
        let stale = event.stale_call.get().copied().unwrap_or(false);
        let text = self.free_text(tool, args);
        let queries = state.agent_mut(agent);
        if queries.run.tool.as_deref().is_some_and(|on| on != tool) {
            // Another tool: it ends the run when it uses what came back.
            if uses_any(args, &queries.run.found) {
                queries.run = Run::default();
            }
        }
        let Some(text) = text else {
            if queries.run.tool.as_deref() == Some(tool.as_str()) && !stale {
                queries.run = Run::default();
            }
            return;
        };
        let here = event.evidence_ref();
        let found = result.as_ref().map(references).unwrap_or_default();
        let lines = known_lines(event);
        let previous = queries
            .last
            .iter()
            .position(|query| query.tool == *tool)
            .and_then(|at| queries.last.remove(at));
        let this = Query {
            tool: tool.clone(),
            text: trimmed(&text, QUERY_CHARS),
            at: here.clone(),
            lines,
            found,
        };
        let rephrase = !stale
            && previous
                .as_ref()
                .is_some_and(|previous| is_rephrase(event, previous, &this.text));
        let count = if rephrase {
            queries.run.extend(previous.as_ref(), &this)
        } else {
            if !stale && queries.run.tool.as_deref() == Some(tool.as_str()) {
                // The same tool, no rephrase: a new question, or paging.
                queries.run = Run::default();
            }
            0
        };
        push_bounded(&mut queries.last, this, TOOLS_KEPT);
        if !rephrase || count < limits.rephrase_after {
            return;
        }
        let (severity, action) = if count == limits.rephrase_after {
            (Severity::Low, Action::InjectContext)
        } else if count == limits.rephrase_after.saturating_add(1) {
            (Severity::Medium, Action::InjectContext)
        } else {
            (Severity::High, Action::Escalate)
        };
        let run = &queries.run;
        let (lines, ids) = evidence_of(run.wordings.iter().map(|wording| &wording.at));
        let wordings = count.saturating_add(1);
        let reason = format!(
            "{agent} reworded one {tool} query {count} times in a row ({} rephrase of the run; \
             {wordings} wordings) and used nothing it returned",
            ordinal(count),
        );
        let mut detection = Detection::new(
            self.name(),
            kinds::TOOL_REPHRASE,
            severity,
            action,
            lines,
            reason,
        )
        .with_agents([agent.as_str()]);
        detection.count = Some(wordings);
        detection.evidence_ids = ids;
        detection.directive = Some(directive(tool, run, wordings));
        out.push(detection);
    }
}

impl ToolRephrase {
    /// The call's free-text arguments (volatile keys left out), joined, or
    /// `None` when it has none.
    fn free_text(&self, tool: &str, args: &Value) -> Option<String> {
        let mut texts = Vec::new();
        self.collect_free_text(tool, args, &mut texts);
        (!texts.is_empty()).then(|| texts.join(" "))
    }

    fn collect_free_text(&self, tool: &str, value: &Value, out: &mut Vec<String>) {
        if out.len() >= FREE_TEXTS_READ {
            return;
        }
        match value {
            Value::String(text) if is_free_text(text) => out.push(text.trim().to_owned()),
            Value::Object(map) => {
                for (key, value) in map {
                    if !self.config.is_volatile(tool, key) {
                        self.collect_free_text(tool, value, out);
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.collect_free_text(tool, item, out);
                }
            }
            _ => {}
        }
    }
}

impl Run {
    /// Adds a rephrase `this` of `previous` (the run's first wording when
    /// the run starts): the run's count after it.
    fn extend(&mut self, previous: Option<&Query>, this: &Query) -> u32 {
        if self.tool.as_deref() != Some(this.tool.as_str()) {
            *self = Run {
                tool: Some(this.tool.clone()),
                ..Run::default()
            };
            if let Some(previous) = previous {
                self.add(previous);
            }
        }
        self.add(this);
        self.count = self.count.saturating_add(1);
        self.count
    }

    /// Keeps a wording (the first and the newest) and what it found.
    fn add(&mut self, query: &Query) {
        let wording = Wording {
            text: query.text.clone(),
            at: query.at.clone(),
        };
        if self.wordings.len() >= WORDINGS_KEPT {
            // Keep the first wording: the directive quotes where it began.
            self.wordings.remove(1);
        }
        self.wordings.push_back(wording);
        for found in &query.found {
            if !self.found.contains(found) {
                push_bounded(&mut self.found, *found, FOUND_KEPT);
            }
        }
    }
}

/// Whether `text` rewords `previous`: different words, about the same
/// thing (by the matcher's cosine or judge with semantic matching on, by
/// content words without it).
fn is_rephrase(event: &ObservedEvent<'_>, previous: &Query, text: &str) -> bool {
    if comparable(text) == comparable(&previous.text) {
        return false;
    }
    match event.matched_args {
        Some(matched) => {
            let related = matched.related.iter().map(|related| related.line);
            let judged = matched.matches.iter().map(|found| found.line);
            related
                .chain(judged)
                .any(|line| previous.lines.contains(&line))
        }
        None => share_content_words(&previous.text, text),
    }
}

/// The lines the matcher knows this call's free text as: its own line, and
/// the earlier lines the judge called it the same as.
fn known_lines(event: &ObservedEvent<'_>) -> Vec<u64> {
    let mut lines = vec![event.line];
    if let Some(matched) = event.matched_args {
        lines.extend(matched.matches.iter().map(|found| found.line));
    }
    lines
}

/// A text as compared for "the same words": lower case, spacing collapsed.
fn comparable(text: &str) -> String {
    text.to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether two queries share their content words for at least half of the
/// shorter one's.
pub fn share_content_words(a: &str, b: &str) -> bool {
    let (a, b) = (content_words(a), content_words(b));
    let shorter = a.len().min(b.len());
    shorter > 0 && 2 * a.intersection(&b).count() >= shorter
}

/// A text's content words: lower case, split on anything but letters,
/// digits and apostrophes, stop words out, stemmed.
fn content_words(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|word| word.trim_matches('\''))
        .filter(|word| !word.is_empty() && !stop_words().contains(word))
        .map(|word| stemmer().stem(word).into_owned())
        .collect()
}

/// The stop word list (`data/stop-words-en.txt`).
fn stop_words() -> &'static BTreeSet<&'static str> {
    static WORDS: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    WORDS.get_or_init(|| {
        include_str!("../data/stop-words-en.txt")
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect()
    })
}

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// The URLs, paths and ids a result holds (hashes, at most
/// [`REFERENCES_PER_RESULT`]).
fn references(result: &Value) -> Vec<[u8; 16]> {
    let mut found = Vec::new();
    visit_strings(result, &mut |text| {
        for reference in reference_tokens(text) {
            let hash = hash128(&reference);
            if found.len() < REFERENCES_PER_RESULT && !found.contains(&hash) {
                found.push(hash);
            }
        }
    });
    found
}

/// Whether an argument of `args` holds one of the references in `found`.
fn uses_any(args: &Value, found: &VecDeque<[u8; 16]>) -> bool {
    if found.is_empty() {
        return false;
    }
    let mut uses = false;
    visit_strings(args, &mut |text| {
        if !uses {
            uses = reference_tokens(text).any(|reference| found.contains(&hash128(&reference)));
        }
    });
    uses
}

/// Calls `visit` on every string in `value` (object keys aside).
fn visit_strings(value: &Value, visit: &mut impl FnMut(&str)) {
    match value {
        Value::String(text) => visit(text),
        Value::Array(items) => items.iter().for_each(|item| visit_strings(item, visit)),
        Value::Object(map) => map.values().for_each(|item| visit_strings(item, visit)),
        _ => {}
    }
}

/// The references in a text: URLs (without a trailing slash), paths
/// (`/a/b`, `src/x.rs`) and ids (a token of 4 or more characters with a
/// digit, such as `KB-10432`, `INC0012345`, `2401.01234`), as compared.
fn reference_tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    static TOKEN: OnceLock<Option<Regex>> = OnceLock::new();
    let token = TOKEN
        .get_or_init(|| Regex::new(r#"[^\s"'<>()\[\]{},;|`]+"#).ok())
        .as_ref();
    token
        .into_iter()
        .flat_map(move |token| token.find_iter(text))
        .map(|found| found.as_str().trim_end_matches(['.', ':', '!', '?']))
        .filter(|token| is_reference(token))
        .map(|token| token.trim_end_matches('/').to_lowercase())
}

fn is_reference(token: &str) -> bool {
    if token.contains("://") {
        return true;
    }
    let has_digit = token.chars().any(|c| c.is_ascii_digit());
    let path = token.contains('/') && token.chars().filter(|c| c.is_alphanumeric()).count() >= 3;
    path || (token.chars().count() >= 4 && has_digit && !token.chars().all(|c| c == '.'))
}

/// What the agent is told: the wordings tried, and to change the approach.
fn directive(tool: &str, run: &Run, wordings: u32) -> String {
    let mut out = format!(
        "You have asked {tool} the same thing {wordings} times in different words, and used \
         nothing it returned. Wordings tried:"
    );
    for wording in &run.wordings {
        let _ = write!(out, " \"{}\" (line {});", wording.text, wording.at.line());
    }
    out.pop();
    out.push_str(
        ". Another wording will not help: change the approach. Use a result you already \
         have, try a different source or tool, or ask a different question.",
    );
    out
}

#[cfg(test)]
mod tests {
    use loopguard_core_types::Event;
    use serde_json::json;

    use super::*;

    fn call(agent: &str, tool: &str, args: Value, result: Value) -> Event {
        Event::from_value(&json!({
            "type": "tool_call", "task": "T", "agent": agent, "tool": tool,
            "args": args, "result": result
        }))
        .expect("a tool call")
    }

    fn search(query: &str, n: u32) -> Event {
        call(
            "researcher",
            "web_search",
            json!({ "query": query }),
            json!([{ "title": format!("Result {n}"), "url": format!("https://example.test/{n}") }]),
        )
    }

    /// The lines that fire, with their severity, replaying `events`.
    fn fired(config: &Config, events: &[Event]) -> Vec<(u64, Severity)> {
        let detector = ToolRephrase::new(config);
        let mut state = ToolRephraseState::default();
        let mut found = Vec::new();
        for (event, line) in events.iter().zip(1..) {
            let mut out = Vec::new();
            detector.observe(&mut state, &ObservedEvent::new(line, event), &mut out);
            found.extend(out.iter().map(|d| (line, d.severity)));
        }
        found
    }

    const WORDINGS: [&str; 6] = [
        "EU AI act fines for startups",
        "fines for startups under the EU AI act",
        "EU AI act startup fines amount",
        "what fines does the EU AI act set for startups",
        "AI act fines startups EU",
        "startups EU AI act fines list",
    ];

    #[test]
    fn ruling_19_the_third_rephrase_is_the_first_detection_then_the_ladder() {
        let events: Vec<Event> = WORDINGS
            .iter()
            .zip(1..)
            .map(|(query, n)| search(query, n))
            .collect();
        assert_eq!(
            fired(&Config::default(), &events),
            [
                (4, Severity::Low),
                (5, Severity::Medium),
                (6, Severity::High)
            ]
        );
    }

    #[test]
    fn ruling_19_a_page_opened_from_the_results_ends_the_run() {
        let events = vec![
            search(WORDINGS[0], 1),
            search(WORDINGS[1], 2),
            search(WORDINGS[2], 3),
            call(
                "researcher",
                "open_page",
                json!({ "url": "https://example.test/3/" }),
                json!("The AI act sets fines of up to 7% of turnover"),
            ),
            search(WORDINGS[3], 4),
            search(WORDINGS[4], 5),
        ];
        assert_eq!(fired(&Config::default(), &events), []);
        // A page that came from nowhere in the run does not end it.
        let mut elsewhere = events.clone();
        elsewhere[3] = call(
            "researcher",
            "open_page",
            json!({ "url": "https://elsewhere.test/ai-act" }),
            json!("Elsewhere"),
        );
        assert_eq!(
            fired(&Config::default(), &elsewhere),
            [(5, Severity::Low), (6, Severity::Medium)]
        );
    }

    #[test]
    fn ruling_19_paging_new_questions_and_other_agents_are_no_rephrase() {
        let paging: Vec<Event> = (1..=6)
            .map(|page| {
                call(
                    "researcher",
                    "web_search",
                    json!({ "query": WORDINGS[0], "page": page }),
                    json!(format!("page {page} of results")),
                )
            })
            .collect();
        assert_eq!(fired(&Config::default(), &paging), []);
        let subjects = [
            "EU AI act fines for startups",
            "GDPR data protection officer requirements",
            "California privacy law penalties for small firms",
            "UK online safety act scope",
        ];
        let new_questions: Vec<Event> = subjects
            .iter()
            .zip(1..)
            .map(|(query, n)| search(query, n))
            .collect();
        assert_eq!(fired(&Config::default(), &new_questions), []);
        let two_agents: Vec<Event> = WORDINGS
            .iter()
            .zip(1..)
            .map(|(query, n)| {
                let agent = if n % 2 == 0 { "a" } else { "b" };
                call(
                    agent,
                    "web_search",
                    json!({ "query": query }),
                    json!(n.to_string()),
                )
            })
            .collect();
        assert_eq!(fired(&Config::default(), &two_agents), []);
    }

    #[test]
    fn rephrase_after_is_set_per_tool_and_exclude_turns_it_off() {
        let events: Vec<Event> = WORDINGS
            .iter()
            .zip(1..)
            .map(|(query, n)| search(query, n))
            .collect();
        let mut config = Config::default();
        config.tools.per_tool.insert(
            "web_search".to_owned(),
            loopguard_config::PerToolConfig {
                rephrase_after: Some(5),
                ..Default::default()
            },
        );
        assert_eq!(fired(&config, &events), [(6, Severity::Low)]);
        config.tools.per_tool.insert(
            "web_search".to_owned(),
            loopguard_config::PerToolConfig {
                exclude: true,
                ..Default::default()
            },
        );
        assert_eq!(fired(&config, &events), []);
    }

    #[test]
    fn the_directive_lists_the_wordings_and_the_state_is_bounded() {
        let events: Vec<Event> = (0..40)
            .map(|n| search(WORDINGS[n % WORDINGS.len()], n as u32))
            .collect();
        let detector = ToolRephrase::new(&Config::default());
        let mut state = ToolRephraseState::default();
        let mut last = Vec::new();
        for (event, line) in events.iter().zip(1..) {
            last.clear();
            detector.observe(&mut state, &ObservedEvent::new(line, event), &mut last);
        }
        let [detection] = last.as_slice() else {
            panic!("the 40th call fires: {last:?}");
        };
        assert_eq!(detection.agents, ["researcher"]);
        assert_eq!(detection.evidence.len(), WORDINGS_KEPT);
        assert_eq!(detection.evidence[0], 1, "the first wording is kept");
        let directive = detection.directive.as_deref().unwrap_or_default();
        assert!(
            directive.contains("\"EU AI act fines for startups\" (line 1)"),
            "{directive}"
        );
        assert!(directive.contains("change the approach"), "{directive}");
        let queries = &state.agents[0];
        assert!(queries.run.found.len() <= FOUND_KEPT);
        assert!(queries.last.len() <= TOOLS_KEPT);
    }

    #[test]
    fn content_words_leave_out_stop_words_and_stem() {
        assert!(share_content_words(
            "find recent papers on retrieval augmented generation",
            "latest paper about retrieval augmented generation"
        ));
        assert!(!share_content_words(
            "GDPR data protection officer requirements",
            "EU AI act fines for startups"
        ));
        assert!(!share_content_words("the of and", "a an the"));
    }

    #[test]
    fn references_are_urls_paths_and_ids() {
        let tokens: Vec<String> =
            reference_tokens("See https://x.test/a/, src/lib.rs and KB-10432. Or none.").collect();
        assert_eq!(tokens, ["https://x.test/a", "src/lib.rs", "kb-10432"]);
    }
}
