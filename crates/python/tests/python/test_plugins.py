"""Detector plugins in a guard: by default each runs in a worker process of
its own (the package's ``loopguard-plugin-worker`` script), so a plugin that
segfaults is a fault of that event's decision, not the end of the Python
process; in process, the same plugin would take the interpreter down."""

import json
import os
import subprocess
import sys
import sysconfig

import pytest

import loopguard

CRASHY = os.environ.get("LOOPGUARD_PY_CRASHY_PLUGIN")
needs_plugin = pytest.mark.skipif(CRASHY is None, reason="run from cargo test (builds the plugin)")

TURN = {"type": "turn", "task": "T1", "agent": "coder", "output": "working", "success": True}
FAILURE = {"type": "failure", "task": "T1", "agent": "coder", "error": "E0308 mismatched types"}


def crashy_config(crash_at, isolation=None):
    plugin = {"path": CRASHY, "config": {"crash_at": crash_at, "how": "segv", "every": 2}}
    config = {"plugins": [plugin]}
    if isolation is not None:
        config["plugin_host"] = {"isolation": isolation}
    return config


def test_the_worker_script_is_installed_beside_the_interpreter():
    script = os.path.join(sysconfig.get_path("scripts"), "loopguard-plugin-worker")
    assert os.path.isfile(script), script
    usage = subprocess.run([script], capture_output=True, text=True)
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: loopguard-plugin-worker plugin-worker LIBRARY")


@needs_plugin
def test_a_segfaulting_plugin_is_a_fault_and_the_guard_goes_on():
    guard = loopguard.Guard(crashy_config([3]), semantic=False)
    decisions = [guard.observe(event) for event in [TURN, FAILURE, TURN, FAILURE, TURN, FAILURE]]
    faulted = [(d.line, d.errors) for d in decisions if d.errors]
    assert faulted == [
        (3, ["detector crashy: its worker was killed by SIGSEGV (fault 1 of 3)"])
    ]
    # Restarted with the task's count, it reports every 2nd event it saw:
    # line 3 was lost to the crash, so the 4th falls on line 5.
    counted = [d.line for d in decisions for x in d.detections if x.kind == "crashy_count"]
    assert counted == [2, 5]
    # The built-in detectors went on: the repeated failure.
    assert any(x.kind == "exact_failure" for x in decisions[-1].detections)


@needs_plugin
def test_in_process_the_same_plugin_would_end_the_interpreter():
    # Run in a child interpreter: in process, the segfault is the process's.
    code = (
        "import json, sys, loopguard\n"
        "config = json.loads(sys.argv[1])\n"
        "guard = loopguard.Guard(config, semantic=False)\n"
        "event = {'type': 'turn', 'task': 'T1', 'agent': 'a', 'output': 'x', 'success': True}\n"
        "for _ in range(3):\n"
        "    guard.observe(event)\n"
        "print('survived')\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code, json.dumps(crashy_config([2], "in-process"))],
        capture_output=True,
        text=True,
    )
    assert child.returncode == -11, (child.returncode, child.stderr)
    assert "survived" not in child.stdout


@needs_plugin
def test_a_worker_that_cannot_start_is_named(tmp_path):
    # A config naming a worker that does not exist: refused at start, named.
    config = crashy_config([])
    config["plugin_host"] = {"worker": str(tmp_path / "no-such-worker")}
    with pytest.raises(loopguard.LoopguardError) as raised:
        loopguard.Guard(config, semantic=False)
    assert "no-such-worker" in str(raised.value)
