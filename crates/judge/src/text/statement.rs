//! Whether a text asks for work or states something: a report of work
//! done, a cause found or a figure measured is an answer, not a repeat of
//! its question; and whether a text asks for the same work once more, for
//! another target ("... too", "also ...").

use std::sync::LazyLock;

use super::identifiers::identifier;
use super::{model_input, trim_punctuation};
use crate::normalize::stem;
use crate::words::{IMPERATIVE_VERBS, STATEMENT_OPENERS};

/// Whether `text` says it asks for work done or asked for already, once
/// more for something else: "too" closing a clause ("the Windows
/// installer hangs on the last step too; chase it"), "as well" (not "as
/// well as", which is "and"), "likewise", or "also" inside a sentence
/// ("the Lisbon shop is also seeing timeouts"). An "Also" that opens a
/// sentence adds a part to the same request ("Also list the ones that
/// charge per seat"), and "too" before a word is a degree ("far too
/// slow"). Like [`tokenize`](crate::tokenize), it reads what the model
/// reads of the text.
pub fn adds_to_earlier_work(text: &str) -> bool {
    let lower = model_input(text).to_lowercase();
    let tokens: Vec<&str> = lower.split_whitespace().collect();
    let word = |at: usize| tokens.get(at).map(|raw| trim_punctuation(raw));
    tokens.iter().enumerate().any(|(at, raw)| {
        let opens_sentence = at
            .checked_sub(1)
            .and_then(|before| tokens.get(before))
            .is_none_or(|before| before.ends_with(['.', '?', '!', ':', ';']));
        match trim_punctuation(raw) {
            "too" => raw.ends_with([',', '.', ';', ':', '!', '?', ')']) || at + 1 == tokens.len(),
            "likewise" => true,
            "also" => !opens_sentence,
            "as" => word(at + 1) == Some("well") && word(at + 2) != Some("as"),
            _ => false,
        }
    })
}

/// Whether `text` reads as a report (of work done, a cause found or a
/// figure measured) rather than a request or a topic: it asks nothing
/// (no question mark, no "please", no "can you", no "I need", no
/// imperative first word) and states a cause, an outcome, what someone
/// did, or what a figure was. Like [`tokenize`](crate::tokenize), it
/// reads what the model reads of the text.
pub fn reads_as_report(text: &str) -> bool {
    let lower = model_input(text).to_lowercase();
    let Some(words) = words_if_no_question(&lower) else {
        return false;
    };
    if asks(text, &lower, &words) {
        return false;
    }
    states_a_cause(&words)
        || states_a_figure_or_state(&words)
        || someone_did(&words)
        || reports_in_short(&lower, &words)
}

/// Whether a text that has no question mark asks all the same: it opens
/// with "please", "can", "could" or an imperative (not when it opens with
/// an identifier: "test_refund_rounding is flaky because ..." does
/// not open with a verb, whatever the identifier's first part is), a
/// later clause instructs, it says "please", "I need", or passes someone
/// else's need on.
fn asks(text: &str, lower: &str, words: &[&str]) -> bool {
    let opens_with_identifier = model_input(text)
        .split_whitespace()
        .next()
        .is_some_and(|first| identifier(trim_punctuation(first)).is_some());
    let opens_asking = matches!(
        words.first().copied(),
        Some("please" | "can" | "could" | "would" | "will" | "pls" | "kindly" | "let's")
    ) || !opens_with_identifier
        && words.first().is_some_and(|first| is_imperative(first));
    opens_asking
        || instructs_after_context(lower)
        || words.iter().any(|w| matches!(*w, "please" | "pls" | "plz"))
        || words.windows(2).any(|pair| {
            matches!(pair[0], "i" | "we") && matches!(pair[1], "need" | "want" | "would")
        })
        || someone_wants(words)
}

/// Whether the words give a cause or an outcome ("because", "fixed",
/// "root cause", "due to"). "due to" gives a cause; "due by Nov 22" a
/// deadline.
fn states_a_cause(words: &[&str]) -> bool {
    const CAUSES: [&str; 9] = [
        "because", "caused", "turned", "found", "root", "fixed", "done", "resolved", "explains",
    ];
    words.windows(2).any(|pair| pair == ["due", "to"]) || words.iter().any(|w| CAUSES.contains(w))
}

