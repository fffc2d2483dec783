"""A bench session: resolve the options into probes, LM, retriever and strategies, own the run
folder (create, resume or refuse), run strategies with progress, and write the summary.

Both the pytest plugin and the ``flarebench`` console script drive runs through this class.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from tqdm import tqdm

from flarebench.bench.adoption import ADOPTION_MD
from flarebench.bench.bounds import strategy_rows, with_bounds
from flarebench.bench.calibrate import CALIBRATION_CSV, CalibrationError, Goal, check_goal_fits
from flarebench.bench.config import command_line, fingerprint, first_difference, meaning, run_config
from flarebench.bench.gate import GATE_JSON, GateError, Gating
from flarebench.bench.html import REPORT_HTML
from flarebench.bench.interrupt import interrupts_polled
from flarebench.bench.paths import StorageFailed, WriteError
from flarebench.bench.ray_executor import (
    DEFAULT_WORKERS,
    EXECUTORS,
    RaySettings,
    address_problem,
    import_ray,
    run_on_ray,
)
from flarebench.bench.recipe import BackendRecipe
from flarebench.bench.report import (
    SUMMARY_CSV,
    SUMMARY_MD,
    absent_reference,
    format_table,
    is_comparison,
    summary_frame,
    write_atomic,
    write_summary,
)
from flarebench.bench.runlock import LOCK, LockHeld, RunLock
from flarebench.bench.runner import TRACES, TraceError, TraceLog, refusal, resume_hint, run_strategy, warm_up
from flarebench.bench.scorers import ScorerError
from flarebench.bench.settings import COMMAND_LINE, was_given
from flarebench.bench.trigger_scores import TRIGGERS_CSV
from flarebench.probes.load import SHIPPED_DIR, ProbeError, check_format, load_probe_set, shadowed
from flarebench.strategies import plugins
from flarebench.strategies.backends import lm_class, only_for
from flarebench.strategies.base import LONG_ANSWER_DEFAULTS
from flarebench.strategies.lm import KeyRefused, LMError, LMUnavailable
from flarebench.strategies.records import OBJECT, Trace, check_fields
from flarebench.strategies.registry import canonical, expand, parse_spec
from flarebench.strategies.triggers import Gated

RUN_JSON = "run.json"
#: run.json's ``status``: a run in progress, one stopped with strategies or probes to go, one
#: stopped by Ctrl-C or SIGTERM, and one that ran every spec on every selected probe.
STATUSES = ("running", "partial", "interrupted", "complete")
_START_AGAIN = ", or use --overwrite to start the run again"  # the end of a line refusing traces.jsonl

#: The cache of a calibration's dev runs, in the run folder.
DEV_CACHE = "dev-cache"
#: Where a run without --report-dir writes its folder, ``<UTC time>-<config hash>``.
DEFAULT_RUNS = Path("reports")


def _unreadable(traces: Path, e: OSError) -> str:
    """The line refusing a traces.jsonl that cannot be read (before :data:`_START_AGAIN`)."""
    return f"{traces}: cannot be read ({e.strerror or e}); fix or delete it"


class ConfigError(ValueError):
    """A user mistake in the run options or the run folder: shown as one line, never a traceback.
    ``option`` names the flag a message is about where the message does not open with it, so that
    a value from the config file is named by its file, line and key (bench/settings.py, locate)."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


