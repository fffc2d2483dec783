"""The pytest plugin (registered through the ``pytest11`` entry point ``flarebench``).

It adds the run options to every pytest wherever flarebench is installed, parametrizes bench tests
by strategy spec (``spec`` argument), provides the session-wide ``bench_session`` fixture, and
prints the comparison table at the end. It imports nothing heavy until a bench test runs.
"""

from __future__ import annotations

import pytest

from bench.options import RUN_OPTIONS

_SESSION = pytest.StashKey[object]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flarebench", "flarebench: benchmark retrieval strategies")
    for opt in RUN_OPTIONS:
        group.addoption(opt.flag, **opt.argparse_kwargs())


def pytest_configure(config: pytest.Config) -> None:
    # A bad --strategy is a usage error, reported before anything is collected or loaded.
    if config.getoption("strategy"):
        from strategies.registry import SpecError, expand, parse_spec

        for spec in expand(config.getoption("strategy")):
            try:
                parse_spec(spec)
            except SpecError as e:
                raise pytest.UsageError(str(e)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spec" in metafunc.fixturenames:
        from strategies.registry import expand

        metafunc.parametrize("spec", expand(metafunc.config.getoption("strategy")))


@pytest.fixture(scope="session")
def bench_session(request: pytest.FixtureRequest):
    """The run shared by all bench tests of this pytest session (probes, LM, retriever, run folder)."""
    from bench.session import BenchSession, ConfigError

    opts = {o.dest: request.config.getoption(o.dest) for o in RUN_OPTIONS}
    try:
        session = BenchSession(**opts)
    except ConfigError as e:
        pytest.exit(f"flarebench: {e}", returncode=2)
    request.config.stash[_SESSION] = session
    yield session
    session.close()


@pytest.fixture
def run_spec(request: pytest.FixtureRequest, bench_session):
    """Run a strategy spec on the session's probes with live progress (output capture paused)."""
    from bench.runner import StrategyRefused

    capman = request.config.pluginmanager.getplugin("capturemanager")

    def run(spec: str):
        try:
            with capman.global_and_fixture_disabled():
                return bench_session.run(spec)
        except StrategyRefused as e:
            pytest.fail(str(e), pytrace=False)

    return run


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return
    terminalreporter.section("flarebench")
    terminalreporter.write_line(session.table())
    terminalreporter.write_line(f"run folder: {session.run_dir}")
