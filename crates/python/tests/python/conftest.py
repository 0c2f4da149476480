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
