"""Shared fixtures: where the traces and the expected decisions are.

`crates/python/tests/python.rs` (run by `cargo test`) sets the environment:
``LOOPGUARD_PY_TRACES`` (the workspace's tests/traces), ``LOOPGUARD_PY_EXPECTED``
(each trace's decisions from the Rust engine, one JSON line each),
``LOOPGUARD_PY_TRACE_NAMES`` (which traces) and ``LOOPGUARD_PY_SEMANTIC`` (set when
the embedding model's files are there).
"""

import os
import pathlib

import pytest

import loopguard

HERE = pathlib.Path(__file__).resolve()
WORKSPACE = HERE.parents[4]


def traces_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("LOOPGUARD_PY_TRACES", WORKSPACE / "tests" / "traces"))


def read_trace(name: str) -> list:
    lines = (traces_dir() / name).read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


@pytest.fixture
def trace():
    return read_trace


def sent_usage(guard) -> list:
    """The ``usage`` of every event a :class:`RecordingGuard` was given (None
    for an event without), in order."""
    return [event.get("usage") for event in guard.events]


class RecordingGuard(loopguard.Guard):
    """A guard that keeps every event it decides (a completion as the
    ``completed`` event it is) and its decision, so a test can see what an
    adapter sent and what it got."""

    def __init__(self, *args, **kwargs) -> None:
        self.events = []
        self.decisions = []

    def observe(self, event):
        self.events.append(dict(event))
        self.decisions.append(super().observe(event))
        return self.decisions[-1]

    def completed(self, task, usage=None):
        event = {"type": "completed", "task": task}
        if usage is not None:
            event["usage"] = usage
        self.events.append(event)
        self.decisions.append(super().completed(task, usage=usage))
        return self.decisions[-1]
