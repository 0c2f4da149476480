"""The binding: decisions equal the Rust engine's, bad input, reports, threads,
asyncio, a restart on SQLite, the model."""

import asyncio
import json
import os
import pathlib
import threading

import pytest

import loopguard
from conftest import read_trace


def hop(task, a, b, **extra):
    return {"type": "handoff", "task": task, "from": a, "to": b, **extra}


EXPECTED = os.environ.get("LOOPGUARD_PY_EXPECTED")
NAMES = [n for n in os.environ.get("LOOPGUARD_PY_TRACE_NAMES", "").split(",") if n]


@pytest.mark.skipif(not EXPECTED, reason="run from `cargo test -p loopguard-python`")
@pytest.mark.parametrize("name", NAMES)
def test_decisions_equal_the_rust_replay(name):
    expected = pathlib.Path(EXPECTED, name).read_text(encoding="utf-8").splitlines()
    lines = read_trace(name)
    assert len(lines) == len(expected)
    guard = loopguard.Guard(semantic=False)
    for number, (line, want) in enumerate(zip(lines, expected), start=1):
        # Half the events as dicts, half as JSON text: both paths agree.
        if number % 2:
            decision = guard.observe(json.loads(line))
        else:
            decision = guard.observe_json(line)
        assert decision.to_dict() == json.loads(want), f"{name} line {number}"
        assert json.loads(decision.to_json()) == json.loads(want)
    assert NAMES, "no traces named"


def test_decision_attributes_are_typed():
    guard = loopguard.Guard(semantic=False)
    for a, b in [("planner", "coder"), ("coder", "planner")] * 2:
        decision = guard.observe(hop("T", a, b))
    assert decision.action == "break_cycle"
    assert decision.status == "active"
    assert decision.loop_count == 0
    assert decision.line == 4
    assert decision.task == "T"
    assert decision.directive is None
    assert decision.errors == []
    assert decision.degraded is False
    [detection] = decision.detections
    assert isinstance(detection, loopguard.Detection)
    assert detection.kind == "agent_pair"
    assert detection.severity == "low"
    assert detection.action == "break_cycle"
    assert detection.evidence == [1, 2, 3, 4]
    assert detection.skip_agent == "planner"
    assert "exchanged work 4 times" in detection.reason
    assert detection.to_dict()["kind"] == "agent_pair"
    assert repr(decision).startswith('Decision(task="T", line=4, action="break_cycle"')
    assert "agent_pair" in repr(detection)


def test_a_bad_event_names_the_field_and_changes_nothing():
    guard = loopguard.Guard(semantic=False)
    guard.observe(hop("T", "planner", "coder"))
    before = guard.report()
    bad = [
        ({"type": "handoff", "task": "T", "from": "coder"}, '"to"'),
        ({"task": "T"}, '"type"'),
        ({"type": "teleport", "task": "T"}, "teleport"),
        ({"type": "handoff", "from": "a", "to": "b"}, '"task"'),
        (hop("T", "a", "b", content={1, 2}), '"content"'),
        (hop("T", "a", "b", meta={"x": [1, float("nan")]}), '"meta.x[1]"'),
        (hop("T", "a", "b", meta={1: "x"}), '"meta"'),
        (["not", "a", "dict"], "expected a dict"),
    ]
    for event, field in bad:
        with pytest.raises(loopguard.EventError) as caught:
            guard.observe(event)
        assert field in str(caught.value), (event, str(caught.value))
        assert isinstance(caught.value, loopguard.LoopguardError)
    with pytest.raises(loopguard.EventError, match="invalid JSON"):
        guard.observe_json("{not json")
    assert guard.report() == before
    # The next good event is the second one: no number was taken.
    assert guard.observe(hop("T", "coder", "planner")).line == 2


def test_human_and_completed_reset_the_task():
    guard = loopguard.Guard(semantic=False)
    failure = {"type": "failure", "task": "T", "agent": "coder", "error": "KeyError: 'x'"}
    decisions = [guard.observe(failure) for _ in range(8)]
    gated = [d for d in decisions if d.status == "escalated"]
    assert gated, [d.action for d in decisions]
    assert gated[-1].action == "escalate"
    lifted = guard.human("T", note="fixed the key")
    assert lifted.status == "active"
    assert lifted.loop_count == 0
    done = guard.completed("T")
    assert done.status == "completed"