@functools.cache  # each metadata.version() scans sys.path; the installed versions do not change
def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("flarebench", "llama_cpp_python", "openai", "bm25s", "pysbd", "pandas"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass
class BenchSession:
    """One run of one or more strategy specs over one probe set."""

    strategy: list[str] | None = None
    plugin: list[str] | None = None  # --plugin: modules or files imported before the specs are read
    probes: str = "phantomwiki"
    probes_format: str = "auto"
    limit: int | None = None
    lm: str = "llamacpp:smollm2"
    # --lm openai:MODEL's endpoint (strategies/openai_lm.py); the key is read from the variable named
    # by lm_api_key_env and never stored here.
    lm_base_url: str | None = None
    lm_api_key_env: str | None = None
    lm_timeout: float | None = None
    lm_retries: int | None = None
    retriever_timeout: float | None = None
    retriever_retries: int | None = None
    concurrency: int = 1  # probes at once; > 1 only for thread-safe backends
    # --executor ray: the probes go to Ray workers (bench/ray_executor.py); how they are executed
    # changes no answer, so it is recorded in run.json but is not part of the config.
    executor: str = "local"
    ray_address: str | None = None
    workers: int | None = None
    threads_per_worker: int | None = None
    retriever: str = "bm25s"
    # --retriever dense/hybrid's embeddings endpoint and --rerank (strategies/dense.py, rerank.py); the
    # key is read from the variable named by embed_api_key_env and never stored here.
    embed: str | None = None
    embed_base_url: str | None = None
    embed_api_key_env: str | None = None
    rerank: str | None = None
    rerank_depth: int | None = None
    report_dir: str | None = None
    overwrite: bool = False
    retry_errors: bool = False  # --retry-errors: a resumed run's errored probes are run again
    save_baseline: str | None = None
    gate: str | None = None
    tolerance: list[str] | None = None
    gate_across_configs: bool = False
    prices: str | None = None  # --prices FILE: a price table looked up before the shipped one
    reference: str = "single_time"  # --reference SPEC: the delta columns' reference strategy
    judge: str | None = None  # --judge openai:MODEL: ragas-judged faithfulness (bench/faithfulness.py)
    judge_base_url: str | None = None
    progress: bool = True
    #: What kind of study this run is (``{"kind": "compare"}``, ``{"kind": "sweep", "param": ...}``),
    #: recorded in run.json for the report; it changes no answer, so it is not part of the config.
    study: dict | None = None
    cache: str | None = None  # --cache [DIR]: LM calls and retrievals from disk (bench/cache.py)
    #: --record-topk K: drafts record their top-K alternatives and entropies (bench/topk.py)
    record_topk: int | None = None
    #: Where each option's value came from ("command line", a config file's path, "default";
    #: bench/settings.py), recorded in run.json; not part of the config, as it changes no answer.
    option_sources: dict[str, str] | None = None
    started: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {self.limit}")
        # Every path option is checked first: a wrong one fails in one line before anything loads.
        self._check_paths()
        try:
            plugins.load_all(self.plugin)
        except plugins.PluginError as e:
            raise ConfigError(str(e), option="--plugin") from None
        try:
            lm_thread_safe = lm_class(self.lm).thread_safe
        except LMError as e:
            raise ConfigError(str(e), option="--lm") from None
        if self.record_topk is not None:
            from flarebench.bench.topk import check_k

            try:
                check_k(self.record_topk)
            except ValueError as e:
                raise ConfigError(str(e)) from None
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be >= 1, got {self.concurrency}")
        if self.concurrency > 1 and not lm_thread_safe:
            raise ConfigError(
                f"--concurrency {self.concurrency} needs a backend that serves calls in parallel; "
                f"{self.lm} does not (use --lm openai:MODEL)"
            )
        self.ray = self._ray_settings()
        try:  # named apart: a format from the config file is located there, not at --probes
            check_format(self.probes_format)
        except ProbeError as e:
            raise ConfigError(str(e), option="--probes-format") from None
        try:
            self.probe_set = load_probe_set(self.probes, self.probes_format)
        except ProbeError as e:
            raise ConfigError(_probe_problem(self.probes, self.probes_format, e), option="--probes") from None
        if hidden := shadowed(self.probes):
            kind = "folder" if hidden.is_dir() else "file"
            note = f"--probes {self.probes} is the shipped set, not the {kind} {hidden} here (give ./{hidden} for that)"
            print(f"flarebench: {note}", file=sys.stderr)
        self.selected = self.probe_set.probes[: self.limit] if self.limit else list(self.probe_set.probes)
        if self.study and "goal" in self.study:
            # A calibration's goal must be measurable on these probes (fact_recall needs long ones):
            # refused before the model loads and the run folder opens.
            try:
                check_goal_fits(Goal(**self.study["goal"]), self.probe_set)
            except CalibrationError as e:
                raise ConfigError(str(e)) from None
        self.specs = given = expand(self.strategy)
        # Regression gates (bench/gate.py): with --gate or --save-baseline the latency reference runs first.
        try:
            self.gating = Gating.from_options(
                self.strategy, self.gate, self.save_baseline, self.tolerance, self.gate_across_configs
            )
        except GateError as e:
            raise ConfigError(str(e)) from None
        self.specs = self.gating.specs
        if is_comparison(self.study) and self.study.get("bounds", True):
            # A comparison runs its never and always bounds too (bench/bounds.py), unless --no-bounds;
            # after the gate's specs, so that a baseline is not asked for them.
            self.specs = with_bounds(self.specs)
        # Parse every spec before loading anything heavy, so a typo fails at once.
        from flarebench.strategies.registry import SpecError, refuse_twins

        try:
            # A set of long probes asks every spec for long answers, unless the spec says otherwise.
            defaults = LONG_ANSWER_DEFAULTS if self.probe_set.answer_form == "long" else None
            self.strategies = {spec: parse_spec(spec, defaults) for spec in self.specs}
            if not (self.study and "goal" in self.study):  # a calibration's grid: its user's specs are checked
                refuse_twins([spec for spec in given if spec in self.strategies])  # a gate runs its baseline's
        except SpecError as e:
            raise ConfigError(str(e), option="--strategy") from None
        if self.record_topk is not None and not any(isinstance(s, Gated) for s in self.strategies.values()):
            # It widens draft calls only: without a drafting strategy the run would record nothing.
            raise ConfigError(
                f"--record-topk records the drafts of a strategy with a trigger (flare_direct, adaptive); "
                f"{', '.join(self.specs)} draft nothing"
            )
        self.reference = canonical(self.reference)  # as the rows are labelled (expand)
        try:  # one that is no strategy is a typo
            reference = parse_spec(self.reference, defaults)
        except SpecError as e:
            raise ConfigError(f"--reference: {e}") from None
        if not (self.study and "goal" in self.study):  # a calibration's grid: the CLI checks its user's specs
            asked = was_given(self.option_sources, "reference")
            sweep = bool(self.study and self.study.get("kind") == "sweep")  # its specs are the swept points
            hint = "name one of its points" if sweep else ADD_REFERENCE
            self.reference = run_reference(self.reference, reference, self.strategies, asked, hint)
        # A bad price file fails before anything heavy is loaded; the LM's name picks the price below.
        from flarebench.bench.prices import PriceError, load_table

        try:
            if self.prices:
                load_table(self.prices)
        except PriceError as e:
            raise ConfigError(str(e), option="--prices") from None
        from flarebench.bench.faithfulness import JudgeError, parse_judge

        try:
            self.judge_backend = parse_judge(self.judge, self.judge_base_url)
        except JudgeError as e:
            raise ConfigError(str(e), option="--judge") from None
        self._faithfulness: dict = {}  # (strategy, probe id) -> row, scored once per trace
        self._rows: dict = {}  # (strategy, probe id) -> its per-probe row, made once (report.probe_rows)
        self.judge_failure: str | None = None  # the judge's error, when it failed: its answers are unjudged
        self._scored_at: tuple[int, list[Trace], Any] | None = None  # see _scored()
        self._dev: tuple | None = None  # calibration's dev-run backends (see measure())
        self._more_to_come = False  # a calibration's specs are not all known yet (see focus())
        self.warmed: dict | None = None  # what warm_up() evaluated before the first probe
        self.interrupted = False  # set by mark_interrupted(): the entry points say how to resume
        if self.retry_errors and (self.gating.active or self.overwrite):
            fresh = "--overwrite starts the run again" if self.overwrite else "a gated run is measured in one fresh run"
            source = (self.option_sources or {}).get("retry_errors", COMMAND_LINE)
            if source == COMMAND_LINE:
                raise ConfigError(f"--retry-errors runs a resumed run's failed probes again, but {fresh}")
            # A team's default for its own runs: its CI's gated runs go on without it, saying so.
            print(f"flarebench: retry-errors from {source} is left off: {fresh}", file=sys.stderr)
            self.retry_errors = False
        # A folder another process is writing is refused now, before the model loads (it is
        # checked again, authoritatively, when the lock is taken).
        self._lock: RunLock | None = None
        if self.report_dir:
            self._refuse_foreign_folder(Path(self.report_dir))
            if not self.overwrite:
                self._refuse_unreadable_run(Path(self.report_dir))
            if why := RunLock(Path(self.report_dir)).blocked():
                raise ConfigError(why)
        self._backends = None
        self._on_ray = False  # --executor ray: the unfinished probes were sent to the workers
        try:
            self._load_backends()
        except BaseException:
            self.close()  # the model, the cache and the folder's lock, whatever was taken
            raise

    def _load_backends(self) -> None:
        """Load the LM, the retriever and the cache, then open the run folder (the heavy part of
        :meth:`__post_init__`; on an error the caller closes whatever was opened)."""
        from flarebench.bench.prices import price_for

        try:  # the retriever and rerank options, before an endpoint is asked or a model loads
            self.recipe.check()
        except ValueError as e:
            raise ConfigError(str(e), option="--retriever") from None
        try:
            # A Ray run's driver describes its model but answers no probe: its weights load only if
            # it ever calls it (calibration's dev runs, pytest-benchmark's timed probe).
            backends = self.recipe.build(progress=self.progress, lm_weights=self.ray is None)
        except KeyRefused as e:  # a wrong key, as a wrong option: nothing ran, nothing to resume
            raise ConfigError(str(e)) from None
        except LMUnavailable as e:
            e.before_run = True  # the entry points say so, and what to check (runner.resume_hint)
            raise
        except (ValueError, LMError) as e:  # a bad option, or an extra that is not installed
            raise ConfigError(str(e)) from None
        self._backends = backends
        self.lm_backend, self.retriever_backend, self.disk_cache = backends.lm, backends.retriever, backends.cache
        # What an endpoint offers, found by its capability probe (None for in-process backends).
        self.lm_capabilities = backends.capabilities
        # A strategy the LM cannot serve is refused before the run folder is opened.
        if why := refusal(self.strategies, self.lm_backend):
            raise ConfigError(why)
        self.config = self._config()
        self.price = price_for(self.config["lm"].get("name", self.lm), self.prices)
        if self.study and "goal" in self.study and self.price is None:
            goal = Goal(**self.study["goal"])
            if priced := [c for c in (goal.metric, goal.objective) if c and c.startswith("cost")]:
                # Every dev point's cost would be missing: the grid would run for a goal no point meets.
                raise ConfigError(
                    f"{priced[0]}: the LM {self.config['lm'].get('name', self.lm)} has no price, so no cost is "
                    "measured (give --prices FILE with its price)"
                )
        try:
            self.gating.bind(fingerprint(self.config, self.strategies, len(self.selected)))
        except GateError as e:
            raise ConfigError(str(e)) from None
        self.results: dict[str, list[Trace]] = {}
        self.report_path: Path | None = None
        self.run_dir = self._open_run_dir()

    @property
    def recipe(self) -> BackendRecipe:
        """How this run's backends are built: here, and by every worker of ``--executor ray``."""
        return BackendRecipe(
            lm=self.lm,
            retriever=self.retriever,
            corpus=tuple(self.probe_set.corpus),
            lm_base_url=self.lm_base_url,
            lm_api_key_env=self.lm_api_key_env,
            lm_timeout=self.lm_timeout,
            lm_retries=self.lm_retries,
            retriever_timeout=self.retriever_timeout,
            retriever_retries=self.retriever_retries,
            embed=self.embed,
            embed_base_url=self.embed_base_url,
            embed_api_key_env=self.embed_api_key_env,
            rerank=self.rerank,
            rerank_depth=self.rerank_depth,
            cache=self.cache,
            record_topk=self.record_topk,
            plugins=tuple(self.plugin or ()),
        )

    def _ray_settings(self) -> RaySettings | None:
        """--executor ray's settings (None for --executor local), refused in one line when wrong."""
        if self.executor not in EXECUTORS:
            raise ConfigError(f"--executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        flags = {"--ray-address": self.ray_address, "--workers": self.workers,
                 "--threads-per-worker": self.threads_per_worker}  # fmt: skip
        if self.executor == "local":
            if given := [flag for flag, value in flags.items() if value is not None]:
                raise ConfigError(only_for(given, "--executor ray"))
            return None
        for flag in ("--workers", "--threads-per-worker"):
            if flags[flag] is not None and flags[flag] < 1:
                raise ConfigError(f"{flag} must be >= 1, got {flags[flag]}")
        if self.ray_address is not None and (why := address_problem(self.ray_address)):
            raise ConfigError(why)
        if self.concurrency > 1:
            raise ConfigError("--concurrency applies to --executor local; with --executor ray, set --workers")
        try:
            import_ray()
        except ImportError as e:
            raise ConfigError(str(e)) from None
        return RaySettings(self.ray_address, self.workers or DEFAULT_WORKERS, self.threads_per_worker)

    def _config(self) -> dict[str, Any]:
        """Everything that determines the answers (:func:`flarebench.bench.config.run_config`)."""
        return run_config(
            self.probe_set,
            self._probe_source(),
            self.lm_backend,
            self.retriever_backend,
            self.strategies,
            record_topk=self.record_topk,
            plugins={
                **{ref: plugins.digest(ref) for ref in self.plugin or () if plugins.shapes_answers(ref)},
                **plugins.installed_code(
                    [
                        *((plugins.STRATEGIES, spec.partition(":")[0]) for spec in self.specs),
                        (plugins.LMS, self.lm.partition(":")[0]),
                        (plugins.RETRIEVERS, self.retriever),
                    ]
                ),
            },
        )

    def _probe_source(self) -> str:
        # A shipped set is named, so a run folder resumes and rescores from any checkout.
        if self.probe_set.path.parent == SHIPPED_DIR:
            return self.probe_set.name
        return str(self.probe_set.path)

    @property
    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.config, sort_keys=True).encode()).hexdigest()[:10]

    def _check_paths(self) -> None:
        """Refuse, in one line, a path option that cannot serve: a file where a folder is wanted
        or the reverse, a missing input, a place that cannot be written."""
        from flarebench.bench.paths import PathError, check_cache_root, check_folder, check_input_file

        try:
            check_folder("--report-dir", self.report_dir or "reports")
            check_cache_root()  # $FLAREBENCH_CACHE: every run keeps its indexes there, with --cache or without
            if self.cache:
                from flarebench.bench.cache import default_dir

                check_folder("--cache", default_dir() if self.cache == "default" else self.cache)
            if self.prices:
                check_input_file("--prices", self.prices)
        except PathError as e:
            raise ConfigError(str(e)) from None

    def _refuse_foreign_folder(self, run_dir: Path) -> None:
        # A folder holding files but no run is someone else's: never written into, and never
        # emptied by --overwrite, which replaces a run (a repository's root given by mistake).
        if (run_dir / RUN_JSON).exists() or not run_dir.is_dir():
            return
        entries = sorted(p.name for p in run_dir.iterdir() if p.name != LOCK)
        if foreign := [name for name in entries if not _written_by_a_run(name)]:
            raise ConfigError(
                f"{run_dir} exists and holds no flarebench run (it holds {foreign[0]!r}); "
                "use another --report-dir (--overwrite replaces a run, never other files)"
            )
        if entries and not self.overwrite:
            raise ConfigError(
                f"{run_dir} holds no run.json, only a run's other files; use --overwrite or another --report-dir"
            )

    def _refuse_unreadable_run(self, run_dir: Path) -> None:
        """A run folder that cannot be resumed as it is (a run.json that is no run's, a traces.jsonl
        that cannot be opened) refused before the model loads; :meth:`_open_run_dir` checks again,
        authoritatively."""
        traces = run_dir / TRACES
        if traces.exists():
            try:
                traces.open("rb").close()
            except OSError as e:
                raise ConfigError(f"{_unreadable(traces, e)}{_START_AGAIN}") from None
        if (run_dir / RUN_JSON).exists() and not self.gating.active:  # a gated run says so itself
            try:
                read_run_json(run_dir / RUN_JSON)
            except ConfigError as e:
                raise ConfigError(f"{e}; use --overwrite to replace it") from None

    def _default_to_resume(self) -> tuple[Path, str] | None:
        """The newest default run folder of this configuration (``reports/<time>-<config hash>``)
        when its run did not finish (interrupted, killed), or finished and --retry-errors is given,
        and no live process writes it, with why it is resumed; None otherwise, and always for a
        gated run or with --overwrite, which start afresh."""
        if self.gating.active or self.overwrite:
            return None
        folders = sorted(DEFAULT_RUNS.glob(f"*-{self.config_hash}")) if DEFAULT_RUNS.is_dir() else []
        if not folders:
            return None
        try:
            status = read_run_json(folders[-1] / RUN_JSON).get("status")
        except (ConfigError, OSError):
            return None  # not a run this command can resume: a new folder, as before
        if RunLock(folders[-1]).blocked() is not None:
            return None
        if status != "complete":
            return folders[-1], "which did not finish"
        if self.retry_errors and _has_errors(folders[-1] / TRACES):
            return folders[-1], "for --retry-errors"
        return None  # finished (with nothing to retry): a new run, as before

    def _new_default_folder(self) -> Path:
        """A new ``reports/<time>-<config hash>`` folder, made here: of two runs started in the same
        second (two CI jobs, a double launch) the second gets ``<time>.2-<config hash>``, not a
        refusal of the first's folder."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        run_dir, n = DEFAULT_RUNS / f"{stamp}-{self.config_hash}", 1
        while True:
            try:
                run_dir.mkdir(parents=True)
                return run_dir
            except FileExistsError:
                n += 1
                run_dir = DEFAULT_RUNS / f"{stamp}.{n}-{self.config_hash}"
            except OSError as e:
                raise ConfigError(f"--report-dir {run_dir}: cannot be created ({e.strerror or e})") from None

    def _open_run_dir(self) -> Path:
        """Create, resume or refuse the run folder, holding its lock from here to :meth:`close`."""
        if self.report_dir:
            run_dir = Path(self.report_dir)
        elif resumed := self._default_to_resume():
            # "Run the same command to resume" holds without --report-dir too.
            run_dir, why = resumed
            print(f"flarebench: resuming {run_dir}, this configuration's last run, {why}", file=sys.stderr)
        else:
            run_dir = self._new_default_folder()
        self._refuse_foreign_folder(run_dir)
        try:  # checked before anything loaded, but a place can still refuse (/proc as root)
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--report-dir {run_dir}: cannot be created ({e.strerror or e})") from None
        self._lock = RunLock(run_dir)
        try:
            note = self._lock.acquire()
        except LockHeld as e:
            self._lock = None
            raise ConfigError(str(e)) from None
        if note:
            print(f"flarebench: {note}", file=sys.stderr)
        run_json = run_dir / RUN_JSON
        if self.gating.active and run_json.exists():
            # A gate or a baseline is measured in one fresh run: nothing finished earlier is reused.
            if not self.overwrite:
                raise ConfigError(
                    f"{run_dir} already holds a run; --gate and --save-baseline never resume one: "
                    "use another --report-dir, or --overwrite to replace it"
                )
            _clear(run_dir)
        if run_json.exists():
            try:
                recorded = read_run_json(run_json)
            except ConfigError as e:
                if not self.overwrite:
                    raise ConfigError(f"{e}; use --overwrite to replace it") from None
                recorded = {"config": None}  # unreadable: replaced below, as another configuration's run is
            diff = first_difference(recorded["config"], self.config)
            if diff and not self.overwrite:
                why = f" ({meaning(diff)})" if meaning(diff) else ""
                raise ConfigError(
                    f"{run_dir} holds a run of a different configuration: {diff}{why}; "
                    "use --overwrite to replace it or another --report-dir"
                )
            # A calibration's split and goal decide which probes are dev and which test: resumed
            # with others, a dev point's cached traces would be taken for test rows.
            split = first_difference(
                _calibration_of(recorded.get("study"), recorded.get("limit")),
                _calibration_of(self.study, self.limit),
                "study",
            )
            if split and not diff and not self.overwrite:
                raise ConfigError(
                    f"{run_dir} holds a run of another calibration: {split}; "
                    "use --overwrite to replace it or another --report-dir"
                )
            diff = diff or split
            if diff:
                _clear(run_dir)
            elif self.study is None:
                self.study = _resumed_study(recorded.get("study"))
        elif self.overwrite:
            _clear(run_dir)
        try:
            self.log = TraceLog(run_dir / TRACES)
            self.log.read()
        except (TraceError, OSError) as e:
            # A damaged line would be scored as nothing or resumed around, and a file that cannot be
            # read (a folder by that name) cannot be resumed: fixed by hand, or the run is started again.
            if not self.overwrite:
                what = (
                    f"{e}; fix or delete that line" if isinstance(e, TraceError) else _unreadable(run_dir / TRACES, e)
                )
                raise ConfigError(f"{what}{_START_AGAIN}") from None
            _clear(run_dir)
            self.log = TraceLog(run_dir / TRACES)
        if self.retry_errors:
            self._drop_errors()
        self._write_run_json(run_dir, status="running")
        return run_dir

    def retry_hint(self) -> str:
        """How to run again the probes that raised an error ("" for a gated run, measured again whole)."""
        if self.gating.active:
            return ""
        if self.retry_errors:
            return "the same command runs them again, as --retry-errors is on"
        return "the same command with --retry-errors runs them again"

    def _drop_errors(self) -> None:
        """--retry-errors: remove the traces of the selected probes that hold an error, so that the
        run runs them again, and say how many of each spec."""
        wanted = {p.id for p in self.selected}
        traces = self.log.read()
        if not traces:  # a new run: nothing has failed yet
            return
        failed = [t for t in traces if t.error and t.probe_id in wanted]
        self.log.drop({(t.strategy, t.probe_id) for t in failed})
        counts = ", ".join(f"{spec} {n}" for spec, n in Counter(t.strategy for t in failed).items())
        said = f"running again {len(failed)} probe{'s' * (len(failed) != 1)} whose trace held an error ({counts})"
        print(f"flarebench: --retry-errors: {said if failed else 'no trace holds an error'}", file=sys.stderr)

    def _write_run_json(self, run_dir: Path, status: str) -> None:
        info = {
            "flarebench_run": 1,
            "config_hash": self.config_hash,
            "status": status,
            "created_utc": dt.datetime.fromtimestamp(self.started, dt.UTC).isoformat(),
            "limit": self.limit,
            "probes_run": len(self.selected),
            # The probes this run selected, exactly: `bench score` scores these and no others (a
            # folder resumed with another --limit holds traces of probes outside the selection).
            "probe_ids": [p.id for p in self.selected],
            "config": self.config,
            "versions": dict(_versions()),
            "command": command_line(),
        }
        if self.option_sources:
            info["option_sources"] = self.option_sources
        if self.plugin:  # a file by its absolute path: score and report load it again from any folder
            info["plugins"] = [plugins.recorded(ref) for ref in self.plugin]
        if self.study:
            info["study"] = self.study
        if self.disk_cache is not None:  # absolute, as the plugins: read later from another folder
            info["cache"] = os.path.abspath(self.disk_cache.path)
        if self.warmed is not None:
            info["warm_up"] = self.warmed
        if self.ray is not None:
            info["executor"] = self.ray.record()
        if self.gating.active:
            info["gate"] = self.gating.record()
        # How the metrics were scored (not in config: prices and the reference change no answer,
        # so resuming with other ones is allowed); `bench score` scores with the same ones.
        info["scoring"] = {
            "reference": self.reference,
            "price": self.price.record() if self.price else None,
            "judge": self.judge_backend.describe() if self.judge_backend else None,
        }
        write_atomic(run_dir / RUN_JSON, json.dumps(info, indent=2) + "\n")

    def run(
        self, spec: str, probes: list | None = None, label: str | None = None, backends: tuple | None = None
    ) -> list[Trace]:
        """Run one spec over the selected probes, or over ``probes`` (a part of them: calibration's
        dev and test parts), skipping those already in traces.jsonl, with a progress bar (titled
        ``label`` when given), through the session's LM and retriever or ``backends`` (an (LM,
        retriever) pair); returns this spec's traces of those probes, resumed ones included."""
        lm, retriever = backends or (self.lm_backend, self.retriever_backend)
        probes = self.selected if probes is None else probes
        if self.ray is not None and backends is None and not self._on_ray:
            self._run_on_ray()
        done = {t.probe_id: t for t in self.log.read() if t.strategy == spec}
        todo = [p for p in probes if p.id not in done]
        if label is None:
            label = f"[{self.specs.index(spec) + 1}/{len(self.specs)}] {spec}"
        with tqdm(
            total=len(probes),
            initial=len(probes) - len(todo),
            desc=label,
            unit="probe",
            disable=not self.progress or self._on_ray,  # the Ray run's own bar showed these probes
            file=sys.stderr,
            dynamic_ncols=True,
        ) as bar:
            for trace in run_strategy(
                spec,
                self.strategies[spec],
                todo,
                lm,
                retriever,
                self.log,
                concurrency=self.concurrency,
            ):
                done[trace.probe_id] = trace
                bar.update()
        traces = [done[p.id] for p in probes if p.id in done]
        self.results[spec] = traces
        self.write_summary()
        return traces

    def warm_up(self) -> None:
        """Before any probe is timed: evaluate every static prompt prefix and make one retrieval
        (:func:`flarebench.bench.runner.warm_up`); run.json records what it did. A Ray run's workers
        warm their own backends instead (the driver's serve no probe). A folder that already holds
        every probe of every spec is said to be finished, and nothing is warmed."""
        if not self._unfinished():
            total = len(self.specs) * len(self.selected)
            print(f"flarebench: {self.run_dir} holds all {total} traces already: nothing to run", file=sys.stderr)
            return
        if self.ray is None:
            self.warmed = warm_up(self.strategies, self.lm_backend, self.retriever_backend)
            self._write_run_json(self.run_dir, status="running")

    def _unfinished(self) -> list[tuple[str, Any]]:
        """The (spec, probe) pairs of the selection that traces.jsonl does not hold yet."""
        finished = self.log.done()
        return [(spec, p) for spec in self.specs for p in self.selected if (spec, p.id) not in finished]

    def _run_on_ray(self) -> None:
        """Run every spec's unfinished selected probes on Ray workers at once, with one progress
        bar; :meth:`run` then finds them finished in traces.jsonl."""
        self._on_ray = True
        pairs = self._unfinished()
        if not pairs:  # a finished run, resumed: no cluster to start
            return
        totals = Counter({spec: len(self.selected) for spec in self.specs})
        done = Counter({spec: len(self.selected) for spec in self.specs})
        done.subtract(spec for spec, _ in pairs)
        defaults = LONG_ANSWER_DEFAULTS if self.probe_set.answer_form == "long" else None
        recipe = replace(self.recipe, lm_threads=self.ray.threads_per_worker)
        for _ in run_on_ray(pairs, self.ray, recipe, defaults, self.log, self.progress, done, totals):
            pass

    def measure(self, spec: str, probes: list, label: str, cold: bool = False) -> dict[str, Any]:
        """Run ``spec`` on ``probes`` (a calibration's dev part) and return its summary row there.

        Dev runs go through a cache of their own in the run folder (``dev-cache/``): the grid points
        of a sweep repeat many calls (every threshold drafts the same first sentence). A cache hit
        takes the time of a lookup, so a goal that is a time runs its dev points ``cold``, without
        it. Test runs never use it, so their latency is measured cold (unless the run itself has
        --cache)."""
        if not cold and self._dev is None:
            from flarebench.bench.cache import CachedLM, CachedRetriever, DiskCache

            cache = DiskCache(self.run_dir / DEV_CACHE)
            self._dev = (CachedLM(self.lm_backend, cache), CachedRetriever(self.retriever_backend, cache), cache)
        traces = self.run(spec, probes, label, backends=None if cold else self._dev[:2])
        summary = summary_frame(traces, {p.id: p for p in probes}, price=self.price)
        return summary.iloc[0].to_dict() if len(summary) else {}

    def focus(self, specs: list[str], probes: list, final: bool = True) -> None:
        """From now on, summarise and report only ``specs`` on ``probes`` (a calibration's chosen
        points on its test part); run.json records that selection, so `report` rebuilds the same.
        Until a ``final`` focus the run is never ``complete``: the calibrated specs are still to come."""
        self.specs, self.selected = list(specs), list(probes)
        if self.study is not None:  # the summary's rows in this order when rescored (run.json's probe_ids: probes)
            self.study["specs"] = list(specs)
        self._more_to_come = not final
        self._scored_at = None

    def _scored(self) -> tuple[list[Trace], Any]:
        """This run's traces on disk (its specs, its selected probes) and their summary, computed
        again only when traces.jsonl has grown: the entry points ask for the summary several times
        between two appends (gate check, table, report.html, baseline)."""
        size = self.log.size()
        if self._scored_at is not None and self._scored_at[0] == size:
            return self._scored_at[1], self._scored_at[2]
        wanted = {p.id for p in self.selected}
        specs = set(self.specs)
        traces = [t for t in self.log.read() if t.strategy in specs and t.probe_id in wanted]
        probes = {p.id: p for p in self.selected}
        new = [t for t in traces if (t.strategy, t.probe_id) not in self._faithfulness]
        if new:
            self._faithfulness.update(self._faithfulness_of(new))
        summary = summary_frame(
            traces,
            probes,
            order=self.specs,
            price=self.price,
            reference=self.reference,
            faithfulness=self._faithfulness,
            oracle=is_comparison(self.study),
            memo=self._rows,
        )
        self._scored_at = (size, traces, summary)
        return traces, summary

    def _faithfulness_of(self, traces: list[Trace]) -> dict:
        """The faithfulness rows of new traces. A judge that fails (down, timing out) is said once
        and the run goes on with these answers unjudged; a stopped run waits for no judge."""
        from flarebench.bench.faithfulness import JUDGE_FAILED, RUN_STOPPED, JudgeError, faithfulness_rows, not_judged

        if self.judge_backend is not None and (self.judge_failure or self.interrupted):
            return not_judged(traces, JUDGE_FAILED if self.judge_failure else RUN_STOPPED)
        try:
            return faithfulness_rows(traces, self.probe_set.docs_by_id, self.judge_backend)
        except JudgeError as e:
            self.judge_failure = str(e)
            return not_judged(traces, JUDGE_FAILED)

    def summary(self):
        """The summary of every spec of this run, from the traces on disk."""
        return self._scored()[1]

    @property
    def finished(self) -> bool:
        """Whether every spec ran every selected probe (and no calibrated point is still to come)."""
        return (
            not self._more_to_come
            and bool(self.specs)  # a calibration whose every strategy failed has nothing complete
            and all(self.ran_all(spec) for spec in self.specs)
        )

    def ran_all(self, spec: str) -> bool:
        """Whether ``spec`` has run every selected probe."""
        return spec in self.results and len(self.results[spec]) == len(self.selected)

    def write_summary(self, status: str | None = None) -> None:
        """Write the summary files and run.json with the run's ``status``: ``complete`` when every
        spec ran every selected probe, else ``partial`` (or the ``status`` given: ``interrupted``)."""
        status = status or ("complete" if self.finished else "partial")
        with _storage_stops_the_run():
            write_summary(self.run_dir, self.summary(), self.config, self.study, status, gated=self.gating.active)
            self._write_run_json(self.run_dir, status=status)

    @contextlib.contextmanager
    def closing(self) -> Iterator[BenchSession]:
        """The body of a command's run: on Ctrl-C, an unreachable LM or any other error, what
        finished is summarised and reported and the run marked interrupted before the error goes on;
        the session is closed on every way out."""
        try:
            yield self
        except BaseException as e:
            self.mark_interrupted(e)
            with contextlib.suppress(AttributeError):  # read by the CLI's line for the stop
                e.stop_note = self.stop_note(e)
            raise
        finally:
            self.close()

    def mark_interrupted(self, why: BaseException | None = None) -> None:
        """Summarise what finished, record in run.json that the run was stopped (Ctrl-C, SIGTERM,
        an error: ``why``) before it ended, and write report.html for it (a CI job's artifact); its
        finished probes are kept, and the same command resumes it. Never raises: the error that
        stopped the run is the one to show."""
        if isinstance(why, KeyboardInterrupt) and getattr(self, "run_dir", None) is not None:
            # Thousands of traces take seconds to summarise: a silent terminal invites a kill -9.
            print(
                "flarebench: stopping: summarising the finished probes and writing the report "
                "(a second Ctrl-C waits for them)",
                file=sys.stderr,
            )
        # A second Ctrl-C or SIGTERM (a CI runner signals the job's shell and its children) would cut
        # this short and leave run.json saying `running`: until the run is marked, it is dropped.
        with interrupts_polled():
            self._mark_interrupted()

    def _mark_interrupted(self) -> None:
        self.interrupted = True
        status = "complete" if self.stopped_finished else "interrupted"
        with contextlib.suppress(Exception):
            self.write_summary(status=status)
        with contextlib.suppress(Exception):
            self._write_run_json(self.run_dir, status=status)  # also when the summary failed
        if self.gating.baseline is not None:  # gate.json names the gated specs left unchecked
            with contextlib.suppress(Exception):
                self.gating.write_verdicts(self.run_dir)
        with contextlib.suppress(Exception):
            self.write_report()

    @property
    def stopped_finished(self) -> bool:
        """Whether the run was stopped as it wrote its files, with every probe finished (and every
        gated spec checked): it is complete, and its files are written again whole."""
        return self.interrupted and self.finished and not self.gating.unchecked

    def stop_note(self, why: BaseException | None = None) -> str:
        """What follows "interrupted; " when the run was stopped (by ``why``): how to resume it, or
        that it had finished (stopped as it wrote its files, which were written again, unless a
        scorer that fails kept them from being written)."""
        from flarebench.bench.faithfulness import RUN_STOPPED

        if self.stopped_finished and isinstance(why, ScorerError):
            note = (
                f"every probe had finished and is kept: once the scorer is fixed, flarebench score {self.run_dir} "
                "writes the summary and the report"
            )
        elif self.stopped_finished:
            note = f"every probe had finished: {self.run_dir} holds the complete run, its summary and its report"
        else:
            note = f"{resume_hint(self.gating.active)} (run folder: {self.run_dir})"  # a default folder's name is new
            note = f"fix the scorer: {note}" if isinstance(why, ScorerError) else note
        if any(row["faithfulness_method"] == RUN_STOPPED for row in self._faithfulness.values()):
            note += f"; its faithfulness is not judged yet: flarebench score {self.run_dir} judges it"
        return note

    def judge_line(self) -> str:
        """The line a run whose judge failed ends with ("" when it did not): faithfulness is missing."""
        if not self.judge_failure:
            return ""
        return (
            f"flarebench: faithfulness not judged: {self.judge_failure}; the answers are kept: flarebench score "
            f"{self.run_dir} judges them (--judge none: the offline method)"
        )

    def write_report(self) -> Path:
        """Write report.html for what has run so far; returns its path."""
        from flarebench.bench.html import write_report

        info = json.loads((self.run_dir / RUN_JSON).read_text(encoding="utf-8"))
        traces, summary = self._scored()
        with _storage_stops_the_run():
            self.report_path = write_report(self.run_dir, summary, info, traces, self.probe_set, self._rows)
        return self.report_path

    def table(self) -> str:
        return format_table(self.summary(), compact=True)

    def closing_lines(self) -> list[str]:
        """What every entry point prints when a run ends (the CLI to stdout, `pytest bench` in its
        terminal summary): the table, the run folder, its report, and the gate's verdict."""
        lines = [self.table(), f"run folder: {self.run_dir}"]
        if was_given(self.option_sources, "reference"):  # asked for, not the default
            lines[1:1] = filter(None, [absent_reference(self.summary(), self.reference)])
        if self.report_path is not None:
            lines.append(f"report: {self.report_path}")
        gating = self.gating
        if gating.baseline is not None:
            if gating.difference:
                lines.append(f"gate across configurations; first difference: {gating.difference}")
            broken = [spec for spec, verdict in gating.verdicts.items() if verdict]
            ran = set(strategy_rows(self.summary())["strategy"])
            unchecked = [spec for spec in gating.unchecked if spec not in ran]
            unfinished = [spec for spec in gating.unchecked if spec in ran and not self.ran_all(spec)]
            stopped = [spec for spec in gating.unchecked if self.ran_all(spec)]  # stopped before its check
            gated = {*gating.wanted, *gating.against.values(), gating.reference}
            unasked = [s for s in gating.baseline.metrics if s not in gated]
            lines.append(
                f"gate {gating.baseline.path} (latency reference {gating.reference}): "
                f"{len(gating.verdicts) - len(broken)} passed, {len(broken)} broken"
                + (f" ({', '.join(broken)})" if broken else "")
                + "".join(f"; {spec} against the baseline's {base}" for spec, base in gating.against.items())
                # A gated spec that never ran passed nothing: said, so that "0 broken" is not read as a pass.
                + (f"; not checked, as they did not finish: {', '.join(unfinished)}" if unfinished else "")
                + (f"; not checked, as the run stopped before their check: {', '.join(stopped)}" if stopped else "")
                + (f"; not checked, as they did not run: {', '.join(unchecked)}" if unchecked else "")
                + (f"; not gated in this run (not asked for): {', '.join(unasked)}" if unasked else "")
            )
            lines += [f"gate note: {note}" for note in gating.notes()]
        return lines

    def close(self) -> None:
        """Close the LM and the cache and release the run folder's lock (safe to call twice)."""
        try:
            if getattr(self, "_backends", None) is not None:
                self._backends.close()
            if getattr(self, "_dev", None) is not None:
                self._dev[2].close()
        finally:
            if getattr(self, "_lock", None) is not None:
                self._lock.release()


