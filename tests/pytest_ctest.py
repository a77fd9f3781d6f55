"""pytest under CTest (tests/pytest.cmake): one CTest entry per test file.

  pytest_ctest.py collect OUT PREFIX STRIP FILE...
      Collects FILE... (run in their directory, at configure time) and writes OUT, a CMake file
      with one `ty__pytest_case(NAME FILE "" COUNT)` call per file: NAME is PREFIX.<file>,
      <file> without the .py and without STRIP at its start (may be ""), COUNT its number of
      tests (CTest's COST: the biggest files start first). A test marked `alone` gets an entry
      of its own instead, `ty__pytest_case(NAME FILE TEST 1 ALONE)` with NAME
      PREFIX.<file>.<test>, which CTest runs with nothing else running (RUN_SERIAL).
      A file that yields no test (skipped as a whole, or an import error) gets its entry all
      the same, so it reports Not Run or Failed instead of vanishing.
  pytest_ctest.py run [--ctest-node=TEST] [PYTEST ARG...]
      `python3 -m pytest PYTEST ARG...` with this file as a plugin: --ctest-node (URL-quoted,
      the part of the node id after `file.py::`) runs that one test of the file given; without
      it, the file's tests less those marked `alone`, and less those marked `not_sanitized` in
      the sanitizer build (TY_SANITIZED=1). A run in which a test was skipped exits 77 (CTest's
      SKIP_RETURN_CODE: "Not Run"), never 0, even when the others passed: a skipped test is not
      a pass, and the file's entry says which ran and which did not.

A process per file, not per test: starting Python and pytest costs about 0.5 s of CPU, which a
thousand tests paid twice per suite run (docs/decisions.md, "The suite inside CI's 30 minutes").
"""
import os
import sys
import urllib.parse

import pytest

SKIP = 77


# ---- the plugin (run) ----------------------------------------------------------------------

class Outcomes:
    passed = 0
    skipped = []


def pytest_addoption(parser):
    parser.addoption("--ctest-node", default=None,
                     help="run only the test whose node id ends in ::NODE (URL-quoted)")


def pytest_configure(config):
    register_markers(config)


def register_markers(config):
    config.addinivalue_line("markers", "alone: its own CTest entry, run with nothing else "
                            "running (a test that compares the speed of its own processes)")
    config.addinivalue_line("markers", "not_sanitized: not run in the ASan + UBSan build "
                            "(a test of what that build cannot do, e.g. valgrind)")


def pytest_collection_modifyitems(session, config, items):
    want = config.getoption("ctest_node")
    if want is None:
        sanitized = os.environ.get("TY_SANITIZED") == "1"
        keep = [i for i in items if not i.get_closest_marker("alone")
                and not (sanitized and i.get_closest_marker("not_sanitized"))]
    else:
        want = urllib.parse.unquote(want)
        keep = [i for i in items if i.nodeid.split("::", 1)[-1] == want]
        if not keep and not Outcomes.skipped:
            raise pytest.UsageError(f"no test {want!r} here (renamed or removed since CMake "
                                    "collected the tests: configure again)")
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


def pytest_collectreport(report):
    if report.skipped:
        Outcomes.skipped.append(report.nodeid)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        Outcomes.skipped.append(report.nodeid)
    elif report.when == "call" and report.passed:
        Outcomes.passed += 1


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    nothing_failed = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    if nothing_failed and Outcomes.skipped:
        print(f"\n{len(Outcomes.skipped)} skipped ({', '.join(Outcomes.skipped)}), "
              f"{Outcomes.passed} passed: exit {SKIP} (Not Run), a skipped test is not a pass")
        session.exitstatus = SKIP


def run(args):
    # As `python3 -m pytest` does: the working directory first on sys.path.
    sys.path.insert(0, os.getcwd())
    # The slowest steps are listed in CTest's output: where the suite's time goes, per file.
    return pytest.main(["-p", "no:cacheprovider", "-rs", "--durations=10", "--durations-min=1",
                        *args], plugins=[sys.modules[__name__]])


# ---- collection (collect) ------------------------------------------------------------------

class Collector:
    def __init__(self):
        self.items = []

    def pytest_configure(self, config):
        register_markers(config)

    def pytest_collection_finish(self, session):
        self.items = [(i.nodeid, bool(i.get_closest_marker("alone"))) for i in session.items]


def bracket(text):
    """A CMake bracket argument holding `text` verbatim."""
    eq = "="
    while f"]{eq}]" in text:
        eq += "="
    return f"[{eq}[{text}]{eq}]"


def collect(out, prefix, strip, files):
    collector = Collector()
    with open(os.devnull, "w") as null:
        saved = sys.stdout
        sys.stdout = null
        try:
            pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *files],
                         plugins=[collector])
        finally:
            sys.stdout = saved
    lines = []
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        stem = stem[len(strip):] if strip and stem.startswith(strip) else stem
        tests = [(n.split("::", 1)[1], alone) for n, alone in collector.items
                 if os.path.basename(n.split("::", 1)[0]) == os.path.basename(f)]
        grouped = sum(1 for _, alone in tests if not alone)
        if grouped or not tests:
            lines.append(f"ty__pytest_case({bracket(f'{prefix}.{stem}')} {bracket(f)} \"\" "
                         f"{max(grouped, 1)})")
        for t, alone in tests:
            if not alone:
                continue
            # A CTest name cannot hold ';' (a CMake list separator); '::' of a test class reads
            # as '.'. The node id travels URL-quoted.
            name = f"{prefix}.{stem}.{t.replace('::', '.').replace(';', ',')}"
            lines.append(f"ty__pytest_case({bracket(name)} {bracket(f)} "
                         f"{bracket(urllib.parse.quote(t, safe=''))} 1 ALONE)")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write("# Generated by tests/pytest_ctest.py collect at configure time.\n")
        f.write("".join(line + "\n" for line in lines))
    os.replace(tmp, out)
    return 0


def main(argv):
    if len(argv) >= 4 and argv[0] == "collect":
        return collect(argv[1], argv[2], argv[3], argv[4:])
    if argv and argv[0] == "run":
        return run(argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(int(main(sys.argv[1:])))