/// Whether the words give a figure measured ("p99 was 412 ms", "spend in
/// May was $48,300") or a state reached ("is live", "is now on", "are
/// still rolling out").
fn states_a_figure_or_state(words: &[&str]) -> bool {
    let measured = words.windows(2).any(|pair| {
        matches!(pair[0], "was" | "were" | "is" | "are")
            && pair[1].starts_with(|c: char| c.is_ascii_digit())
    });
    let state = words.windows(2).any(|pair| {
        matches!(pair[0], "is" | "are" | "was" | "were")
            && matches!(pair[1], "live" | "now" | "ready" | "complete" | "finished")
    });
    measured || state
}

/// Whether the words say what someone did: a first person and a past ("I
/// rotated", "we merged", "I've added", "I couldn't").
fn someone_did(words: &[&str]) -> bool {
    words.windows(2).any(|pair| {
        matches!(
            pair[0],
            "i" | "we" | "i've" | "we've" | "ive" | "i’ve" | "we’ve"
        ) && (pair[1].ends_with("ed")
            || matches!(
                pair[1],
                "ran"
                    | "made"
                    | "wrote"
                    | "took"
                    | "put"
                    | "set"
                    | "got"
                    | "did"
                    | "gave"
                    | "couldn't"
                    | "couldnt"
                    | "didn't"
                    | "didnt"
                    | "found"
                    | "sent"
            ))
    })
}

/// Whether someone else's need is passed on ("Sales wants a CSV of ...",
/// "Finance needs the figures by Friday", "Legal wants us to check"): a
/// request, as "I need" is. "wants" or "needs" before a figure ("the job
/// needs 4 GB") states a fact.
fn someone_wants(words: &[&str]) -> bool {
    words.windows(2).any(|pair| {
        matches!(pair[0], "wants" | "needs")
            && matches!(
                pair[1],
                "a" | "an" | "the" | "to" | "us" | "you" | "them" | "someone" | "every" | "all"
            )
    })
}

/// Whether a clause after the first opens with a verb in its plain form,
/// as an instruction does ("The error messages are vague. Make each one
/// name the file"): context first, then the request. "See" and "let" are
/// left out: a report ends with them as often ("see PR #412", "let me
/// know").
fn instructs_after_context(lower: &str) -> bool {
    clauses(lower).skip(1).any(|clause| {
        let mut words = clause.split_whitespace().map(trim_punctuation);
        let (Some(opening), next) = (words.next(), words.next()) else {
            return false;
        };
        // A verb of the list used as a noun is followed by a verb ("Fix
        // is deployed", "Build passed"), an instruction by its object.
        let noun_then_verb = next.is_some_and(|next| {
            matches!(
                next,
                "is" | "are"
                    | "was"
                    | "were"
                    | "has"
                    | "had"
                    | "passes"
                    | "passed"
                    | "fails"
                    | "failed"
                    | "works"
                    | "worked"
            )
        });
        !matches!(opening, "see" | "let") && !noun_then_verb && IMPERATIVE_VERBS.contains(&opening)
    })
}

