"""The per-event cost of loopguard from Python, against the same engine from Rust.

Run by hand (a release wheel is the fair comparison)::

    maturin build --release -m crates/python/Cargo.toml -o target/wheels
    python -m venv /tmp/lg && /tmp/lg/bin/pip install target/wheels/loopguard_rs-*.whl
    /tmp/lg/bin/python crates/python/bench/observe.py target/observe-trace.jsonl
    cargo bench -p loopguard-python --bench observe -- target/observe-trace.jsonl

The script writes the trace it times (deterministic: 100,000 events over 1,000
interleaved tasks, handoffs, tool calls and failures, one event in 25 a repeat)
to the path given, then times ``Guard.observe`` (a dict per event),
``Guard.observe_json`` (a JSON line per event) and, for scale, ``json.dumps``
alone. The Rust bench replays the same file through the same engine
(``Guard(semantic=False)``'s): the difference is the binding's overhead.
"""

import json
import random
import sys
import time

import loopguard

EVENTS = 100_000
TASKS = 1_000


def generate(events=EVENTS, tasks=TASKS, seed=7):
    rng = random.Random(seed)
    agents = ["planner", "coder", "reviewer", "tester", "researcher"]
    tools = ["search", "read_file", "run_tests", "write_file"]
    history = {}
    out = []
    for n in range(events):
        task = f"task-{rng.randrange(tasks)}"
        past = history.setdefault(task, [])
        if past and rng.random() < 0.04:
            event = dict(rng.choice(past))
        else:
            kind = rng.random()
            a, b = rng.sample(agents, 2)
            if kind < 0.5:
                event = {"type": "handoff", "task": task, "from": a, "to": b,
                         "content": f"step {n}: please look at part {rng.randrange(10**6)}"}
            elif kind < 0.85:
                tool = rng.choice(tools)
                event = {"type": "tool_call", "task": task, "agent": a, "tool": tool,
                         "args": {"query": f"q{rng.randrange(10**6)}"},
                         "result": f"result {rng.randrange(10**6)}"}
            else:
                event = {"type": "failure", "task": task, "agent": a,
                         "error": f"AssertionError: case {rng.randrange(10**6)} failed"}
            past.append(event)
            if len(past) > 8:
                past.pop(0)
        out.append(event)
    return out


def per_event(label, seconds, count):
    micros = seconds / count * 1e6
    print(f"{label:<40} {micros:7.2f} µs/event  ({count / seconds / 1e3:7.1f} K events/s)")
    return micros


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "observe-trace.jsonl"
    events = generate()
    lines = [json.dumps(event, separators=(",", ":")) for event in events]
    with open(path, "w", encoding="utf-8") as trace:
        trace.write("\n".join(lines) + "\n")
    print(f"{len(events)} events over {TASKS} tasks written to {path}")

    start = time.perf_counter()
    for event in events:
        json.dumps(event)
    per_event("json.dumps alone (for scale)", time.perf_counter() - start, len(events))

    best = {}
    for _ in range(3):
        guard = loopguard.Guard(semantic=False)
        start = time.perf_counter()
        for event in events:
            guard.observe(event)
        best["observe"] = min(best.get("observe", 1e9), time.perf_counter() - start)
        guard.close()
        guard = loopguard.Guard(semantic=False)
        start = time.perf_counter()
        for line in lines:
            guard.observe_json(line)
        best["observe_json"] = min(best.get("observe_json", 1e9), time.perf_counter() - start)
        guard.close()
    per_event("Guard.observe(dict), best of 3", best["observe"], len(events))
    per_event("Guard.observe_json(line), best of 3", best["observe_json"], len(events))


if __name__ == "__main__":
    main()
