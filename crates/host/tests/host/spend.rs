//! Spend per task and budgets (ruling 18): the totals and the spend in
//! loops equal the sums by hand, a budget is crossed at the exact line and
//! a human grants a fresh allowance.

use std::collections::BTreeSet;

use loopguard_config::Config;
use loopguard_core_types::{Action, Decision, Event, Report, TaskStatus, kinds};
use loopguard_host::{LoopGuard, SPEND_LOOP_KINDS, replay};
use serde_json::{Value, json};

const PRICES: &str = "[pricing.small-model]\ninput_per_mtok = 0.5\noutput_per_mtok = 1.5\n";

fn config(extra: &str) -> Config {
    Config::from_toml_str(&format!("{PRICES}{extra}")).unwrap_or_else(|e| panic!("{e}"))
}

/// A small deterministic generator (a linear congruential one), so that
/// the trace is the same on every run.
struct Numbers(u64);

impl Numbers {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

/// A trace of two tasks with `usage` on every line: work, a tool called
/// again and again, a failure repeated, a handoff ping-pong. Half the lines
/// give their own cost, the others a priced model or none.
fn trace_with_usage_everywhere() -> String {
    let mut numbers = Numbers(7);
    let mut lines = Vec::new();
    for step in 0..60u64 {
        let task = if step % 3 == 0 { "T2" } else { "T1" };
        let mut event = match numbers.below(5) {
            0 => {
                json!({"type":"turn","agent":"coder","output":format!("step {step}"),"success":true})
            }
            1 => {
                json!({"type":"tool_call","agent":"coder","tool":"search","args":{"q":"why is the build red"},"result":"no results"})
            }
            2 => json!({"type":"failure","agent":"coder","error":"E0308 mismatched types"}),
            3 => {
                json!({"type":"handoff","from":"coder","to":"reviewer","content":"please review the same patch"})
            }
            _ => {
                json!({"type":"handoff","from":"reviewer","to":"coder","content":"same comments as before"})
            }
        };
        event["task"] = json!(task);
        let input = numbers.below(4000);
        let output = numbers.below(900);
        event["usage"] = match numbers.below(3) {
            0 => {
                json!({"input_tokens": input, "output_tokens": output, "cost_usd": numbers.below(5000) as f64 / 100_000.0})
            }
            1 => json!({"input_tokens": input, "output_tokens": output, "model": "small-model-v2"}),
            _ => json!({"input_tokens": input, "output_tokens": output, "model": "unpriced"}),
        };
        lines.push(event.to_string());
    }
    lines.join("\n") + "\n"
}

/// What one line spent, by hand: its own cost, else its tokens at the
/// price of `PRICES`, else none.
fn spend_of(line: &Value) -> (u64, u64, Option<f64>) {
    let usage = &line["usage"];
    let input = usage["input_tokens"].as_u64().unwrap_or(0);
    let output = usage["output_tokens"].as_u64().unwrap_or(0);
    let cost = usage["cost_usd"].as_f64().or_else(|| {
        usage["model"]
            .as_str()
            .filter(|model| model.starts_with("small-model"))
            .map(|_| (input as f64 * 0.5 + output as f64 * 1.5) / 1e6)
    });
    (input, output, cost)
}

fn sum<'a>(lines: impl Iterator<Item = &'a Value>) -> (u64, u64, f64) {
    lines.map(spend_of).fold((0, 0, 0.0), |acc, (i, o, c)| {
        (acc.0 + i, acc.1 + o, acc.2 + c.unwrap_or(0.0))
    })
}