def test_report_is_the_replay_report():
    guard = loopguard.Guard(semantic=False)
    for a, b in [("planner", "coder"), ("coder", "planner")] * 2:
        guard.observe(hop("T", a, b))
    guard.observe(hop("U", "a", "b"))
    report = guard.report()
    assert report["events"] == 5
    assert [task["task"] for task in report["tasks"]] == ["T", "U"]
    [detection] = report["tasks"][0]["detections"]
    assert detection["kind"] == "agent_pair"
    assert detection["line"] == 4
    assert any("semantic matching is off" in note for note in report["notes"])


def test_config_from_a_dict_and_from_a_file(tmp_path):
    strict = {"cycles": {"max_exchanges": 1}}
    guard = loopguard.Guard(strict, semantic=False)
    guard.observe(hop("T", "a", "b"))
    assert guard.observe(hop("T", "b", "a")).action == "break_cycle"
    path = tmp_path / "loopguard.toml"
    path.write_text("[cycles]\nmax_exchanges = 1\n")
    guard = loopguard.Guard(path, semantic=False)
    guard.observe(hop("T", "a", "b"))
    assert guard.observe(hop("T", "b", "a")).action == "break_cycle"
    with pytest.raises(loopguard.ConfigError, match="window_sec"):
        loopguard.Guard({"cycles": {"window_sec": 3}}, semantic=False)
    with pytest.raises(loopguard.ConfigError, match="no-such.toml"):
        loopguard.Guard(str(tmp_path / "no-such.toml"), semantic=False)
    with pytest.raises(loopguard.ConfigError, match="None, a path or a dict"):
        loopguard.Guard(42, semantic=False)
    with pytest.raises(loopguard.StoreError):
        loopguard.Guard(store="redis://nowhere", semantic=False)


def test_threads_keep_exact_counts():
    guard = loopguard.Guard(semantic=False)
    threads, per_thread = 8, 200
    errors = []

    def work(n):
        try:
            for i in range(per_thread):
                # Distinct agents each time: no loop, every event counted.
                guard.observe(hop(f"task-{n}", f"a{i}", f"b{i}"))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    report = guard.report()
    assert report["events"] == threads * per_thread
    assert len(report["tasks"]) == threads
    # Every event took its own number.
    assert guard.observe(hop("last", "a", "b")).line == threads * per_thread + 1


def test_aobserve_inside_a_running_loop():
    guard = loopguard.Guard(semantic=False)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        decisions = []
        for a, b in [("planner", "coder"), ("coder", "planner")] * 2:
            decisions.append(await guard.aobserve(hop("T", a, b)))
        line = json.dumps(hop("T", "planner", "coder"))
        decisions.append(await guard.aobserve_json(line))
        many = await asyncio.gather(*(guard.aobserve(hop(f"U{i}", "a", "b")) for i in range(16)))
        task.cancel()
        return decisions, many, ticks

    decisions, many, ticks = asyncio.run(main())
    assert [d.action for d in decisions][3] == "break_cycle"
    assert len({d.line for d in many}) == 16
    assert ticks > 0


def test_a_restart_on_sqlite_keeps_the_task(tmp_path):
    url = f"sqlite://{tmp_path / 'loopguard.db'}"
    with loopguard.Guard(store=url, semantic=False) as guard:
        for a, b in [("planner", "coder"), ("coder", "planner"), ("planner", "coder")]:
            guard.observe(hop("T", a, b))
    assert guard.closed
    with pytest.raises(loopguard.LoopguardError, match="closed"):
        guard.observe(hop("T", "a", "b"))
    with loopguard.Guard(store=url, semantic=False) as again:
        decision = again.observe(hop("T", "coder", "planner"))
        # The fourth exchange of the pair, counted across the restart; new
        # numbers after the first run's.
        assert decision.action == "break_cycle"
        assert decision.line == 4
        assert decision.detections[0].evidence == [1, 2, 3, 4]
        report = again.report()
    assert report["events"] == 4
    assert report["tasks"][0]["detections"][0]["kind"] == "agent_pair"


SEMANTIC = bool(os.environ.get("LOOPGUARD_PY_SEMANTIC"))


@pytest.mark.skipif(not SEMANTIC, reason="the embedding model's files are not in models/cache")
def test_semantic_catches_reworded_requests_that_exact_matching_misses():
    lines = read_trace("semantic_collaboration.jsonl")

    def collaboration_lines(guard):
        found = []
        for line in lines:
            decision = guard.observe_json(line)
            if decision.task == "T1" and any(
                d.kind == "collaboration_loop" for d in decision.detections
            ):
                found.append(decision.line)
        return found

    assert collaboration_lines(loopguard.Guard(semantic=True)) == [2, 3, 4]
    assert collaboration_lines(loopguard.Guard(semantic=False)) == []


