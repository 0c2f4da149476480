"""The package itself: exports, stubs, docstrings."""

import doctest
import pathlib

import loopguard
from loopguard import _loopguard

PACKAGE = pathlib.Path(loopguard.__file__).parent


def test_exports_and_version():
    for name in loopguard.__all__:
        assert hasattr(loopguard, name), name
    assert loopguard.__version__.count(".") == 2
    assert issubclass(loopguard.EventError, loopguard.LoopguardError)
    assert issubclass(loopguard.ConfigError, loopguard.LoopguardError)
    assert issubclass(loopguard.Guard, _loopguard.Guard)


def test_stubs_and_marker_ship_with_the_package():
    assert (PACKAGE / "py.typed").is_file()
    stub = (PACKAGE / "_loopguard.pyi").read_text()
    compile(stub, "_loopguard.pyi", "exec")
    # Every public name of the native module is in its stub.
    for name in dir(_loopguard):
        if not name.startswith("_") or name == "__version__":
            assert name in stub, name
    for cls in (_loopguard.Guard, _loopguard.Decision, _loopguard.Detection):
        for attr in dir(cls):
            if not attr.startswith("_"):
                assert f"def {attr}(" in stub, f"{cls.__name__}.{attr}"


def test_docstrings_and_their_examples_run():
    for obj in (loopguard, loopguard.Guard, loopguard.Guard.observe, loopguard.Decision,
                loopguard.Detection.kind, loopguard.EventError):
        assert obj.__doc__, obj
    help_text = []
    import pydoc
    help_text.append(pydoc.render_doc(loopguard.Guard))
    assert "aobserve" in help_text[0] and "observe_json" in help_text[0]
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    tests = finder.find(loopguard, "loopguard", globs={"loopguard": loopguard})
    tests += finder.find(_loopguard.Guard, "Guard", globs={"loopguard": loopguard})
    tests += finder.find(_loopguard.Decision, "Decision", globs={"loopguard": loopguard})
    assert sum(len(test.examples) for test in tests) >= 5
    for test in tests:
        runner.run(test)
    assert runner.failures == 0