def read_run_json(path: Path) -> dict[str, Any]:
    """A run folder's run.json: a JSON object holding the run's ``config`` object. Anything else,
    or a file that cannot be read, is a ConfigError naming the file and what is wrong in it
    (``RUN_DIR/run.json: config: missing``)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not a flarebench run.json ({e})") from None
    try:
        return check_fields(info, {"config": OBJECT}, required=["config"])
    except ValueError as e:
        raise ConfigError(f"{path}: {e}") from None


#: What decides a calibrated run's dev and test parts and its chosen values (bench/calibrate.py); not
#: --budget-tolerance, which only judges the test figures: a run again with another one re-judges them.
_CALIBRATION_FIELDS = ("goal", "dev_fraction", "seed")


def _calibration_of(study, limit: int | None) -> dict[str, Any]:
    """The fields of a run's study that a calibration is defined by, and its ``limit`` (the probes
    it split; more of them would move probes of the dev part into the test part); all None for a run
    that is no calibration."""
    if not (isinstance(study, dict) and "goal" in study):
        return dict.fromkeys([*_CALIBRATION_FIELDS, "limit"])
    return {**{key: study.get(key) for key in _CALIBRATION_FIELDS}, "limit": limit}


def _resumed_study(study) -> dict | None:
    """The study a plain ``run`` keeps when it resumes a folder of its configuration: a comparison's
    or a sweep's, which ran every spec on every selected probe as the plain run does, so that the
    report keeps its plots; not a calibration's, whose goal split the probes into dev and test parts."""
    plain = isinstance(study, dict) and study.get("kind") in ("compare", "sweep") and "goal" not in study
    return study if plain else None


