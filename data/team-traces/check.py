#!/usr/bin/env python3
"""Consistency check for data/team-traces (standard library only).

Checks every NAME.jsonl against its NAME.expected.jsonl and the counts in
README.md. It does not run loopguard and knows nothing of its detections.

    python3 data/team-traces/check.py

Exits 0 when everything holds, 1 with one line per problem otherwise.
"""
import json
import re
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHAPES = {"hub": "hub-and-spoke", "sup": "supervisor", "swarm": "handoff swarm", "peer": "peer pair"}
COMMON = ("type", "task", "id", "ts")
FIELDS = {
    "handoff": ("from", "to"),
    "collaboration": ("from", "to", "request"),
    "tool_call": ("agent", "tool"),
    "turn": ("agent", "output", "success"),
    "failure": ("agent", "error"),
    "progress": (),
    "completed": (),
    "human": (),
}
LOOP_WINDOW_S = 600

problems = []


def bad(msg):
    problems.append(msg)


def parse_ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def shape_of(name):
    m = re.match(r"(loop|normal)_(hub|sup|swarm|peer)_", name)
    return (m.group(1), SHAPES[m.group(2)]) if m else (None, None)


def check_trace(path):
    name = path.name[: -len(".jsonl")]
    kind, shape = shape_of(name)
    if kind is None:
        bad(f"{name}: name must be loop_|normal_ + hub_|sup_|swarm_|peer_")
    raw = path.read_bytes()
    if not raw.endswith(b"\n"):
        bad(f"{name}: last line has no newline")
    lines = raw.decode("utf-8").split("\n")[:-1]
    events, ids = [], set()
    prev_ts = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            bad(f"{name}:{n}: blank line")
            events.append({})
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError as e:
            bad(f"{name}:{n}: invalid JSON ({e})")
            events.append({})
            continue
        events.append(ev)
        for f in COMMON + FIELDS.get(ev.get("type"), ()):
            if f not in ev:
                bad(f"{name}:{n}: missing field {f}")
        if ev.get("type") not in FIELDS:
            bad(f"{name}:{n}: unexpected type {ev.get('type')!r}")
        if ev.get("type") == "tool_call" and "result" not in ev and "error" not in ev:
            bad(f"{name}:{n}: tool_call without result or error")
        if ev.get("id") in ids:
            bad(f"{name}:{n}: duplicate id {ev.get('id')}")
        ids.add(ev.get("id"))
        try:
            ts = parse_ts(ev["ts"])
            if prev_ts and ts <= prev_ts:
                bad(f"{name}:{n}: ts does not increase")
            if prev_ts and (ts - prev_ts).total_seconds() > 900:
                bad(f"{name}:{n}: more than 15 minutes after the previous event")
            prev_ts = ts
        except (KeyError, ValueError):
            bad(f"{name}:{n}: bad ts")

    side = path.with_name(name + ".expected.jsonl")
    if not side.exists():
        bad(f"{name}: no sidecar")
        return name, kind, shape, len(lines), [], {e.get("task") for e in events}
    sraw = side.read_bytes()
    labels = []
    for k, line in enumerate(sraw.decode("utf-8").split("\n")[:-1], 1):
        try:
            lab = json.loads(line)
        except json.JSONDecodeError as e:
            bad(f"{side.name}:{k}: invalid JSON ({e})")
            continue
        if set(lab) != {"line", "note"} or not isinstance(lab["line"], int) or not lab["note"]:
            bad(f"{side.name}:{k}: want exactly {{line: int, note: text}}")
            continue
        n = lab["line"]
        if not 1 <= n <= len(lines):
            bad(f"{side.name}:{k}: line {n} is not in the trace ({len(lines)} lines)")
            continue
        if labels and n <= labels[-1]:
            bad(f"{side.name}:{k}: lines not increasing")
        if events[n - 1].get("type") == "completed":
            bad(f"{side.name}:{k}: labels a completed event")
        for ref in re.findall(r"\blines? (\d+)", lab["note"]) + re.findall(r"\band (\d+)\b", lab["note"]):
            if not 1 <= int(ref) < n:
                bad(f"{side.name}:{k}: note refers to line {ref}, not an earlier line")
        labels.append(n)
    if kind == "normal" and sraw:
        bad(f"{name}: a normal trace must have a zero-byte sidecar")
    if kind == "loop" and not labels:
        bad(f"{name}: a loop trace must label its loop lines")
    if labels:
        # The loop, from the earliest line a note points back to, fits in the window.
        refs = [int(r) for r in re.findall(r"\blines? (\d+)", sraw.decode("utf-8"))]
        first = min(refs + labels)
        span = (parse_ts(events[labels[-1] - 1]["ts"]) - parse_ts(events[first - 1]["ts"])).total_seconds()
        if span > LOOP_WINDOW_S:
            bad(f"{name}: loop from line {first} to {labels[-1]} spans {span:.0f} s (> {LOOP_WINDOW_S})")
    return name, kind, shape, len(lines), labels, {e.get("task") for e in events}


