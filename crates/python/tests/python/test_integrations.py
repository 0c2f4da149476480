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
    assert error.decision is decision
    assert str(error) == decision.detections[0].reason
    # Behind the gate, an event with no detection still has a reason.
    gated = guard.observe({"type": "handoff", "task": "T", "from": "a", "to": "b"})
    assert gated.action == "escalate"
    assert "escalated" in loopguard.stop_reason(gated)


def readme_examples(path):
    """The README's adapter examples: python blocks opening with the
    adapter's module name as a comment."""
    text = path.read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    return {
        block.splitlines()[0][len("# loopguard.integrations.") :]: block
        for block in blocks
        if block.startswith("# loopguard.integrations.")
    }


def example_names(adapter):
    """What an example takes from its surroundings: a scripted model that
    repeats one tool call, and the tool."""
    if adapter == "openai_agents":
        import test_openai_agents as t

        calls = [("lookup_weather", {"city": "Paris"})] * 12

        def lookup_weather(city: str) -> str:
            """The weather in a city."""
            return f"It is sunny in {city} this afternoon."

        return {"model": t.ScriptedModel("weather", calls), "lookup_weather": lookup_weather}
    if adapter == "langchain":
        import test_langchain as t

        return {"model": t.ScriptedChatModel(script=t.LOOP), "search": t.search}
    import test_autogen as t
    from autogen_ext.models.replay import ReplayChatCompletionClient

    calls = [t.call(i, "lookup_weather", city="Paris") for i in range(20)]
    client = ReplayChatCompletionClient(calls, model_info=t.TOOLS)
    return {"model_client": client, "lookup_weather": t.lookup_weather}


def test_the_readmes_show_the_same_examples():
    from conftest import WORKSPACE

    crate = readme_examples(WORKSPACE / "crates" / "python" / "README.md")
    assert sorted(crate) == sorted(FRAMEWORKS)
    assert readme_examples(WORKSPACE / "README.md") == crate
    for block in crate.values():
        assert len(block.strip().splitlines()) <= 16, block


@pytest.mark.parametrize("adapter", sorted(FRAMEWORKS))
def test_the_readme_example_stops_a_loop(adapter, capsys):
    pytest.importorskip(FRAMEWORKS[adapter][0])
    from conftest import WORKSPACE

    block = readme_examples(WORKSPACE / "crates" / "python" / "README.md")[adapter]
    names = example_names(adapter)
    exec(compile(block, f"README.md ({adapter})", "exec"), names)
    printed = capsys.readouterr().out.strip()
    guard = names["guard"]
    [task] = guard.report()["tasks"]
    assert task["status"] == "escalated"
    reason = task["detections"][-1]["reason"]
    assert printed in (f"escalate {reason}", f"loopguard: {reason}"), printed
    actions = [d["action"] for d in task["detections"]]
    assert actions == ["inject_context", "inject_context", "escalate"]
