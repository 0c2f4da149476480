"""loopguard.integrations.autogen on real AutoGen AgentChat teams with the
replay model client (no network): a looping team is stopped with the reason
as its stop_reason; a normal run is untouched."""

import asyncio
import json

import pytest

pytest.importorskip("autogen_agentchat")

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_agentchat.conditions import (  # noqa: E402
    MaxMessageTermination,
    TextMentionTermination,
)
from autogen_agentchat.messages import ToolCallExecutionEvent  # noqa: E402
from autogen_agentchat.teams import RoundRobinGroupChat  # noqa: E402
from autogen_core import FunctionCall  # noqa: E402
from autogen_core.models import CreateResult, ModelFamily, ModelInfo, RequestUsage  # noqa: E402
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402

import loopguard  # noqa: E402
from conftest import RecordingGuard, sent_usage  # noqa: E402
from loopguard.integrations.autogen import LoopGuardTermination  # noqa: E402

TOOLS = ModelInfo(
    vision=False,
    function_calling=True,
    json_output=False,
    family=ModelFamily.UNKNOWN,
    structured_output=False,
)


def call(turn, name, spent=(0, 0), **args):
    """The model's answer that calls one tool; ``spent`` is the (prompt,
    completion) tokens it reports."""
    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id=f"call_{turn}", name=name, arguments=json.dumps(args))],
        usage=RequestUsage(prompt_tokens=spent[0], completion_tokens=spent[1]),
        cached=False,
    )


def say(text, spent):
    """The model's text answer, reporting ``spent`` (prompt, completion) tokens."""
    return CreateResult(
        finish_reason="stop",
        content=text,
        usage=RequestUsage(prompt_tokens=spent[0], completion_tokens=spent[1]),
        cached=False,
    )


ran = []


def lookup_weather(city: str) -> str:
    """The weather in a city."""
    ran.append(("lookup_weather", city))
    return f"It is sunny in {city} this afternoon."


def lookup_time(city: str) -> str:
    """The local time in a city."""
    ran.append(("lookup_time", city))
    return f"It is noon in {city}, local time."


def weather_agent(completions):
    client = ReplayChatCompletionClient(completions, model_info=TOOLS)
    return AssistantAgent("weather", model_client=client, tools=[lookup_weather, lookup_time])


def executions(result):
    return [m for m in result.messages if isinstance(m, ToolCallExecutionEvent)]


def test_a_looping_team_is_stopped_with_the_reason():
    guard = loopguard.Guard(semantic=False)
    condition = LoopGuardTermination(guard, task="loop-team")
    agent = weather_agent([call(i, "lookup_weather", city="Paris") for i in range(20)])
    team = RoundRobinGroupChat([agent], termination_condition=condition | MaxMessageTermination(60))
    result = asyncio.run(team.run(task="What is the weather in Paris?"))

    [entry] = [t for t in guard.report()["tasks"] if t["task"] == "loop-team"]
    assert entry["status"] == "escalated"
    kinds = [d["kind"] for d in entry["detections"]]
    actions = [d["action"] for d in entry["detections"]]
    # Nudges at the 3rd and 4th identical call, the stop at the 5th.
    assert kinds == ["tool_repeat"] * 3
    assert actions == ["inject_context", "inject_context", "escalate"]
    assert result.stop_reason == f"loopguard: {entry['detections'][-1]['reason']}"
    assert condition.last_stop.action == "escalate"
    assert condition.last_stop.task == "loop-team"
    assert len(executions(result)) == 5
    # The team can run again; the task stays behind the human gate.
    assert not condition.terminated


