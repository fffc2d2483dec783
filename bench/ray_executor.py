"""``--executor ray``: a run's unfinished (strategy spec, probe) pairs spread over Ray actors.

Each actor builds the run's backends once from the session's :class:`BackendRecipe` (its own
in-process model, or a client of a served one), runs probes through the runner's
:func:`run_probe` (so each probe is timed inside the worker) and returns traces. Only the driver
writes ``traces.jsonl``, through the session's :class:`TraceLog`, so resume, ``bench score``,
reports and gates read a Ray run as any other.

Faults, with Ray's own settings: a worker process that dies is started again (``max_restarts``)
and the probes it held are sent to it again (``max_task_retries``); a probe's trace is written when
it comes back, so a probe lost with its worker is run again and none is written twice. A worker
that stays down gives its probes back to the others. Ray is imported only here, and only when the
executor is used: the default install does not need it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from tqdm import tqdm

from flarebench.bench.interrupt import interrupts_polled, sigterm_kept
from flarebench.bench.recipe import BackendRecipe
from flarebench.bench.runner import TraceLog, run_probe
from flarebench.strategies.lm import LMUnavailable
from flarebench.strategies.records import Trace

#: The values of --executor.
EXECUTORS = ("local", "ray")
#: --workers when not given.
DEFAULT_WORKERS = 2
INSTALL_HINT = "--executor ray needs the ray extra: pip install 'flarebench[ray]'"
#: Times Ray starts a dead worker again (the actor's ``max_restarts``), rebuilding its backends.
MAX_RESTARTS = 3
#: Times Ray sends a probe again when its worker died holding it (the actor's ``max_task_retries``).
MAX_TASK_RETRIES = 3
#: Probes queued on each worker: the next one is there as soon as one finishes.
IN_FLIGHT = 2
#: Variables the workers need from the driver's environment when set there (an endpoint's default
#: URL and key, the BM25 index cache, the in-process model's threads that run.json records), besides
#: the key variables the options name.
PASSED_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "FLAREBENCH_CACHE", "FLAREBENCH_LM_THREADS", "HF_HUB_OFFLINE")
#: Seconds to wait for a TCP connection to --ray-address's head before Ray is asked to join it:
#: ray.init retries a head that is not there for many minutes, printing its own log lines.
REACH_TIMEOUT = 10.0
#: The logger of Ray's notice that a new local instance uses token authentication (Ray's default
#: where $RAY_AUTH_MODE is unset): a WARNING line amid the run's bar that asks nothing of the user.
#: Held at ERROR while the run starts its own instance.
AUTH_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # the terminal colours of Ray's messages
_OWN_ERROR = re.compile(r"^flarebench(?:\.\w+)+: ")  # "flarebench.strategies.x.SomeError: " before a message


class RayRunError(LMUnavailable):
    """Ray cannot serve the run (no cluster to reach, every worker lost): as with an unreachable LM
    server, the run stops in one line, keeps what finished and resumes with the same command."""


@dataclass(frozen=True)
class RaySettings:
    """``--ray-address`` (None: start a local Ray instance), ``--workers``, ``--threads-per-worker``
    (None: the in-process model's default threads; each worker reserves that many CPUs, else one)."""

    address: str | None = None
    workers: int = 2
    threads_per_worker: int | None = None

    @property
    def cpus_per_worker(self) -> int:
        """The CPUs Ray reserves for each worker: its model's threads, else one (a client of a served
        model, or the in-process model at its default threads)."""
        return self.threads_per_worker or 1

    def record(self) -> dict:
        """What run.json records: how the run was executed (it changes no answer)."""
        return {"kind": "ray", "address": self.address or "local", "workers": self.workers,
                "threads_per_worker": self.threads_per_worker}  # fmt: skip


class ProbeWorker:
    """A Ray actor's body: the run's backends and strategies, built once; runs one probe a call."""

    def __init__(self, recipe: BackendRecipe, specs: list[str], defaults: dict | None, env: dict[str, str]):
        from flarebench.bench.runner import warm_up
        from flarebench.strategies.registry import parse_spec

        # The driver's settings (:func:`_worker_env`) come as an argument, not as Ray's runtime_env:
        # Ray's runtime-env agent writes a runtime_env's values into its log on every node (an API
        # key too), and an actor with one cannot take the workers Ray starts ahead for the job.
        os.environ.update(env)
        self.backends = recipe.build()  # loads the --plugin modules first: their strategies parse
        self.strategies = {spec: parse_spec(spec, defaults) for spec in specs}
        # Each worker's own backends: the prefixes are evaluated before any probe is timed.
        warm_up(self.strategies, self.backends.lm, self.backends.retriever)

    def ready(self) -> int:
        """The worker's process id, once its backends are built."""
        return os.getpid()

    def run(self, spec: str, probe) -> Trace:
        """One probe's trace (an error trace when the strategy failed), timed here."""
        return run_probe(spec, self.strategies[spec], probe, self.backends.lm, self.backends.retriever)


def address_problem(address: str) -> str | None:
    """Why ``address`` is no --ray-address (``auto``, or ``HOST:PORT`` of a Ray head), else None."""
    if address == "auto":
        return None
    host, colon, port = address.rpartition(":")
    if not colon or not host.strip("[]") or "/" in address or not port.isdigit() or not 0 < int(port) < 65536:
        return f"--ray-address must be HOST:PORT of a Ray head (a port 1-65535) or auto, got {address!r}"
    return None


def _reach(address: str) -> None:
    """Raise RayRunError at once, naming ``address`` as given, when no head answers there (``auto``:
    the cluster Ray would join, when it knows one)."""
    target = address
    if address == "auto":
        try:  # where Ray would look; a private helper, so anything unexpected leaves the check to ray.init
            from ray._private.services import get_ray_address_from_environment

            target = get_ray_address_from_environment("auto", None)
        except Exception:
            return
        if not target or address_problem(target):
            return  # no cluster known: ray.init says so at once
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT).close()
    except (OSError, ValueError) as e:
        raise RayRunError(f"--executor ray: no Ray cluster answers at {address} ({e})") from None