#: What a run, ``score`` and ``report`` write in a run folder (docs/runs.md), but the lock.
RUN_FILES = frozenset(
    {
        RUN_JSON,
        TRACES,
        SUMMARY_CSV,
        SUMMARY_MD,
        ADOPTION_MD,
        REPORT_HTML,
        GATE_JSON,
        TRIGGERS_CSV,
        CALIBRATION_CSV,
        DEV_CACHE,
    }
)


def _written_by_a_run(name: str) -> bool:
    """Whether a run folder's entry is one flarebench writes: a file of :data:`RUN_FILES`, a
    ``score --by`` breakdown, or the temporary file of a write cut short (:func:`write_atomic`)."""
    if name.startswith("breakdown_") and name.endswith(".csv"):
        return True
    return name in RUN_FILES or any(name.startswith(f".{own}.") for own in RUN_FILES)


@contextlib.contextmanager
def _storage_stops_the_run() -> Iterator[None]:
    """A run's summary or report that cannot be written (a full disk) stops the run as a trace that
    cannot be written does (StorageFailed: exit 3, resumable), not as a mistake in the command."""
    try:
        yield
    except WriteError as e:
        raise StorageFailed(str(e)) from None


def _has_errors(traces: Path) -> bool:
    """Whether a run folder's traces.jsonl holds a trace with an error (False when it cannot be read:
    such a folder is not one to resume)."""
    try:
        return any(t.error for t in TraceLog(traces, writer=False).read())
    except (TraceError, OSError):
        return False


