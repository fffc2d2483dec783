"""The pytest plugin (registered through the ``pytest11`` entry point ``flarebench``).

It adds the run options to every pytest wherever flarebench is installed (their defaults from the
project's config file, see :mod:`flarebench.bench.settings`), parametrizes bench tests by strategy
spec (``spec`` argument), provides the session-wide ``bench_session`` fixture, and prints the
comparison table at the end. It imports nothing heavy until a bench test runs.

``pytest bench`` works in any repository: where the current folder has no ``bench`` folder, the
argument names flarebench's own bench (the installed ``flarebench/bench``); where it has one (made
by ``flarebench init``, holding a test module that hands collection to flarebench), that one runs.
It runs in one process: under pytest-xdist's workers (``-n N``) it is a usage error.

A mistake in the options is a usage error (``ERROR: ...``, exit status 4), whether it is found at
configure time or as the ``bench_session`` fixture starts the run.

Regression gates (``--gate``, ``--save-baseline``; see bench/gate.py): the baseline is read and
checked at configure time (a bad file is a usage error), the latency reference spec is
parametrized first, ``bench_gate`` fails a spec's test with one line per broken metric, and the
baseline is saved at the end of the session. With pytest-benchmark active, each bench test also
times one fixed probe through the ``benchmark`` fixture (``bench_timing``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from flarebench.bench.interrupt import sigterm_interrupts
from flarebench.bench.options import DEFAULTS_NOTE, RUN_OPTIONS

#: The name users give pytest for the bench (``pytest bench ...``).
BENCH_ARG = "bench"
# The module ``flarebench init`` writes in a repository's ``bench`` folder (bench/templates/init).
_INIT_MODULE = "test_flarebench.py"
# flarebench's own bench module.
_OWN_MODULE = Path(__file__).resolve().parent / "test_bench.py"
# Why the bench refuses pytest-xdist's workers.
_ONE_PROCESS = (
    "flarebench: pytest bench runs in one process (it times each probe; its run folder has one writer): "
    "drop -n, or add -n 0 / -p no:xdist"
)

_OPTIONS = pytest.StashKey[dict]()
_SOURCES = pytest.StashKey[dict]()
_SESSION = pytest.StashKey[object]()
_GATING = pytest.StashKey[object]()
_GATE_NOTES = pytest.StashKey[list]()
_USAGE = pytest.StashKey[str]()
_STORAGE = pytest.StashKey[Path]()
_GATE_OPTIONS = ("gate", "save_baseline", "tolerance", "gate_across_configs")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flarebench", f"flarebench: benchmark retrieval strategies. {DEFAULTS_NOTE}")
    for opt in RUN_OPTIONS:
        group.addoption(opt.flag, **opt.argparse_kwargs())
        group.addoption(opt.negation, **opt.negation_kwargs())


def _bench_arg(arg: str, here: Path) -> str:
    """``bench`` (or ``bench/...``, ``bench::...``) as the installed bench's path when ``here`` has no
    ``bench`` folder of its own; any other argument unchanged."""
    if not (arg == BENCH_ARG or arg.startswith((f"{BENCH_ARG}/", f"{BENCH_ARG}::"))) or (here / BENCH_ARG).exists():
        return arg
    return str(Path(__file__).resolve().parent) + arg[len(BENCH_ARG) :]


def _collects_the_bench(arg: str, here: Path, named: bool = False) -> bool:
    """Whether the pytest argument ``arg`` (given in ``here``, after :func:`_bench_arg`) collects a
    bench module, named as the module, its folder or (unless ``named``: the bench itself asked
    for) the folder above (a repository's root). Folders further up are not looked into: pytest
    skips a virtualenv holding flarebench."""
    path = (here / arg.split("::", 1)[0]).resolve()
    if path.is_file():
        return _is_bench_module(path)
    names = (_INIT_MODULE, _OWN_MODULE.name)
    folders = (path,) if named else (path, path / BENCH_ARG)
    return any(_is_bench_module(folder / name) for folder in folders for name in names)


def _is_bench_module(module: Path) -> bool:
    """The module ``flarebench init`` writes, or flarebench's own (installed, or a checkout's copy:
    the same text, as under a non-editable install)."""
    if module.name == _INIT_MODULE:
        return module.is_file()
    try:
        return module.name == _OWN_MODULE.name and module.read_bytes() == _OWN_MODULE.read_bytes()
    except OSError:
        return False


def _distributed(config: pytest.Config) -> bool:
    """Whether pytest-xdist will send the tests to workers (its own test, less --collect-only,
    where nothing runs; a worker's options say "no")."""
    if config.getoption("collectonly"):
        return False
    return config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None))