def import_ray():
    """The ray module; ImportError, in one line naming the extra to install, without it."""
    try:
        import ray
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return ray


def run_on_ray(
    pairs: list[tuple[str, object]],
    settings: RaySettings,
    recipe: BackendRecipe,
    defaults: dict | None,
    log: TraceLog,
    progress: bool = True,
    done: Counter | None = None,
    totals: Counter | None = None,
) -> Iterator[Trace]:
    """Run the (spec, probe) ``pairs`` on ``settings.workers`` Ray actors, appending each trace to
    ``log`` as it comes back and yielding it. ``done`` and ``totals`` (probes per spec, finished
    and in the run) feed the one progress bar. LMUnavailable from a worker stops the run (what came
    back is kept); RayRunError when Ray cannot start or every worker is lost."""
    ray = import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    # No more workers than pairs to run: each one builds the backends before it answers anything.
    settings = replace(settings, workers=min(settings.workers, len(pairs)))
    started = not ray.is_initialized()
    if started:
        if settings.address:
            _reach(settings.address)
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING}  # the run's bar, not Ray's logs
        try:
            with sigterm_kept():  # SIGTERM stops the run as Ctrl-C does, not as Ray's sys.exit
                if settings.address:
                    ray.init(address=settings.address, **quiet)
                else:
                    # A new instance (address "local"), never a cluster another `ray start` left on the
                    # machine; room for every worker asked for, even beyond the cores: the user chose.
                    cpus = settings.workers * settings.cpus_per_worker
                    with _logger_at(AUTH_NOTICE_LOGGER, logging.ERROR):
                        ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise RayRunError(f"--executor ray: cannot start or reach Ray ({_first_line(e)})") from None
    with _errors_unprinted():
        try:
            yield from _dispatch(ray, pairs, settings, _portable(recipe), defaults, log, progress, done, totals)
        finally:
            if started:
                ray.shutdown()  # the driver's actors go with it


@contextlib.contextmanager
def _errors_unprinted() -> Iterator[None]:
    """Within the block, the driver does not print the error messages Ray sends it (a worker's
    failed task or actor, with its traceback, once per retry; "(raylet)" lines on stdout, even with
    log_to_driver off): the run reports what failed in one line of its own. Ray prints them from a
    thread through a private module function, replaced here and put back after."""
    worker = sys.modules.get("ray._private.worker")
    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None:
        yield
        return

    def unprinted(data, *args, **kwargs):
        if data.get("pid") != "raylet":
            printer(data, *args, **kwargs)

    worker.print_to_stdstream = unprinted
    try:
        yield
    finally:
        worker.print_to_stdstream = printer