async fn report_of(trace: &str, config: Config) -> Report {
    let guard = LoopGuard::new(config).unwrap_or_else(|e| panic!("{e}"));
    replay(&guard, trace.as_bytes(), |_| {})
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn totals_and_the_spend_in_loops_equal_the_sums_by_hand() {
    let trace = trace_with_usage_everywhere();
    let lines: Vec<Value> = trace
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let report = report_of(&trace, config("")).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let mut loop_lines_seen = 0;
    for task in &report.tasks {
        let usage = task
            .usage
            .unwrap_or_else(|| panic!("{} has usage", task.task));
        let own = lines
            .iter()
            .filter(|line| line["task"] == task.task.as_str());
        let (input, output, cost) = sum(own);
        assert_eq!(
            (usage.total.input_tokens, usage.total.output_tokens),
            (input, output)
        );
        let reported = usage.total.cost_usd.unwrap_or_else(|| panic!("priced"));
        assert!((reported - cost).abs() < 1e-6, "{reported} != {cost}");

        let named: BTreeSet<u64> = task
            .detections
            .iter()
            .filter(|detection| SPEND_LOOP_KINDS.contains(&&*detection.kind))
            .flat_map(|detection| detection.evidence.iter().copied())
            .collect();
        loop_lines_seen += named.len();
        let (input, output, cost) = sum(named.iter().map(|line| &lines[*line as usize - 1]));
        let in_loops = usage.in_loops;
        assert_eq!(
            (in_loops.input_tokens, in_loops.output_tokens),
            (input, output),
            "{}: lines {named:?}",
            task.task
        );
        let reported = in_loops.cost_usd.unwrap_or(0.0);
        assert!((reported - cost).abs() < 1e-6, "{reported} != {cost}");
    }
    assert!(
        loop_lines_seen > 10,
        "the trace loops: {loop_lines_seen} lines named"
    );
}

async fn observe_all(guard: &LoopGuard, events: &[String]) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for (index, line) in events.iter().enumerate() {
        let event = Event::from_json(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        decisions.push(guard.observe_line(index as u64 + 1, event).await);
    }
    decisions
}

fn costly_turn(task: &str, cost: f64) -> String {
    json!({"type":"turn","task":task,"agent":"writer","output":"a new draft","success":true,
           "usage":{"input_tokens":1000,"output_tokens":100,"cost_usd":cost}})
    .to_string()
}

#[tokio::test]
async fn a_budget_is_crossed_at_its_exact_line_and_a_human_grants_a_fresh_allowance() {
    let guard =
        LoopGuard::new(config("[budget]\nmax_cost_usd = 0.10\n")).unwrap_or_else(|e| panic!("{e}"));
    let mut events: Vec<String> = (0..5).map(|_| costly_turn("T", 0.03)).collect();
    events.push(json!({"type":"human","task":"T","note":"go on"}).to_string());
    events.extend((0..4).map(|_| costly_turn("T", 0.03)));
    let decisions = observe_all(&guard, &events).await;
    let budget_lines: Vec<u64> = decisions
        .iter()
        .filter(|decision| decision.detections.iter().any(|d| d.kind == kinds::BUDGET))
        .map(|decision| decision.line)
        .collect();
    // 0.12 > 0.10 on the 4th turn; then 0.12 again since the grant at line 6.
    assert_eq!(budget_lines, [4, 10]);

    let crossing = &decisions[3].detections[0];
    assert_eq!(
        (crossing.action, crossing.kind.as_ref()),
        (Action::Escalate, kinds::BUDGET)
    );
    let budget = crossing
        .budget
        .as_deref()
        .unwrap_or_else(|| panic!("names the budget"));
    assert_eq!(budget.limit, "budget.max_cost_usd");
    assert_eq!(budget.allowed, 0.10);
    assert!((budget.spent - 0.12).abs() < 1e-9, "{}", budget.spent);
    assert_eq!(budget.usage.total.input_tokens, 4000);
    assert_eq!(decisions[3].status, TaskStatus::Escalated);
    assert_eq!(decisions[3].loop_count, 0, "a budget is no loop");
    assert!(
        crossing.reason.contains("budget.max_cost_usd"),
        "{}",
        crossing.reason
    );
    // Gated: the next event is answered escalate, with no second detection.
    assert_eq!(decisions[4].action, Action::Escalate);
    assert!(decisions[4].detections.is_empty());
    // The human lifts the gate; the allowance counts from there.
    assert_eq!(decisions[5].status, TaskStatus::Active);
    assert_eq!(decisions[8].action, Action::None, "0.09 since the grant");
    let again = decisions[9].detections[0]
        .budget
        .as_deref()
        .unwrap_or_else(|| panic!("again"));
    assert!((again.spent - 0.12).abs() < 1e-9, "{}", again.spent);
    let total = decisions[9].usage.unwrap_or_else(|| panic!("usage")).total;
    assert!(
        (total.cost_usd.unwrap_or(0.0) - 0.27).abs() < 1e-9,
        "resets do not clear spend"
    );
}

#[tokio::test]
async fn the_loop_budget_names_the_costliest_loops_and_a_normal_task_of_the_same_spend_runs_on() {
    let guard = LoopGuard::new(config("[budget]\nmax_loop_cost_usd = 0.05\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    let call = |task: &str, query: &str| {
        json!({"type":"tool_call","task":task,"agent":"researcher","tool":"search",
               "args":{"q":query},"result":"no results","usage":{"input_tokens":2000,"output_tokens":50,"cost_usd":0.02}})
        .to_string()
    };
    let events = vec![
        call("LOOP", "flaky login test"),
        call("WORK", "login test fixture"),
        call("LOOP", "flaky login test"),
        call("WORK", "session cookie expiry"),
        call("LOOP", "flaky login test"),
        call("WORK", "timezone of the test clock"),
    ];
    let decisions = observe_all(&guard, &events).await;
    let crossing = decisions[4]
        .detections
        .iter()
        .find(|detection| detection.kind == kinds::BUDGET)
        .unwrap_or_else(|| panic!("the looping task crosses: {:?}", decisions[4]));
    let budget = crossing
        .budget
        .as_deref()
        .unwrap_or_else(|| panic!("named"));
    assert_eq!(budget.limit, "budget.max_loop_cost_usd");
    assert_eq!(budget.costliest_loops.len(), 1);
    assert_eq!(budget.costliest_loops[0].kind, kinds::TOOL_REPEAT);
    assert_eq!(budget.costliest_loops[0].evidence, [1, 3, 5]);
    assert_eq!(crossing.evidence, [1, 3, 5]);
    for decision in decisions.iter().filter(|decision| decision.task == "WORK") {
        assert_eq!(decision.action, Action::None, "{decision:?}");
    }
    let work = decisions[5].usage.unwrap_or_else(|| panic!("usage"));
    assert!((work.total.cost_usd.unwrap_or(0.0) - 0.06).abs() < 1e-9);
    assert_eq!(work.in_loops.cost_usd, None, "no loop, no spend in loops");
}

#[tokio::test]
async fn tokens_without_a_price_add_tokens_only_and_a_task_type_has_its_own_budget() {
    let guard = LoopGuard::new(config(
        "[budget]\nmax_tokens = 5000\n[budget.task_types.research]\nmax_tokens = 20000\n",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let turn = |task: &str, task_type: &str| {
        json!({"type":"turn","task":task,"task_type":task_type,"agent":"a","output":"x","success":true,
               "usage":{"input_tokens":2000,"output_tokens":500,"model":"unpriced"}})
        .to_string()
    };
    let events: Vec<String> = (0..3)
        .flat_map(|_| [turn("CODE", "coding"), turn("RESEARCH", "research")])
        .collect();
    let decisions = observe_all(&guard, &events).await;
    let crossed: Vec<(u64, String)> = decisions
        .iter()
        .flat_map(|decision| {
            decision
                .detections
                .iter()
                .filter_map(|d| d.budget.as_deref())
                .map(|budget| (decision.line, budget.limit.clone()))
        })
        .collect();
    assert_eq!(crossed, [(5, "budget.max_tokens".to_owned())]);
    let research = decisions[5].usage.unwrap_or_else(|| panic!("usage"));
    assert_eq!(research.total.tokens(), 7500);
    assert_eq!(
        research.total.cost_usd, None,
        "an unpriced model adds tokens only"
    );
}

#[tokio::test]
async fn a_bad_usage_is_a_line_error_naming_the_field_and_the_rest_is_read() {
    let trace = [
        costly_turn("T", 0.01),
        r#"{"type":"turn","task":"T","agent":"a","output":"x","success":true,"usage":{"output_tokens":1.5}}"#.to_owned(),
        costly_turn("T", 0.02),
    ]
    .join("\n");
    let report = report_of(&trace, Config::default()).await;
    assert_eq!(report.events, 2);
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].line, 2);
    assert!(
        report.errors[0].error.contains("\"usage.output_tokens\""),
        "{}",
        report.errors[0].error
    );
    let usage = report.tasks[0].usage.unwrap_or_else(|| panic!("usage"));
    assert_eq!(usage.total.input_tokens, 2000);
}

#[tokio::test]
async fn a_trace_without_usage_reports_none() {
    let trace = r#"{"type":"failure","task":"T","agent":"a","error":"boom"}"#;
    let report = report_of(trace, config("[budget]\nmax_tokens = 10\n")).await;
    assert_eq!(report.tasks[0].usage, None);
    let json = serde_json::to_value(&report).unwrap_or_else(|e| panic!("{e}"));
    assert!(json["tasks"][0].get("usage").is_none(), "{json}");
}