def test_agents_trading_the_same_message_are_stopped():
    guard = loopguard.Guard(semantic=False)
    say = ["Please check this again."] * 20
    a = AssistantAgent("alice", model_client=ReplayChatCompletionClient(say))
    b = AssistantAgent("bob", model_client=ReplayChatCompletionClient(say))
    condition = LoopGuardTermination(guard)
    team = RoundRobinGroupChat([a, b], termination_condition=condition | MaxMessageTermination(40))
    result = asyncio.run(team.run(task="Review the patch."))
    stop = condition.last_stop
    assert stop.action == "escalate"
    assert result.stop_reason == f"loopguard: {loopguard.stop_reason(stop)}"
    [entry] = guard.report()["tasks"]
    assert entry["status"] == "escalated"
    # The same message handed back and forth: the pair's exchanges, the
    # same topic, the same query again with nothing learned.
    kinds = {"agent_pair", "topic_cycle", "repeated_query"}
    assert "agent_pair" in {d.kind for d in stop.detections}
    assert {d["kind"] for d in entry["detections"]} <= kinds
    assert len(result.messages) < 40


def test_a_normal_run_is_untouched():
    def completions():
        return [
            call(0, "lookup_weather", city="Paris"),
            call(1, "lookup_time", city="Paris"),
            "Sunny at noon in Paris. TERMINATE",
        ]

    ran.clear()
    plain_team = RoundRobinGroupChat(
        [weather_agent(completions())], termination_condition=TextMentionTermination("TERMINATE")
    )
    plain = asyncio.run(plain_team.run(task="What is the weather in Paris?"))
    plain_ran = list(ran)

    ran.clear()
    guard = loopguard.Guard(semantic=False)
    condition = LoopGuardTermination(guard)
    task = condition.task
    team = RoundRobinGroupChat(
        [weather_agent(completions())],
        termination_condition=condition | TextMentionTermination("TERMINATE"),
    )
    result = asyncio.run(team.run(task="What is the weather in Paris?"))

    assert result.stop_reason == plain.stop_reason
    assert [m.to_text() for m in result.messages] == [m.to_text() for m in plain.messages]
    assert ran == plain_ran
    [entry] = guard.report()["tasks"]
    assert entry["task"] == task
    assert entry["detections"] == []
    assert entry["status"] == "completed"
    # The two calls and the run's completion.
    assert guard.report()["events"] == 3
    assert condition.task != task


def test_a_conversation_by_design_runs_to_the_end():
    """A writer and a critic improving a draft turn by turn, every message
    new: an exchange counts only when it brings nothing new (ruling 4 of
    trace format 1.2, the default), so the team runs to the end. Counted as
    trace format 1.1 counts (``cycles.count = "every"``), every exchange
    between two peers counts, and the team is stopped."""

    def team(guard):
        drafts = [f"Draft {i}: the intro now covers point {i} of the outline." for i in range(8)]
        notes = [f"Note {i}: tighten the sentence about point {i}." for i in range(8)]
        writer = AssistantAgent("writer", model_client=ReplayChatCompletionClient(drafts))
        critic = AssistantAgent("critic", model_client=ReplayChatCompletionClient(notes))
        condition = LoopGuardTermination(guard)
        chat = RoundRobinGroupChat(
            [writer, critic], termination_condition=condition | MaxMessageTermination(17)
        )
        return condition, asyncio.run(chat.run(task="Write the intro."))

    calm, result = team(loopguard.Guard(semantic=False))
    assert calm.last_stop is None, loopguard.stop_reason(calm.last_stop)
    assert len(result.messages) == 17
    assert not result.stop_reason.startswith("loopguard")

    stopped, result = team(loopguard.Guard({"cycles": {"count": "every"}}, semantic=False))
    assert stopped.last_stop is not None
    assert result.stop_reason.startswith("loopguard: ")