def main():
    traces = sorted(p for p in HERE.glob("*.jsonl") if not p.name.endswith(".expected.jsonl"))
    for side in HERE.glob("*.expected.jsonl"):
        if not side.with_name(side.name.replace(".expected.jsonl", ".jsonl")).exists():
            bad(f"{side.name}: sidecar without a trace")
    rows = [check_trace(p) for p in traces]

    multi = [r[0] for r in rows if len(r[5]) > 1]
    if len(multi) != 2:
        bad(f"expected exactly 2 traces with two tasks, found {multi}")

    readme = (HERE / "README.md").read_text(encoding="utf-8")
    # Per-trace rows: | `name` | lines | labelled lines | ...
    listed = {}
    for m in re.finditer(r"^\| `(\w+)` \| (\d+) \| (\d+) \|", readme, re.M):
        listed[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    for name, kind, shape, n, labels, _ in rows:
        if name not in listed:
            bad(f"README: {name} is not listed")
        elif listed[name] != (n, len(labels)):
            bad(f"README: {name} listed as {listed[name]}, is ({n}, {len(labels)})")
    for name in set(listed) - {r[0] for r in rows}:
        bad(f"README: lists {name}, which has no trace")
    # Counts table: | shape | normal | loop | traces | lines | labelled lines |
    totals = {}
    for name, kind, shape, n, labels, _ in rows:
        t = totals.setdefault(shape, [0, 0, 0, 0, 0])
        t[0 if kind == "normal" else 1] += 1
        t[2] += 1
        t[3] += n
        t[4] += len(labels)
    totals["all"] = [sum(t[i] for t in list(totals.values())) for i in range(5)]
    for shape, want in totals.items():
        m = re.search(r"^\| \**" + re.escape(shape) + r"\** \| \**(\d+)\** \| \**(\d+)\** \| \**(\d+)\** \| \**(\d+)\** \| \**(\d+)\** \|", readme, re.M)
        if not m:
            bad(f"README: no counts row for {shape}")
        elif [int(x) for x in m.groups()] != want:
            bad(f"README: counts row for {shape} says {[int(x) for x in m.groups()]}, is {want}")
    long_normal = sorted(r[0] for r in rows if r[1] == "normal" and r[3] >= 30)
    m = re.search(r"^Long normal runs \((\d+)\)", readme, re.M)
    if not m or int(m.group(1)) != len(long_normal):
        bad(f"README: 'Long normal runs (N)' should say {len(long_normal)}")
    for name in long_normal:
        if not re.search(r"^- `" + name + "`", readme, re.M):
            bad(f"README: long normal run {name} not in the list")

    for p in problems:
        print(p)
    print(f"{len(rows)} traces, {totals['all'][3]} lines, {totals['all'][4]} labelled lines, "
          f"{len(long_normal)} long normal runs: {'OK' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