/// Whether a text that asks nothing at its start (no question mark, no
/// "please", no imperative first word) reports in a form of its own: it
/// opens with a verb in the past ("Restarted the worker; the queue
/// drained") or gives figures after a label ("Open P2s by team: billing
/// 3, growth 1"), and no clause of it asks ("...; review it before
/// Friday", "...: why 2 and not 3", "it should exit cleanly"). A topic
/// ("debugging the stuck import job") opens with a gerund and reports
/// nothing.
fn reports_in_short(lower: &str, words: &[&str]) -> bool {
    const ASKING_OPENERS: [&str; 16] = [
        "what", "why", "how", "which", "who", "when", "where", "whether", "is", "are", "do",
        "does", "did", "should", "need", "want",
    ];
    let Some(first) = words.first().copied() else {
        return false;
    };
    if first.ends_with("ing") {
        return false;
    }
    let clause_asks = clauses(lower)
        .filter_map(|clause| clause.split_whitespace().next())
        .map(trim_punctuation)
        .any(|opening| ASKING_OPENERS.contains(&opening) || is_imperative(opening))
        || words.iter().any(|word| matches!(*word, "should" | "must"));
    if clause_asks {
        return false;
    }
    // "Restarted", "Deployed".
    let opens_in_past = is_past_form(first);
    // "Soak test at 300 RPS: error rate 0.1%, p99 910 ms".
    // The label ends at a colon, not at one inside a time ("02:10").
    let figures_after_label = label_colon(lower).is_some_and(|at| {
        let rest = &lower[at + 1..];
        rest.split_whitespace()
            .filter(|word| word.starts_with(|c: char| c.is_ascii_digit() || c == '$'))
            .count()
            >= 2
    });
    opens_in_past || figures_after_label
}

/// Whether the colon at byte `at` of `text` is inside a time or a ratio
/// ("02:10", "16:9"): digits on both sides.
fn colon_between_digits(text: &str, at: usize) -> bool {
    let bytes = text.as_bytes();
    at > 0 && bytes[at - 1].is_ascii_digit() && bytes.get(at + 1).is_some_and(u8::is_ascii_digit)
}

/// The clauses of a lowercase text: split at sentence ends, semicolons,
/// colons and line breaks, but not at a colon between digits ("from
/// 02:10 to 02:40 UTC. See if ..." is two clauses, not four).
fn clauses(lower: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    let mut out = Vec::new();
    for (at, c) in lower.char_indices() {
        let splits = match c {
            '.' | ';' | '!' | '\n' => true,
            ':' => !colon_between_digits(lower, at),
            _ => false,
        };
        if splits {
            out.push(&lower[start..at]);
            start = at + c.len_utf8();
        }
    }
    out.push(&lower[start..]);
    out.into_iter()
}

/// Where the label of "label: figures" ends: the first colon of a
/// lowercase text that is not between digits.
fn label_colon(lower: &str) -> Option<usize> {
    lower
        .match_indices(':')
        .map(|(at, _)| at)
        .find(|&at| !colon_between_digits(lower, at))
}

/// The words of a lowercase text (apostrophes kept), or `None` when it
/// has a question mark: a question asks, whatever its words.
fn words_if_no_question(lower: &str) -> Option<Vec<&str>> {
    (!lower.contains('?')).then(|| {
        lower
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
            .filter(|w| !w.is_empty())
            .collect()
    })
}

/// Whether `text` states something rather than asks for it: it
/// [reads as a report](reads_as_report), or it asks nothing (no question
/// mark, no "please", no "can you", no "I need") and opens as a statement
/// does, with an article, a pronoun, "there" or a number
/// (`data/statement-openers.txt`: "The 2023 van hauls 1,500 kg", "I
/// clicked 'Checkout'", "4,000 - 2,500 = 1,500"), never as an
/// instruction does, with its verb. It reads what the model reads of the
/// text ([`model_input`]).
pub fn reads_as_statement(text: &str) -> bool {
    reads_as_report(text) || states_without_reporting(text)
}

/// Whether `text`, read as no report, still [states](reads_as_statement)
/// rather than asks.
pub(crate) fn states_without_reporting(text: &str) -> bool {
    let lower = model_input(text).to_lowercase();
    let Some(words) = words_if_no_question(&lower) else {
        return false;
    };
    let asks = words.iter().any(|w| matches!(*w, "please" | "pls" | "plz"))
        || words.windows(2).any(|pair| {
            matches!(pair[0], "can" | "could" | "would" | "will")
                && matches!(pair[1], "you" | "we" | "someone")
                || matches!(pair[0], "i" | "we") && matches!(pair[1], "need" | "want")
        });
    let opens_as_statement = words.first().is_some_and(|first| {
        first.starts_with(|c: char| c.is_ascii_digit()) || STATEMENT_OPENERS.contains(first)
    });
    !asks && opens_as_statement
}