def t1_collaboration_reasons(guard):
    """The reasons of task T1's collaboration loops in the semantic trace."""
    reasons = []
    for line in read_trace("semantic_collaboration.jsonl"):
        decision = guard.observe_json(line)
        if decision.task == "T1":
            reasons += [d.reason for d in decision.detections if d.kind == "collaboration_loop"]
    return reasons


@pytest.mark.skipif(not SEMANTIC, reason="the embedding model's files are not in models/cache")
def test_the_tuned_encoder_is_loaded_when_the_config_asks_for_it():
    guard = loopguard.Guard({"similarity": {"tuned_encoder": True}}, semantic=True)
    reasons = t1_collaboration_reasons(guard)
    assert len(reasons) == 3, reasons
    assert all("the shipped judge weights for the tuned encoder" in r for r in reasons), reasons


def test_the_tuned_encoder_is_named_and_a_wrong_name_is_a_config_error():
    with pytest.raises(loopguard.ConfigError, match="similarity.tuned_encoder"):
        loopguard.Guard({"similarity": {"tuned_encoder": "bert"}}, semantic=False)


@pytest.mark.skipif(not SEMANTIC, reason="the embedding model's files are not in models/cache")
def test_the_larger_tuned_encoder_is_loaded_when_the_config_names_it():
    # Its base is fetched into the model directory on first use (the Rust
    # tests have usually fetched it by now).
    guard = loopguard.Guard({"similarity": {"tuned_encoder": "mpnet"}}, semantic=True)
    reasons = t1_collaboration_reasons(guard)
    assert len(reasons) == 3, reasons
    assert all(
        "the shipped judge weights for the larger tuned encoder" in r for r in reasons
    ), reasons


def test_decisions_compare_hash_and_pickle_as_their_dicts():
    import copy
    import pickle

    guard = loopguard.Guard(semantic=False)
    failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    decisions = [guard.observe(failure) for _ in range(4)]
    last = decisions[-1]
    for decision in decisions:
        again = pickle.loads(pickle.dumps(decision))
        assert isinstance(again, loopguard.Decision)
        assert again == decision and again is not decision
        assert hash(again) == hash(decision)
        assert again.to_dict() == decision.to_dict()
        assert copy.deepcopy(decision) == decision
    assert loopguard.Decision(last.to_dict()) == last
    assert loopguard.Decision(**last.to_dict()) == last
    assert decisions[0] != last and last != last.to_dict()
    assert len({decisions[0], pickle.loads(pickle.dumps(decisions[0]))}) == 1
    [detection] = last.detections
    assert pickle.loads(pickle.dumps(detection)) == detection
    assert loopguard.Detection(detection.to_dict()) == detection
    assert hash(loopguard.Detection(**detection.to_dict())) == hash(detection)
    assert detection != last
    with pytest.raises(ValueError, match="Decision"):
        loopguard.Decision({"task": "T"})
    with pytest.raises(TypeError, match="dict"):
        loopguard.Decision("not a dict")


def test_stopped_is_true_exactly_when_the_run_must_stop():
    guard = loopguard.Guard(semantic=False)
    failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    decisions = [guard.observe(failure) for _ in range(4)]
    decisions.append(guard.observe(hop("T", "coder", "reviewer")))
    assert [d.stopped for d in decisions] == [d.action in ("escalate", "abort") for d in decisions]
    assert [d.stopped for d in decisions] == [False, False, False, True, True]
    # Behind the gate a decision has no detection and still stops.
    assert decisions[-1].detections == [] and decisions[-1].stopped
    for action in ("none", "warn", "break_cycle", "inject_context", "pivot", "block"):
        assert not loopguard.Decision(decisions[0].to_dict(), action=action).stopped
    assert loopguard.Decision(decisions[0].to_dict(), action="abort").stopped


def test_human_and_completed_refuse_a_task_the_guard_never_saw():
    guard = loopguard.Guard(semantic=False)
    guard.observe(hop("T", "planner", "coder"))
    before = guard.report()
    for reset in (guard.human, guard.completed):
        with pytest.raises(loopguard.UnknownTaskError, match='"unknown-task"') as caught:
            reset("unknown-task")
        assert isinstance(caught.value, loopguard.LoopguardError)
    assert guard.report() == before
    assert guard.status("unknown-task") is None
    # A known task is reset as before.
    assert guard.human("T").status == "active"
    assert guard.completed("T").status == "completed"