@contextlib.contextmanager
def _logger_at(name: str, level: int) -> Iterator[None]:
    """The logger ``name`` at ``level`` within the block, at its own level again after it."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def _portable(recipe: BackendRecipe) -> BackendRecipe:
    # A worker may start in another folder: plugin files are named by absolute path.
    plugins = tuple(str(Path(p).resolve()) if p.endswith(".py") else p for p in recipe.plugins)
    return replace(recipe, plugins=plugins)


def _worker_env(recipe: BackendRecipe) -> dict[str, str]:
    names = [*PASSED_ENV, recipe.lm_api_key_env, recipe.embed_api_key_env]
    return {name: os.environ[name] for name in names if name and name in os.environ}


def _dispatch(ray, pairs, settings, recipe, defaults, log, progress, done, totals) -> Iterator[Trace]:
    from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

    actor = ray.remote(ProbeWorker).options(
        num_cpus=settings.cpus_per_worker,
        max_restarts=MAX_RESTARTS,
        max_task_retries=MAX_TASK_RETRIES,
    )
    specs = list(dict.fromkeys(spec for spec, _ in pairs))
    # The recipe and the environment go by value: a worker started again rebuilds from its own copy.
    env = _worker_env(recipe)
    workers = [actor.remote(recipe, specs, defaults, env) for _ in range(settings.workers)]
    pings = {w.ready.remote(): i for i, w in enumerate(workers)}
    queue = deque(pairs)
    in_flight: dict = {}  # object ref -> (worker index, (spec, probe))
    load = Counter()  # probes queued per worker
    alive: set[int] = set()
    lost: dict[int, str] = {}  # worker index -> why it is gone for good
    unavailable: LMUnavailable | None = None
    done, totals = done or Counter(), totals or Counter(spec for spec, _ in pairs)

    def fill() -> None:
        # Only to workers that are up: a worker Ray cannot place yet (no free CPU on the cluster)
        # would hold its probes for as long as it waits.
        for i, w in enumerate(workers):
            while queue and unavailable is None and i in alive and load[i] < IN_FLIGHT:
                spec, probe = pair = queue.popleft()
                in_flight[w.run.remote(spec, probe)] = (i, pair)
                load[i] += 1

    bar = tqdm(total=sum(totals.values()), initial=sum(done.values()), desc=f"ray ({settings.workers} workers)",
               unit="probe", disable=not progress, file=sys.stderr, dynamic_ncols=True)  # fmt: skip

    def show() -> None:
        per_spec = ", ".join(f"{spec} {done[spec]}/{totals[spec]}" for spec in totals)
        bar.set_postfix_str(f"workers up {len(alive)}/{settings.workers}; {per_spec}")

    # Ctrl-C and SIGTERM are polled after each wait, at most a second apart, not raised inside it.
    with bar, interrupts_polled() as interrupted:
        fill()
        show()
        # A worker still starting is waited for only while there is a probe it could take.
        while in_flight or (pings and queue and unavailable is None):
            ready, _ = ray.wait([*in_flight, *pings], num_returns=1, timeout=1.0)
            interrupted()
            for ref in ready:
                if ref in pings:
                    i = pings.pop(ref)
                    try:
                        ray.get(ref)
                        alive.add(i)
                    except RayActorError as e:
                        lost[i] = _first_line(e)
                    continue
                i, pair = in_flight.pop(ref)
                load[i] -= 1
                try:
                    trace = ray.get(ref)
                except RayTaskError as e:  # the worker raised out of run_probe: the LM is unreachable
                    if not isinstance(e.cause, LMUnavailable):
                        raise e.cause from None
                    unavailable = unavailable or e.cause
                    continue
                except RayActorError as e:  # the probe is run again, by whichever worker is free
                    alive.discard(i)
                    queue.appendleft(pair)
                    if not isinstance(e, ActorUnavailableError):  # down past its restarts: gone
                        lost[i] = _first_line(e)
                    elif i not in pings.values():  # being started again: it takes probes once it is up
                        pings[workers[i].ready.remote()] = i
                    continue
                alive.add(i)
                log.append(trace)
                done[trace.strategy] += 1
                bar.update()
                yield trace
            if len(lost) == len(workers) and queue:
                raise RayRunError(f"every Ray worker was lost (first: {next(iter(lost.values()))})")
            fill()
            show()
    if unavailable is not None:
        raise unavailable


def _first_line(e: BaseException) -> str:
    """What went wrong, in one plain line: Ray's first line, or for a worker whose backends could
    not be built, the exception that stopped them (the last line of Ray's message: its first line
    only says that the actor died)."""
    lines = [line.strip() for line in _COLOUR.sub("", str(e)).splitlines() if line.strip()]
    if getattr(e, "actor_init_failed", False) and lines:
        # flarebench's own errors read as a local run's do, without their module path.
        return f"its backends could not be built: {_OWN_ERROR.sub('', lines[-1])}"
    return lines[0] if lines else type(e).__name__