def test_a_run_whose_task_is_already_stopped_ends_before_its_first_step():
    guard = loopguard.Guard(semantic=False)
    condition = LoopGuardTermination(guard, task="gated")
    loop = [call(i, "lookup_weather", city="Paris") for i in range(20)]
    first = RoundRobinGroupChat(
        [weather_agent(loop)], termination_condition=condition | MaxMessageTermination(60)
    )
    asyncio.run(first.run(task="What is the weather in Paris?"))
    assert condition.last_stop.action == "escalate"
    events = guard.report()["events"]

    # The task is behind the human gate: the next run is stopped on its
    # task message, before the agent speaks or runs a tool.
    ran.clear()
    again = RoundRobinGroupChat(
        [weather_agent(loop)], termination_condition=condition | MaxMessageTermination(60)
    )
    result = asyncio.run(again.run(task="Try again."))
    assert ran == [] and executions(result) == []
    assert [m.source for m in result.messages] == ["user"]
    assert guard.report()["events"] == events
    gate = guard.gate("gated")
    assert condition.last_stop == gate
    assert result.stop_reason == f"loopguard: {loopguard.stop_reason(gate)}"
    assert "escalated" in result.stop_reason

    # Once a human lifts the gate, the task runs again.
    guard.human("gated")
    done = RoundRobinGroupChat(
        [weather_agent([call(0, "lookup_weather", city="Paris"), "Sunny. TERMINATE"])],
        termination_condition=condition | TextMentionTermination("TERMINATE"),
    )
    result = asyncio.run(done.run(task="And now?"))
    assert ran == [("lookup_weather", "Paris")]
    assert not result.stop_reason.startswith("loopguard")


SPENT = {"input_tokens": 1000, "output_tokens": 100}


def test_each_message_s_models_usage_goes_on_its_event_and_decisions_sum_it():
    guard = RecordingGuard(semantic=False)
    condition = LoopGuardTermination(guard)
    completions = [
        call(0, "lookup_weather", spent=(1000, 100), city="Paris"),
        call(1, "lookup_time", spent=(1000, 100), city="Paris"),
        say("Sunny at noon in Paris. TERMINATE", spent=(1000, 100)),
    ]
    team = RoundRobinGroupChat(
        [weather_agent(completions)],
        termination_condition=condition | TextMentionTermination("TERMINATE"),
    )
    result = asyncio.run(team.run(task="What is the weather in Paris?"))
    assert not result.stop_reason.startswith("loopguard")

    # Each tool call carries the request that asked for it; the final
    # answer (no exchange: its agent spoke last too) rides on the completion.
    assert [e["type"] for e in guard.events] == ["tool_call", "tool_call", "completed"]
    assert sent_usage(guard) == [SPENT, SPENT, SPENT]
    spent = [(d.usage["input_tokens"], d.usage["output_tokens"]) for d in guard.decisions]
    assert spent == [(1000, 100), (2000, 200), (3000, 300)]
    assert "cost_usd" not in guard.decisions[-1].usage


def test_a_budget_stops_a_team_that_spends_too_much():
    guard = loopguard.Guard({"budget": {"max_tokens": 2500}}, semantic=False)
    condition = LoopGuardTermination(guard, task="costly")
    cities = ["Paris", "Tokyo", "Lima", "Oslo", "Rome", "Cairo", "Quito", "Perth"]
    loop = [call(i, "lookup_weather", spent=(1000, 100), city=c) for i, c in enumerate(cities)]
    team = RoundRobinGroupChat(
        [weather_agent(loop)], termination_condition=condition | MaxMessageTermination(60)
    )
    result = asyncio.run(team.run(task="The weather everywhere?"))

    # 1100 tokens a call: the 3rd takes the task past 2500; no call repeats
    # another, so the budget alone stops the team.
    stop = condition.last_stop
    assert stop.action == "escalate"
    [detection] = stop.detections
    assert detection.kind == "budget"
    assert detection.budget["limit"] == "budget.max_tokens"
    assert (detection.budget["allowed"], detection.budget["spent"]) == (2500, 3300)
    assert stop.usage["input_tokens"] == 3000
    assert len(executions(result)) == 3
    assert result.stop_reason == f"loopguard: {detection.reason}"
    assert guard.status("costly") == "escalated"
