"""loopguard.integrations without the frameworks, and the adapters' docs."""

import doctest
import importlib
import subprocess
import sys

import pytest

import loopguard
import loopguard.integrations

FRAMEWORKS = {
    "openai_agents": ("agents", "openai-agents"),
    "langchain": ("langchain.agents", "langchain"),
    "autogen": ("autogen_agentchat", "autogen-agentchat"),
}


def test_the_package_imports_no_framework():
    code = (
        "import sys, loopguard.integrations; "
        "print(sorted(m for m in ('agents', 'langchain', 'autogen_agentchat') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert loopguard.integrations.ADAPTERS == {a: p for a, (_, p) in FRAMEWORKS.items()}


@pytest.mark.parametrize("adapter", sorted(FRAMEWORKS))
def test_an_adapter_without_its_framework_names_the_package(adapter, monkeypatch):
    module, package = FRAMEWORKS[adapter]
    # A module set to None in sys.modules cannot be imported: as if missing.
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, f"loopguard.integrations.{adapter}", raising=False)
    with pytest.raises(ImportError, match=f"pip install {package}"):
        importlib.import_module(f"loopguard.integrations.{adapter}")


@pytest.mark.parametrize("adapter", sorted(FRAMEWORKS))
def test_adapter_docstrings_and_examples(adapter):
    pytest.importorskip(FRAMEWORKS[adapter][0])
    module = importlib.import_module(f"loopguard.integrations.{adapter}")
    assert "Example::" in module.__doc__
    tests = doctest.DocTestFinder().find(module, module.__name__, globs={"loopguard": loopguard})
    runner = doctest.DocTestRunner()
    for test in tests:
        runner.run(test)
    assert runner.tries >= 2 and runner.failures == 0
    for name in module.__all__:
        assert getattr(module, name).__doc__, name


def test_loop_detected_carries_the_decision():
    guard = loopguard.Guard(semantic=False)
    failure = {"type": "failure", "task": "T", "agent": "coder", "error": "E0308"}
    decision = [guard.observe(failure) for _ in range(4)][-1]
    error = loopguard.LoopDetected(decision)
    assert isinstance(error, loopguard.LoopguardError)
    assert error.decision is decision and decision.stopped
    assert str(error) == decision.detections[0].reason
    # Behind the gate, an event with no detection still has a reason.
    gated = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b"})
    assert gated.action == "escalate"
    assert "escalated" in loopguard.stop_reason(gated)


def test_the_shared_usage_helpers_examples_run():
    from loopguard.integrations import _common

    tests = doctest.DocTestFinder().find(_common, _common.__name__)
    runner = doctest.DocTestRunner()
    for test in tests:
        runner.run(test)
    assert runner.tries >= 3 and runner.failures == 0
    assert _common.usage(True, -1) is None
    assert _common.with_usage({"type": "completed"}, None) == {"type": "completed"}