def test_human_knows_a_task_from_the_store_after_a_restart(tmp_path):
    url = f"sqlite://{tmp_path / 'loopguard.db'}"
    failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    with loopguard.Guard(store=url, semantic=False) as guard:
        assert [guard.observe(failure) for _ in range(4)][-1].stopped
    with loopguard.Guard(store=url, semantic=False) as again:
        assert again.status("T") == "escalated"
        assert again.gate("T").stopped
        assert again.human("T", note="fixed").status == "active"
        assert again.gate("T") is None
        with pytest.raises(loopguard.UnknownTaskError):
            again.human("U")


def test_status_and_gate_say_whether_a_task_is_stopped():
    guard = loopguard.Guard(semantic=False)
    assert guard.status("T") is None and guard.gate("T") is None
    guard.observe(hop("T", "planner", "coder"))
    assert guard.status("T") == "active" and guard.gate("T") is None
    failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    stopped = [guard.observe(failure) for _ in range(4)][-1]
    gate = guard.gate("T")
    assert guard.status("T") == "escalated"
    assert gate.action == "escalate" and gate.stopped and gate.status == "escalated"
    assert gate.task == "T" and gate.line == 0 and gate.detections == []
    assert gate.loop_count == stopped.loop_count
    assert "escalated" in loopguard.stop_reason(gate)
    # Asking changes nothing: no event was observed.
    assert guard.report()["events"] == 5


def test_usage_is_summed_per_task_and_read_as_decision_usage():
    prices = {"pricing": {"gpt-4o-mini": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}}
    guard = loopguard.Guard(prices, semantic=False)
    spent = {"input_tokens": 1000, "output_tokens": 100, "model": "gpt-4o-mini"}
    first = guard.observe(hop("T", "a", "b", usage=spent))
    assert first.usage["input_tokens"] == 1000 and first.usage["output_tokens"] == 100
    assert first.usage["cost_usd"] == pytest.approx(1000 * 2e-6 + 100 * 8e-6)
    assert first.usage["in_loops"]["input_tokens"] == 0
    # An event without usage still reports the task's spend; the dict is
    # the decision's own `usage` field.
    second = guard.observe(hop("T", "b", "a"))
    assert second.usage == first.usage == second.to_dict()["usage"]
    done = guard.completed("T", usage={"input_tokens": 500, "output_tokens": 50, "cost_usd": 0.5})
    assert (done.usage["input_tokens"], done.usage["output_tokens"]) == (1500, 150)
    assert done.usage["cost_usd"] == pytest.approx(0.5028)
    # A task no usage ever reached has none; nor has any detection a budget.
    other = guard.observe(hop("U", "a", "b"))
    assert other.usage is None and "usage" not in other.to_dict()
    assert loopguard.Decision(done.to_dict()).usage == done.usage


def test_completed_usage_is_checked_like_an_event_s():
    guard = loopguard.Guard(semantic=False)
    guard.observe(hop("T", "a", "b"))
    with pytest.raises(loopguard.EventError, match="usage.input_tokens"):
        guard.completed("T", usage={"input_tokens": -3})
    with pytest.raises(loopguard.EventError, match="usage"):
        guard.completed("T", usage=[1, 2])
    assert guard.status("T") == "active"


def test_a_budget_detection_names_the_limit_and_the_spend():
    guard = loopguard.Guard({"budget": {"max_tokens": 2500}}, semantic=False)
    spent = {"input_tokens": 1000, "output_tokens": 100}
    decisions = [
        guard.observe({"type": "tool_call", "task": "T", "agent": "a", "tool": "search",
                       "args": {"q": f"query {n}"}, "result": f"result {n}", "usage": spent})
        for n in range(3)
    ]
    assert [d.action for d in decisions] == ["none", "none", "escalate"]
    [detection] = decisions[-1].detections
    assert detection.kind == "budget" and detection.action == "escalate"
    budget = detection.budget
    assert budget == detection.to_dict()["budget"]
    assert budget["limit"] == "budget.max_tokens"
    assert (budget["allowed"], budget["spent"]) == (2500, 3300)
    assert budget["usage"] == decisions[-1].usage
    assert budget["costliest_loops"] == []
    assert decisions[0].detections == [] and guard.status("T") == "escalated"
    assert all(d.budget is None for d in guard.observe(hop("V", "a", "b")).detections)
