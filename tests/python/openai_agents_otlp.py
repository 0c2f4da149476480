"""Runs OpenAI Agents SDK agents on scripted models and exports their spans
over OTLP/HTTP (protobuf) through the OpenTelemetry instrumentation, as a
real application would: a triage agent hands the question to a weather
agent, which calls its tools (in ``loop`` mode the same call ``--calls``
times) and answers.

No network but the OTLP endpoint: the model is a scripted ``Model`` (it
returns tool calls, then an answer), ``OPENAI_API_KEY`` is a dummy, and the
SDK's own trace export to OpenAI is replaced by the OpenTelemetry processor.

    python openai_agents_otlp.py --mode loop --calls 8
    python openai_agents_otlp.py --mode normal --dump spans.jsonl

The endpoint is the exporter's own environment variable
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (and ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``
for a token, ``OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=gzip`` to gzip). The last
line printed is ``trace_id=<32 hex>``: the task loopguard names after it.
"""

import argparse
import asyncio
import json
import os
import sys
from types import SimpleNamespace

os.environ.setdefault("OPENAI_API_KEY", "sk-dummy-not-used")

from agents import Agent, ModelSettings, Runner, function_tool  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.tracing import response_span  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: E402
    OTLPSpanExporter,
)
from opentelemetry.instrumentation.openai_agents import (  # noqa: E402
    OpenAIAgentsInstrumentor,
)
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)


# The model the scripted responses name, and the tokens they reported
# (input, output), printed at the end as ``tokens=<input>,<output>``.
SCRIPTED_MODEL = "gpt-4o-mini-2024-07-18"
SPENT = [0, 0]


class ScriptedModel(Model):
    """Answers each turn from a script: tool calls, then a final message."""

    def __init__(self, prefix, calls):
        # Call ids are unique across the run's models.
        self.prefix = prefix
        self.calls = list(calls)
        self.turn = 0

    async def get_response(self, *args, **kwargs):
        turn = self.turn
        self.turn += 1
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
            output = [
                ResponseOutputMessage(
                    type="message",
                    id=f"msg_{self.prefix}",
                    role="assistant",
                    status="completed",
                    content=[
                        ResponseOutputText(
                            type="output_text", text="Done.", annotations=[]
                        )
                    ],
                )
            ]
        return ModelResponse(output=output, usage=self.spend(turn), response_id=None)

    def spend(self, turn):
        """This turn's usage, reported as a model client does: on a response
        span whose response names the model and its token counts (what the
        OpenTelemetry instrumentation reads into ``gen_ai.usage.*``)."""
        input_tokens, output_tokens = 1000 + 10 * turn, 40 + turn
        SPENT[0] += input_tokens
        SPENT[1] += output_tokens
        with response_span() as span:
            span.span_data.response = SimpleNamespace(
                model=SCRIPTED_MODEL,
                usage=SimpleNamespace(
                    input_tokens=input_tokens, output_tokens=output_tokens
                ),
            )
        return Usage(
            requests=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the script runs the agent without streaming")


@function_tool
def lookup_weather(city: str) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


@function_tool
def lookup_time(city: str) -> str:
    """The local time in a city."""
    return f"It is noon in {city}."


class TraceIds(SpanProcessor):
    """Remembers the trace ids of the spans that ended."""

    def __init__(self):
        self.ids = []

    def on_end(self, span):
        trace_id = format(span.context.trace_id, "032x")
        if trace_id not in self.ids:
            self.ids.append(trace_id)


class JsonLinesExporter(SpanExporter):
    """Writes each span as one JSON line (for looking at what is emitted)."""

    def __init__(self, path):
        self.file = open(path, "w", encoding="utf-8")

    def export(self, spans):
        for span in spans:
            self.file.write(json.dumps(json.loads(span.to_json())) + "\n")
        self.file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.file.close()


def script(mode, calls):
    if mode == "loop":
        return [("lookup_weather", {"city": "Paris"})] * calls
    return [
        ("lookup_weather", {"city": "Paris"}),
        ("lookup_time", {"city": "Paris"}),
        ("lookup_weather", {"city": "Tokyo"}),
    ]


async def run(mode, calls):
    weather = Agent(
        name="Weather agent",
        instructions="Answer questions about the weather.",
        model=ScriptedModel("weather", script(mode, calls)),
        model_settings=ModelSettings(),
        tools=[lookup_weather, lookup_time],
    )
    # A triage agent hands the question to the weather agent first (the
    # SDK's handoff tool, as a model would call it).
    triage = Agent(
        name="Triage agent",
        instructions="Hand weather questions to the weather agent.",
        model=ScriptedModel("triage", [("transfer_to_weather_agent", {})]),
        handoffs=[weather],
    )
    result = await Runner.run(triage, "What is the weather in Paris?", max_turns=calls + 5)
    return result.final_output


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["loop", "normal"], default="loop")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--dump", help="also write every span as JSON Lines here")
    options = parser.parse_args()

    provider = TracerProvider()
    ids = TraceIds()
    provider.add_span_processor(ids)
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        # Batches, as an application exports: children may reach the
        # server before their root.
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if options.dump:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(options.dump)))
    trace.set_tracer_provider(provider)
    # Replace the SDK's own processor (its export to OpenAI) with
    # OpenTelemetry's.
    OpenAIAgentsInstrumentor(replace_existing_processors=True).instrument(
        tracer_provider=provider
    )

    answer = asyncio.run(run(options.mode, options.calls))
    if not provider.force_flush(30_000):
        print("the spans could not all be exported within 30 s", file=sys.stderr)
        sys.exit(1)
    provider.shutdown()
    print(f"answer={answer}")
    print(f"tokens={SPENT[0]},{SPENT[1]}")
    for trace_id in ids.ids:
        print(f"trace_id={trace_id}")


if __name__ == "__main__":
    main()