/// Whether `word` is a verb in the past ("restarted", "fixed"): it ends
/// in "ed" and the stemmer shortens it ("need" and "speed" it does not;
/// "embed" and "shred" are plain verbs it does).
fn is_past_form(word: &str) -> bool {
    word.len() >= 5
        && word.ends_with("ed")
        && !matches!(word, "embed" | "imbed" | "shred")
        && stem(word).as_ref() != word
}

/// Whether `word` (lowercase) opens an instruction: a verb of
/// `data/imperative-verbs.txt` in its plain form ("review", not
/// "reviewed"; a gerund is a topic's opening and is left to the caller).
fn is_imperative(word: &str) -> bool {
    static STEMS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut stems: Vec<String> = IMPERATIVE_VERBS
            .iter()
            .map(|verb| stem(verb).into_owned())
            .collect();
        stems.sort_unstable();
        stems.dedup();
        stems
    });
    if is_past_form(word) {
        return false;
    }
    let stem = stem(word);
    STEMS
        .binary_search_by(|known| known.as_str().cmp(stem.as_ref()))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(texts: &[&str], read: fn(&str) -> bool) -> Vec<String> {
        texts
            .iter()
            .filter(|text| !read(text))
            .map(|text| (*text).to_owned())
            .collect()
    }

    fn none(texts: &[&str], read: fn(&str) -> bool) -> Vec<String> {
        texts
            .iter()
            .filter(|text| read(text))
            .map(|text| (*text).to_owned())
            .collect()
    }

    #[test]
    fn statements_are_told_from_requests_by_how_they_open_and_whether_they_ask() {
        let statements = [
            "The 2023 Vista Cargo can haul 1,500 kg with the 140 hp engine",
            "4,000 - 2,500 = 1,500 kg, so the truck can still carry the load",
            "I clicked 'Checkout'. The cart did not update.",
            "There is no Awards section on the page",
        ];
        assert_eq!(all(&statements, reads_as_statement), Vec::<String>::new());
        let requests = [
            "Go to the 'Live albums' section and list every track",
            "The checkout page: can you find the shipping fee?",
            "The list, please, with one row per region",
            "Find the yearly price of the Team plan",
            "I need the yearly price of the Team plan",
        ];
        assert_eq!(none(&requests, reads_as_statement), Vec::<String>::new());
    }

    #[test]
    fn reports_and_requests_are_told_apart() {
        let reports = [
            "The nightly backup failed because the disk filled up; I cleared the old snapshots.",
            "p95 for the search API over the last 3 days was 280 ms.",
            "3.1.0 is live in eu-west-1; us-west-2 is still rolling out.",
            "I couldn't reproduce #4410 on Windows 11; I've asked the reporter for a trace.",
            // An identifier first is no imperative, whatever its first part.
            "test_refund_rounding is flaky because two tests share one temp directory.",
            "The weekly sync failed due to an expired API token.",
            // A report may still end by pointing somewhere.
            "Fixed the deadlock in the queue; see PR #518.",
            "The sync failed because the token expired. Let me know if it fails again.",
            "The build failed because the cache expired. Fix is deployed.",
            "Fixed the flaky login test; it passed 40 runs in a row.",
            // A need of a figure is a fact.
            "The build job needs 8 GB; I raised the limit and it passed.",
        ];
        assert_eq!(all(&reports, reads_as_report), Vec::<String>::new());
        let requests = [
            "Can you find out why last night's backup job broke?",
            "Test the refund flow again, because it broke after the upgrade.",
            "Summarize the main points of the articles I sent.",
            "We got another ticket today: the invoice PDF is blank. Please investigate.",
            "I need a list of customers that upgraded last quarter.",
            "Archive the Jira boards for the projects we wrapped up in 2022.",
            // "due by" gives a deadline, not a cause.
            "In Workday, open the Q1 review cycle with peer feedback starting on Mar 3 and manager notes due by Mar 21.",
            // "I sent" in a request is no report; "give" opens an instruction.
            "Give me a short summary of what the two reports I sent concluded.",
            "Fix the flaky login test; it failed three times today.",
            // Context, then an instruction.
            "The backup tool's logs are noisy. Make every line name the volume, and keep the log levels as they are.",
            "The scheduler is stuck again; restart it and tell me when it recovers.",
            // Someone else's need passed on.
            "Marketing wants a CSV of every trial we started between March and May.",
            "Legal needs the Q3 numbers we sent to the auditors.",
        ];
        assert_eq!(none(&requests, reads_as_report), Vec::<String>::new());
    }

    #[test]
    fn a_report_in_short_opens_in_the_past_or_gives_figures_after_a_label() {
        let reports = [
            "Restarted the search indexer; queue depth dropped from 80k to 0 within five minutes.",
            "Open P2s by team: billing 3, growth 1, infra 6, data 2.",
            "Soak test at 300 RPS: error rate 0.1%, p99 910 ms.",
            "Nightly import runs: 2 failed, 38 passed.",
        ];
        assert_eq!(all(&reports, reads_as_report), Vec::<String>::new());
        let not_reports = [
            // A clause that asks, an instruction or a question.
            "Updated the playbook; review it before the release meeting.",
            "Deployed 3.1.0 to staging: why is p99 at 1200 ms and not 500 ms",
            "Restarted the indexer, but it should replay 80k events first.",
            // A topic opens with a gerund; "need", "embed", "speed" are no
            // past forms.
            "profiling the slow search endpoint: 4 retries, 1 timeout",
            "Speed up the thumbnail job.",
            "Embed the uptime chart in the handbook.",
            "Need the totals by country: 2022 and 2023.",
            // Figures in a request.
            "Set the CPU limits: 2 cores for workers and 4 cores for the API.",
            // Times are no figures after a label, and "see" asks.
            "The import stalled from 03:15 to 03:45 UTC. See if the row lock was held.",
            "The import stalled from 03:15 to 03:45 UTC, 2 retries each time.",
        ];
        assert_eq!(none(&not_reports, reads_as_report), Vec::<String>::new());
    }

    #[test]
    fn a_colon_between_digits_is_a_time_not_a_label() {
        let label = |text: &'static str| label_colon(text).map(|at| &text[..at]);
        assert_eq!(
            label("soak test at 300 rps: error rate 0.1%, p99 910 ms"),
            Some("soak test at 300 rps")
        );
        assert_eq!(label("from 03:15 to 03:45 utc"), None);
        assert_eq!(
            label("between 03:15 and 03:45: 97 errors"),
            Some("between 03:15 and 03:45")
        );
        let split: Vec<&str> =
            clauses("lag grew from 03:15 to 03:45 utc. see if the row lock was held").collect();
        assert_eq!(
            split,
            [
                "lag grew from 03:15 to 03:45 utc",
                " see if the row lock was held"
            ]
        );
        assert!(is_imperative("see"));
    }

    #[test]
    fn work_added_for_another_target_is_read_from_too_also_and_as_well() {
        let adds = [
            "The Android build crashes on resume too; track that down.",
            "Deel's June run for contractors is due as well; get it out.",
            "Northwind's SSO is also getting 403s from our SAML endpoint.",
            "The staging cluster needs the same patch, likewise.",
            "Make the audit logs expire after 365 days too",
        ];
        assert_eq!(all(&adds, adds_to_earlier_work), Vec::<String>::new());
        let asks = [
            // A degree, not another target.
            "OrderService has grown way too big; split it up.",
            // A part added to the same request.
            "Compare log pricing on Loki and Datadog. Also point out the ones that bill per host.",
            "Also check the backoff logic in the downloader.",
            // "As well as" is "and".
            "Compare Loki as well as Datadog on log pricing.",
            "Fix the crash on resume in the Android app.",
        ];
        assert_eq!(none(&asks, adds_to_earlier_work), Vec::<String>::new());
    }

    #[test]
    fn two_statements_are_never_a_report_against_a_request() {
        let report = "I ran the export: 3,412 records for June.";
        let statement = "The export gives 3,412 records for June.";
        assert!(reads_as_report(report));
        assert!(!reads_as_report(statement) && reads_as_statement(statement));
    }
}