def _clear(run_dir: Path) -> None:
    """Remove a run's files for a fresh run, keeping its lock (held by this session) and any file
    flarebench did not write (a team's notes beside the run)."""
    for entry in run_dir.iterdir():
        if entry.name == LOCK or not _written_by_a_run(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


#: What a run's user can do about a --reference that is none of its strategies.
ADD_REFERENCE = "add it with --strategy, or name one of them"


def run_reference(spec: str, reference, strategies: dict, asked: bool, hint: str = ADD_REFERENCE) -> str:
    """The spec of ``strategies`` (spec -> its parsed strategy) that the delta reference ``spec``
    (parsed: ``reference``) names: itself, or another spelling of one of them (flare_direct:theta=0.8
    for flare_direct). One ``asked`` for (--reference) that names none is refused (ConfigError,
    ending with ``hint``): its delta columns and adoption tables would be empty after the whole run."""
    if spec in strategies:
        return spec
    if same := next((s for s, made in strategies.items() if made == reference), None):
        return same
    if asked:
        raise ConfigError(
            f"--reference {spec}: not a strategy of this run ({', '.join(strategies)})" + (f": {hint}" if hint else ""),
            option="--reference",
        )
    return spec


def _probe_problem(source: str, fmt: str, error: ProbeError) -> str:
    """A probe set's problems in one line: the first, and how to see them all (read as the run
    read it: a format named with --probes-format is named to the validator too)."""
    lines = str(error).splitlines() or [""]
    if len(lines) == 1:
        return lines[0]
    command = shlex.join(
        ["python", "-m", "flarebench.probes", "validate", source, *(["--format", fmt] if fmt != "auto" else [])]
    )
    return f"{lines[0]} (and {len(lines) - 1} more; `{command}` lists them)"
