"""The documented Python examples, run verbatim: every ```python block of
the workspace's ``docs/python.md``, the page about the package and its
adapters; the Python examples of the workspace README and of this crate's
README must be among them. What an adapter example leaves to the user (a
model, a tool) comes from the scripted models of the adapters' own tests;
the block's text runs unchanged. Blocks that use the embedding model run
only when its files are there (``LOOPGUARD_PY_SEMANTIC``, set by ``cargo
test``)."""

import importlib.util
import os
import pathlib
import re

import pytest

from conftest import WORKSPACE

SEMANTIC = bool(os.environ.get("LOOPGUARD_PY_SEMANTIC"))
NO_MODEL = "the embedding model's files are not there (cargo test sets LOOPGUARD_PY_SEMANTIC=1 when they are)"

FRAMEWORKS = {
    "openai_agents": "agents",
    "langchain": "langchain.agents",
    "autogen": "autogen_agentchat",
}


PAGE = "docs/python.md"


def python_section() -> str:
    return (WORKSPACE / PAGE).read_text(encoding="utf-8")


def python_blocks(text: str) -> list:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


SECTION = python_section()
BLOCKS = python_blocks(SECTION)
ADAPTER_PREFIX = "# loopguard.integrations."
SPEND_PREFIX = "# spend:"


def adapter_of(block: str):
    """The adapter an example is for: its first line names the module."""
    first = block.splitlines()[0]
    return first[len(ADAPTER_PREFIX) :] if first.startswith(ADAPTER_PREFIX) else None


def needs_model(block: str) -> bool:
    """Whether the block fetches the model or builds a guard with semantic matching."""
    return "fetch_model(" in block or re.search(r"Guard\((?![^)]*semantic=False)", block) is not None


def example_names(adapter):
    """What an adapter example takes from its surroundings: a scripted model
    that repeats one tool call, and the tool."""
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


def block_id(block):
    number = BLOCKS.index(block) + 1
    return f"block{number}-{adapter_of(block) or 'guard'}"


@pytest.mark.parametrize("block", BLOCKS, ids=block_id)
def test_the_example_runs_as_written(block, capsys):
    if needs_model(block) and not SEMANTIC:
        pytest.skip(NO_MODEL)
    adapter = adapter_of(block)
    names = {"__name__": "readme_example"}
    if adapter is not None:
        pytest.importorskip(FRAMEWORKS[adapter])
        names.update(example_names(adapter))
    exec(compile(block, f"{PAGE} ({block_id(block)})", "exec"), names)
    printed = capsys.readouterr().out.strip()
    if adapter is not None:
        check_adapter_example(names["guard"], printed)
    elif "fetch_model(" in block:
        assert (pathlib.Path(printed) / "model.onnx").is_file(), printed
    elif block.startswith(SPEND_PREFIX):
        check_spend_example(names["guard"], printed)
    else:
        check_guard_example(names["guard"], printed)


def check_adapter_example(guard, printed):
    """The scripted model looped: nudged twice, then stopped with the reason."""
    [task] = guard.report()["tasks"]
    assert task["status"] == "escalated"
    reason = task["detections"][-1]["reason"]
    assert printed in (f"escalate {reason}", f"loopguard: {reason}"), printed
    actions = [d["action"] for d in task["detections"]]
    assert actions[-1] == "escalate" and actions.count("inject_context") >= 2, actions


def check_spend_example(guard, printed):
    """Three calls of 1000 + 100 tokens, priced: the running spend, then the
    budget detection of the 3rd call."""
    assert printed.splitlines() == [
        "1000 100 0.00021",
        "2000 200 0.00042",
        "3000 300 0.00063",
        "budget.max_tokens 3300.0 of 2500.0",
    ], printed
    assert guard.status("T1") == "escalated"


def check_guard_example(guard, printed):
    """The same failure four times: nudged, then stopped; the gate lifted."""
    lines = printed.splitlines()
    assert any(line.startswith("stopped: same error message") for line in lines), printed
    assert "escalated" in lines and lines[-2:] == ["active", "none"], printed
    assert guard.status("T1") == "active"


def test_the_section_shows_every_adapter_and_the_default_guard():
    adapters = [adapter_of(block) for block in BLOCKS if adapter_of(block)]
    assert sorted(adapters) == sorted(FRAMEWORKS)
    # At least one adapter example uses semantic matching, the default.
    assert any(needs_model(block) for block in BLOCKS if adapter_of(block))
    assert any("fetch_model()" in block for block in BLOCKS)
    assert any(block.startswith(SPEND_PREFIX) for block in BLOCKS)
    for block in BLOCKS:
        assert len(block.strip().splitlines()) <= 22, block


def test_the_install_lines_build_a_release_engine_and_find_the_wheel():
    [install] = re.findall(r"^```bash\n(.*?)^```", SECTION, flags=re.S | re.M)
    commands = [line.split("#")[0].strip() for line in install.splitlines()]
    develop = [c for c in commands if c.startswith("maturin develop")]
    build = [c for c in commands if c.startswith("maturin build")]
    assert develop and all("--release" in c for c in develop), develop
    # The wheel goes where the next command looks, whatever CARGO_TARGET_DIR says.
    assert build and all("--release" in c and "--out dist" in c for c in build), build
    assert all("pip install dist/loopguard_rs-" in c for c in build), build
    assert "target/wheels" not in install


def test_the_event_table_names_every_event_type_and_links_the_spec():
    spec = (WORKSPACE / "docs" / "spec" / "trace-format.md").read_text(encoding="utf-8")
    types = re.findall(r"^\| `([a-z_]+)` +\| [^|]+\| [^|]+\|$", spec, flags=re.M)
    types = [t for t in types if t != "type"]
    assert "tool_call" in types and "human" in types, types
    table = re.findall(r"^\| `([a-z_]+)` +\|", SECTION, flags=re.M)
    assert sorted(t for t in table if t != "type") == sorted(types)
    assert "(spec/trace-format.md)" in SECTION


def test_the_crate_readme_shows_only_examples_the_section_runs():
    crate = (WORKSPACE / "crates" / "python" / "README.md").read_text(encoding="utf-8")
    blocks = python_blocks(crate)
    assert blocks
    for block in blocks:
        assert block in BLOCKS, block


def test_the_workspace_readme_shows_only_examples_the_section_runs():
    readme = (WORKSPACE / "README.md").read_text(encoding="utf-8")
    blocks = python_blocks(readme)
    assert blocks
    for block in blocks:
        assert block in BLOCKS, block


def test_the_adapter_modules_are_the_ones_the_examples_import():
    for adapter in FRAMEWORKS:
        block = next(b for b in BLOCKS if adapter_of(b) == adapter)
        assert f"from loopguard.integrations.{adapter} import" in block
        spec = importlib.util.find_spec(f"loopguard.integrations.{adapter}")
        assert spec is not None, adapter