def pytest_configure(config: pytest.Config) -> None:
    from flarebench.bench import settings

    # pytest-benchmark (a dependency) makes its storage folder, ./.benchmarks, in every pytest run
    # of this environment, a team's own suite's too, and leaves it empty unless asked to save a run:
    # one this run makes and leaves empty is removed at its end (pytest-benchmark configures after us).
    storage = str(config.getoption("benchmark_storage", None) or "")
    if storage.startswith("file://") and not (folder := Path(storage.removeprefix("file://")).absolute()).exists():
        config.stash[_STORAGE] = folder

    # The config file's defaults under the command line's values: a bad file is a usage error.
    try:
        given = {dest: config.getoption(dest) for o in RUN_OPTIONS for dest in (o.dest, o.negated_dest)}
        values, sources = settings.resolve(given, settings.load(config.invocation_params.dir))
    except settings.SettingsError as e:
        raise _usage(str(e)) from None
    config.stash[_OPTIONS], config.stash[_SOURCES] = values, sources
    config.pluginmanager.register(_MarkInterrupted(config))
    config.args = [_bench_arg(arg, config.invocation_params.dir) for arg in config.args]
    # Each xdist worker would open (and lock) the same run folder and time probes beside the others':
    # refused before anything is written, as the controller never collects. The fixture refuses a
    # bench this misses (a module of another name) on the workers, test by test.
    if _distributed(config) and any(_collects_the_bench(a, config.invocation_params.dir) for a in config.args):
        raise pytest.UsageError(_ONE_PROCESS)
    # Plugins first: their strategies, LMs and retrievers are named by the options checked below.
    from flarebench.strategies import plugins

    try:
        plugins.load_all(values["plugin"])
    except plugins.PluginError as e:
        raise _usage(settings.locate(str(e), sources, "--plugin")) from None
    # A bad --strategy is a usage error, reported before anything is collected or loaded.
    if values["strategy"]:
        from flarebench.strategies.registry import SpecError, expand, parse_spec

        for spec in expand(values["strategy"]):
            try:
                parse_spec(spec)
            except SpecError as e:
                raise _usage(settings.locate(str(e), sources, "--strategy")) from None
    # A bad baseline file or gate option is a usage error too, before any model is loaded.
    if any(values[name] for name in _GATE_OPTIONS):
        from flarebench.bench.gate import GateError, Gating

        try:
            config.stash[_GATING] = Gating.from_options(values["strategy"], *(values[name] for name in _GATE_OPTIONS))
        except GateError as e:
            raise _usage(str(e)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    if folder := config.stash.get(_STORAGE, None):
        with contextlib.suppress(OSError):  # not empty (a run saved there), or gone: left as it is
            folder.rmdir()


def _usage(message: str) -> pytest.UsageError:
    """A usage error said as the console script says it: ``ERROR: flarebench: ...``."""
    return pytest.UsageError(f"flarebench: {message}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A bench test is one that uses the bench's fixtures (each needs bench_session): a test of a
    # team's own suite that merely takes an argument called spec is none of ours.
    if "spec" in metafunc.fixturenames and "bench_session" in metafunc.fixturenames:
        from flarebench.strategies.registry import expand

        gating = metafunc.config.stash.get(_GATING, None)
        # Under a gate the specs are the plan's: the latency reference first, then the gated ones.
        specs = gating.specs if gating is not None else expand(metafunc.config.stash[_OPTIONS]["strategy"])
        metafunc.parametrize("spec", specs)


def _benchmark_session(config: pytest.Config):
    """pytest-benchmark's session object when that plugin is active (it has no public accessor)."""
    return getattr(config, "_benchmarksession", None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Bench tests take pytest-benchmark's fixture when that plugin is active and timing is wanted,
    # so --benchmark-only keeps them and --benchmark-json/--benchmark-compare see them; they do not
    # name it in their signature, so --benchmark-skip (or -p no:benchmark) only drops the timing,
    # never the run or its gate. Runs before pytest-benchmark's own hook, which reads fixturenames.
    bs = _benchmark_session(config)
    if bs is None or bs.skip or (bs.disabled and not bs.only):
        return
    for item in items:
        names = getattr(item, "fixturenames", None)
        if isinstance(names, list) and "bench_timing" in names and "benchmark" not in names:
            names.append("benchmark")


@contextlib.contextmanager
def _stop_in_one_line(config: pytest.Config):
    """An LM server that cannot be reached, or a scorer (a plugin's) that fails on the traces, stops
    the pytest session with one line, no traceback."""
    from flarebench.bench.runner import resume_hint
    from flarebench.bench.scorers import ScorerError
    from flarebench.strategies.http_client import redact_secrets
    from flarebench.strategies.lm import LMUnavailable

    opts = config.stash[_OPTIONS]
    gated = bool(opts.get("gate") or opts.get("save_baseline"))
    try:
        yield
    except LMUnavailable as e:
        hint = resume_hint(gated, e)
        pytest.exit(redact_secrets(f"flarebench: {e}; {hint}"), returncode=pytest.ExitCode.TESTS_FAILED)
    except ScorerError as e:
        hint = resume_hint(gated)
        pytest.exit(f"flarebench: {e}; fix the scorer: {hint}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def bench_session(request: pytest.FixtureRequest):
    """The run shared by all bench tests of this pytest session (probes, LM, retriever, run folder)."""
    # Until the session ends, SIGTERM (a cancelled CI job) stops the run as Ctrl-C does.
    with sigterm_interrupts():
        yield from _bench_session(request)


def _bench_session(request: pytest.FixtureRequest):
    from flarebench.bench.session import BenchSession, ConfigError

    if hasattr(request.config, "workerinput"):  # an xdist worker's: see pytest_configure
        pytest.fail(_ONE_PROCESS, pytrace=False)
    opts = request.config.stash[_OPTIONS]
    capman = request.config.pluginmanager.getplugin("capturemanager")
    uncaptured = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    try:
        # Not captured: a note that a stale lock of the run folder was taken over is shown live.
        with uncaptured, _stop_in_one_line(request.config):
            session = BenchSession(**opts, option_sources=request.config.stash[_SOURCES])
    except ConfigError as e:
        # A bad option or file found once the session starts is a usage error, as one found earlier;
        # a value from the config file is named by its file, line and key.
        from flarebench.bench.settings import locate
        from flarebench.strategies.http_client import redact_secrets

        message = redact_secrets(f"flarebench: {locate(str(e), request.config.stash[_SOURCES], e.option)}")
        # Only pytest.exit leaves a fixture; pytest_runtestloop turns it into the usage error.
        request.config.stash[_USAGE] = message
        pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)
    request.config.stash[_SESSION] = session
    # From here the session holds the run folder's lock: every way out (an error, Ctrl-C, the end
    # of the pytest session, which tears this fixture down even when interrupted) closes it.
    try:
        try:
            with _stop_in_one_line(request.config):
                session.warm_up()  # prompt prefixes evaluated before anything is timed
        except BaseException as e:
            session.mark_interrupted(e)  # run.json must not say "running" for a run that stopped
            raise
        yield session
        try:
            with _stop_in_one_line(request.config):
                if session.gating.baseline is not None:  # gate.json names gated specs deselected with -k
                    session.gating.write_verdicts(session.run_dir)
                session.write_report()
        except BaseException as e:  # stopped as it wrote the report: marked (and written again) as any stop
            session.mark_interrupted(e)
            raise
    finally:
        session.close()


def _reference_before(bench_session, spec: str) -> None:
    """Run the gate's latency reference before a gated ``spec`` when it has not run (its own test
    deselected with -k): every gated spec runs after it, as in the full plan, and the latency
    ratios have their denominator."""
    gating = bench_session.gating
    if gating.baseline is not None and spec in gating.wanted and gating.reference not in bench_session.results:
        bench_session.run(gating.reference)


@pytest.fixture
def run_spec(request: pytest.FixtureRequest, bench_session):
    """Run a strategy spec on the session's probes with live progress (output capture paused)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def run(spec: str):
        with capman.global_and_fixture_disabled(), _stop_in_one_line(request.config):
            try:
                _reference_before(bench_session, spec)
                return bench_session.run(spec)
            except KeyboardInterrupt as e:
                # pytest stops here without tearing the run down as `flarebench run` does: what
                # finished is summarised and run.json says the run was interrupted.
                bench_session.mark_interrupted(e)
                raise

    return run


@pytest.fixture
def bench_timing(request: pytest.FixtureRequest, bench_session):
    """Time one fixed probe (the run's first) of a spec with pytest-benchmark, after the spec ran
    (so the model is warm; after a Ray run, once this process's own backends are warmed), one
    round; the spec's summary row goes in ``extra_info``. A no-op when pytest-benchmark is not
    active or its timing is skipped or disabled."""
    from flarebench.bench.gate import with_ratios
    from flarebench.bench.runner import run_probe, warm_up

    benchmark = request.getfixturevalue("benchmark") if "benchmark" in request.fixturenames else None

    def time_probe(spec: str) -> None:
        if benchmark is None:
            return
        s = bench_session
        probe = s.selected[0]
        benchmark.group = "flarebench"
        with _stop_in_one_line(request.config):
            if s.ray is not None:  # the spec ran on the workers: this process's backends are cold
                warm_up({spec: s.strategies[spec]}, s.lm_backend, s.retriever_backend)
            trace = benchmark.pedantic(
                run_probe,
                args=(spec, s.strategies[spec], probe, s.lm_backend, s.retriever_backend),
                rounds=1,
                iterations=1,
                warmup_rounds=0,
            )
        rows = {r["strategy"]: r for r in s.summary().to_dict("records")}
        reference = s.gating.reference if s.gating.reference in rows else None
        info = benchmark.extra_info
        info.update(timed_probe=probe.id, timed_probe_error=trace.error, timed_probe_answer=trace.answer)
        if spec in rows:
            metrics = with_ratios(rows[spec], rows.get(reference) if reference else None)
            info.update({k: v for k, v in metrics.items() if v is not None})
        if reference:
            info["latency_reference"] = reference

    return time_probe


@pytest.fixture
def bench_gate(request: pytest.FixtureRequest, bench_session):
    """Check a spec that ran against the --gate baseline: fail its test with one line per broken
    metric (name, baseline value, new value, allowed bound). A no-op without --gate."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def check(spec: str) -> None:
        gating = bench_session.gating
        if gating.baseline is None or spec not in gating.wanted:
            return
        with capman.global_and_fixture_disabled(), _stop_in_one_line(request.config):
            _reference_before(bench_session, spec)  # run_spec ran it, unless the spec ran another way
        checked = {spec: gating.check(spec, bench_session.summary())}
        reference = gating.reference
        if reference in gating.wanted and reference not in gating.verdicts and reference in bench_session.results:
            # A gated reference whose own test was deselected (-k) ran for this one: checked here.
            checked[reference] = gating.check(reference, bench_session.summary())
        gating.write_verdicts(bench_session.run_dir)
        if broken := {s: lines for s, lines in checked.items() if lines}:
            pytest.fail(
                "\n".join(
                    f"{s} breaks the gate {gating.baseline.path}:\n" + "\n".join(f"  {line}" for line in lines)
                    for s, lines in broken.items()
                ),
                pytrace=False,
            )

    return check


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session):
    # A usage error found as the bench session starts ends pytest as one found at configure time
    # does ("ERROR: ...", exit 4), not with pytest's banner for pytest.exit.
    try:
        return (yield)
    except pytest.exit.Exception:
        if message := session.config.stash.get(_USAGE, None):
            raise pytest.UsageError(message) from None
        raise


class _MarkInterrupted:
    """Ctrl-C or SIGTERM outside a strategy's run (while pytest-benchmark times a probe, between
    tests): run.json says the run was interrupted, as a stop inside a run does (``run_spec``)."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        bench = self.config.stash.get(_SESSION, None)
        if bench is not None and not bench.interrupted:
            bench.mark_interrupted(excinfo.value)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    bench = session.config.stash.get(_SESSION, None)
    if bench is None:
        _no_bench_test_ran(session)
        return
    gating, notes = bench.gating, []
    if bench.judge_failure and session.exitstatus == 0:  # faithfulness was asked for and is missing
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if gating.baseline is not None and gating.unchecked and session.exitstatus == 0:
        # A gate that checked less than it was asked to (its tests deselected with -k) passed nothing.
        notes.append(
            f"gate not passed: {', '.join(gating.unchecked)} did not run (deselected?); gate it with --strategy"
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if gating.save_to is not None:
        notes.append(note := gating.save(bench.summary()))
        if note.startswith("baseline not saved") and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    session.config.stash[_GATE_NOTES] = notes


def _no_bench_test_ran(session: pytest.Session) -> None:
    """A gate or a baseline asked for where every bench test was deselected (-k) checked and saved
    nothing: said, and the session fails, as when some of the gated specs did not run."""
    config = session.config
    gating = config.stash.get(_GATING, None)
    if gating is None or config.getoption("collectonly") or session.exitstatus not in (0, 5):
        return
    if not any(_collects_the_bench(a, config.invocation_params.dir, named=True) for a in config.args):
        return  # a team's own suite (the repository's root too: pytest -k ITS_TEST), a gate in its config file
    notes = []
    if gating.baseline is not None:
        notes.append(f"gate not passed: no bench test ran (deselected?), so {', '.join(gating.wanted)} went unchecked")
    if gating.save_to is not None:
        notes.append("baseline not saved: no bench test ran (deselected?)")
    config.stash[_GATE_NOTES] = notes
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None:
        if notes := config.stash.get(_GATE_NOTES, []):
            terminalreporter.section("flarebench")
            for note in notes:
                terminalreporter.write_line(f"flarebench: {note}")
        return
    terminalreporter.section("flarebench")
    if session.lm_capabilities:
        terminalreporter.write_line(session.lm_capabilities)
    for line in session.closing_lines():
        terminalreporter.write_line(line)
    for note in config.stash.get(_GATE_NOTES, []):
        terminalreporter.write_line(note)
    if line := session.judge_line():
        terminalreporter.write_line(line)
    if session.interrupted:  # as `flarebench run` says it
        terminalreporter.write_line(f"flarebench: interrupted; {session.stop_note()}")
