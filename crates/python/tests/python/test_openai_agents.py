"""loopguard.integrations.openai_agents on the real OpenAI Agents SDK, with a
scripted model (no network): a looping agent is nudged through the tool
output guardrail, then stopped; a normal run is untouched."""

import asyncio
import copy
import json
import os

import pytest

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-not-used")

agents = pytest.importorskip("agents")

from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import loopguard  # noqa: E402
from conftest import RecordingGuard, sent_usage  # noqa: E402
from loopguard.integrations.openai_agents import LoopGuardHooks  # noqa: E402

# The SDK's own trace export would go to OpenAI.
set_tracing_disabled(True)


class ScriptedModel(Model):
    """Answers each turn from a script (tool calls, then a final message) and
    keeps the input it was given each turn; ``spend`` is the (input, output)
    tokens each response reports, ``model`` the model's name."""

    def __init__(self, prefix, calls, answer="Done.", spend=(0, 0), model=None):
        self.prefix = prefix
        self.calls = list(calls)
        self.answer = answer
        self.inputs = []
        self.spend = spend
        self.model = model

    async def get_response(self, system_instructions, input, *args, **kwargs):
        self.inputs.append(copy.deepcopy(input))
        turn = len(self.inputs) - 1
        if turn < len(self.calls):
            name, arguments = self.calls[turn]
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{self.prefix}_{turn}",
                    call_id=f"call_{self.prefix}_{turn}",
                    name=name,
                    arguments=json.dumps(arguments),
                    status="completed",
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text=self.answer, annotations=[])
            output = [
                ResponseOutputMessage(
                    type="message",
                    id=f"msg_{self.prefix}",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        input_tokens, output_tokens = self.spend
        usage = Usage(
            requests=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests run without streaming")


def team(script, guardrails=(), answer="Done."):
    """A triage agent that hands the question to a weather agent with two
    tools; returns (triage agent, the weather model, the tools' call log)."""
    ran = []

    def lookup_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(("lookup_weather", city))
        return f"It is sunny in {city} this afternoon."

    def lookup_time(city: str) -> str:
        """The local time in a city."""
        ran.append(("lookup_time", city))
        return f"It is noon in {city}, local time."

    tools = [
        function_tool(fn, tool_output_guardrails=list(guardrails))
        for fn in (lookup_weather, lookup_time)
    ]
    model = ScriptedModel("weather", script, answer)
    weather = Agent(name="Weather agent", instructions="Answer.", model=model, tools=tools)
    triage = Agent(
        name="Triage agent",
        instructions="Hand weather questions over.",
        model=ScriptedModel("triage", [("transfer_to_weather_agent", {})]),
        handoffs=[weather],
    )
    return triage, model, ran


def outputs(items):
    """The function_call_output items of a model's input, by call id."""
    return {
        item["call_id"]: item["output"]
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def test_a_looping_agent_is_nudged_then_stopped():
    guard = loopguard.Guard(semantic=False)
    hooks = LoopGuardHooks(guard, task="loop-run")
    script = [("lookup_weather", {"city": "Paris"})] * 12
    triage, model, ran = team(script, [hooks.tool_output_guardrail])

    with pytest.raises(loopguard.LoopDetected) as caught:
        asyncio.run(Runner.run(triage, "Weather in Paris?", hooks=hooks, max_turns=20))

    stop = caught.value
    assert stop.decision.action == "escalate"
    assert stop.decision.task == "loop-run"
    assert [d.kind for d in stop.decision.detections] == ["tool_repeat"]
    assert str(stop) == stop.decision.detections[0].reason
    # The handoff, then five identical calls: the 3rd and 4th brought
    # nothing new (nudged), the 5th stopped the run.
    actions = [d.action for d in hooks.decisions]
    assert actions == ["none", "none", "none", "inject_context", "inject_context", "escalate"]
    assert ran == [("lookup_weather", "Paris")] * 5
    # The model got the directive as the 3rd and 4th calls' output.
    first, second = hooks.decisions[3].directive, hooks.decisions[4].directive
    assert first and "lookup_weather" in first and first != second
    assert outputs(model.inputs[3])["call_weather_2"] == first
    assert outputs(model.inputs[4])["call_weather_3"] == second
    assert outputs(model.inputs[2])["call_weather_1"] == "It is sunny in Paris this afternoon."
    assert len(model.inputs) == 5
    # The task stays behind the human gate.
    [task] = [t for t in guard.report()["tasks"] if t["task"] == "loop-run"]
    assert task["status"] == "escalated"


def test_a_normal_run_is_untouched():
    script = [
        ("lookup_weather", {"city": "Paris"}),
        ("lookup_time", {"city": "Paris"}),
        ("lookup_weather", {"city": "Tokyo"}),
    ]
    answer = "Sunny in Paris and Tokyo; noon in Paris."
    triage, plain_model, plain_ran = team(script, answer=answer)
    plain = asyncio.run(Runner.run(triage, "Weather?", max_turns=10))

    guard = loopguard.Guard(semantic=False)
    hooks = LoopGuardHooks(guard)
    task = hooks.task
    triage, model, ran = team(script, [hooks.tool_output_guardrail], answer=answer)
    guarded = asyncio.run(Runner.run(triage, "Weather?", hooks=hooks, max_turns=10))

    assert guarded.final_output == plain.final_output == answer
    assert ran == plain_ran
    assert [outputs(i) for i in model.inputs] == [outputs(i) for i in plain_model.inputs]
    # Every event seen (the handoff, three calls), no action; the run
    # completed its task and the next run gets a new one.
    [report] = [t for t in guard.report()["tasks"] if t["task"] == task]
    assert report["status"] == "completed"
    assert report["detections"] == []
    assert guard.report()["events"] == 5
    assert hooks.task != task


def test_a_tool_without_the_guardrail_is_observed_and_can_stop_the_run():
    guard = loopguard.Guard(semantic=False)
    hooks = LoopGuardHooks(guard, task="failing")

    def flaky(city: str) -> str:
        """Always fails."""
        raise RuntimeError("backend down")

    model = ScriptedModel("flaky", [("flaky", {"city": "Paris"})] * 8)
    agent = Agent(
        name="Flaky agent", instructions="Try.", model=model, tools=[function_tool(flaky)]
    )

    with pytest.raises(loopguard.LoopDetected) as caught:
        asyncio.run(Runner.run(agent, "Go", hooks=hooks, max_turns=20))
    # A failing call is a failure (ruling 14): the 4th identical one is the
    # 3rd loop, the human gate. Without the guardrail the model saw the
    # SDK's error text each time.
    assert caught.value.decision.action == "escalate"
    assert [d.kind for d in caught.value.decision.detections] == ["exact_failure"]
    assert [d.action for d in hooks.decisions] == ["none", "warn", "inject_context", "escalate"]
    errors = {outputs(i).get("call_flaky_2") for i in model.inputs[3:]}
    assert errors == {"An error occurred while running the tool. Please try again."}


def test_a_run_without_events_completes_nothing():
    guard = loopguard.Guard(semantic=False)
    hooks = LoopGuardHooks(guard)
    agent = Agent(name="Solo", instructions="Answer.", model=ScriptedModel("solo", [], "Hi."))
    result = asyncio.run(Runner.run(agent, "Hello", hooks=hooks, max_turns=5))
    assert result.final_output == "Hi."
    assert guard.report()["tasks"] == []


def test_a_run_whose_task_is_already_stopped_ends_before_its_first_step():
    guard = loopguard.Guard(semantic=False)
    hooks = LoopGuardHooks(guard, task="gated")
    script = [("lookup_weather", {"city": "Paris"})] * 12
    triage, _, _ = team(script, [hooks.tool_output_guardrail])
    with pytest.raises(loopguard.LoopDetected):
        asyncio.run(Runner.run(triage, "Weather in Paris?", hooks=hooks, max_turns=20))
    events = guard.report()["events"]

    # The task is behind the human gate: the next run neither calls the
    # model nor runs a tool.
    triage, model, ran = team(script, [hooks.tool_output_guardrail])
    [weather] = triage.handoffs
    with pytest.raises(loopguard.LoopDetected) as caught:
        asyncio.run(Runner.run(weather, "Try again", hooks=hooks, max_turns=20))
    assert model.inputs == [] and ran == []
    assert guard.report()["events"] == events
    assert caught.value.decision == guard.gate("gated")
    assert caught.value.decision.action == "escalate"
    assert "escalated" in str(caught.value)

    # Once a human lifts the gate, the task runs again.
    guard.human("gated")
    once = [("lookup_weather", {"city": "Paris"})]
    triage, model, ran = team(once, [hooks.tool_output_guardrail])
    [weather] = triage.handoffs
    result = asyncio.run(Runner.run(weather, "And now?", hooks=hooks, max_turns=5))
    assert result.final_output == "Done."
    assert ran == [("lookup_weather", "Paris")]


PRICES = {"pricing": {"gpt-4o-mini": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}}


def spending_team(script, guardrails, answer="Done."):
    """The weather team with usage on every response: the triage model's
    handoff 100 + 10 tokens, each weather response 1000 + 100 (model
    ``gpt-4o-mini``)."""
    triage, model, ran = team(script, guardrails, answer)
    model.spend, model.model = (1000, 100), "gpt-4o-mini"
    triage.model.spend, triage.model.model = (100, 10), "gpt-4o-mini"
    return triage, model, ran


def test_each_model_call_s_usage_goes_on_the_next_event_and_decisions_sum_it():
    guard = RecordingGuard(PRICES, semantic=False)
    hooks = LoopGuardHooks(guard, task="spend")
    script = [("lookup_weather", {"city": "Paris"}), ("lookup_time", {"city": "Paris"})]
    triage, _, _ = spending_team(script, [hooks.tool_output_guardrail], answer="Sunny at noon.")
    result = asyncio.run(Runner.run(triage, "Weather?", hooks=hooks, max_turns=10))
    assert result.final_output == "Sunny at noon."

    # The handoff carries the triage call, each tool call the weather call
    # that asked for it, the completion the final answer's.
    small = {"input_tokens": 100, "output_tokens": 10, "model": "gpt-4o-mini"}
    large = {"input_tokens": 1000, "output_tokens": 100, "model": "gpt-4o-mini"}
    assert [e["type"] for e in guard.events] == ["handoff", "tool_call", "tool_call", "completed"]
    assert sent_usage(guard) == [small, large, large, large]
    # Each decision reports the task's running spend, priced from [pricing].
    spent = [(d.usage["input_tokens"], d.usage["output_tokens"]) for d in guard.decisions]
    assert spent == [(100, 10), (1100, 110), (2100, 210), (3100, 310)]
    last = guard.decisions[-1].usage
    assert last["cost_usd"] == pytest.approx(3100 * 2e-6 + 310 * 8e-6)
    # No loop: nothing was spent in one.
    assert (last["in_loops"]["input_tokens"], last["in_loops"]["output_tokens"]) == (0, 0)
    [task] = guard.report()["tasks"]
    assert task["usage"]["input_tokens"] == 3100 and task["usage"]["output_tokens"] == 310


def test_a_budget_stops_a_run_that_spends_too_much():
    guard = loopguard.Guard({"budget": {"max_tokens": 3000}}, semantic=False)
    hooks = LoopGuardHooks(guard, task="costly")
    cities = ["Paris", "Tokyo", "Lima", "Oslo", "Rome", "Cairo", "Quito", "Perth"]
    script = [("lookup_weather", {"city": city}) for city in cities]
    triage, model, ran = spending_team(script, [hooks.tool_output_guardrail])

    with pytest.raises(loopguard.LoopDetected) as caught:
        asyncio.run(Runner.run(triage, "Weather everywhere?", hooks=hooks, max_turns=20))

    # 110 for the handoff, 1100 a call: the 3rd call takes the task past
    # 3000 tokens; no call repeats another, so the budget alone stops it.
    decision = caught.value.decision
    assert decision.action == "escalate" and decision.status == "escalated"
    [detection] = decision.detections
    assert detection.kind == "budget" and detection.severity == "high"
    assert detection.budget["limit"] == "budget.max_tokens"
    assert (detection.budget["allowed"], detection.budget["spent"]) == (3000, 3410)
    assert detection.budget["usage"] == decision.usage
    assert decision.usage["input_tokens"] == 3100
    assert ran == [("lookup_weather", city) for city in cities[:3]]
    assert str(caught.value) == detection.reason
