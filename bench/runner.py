"""The runner: runs configured strategies over probes, times each probe, and appends each finished
trace to ``traces.jsonl`` at once, so an interrupted run keeps what it finished and resumes."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from flarebench.bench.paths import StorageFailed, write_atomic
from flarebench.strategies.base import Strategy
from flarebench.strategies.capabilities import describe
from flarebench.strategies.http_client import redact_secrets
from flarebench.strategies.lm import LM, LMUnavailable
from flarebench.strategies.records import LMCall, Trace
from flarebench.strategies.registry import BUILTIN, get, parse_spec
from flarebench.strategies.retriever import Retriever

TRACES = "traces.jsonl"
#: What the entry points add when a run stops because the LM is unreachable (LMUnavailable).
RESUME_HINT = "finished probes are kept; run the same command to resume"
#: The same for a gated run (--gate, --save-baseline), which is measured in one fresh run, never resumed.
GATED_RESUME_HINT = (
    "finished probes are kept, but a gated run is measured in one fresh run: "
    "run the same command with --overwrite, or with another --report-dir"
)


#: The same when the LM was unreachable before any probe ran: nothing to keep or resume.
UNREACHED_HINT = "no probe has run: check {whose} address ({address}) and that its server is up"
#: Whose address each option holds, as the hint names it.
_WHOSE = {"--lm-base-url": "the LM's", "--embed-base-url": "the embeddings (or rerank) endpoint's"}


def resume_hint(gated: bool, error: BaseException | None = None) -> str:
    """What to tell a user whose run stopped (on ``error``): how to finish it, or, when the LM was
    unreachable before the run began (``error.before_run``, set by the session), what to check."""
    if getattr(error, "before_run", False):
        address = getattr(error, "address", "--lm-base-url")
        return UNREACHED_HINT.format(whose=_WHOSE.get(address, "the server's"), address=address)
    return GATED_RESUME_HINT if gated else RESUME_HINT


#: What reading a dict back into a Trace raises when it is none: a field's kind (ValueError), or a
#: shape the records' constructors cannot take.
_NOT_A_TRACE = (ValueError, KeyError, TypeError, AttributeError)


def _why(e: Exception) -> str:
    """A refused trace's reason: a field check's message as it is, any other error with its type."""
    return f"{type(e).__name__}: {e}" if isinstance(e, KeyError | TypeError | AttributeError) else str(e)


def _pair(line: bytes) -> tuple[str, str]:
    """The (strategy spec, probe id) of a line of traces.jsonl that :meth:`TraceLog.read` accepted."""
    d = json.loads(line)
    return d["strategy"], d["probe_id"]


class TraceError(ValueError):
    """A line of ``traces.jsonl`` that is not a trace, before its last line: ``FILE:LINE: not a
    trace (why)``. Such a file is not resumed or scored until the line is fixed."""


@dataclass
class _Read:
    """What :meth:`TraceLog.read` has read of its file: which file (device, inode), up to which byte
    (after which line), the traces there, their (strategy, probe) pairs and the numbers of the lines
    that repeat a pair read before them."""

    file: tuple[int, int] | None = None
    offset: int = 0
    lines: int = 0
    traces: list[Trace] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    repeats: list[int] = field(default_factory=list)


class TraceLog:
    """``traces.jsonl``: one finished trace per line, flushed to disk as soon as it is written.

    ``writer=False`` opens it for reading only (``bench score``/``report``): the file is then never
    changed, not even to cut a torn last line, since a run may be writing it."""

    def __init__(self, path: Path, writer: bool = True):
        self.path = Path(path)
        self._lock = threading.Lock()  # one line at a time, whichever thread finishes a probe
        self._read_lock = threading.Lock()
        self._known = _Read()
        if writer:
            self._drop_torn_tail()

    def _drop_torn_tail(self) -> None:
        # A run killed mid-write can leave half a line; cut it so the resumed run appends cleanly.
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            with open(self.path, "r+b") as f:
                f.truncate(end)

    def read(self) -> list[Trace]:
        """Every trace written so far, in order, each (strategy, probe) once: the first line wins
        when two writers appended the same pair. A torn last line (no newline yet: being written,
        or killed mid-write) is left out; any other line that is not a trace raises TraceError.

        The file only grows while this object knows it, so a second read parses only the lines
        appended since the first (a run's summary is made again after every strategy); a file that
        shrank or was replaced is read again whole."""
        with self._read_lock:
            try:
                f = open(self.path, "rb")
            except FileNotFoundError:
                self._known = _Read()
                return []
            with f:
                stat = os.fstat(f.fileno())
                if (stat.st_dev, stat.st_ino) != self._known.file or stat.st_size < self._known.offset:
                    self._known = _Read(file=(stat.st_dev, stat.st_ino))
                known = self._known
                f.seek(known.offset)
                data = f.read()
            end = data.rfind(b"\n") + 1
            new: dict[tuple[str, str], Trace] = {}
            repeats = []
            lines = data[:end].split(b"\n")[:-1]
            for number, line in enumerate(lines, start=known.lines + 1):
                if not line.strip():
                    continue
                trace = self._parse(line, number)
                key = (trace.strategy, trace.probe_id)
                if key in known.seen or key in new:
                    repeats.append(number)
                else:
                    new[key] = trace
            # Kept only once every new line parsed: a line that is not a trace is refused again next time.
            known.traces.extend(new.values())
            known.seen.update(new)
            known.repeats.extend(repeats)
            known.offset += end
            known.lines += len(lines)
            return list(known.traces)

    @property
    def repeated(self) -> list[int]:
        """The numbers of the lines :meth:`read` has left out so far as repeating a (strategy, probe)
        of an earlier line (files merged by hand, or two writers before the lock)."""
        return list(self._known.repeats)

    def _parse(self, line: bytes, number: int) -> Trace:
        try:
            d = json.loads(line.decode("utf-8"))
            if not isinstance(d, dict):
                raise ValueError(f"a JSON {type(d).__name__}, not an object")
            for key in ("strategy", "probe_id"):
                if not isinstance(d.get(key), str) or not d[key]:
                    raise ValueError(f"no {key}")
            return Trace.from_dict(d)
        except _NOT_A_TRACE as e:
            raise TraceError(f"{self.path}:{number}: not a trace ({_why(e)[:200]})") from None

    def drop(self, pairs: set[tuple[str, str]]) -> None:
        """Remove every line of these (strategy spec, probe id) pairs, replacing the file whole (a
        reader never sees it half-written), so that a resumed run runs them again."""
        if not pairs or not self.path.exists():
            return
        lines = self.path.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if not line.strip() or _pair(line) not in pairs]
        write_atomic(self.path, b"".join(kept).decode("utf-8"))

    def size(self) -> int:
        """The file's size in bytes (0 before the first trace): it grows with every append, so it
        tells whether anything was written since it was last read."""
        return self.path.stat().st_size if self.path.exists() else 0

    def done(self) -> set[tuple[str, str]]:
        """(strategy spec, probe id) pairs already finished."""
        return {(t.strategy, t.probe_id) for t in self.read()}

    def append(self, trace: Trace) -> None:
        """Write ``trace`` as the file's last line, on disk before this returns; a line that cannot
        be written (a full disk) stops the run (StorageFailed), and a resume drops what was torn."""
        line = json.dumps(trace.to_dict(), ensure_ascii=False) + "\n"
        try:
            with self._lock, open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise StorageFailed.writing(self.path, e) from None


class StrategyRefused(RuntimeError):
    """A strategy cannot run on this backend at all (e.g. FLARE direct without logprobs)."""


def refusal(strategies: dict[str, Strategy], lm: LM) -> str | None:
    """One line naming each spec whose needs ``lm`` does not offer, what is missing, and the
    built-in strategies that would run on it; None when every spec can run."""
    needs = {spec: s.needs() for spec, s in strategies.items() if s.needs()}
    offers = lm.offers() if needs else frozenset()  # a strategy that needs nothing may run without an LM
    refused = {spec: need - offers for spec, need in needs.items() if not need <= offers}
    if not refused:
        return None
    what = "; ".join(f"{spec} needs {describe(missing)}" for spec, missing in refused.items())
    return f"{what}, which {lm.name} does not offer; these would run on it: {', '.join(runnable(offers))}"


def runnable(offers: frozenset[str]) -> list[str]:
    """The built-in strategies, with default parameters, that need no more than ``offers``; a
    strategy with a confidence trigger also as ``NAME:trigger=self_check`` (which needs no logprobs)."""
    out = []
    for name in BUILTIN:
        if get(name)().needs() <= offers:
            out.append(name)
        elif hasattr(get(name), "gate_trigger") and parse_spec(f"{name}:trigger=self_check").needs() <= offers:
            out.append(f"{name}:trigger=self_check")
    return out


def check_compatible(spec: str, strategy: Strategy, lm: LM) -> None:
    """Refuse (StrategyRefused), in one line naming what is missing and what would run instead, a
    strategy the LM cannot serve."""
    why = refusal({spec: strategy}, lm)
    if why:
        raise StrategyRefused(why)


def run_probe(spec: str, strategy: Strategy, probe, lm: LM | None, retriever: Retriever) -> Trace:
    """Run one strategy on one probe; a failure becomes an error trace, not a crash of the run,
    except an unreachable LM (LMUnavailable), which stops the run: every probe left would fail."""
    start = time.perf_counter()
    try:
        if lm is not None:  # an http strategy's service is its own LM
            lm.begin_answer()
        trace = strategy.run(probe.question, lm, retriever)
    except (KeyboardInterrupt, SystemExit, LMUnavailable):
        raise
    except Exception as e:  # a strategy or backend failure is this probe's result, recorded
        trace = _error_trace(probe.question, f"{type(e).__name__}: {e} ({_where(e)})")
    seconds = time.perf_counter() - start  # the probe's: the harness's own check below is not its time
    if not isinstance(trace, Trace):  # a plugin's mistake: recorded as this probe's, not a crash of the run
        trace = _error_trace(probe.question, f"{strategy.name}.run returned {type(trace).__name__}, not a Trace")
    elif why := _unrecordable(trace):  # written, it would make traces.jsonl unreadable: the run could not resume
        trace = _error_trace(probe.question, f"{strategy.name}.run returned a Trace that cannot be recorded ({why})")
    trace.seconds = seconds
    trace.probe_id = probe.id
    trace.strategy = spec
    return trace


def _unrecordable(trace: Trace) -> str | None:
    """Why ``trace`` could not be written and read back (a field of the wrong type), or None."""
    try:
        Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    except _NOT_A_TRACE as e:
        return _why(e)
    return None


def _error_trace(question: str, error: str) -> Trace:
    """The trace of a probe that failed with ``error``, any key it quotes redacted (it is written to
    traces.jsonl and shown in the reports)."""
    return Trace(question=question, output="", answer=None, stop_reason="error", error=redact_secrets(error))


def _where(e: BaseException) -> str:
    """``FILE:LINE`` of the innermost frame ``e`` was raised from."""
    last = traceback.extract_tb(e.__traceback__)[-1]
    return f"{Path(last.filename).name}:{last.lineno}"


def run_strategy(
    spec: str,
    strategy: Strategy,
    probes: Iterable,
    lm: LM,
    retriever: Retriever,
    log: TraceLog,
    progress: Callable[[Trace], None] | None = None,
    concurrency: int = 1,
) -> Iterator[Trace]:
    """Run ``strategy`` over the probes not yet in ``log``, appending each trace as it finishes.

    With ``concurrency`` > 1 (a thread-safe LM only) that many probes run at once and traces come
    in the order they finish; each probe's time is still its own. LMUnavailable stops the run: the
    probes not started are dropped, those in flight finish (and are kept), then it is raised."""
    check_compatible(spec, strategy, lm)
    done = log.done()
    todo = [p for p in probes if (spec, p.id) not in done]
    if concurrency > 1:
        if not lm.thread_safe:
            raise ValueError(f"{lm.name} cannot serve calls from several threads (concurrency {concurrency})")
        yield from _run_concurrently(spec, strategy, todo, lm, retriever, log, progress, concurrency)
        return
    for probe in todo:
        trace = run_probe(spec, strategy, probe, lm, retriever)
        log.append(trace)
        if progress:
            progress(trace)
        yield trace


def _run_concurrently(spec, strategy, todo, lm, retriever, log, progress, workers: int) -> Iterator[Trace]:
    unavailable: LMUnavailable | None = None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flarebench-probe") as pool:
        futures = [pool.submit(run_probe, spec, strategy, probe, lm, retriever) for probe in todo]
        try:
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    trace = future.result()
                except LMUnavailable as e:
                    unavailable = unavailable or e
                    for f in futures:
                        f.cancel()
                    continue
                log.append(trace)
                if progress:
                    progress(trace)
                yield trace
        finally:
            for f in futures:  # the consumer stopped early (or Ctrl-C): start nothing new
                f.cancel()
    if unavailable is not None:
        raise unavailable


def warm_up(strategies: dict[str, Strategy], lm: LM, retriever: Retriever) -> dict[str, float]:
    """Evaluate the static prompt prefix of every strategy (the LM keeps each prefix's state and
    restores it before every call) and make one retrieval, before any probe is timed. One-time
    costs (the model's weights paged in, each prefix's evaluation, first allocations) then land in
    no probe's latency, and a strategy's latency does not depend on which strategies ran before it.
    Nothing a probe produces is made or reused here. Returns what it did (run.json's ``warm_up``):
    the prefixes (the plain ones and those of the strategies' own :meth:`Strategy.warm_up`), the
    prompt tokens they evaluated, and the seconds it took. An exception of a backend's own (not an
    LMError) is said once on stderr, naming what raised it, and the warm-up goes on: in a probe it
    is that probe's error, so a run is not stopped for it here."""
    from flarebench.strategies.lm import WARM_UP, LMError, Prompt

    start = time.perf_counter()
    statics = dict.fromkeys(p for s in strategies.values() for p in s.plain_prefixes())
    warmers = [
        (f"LM {lm.name}", lambda static=static: lm.generate(Prompt(static, " "), 1, purpose=WARM_UP))
        for static in statics
    ]
    warmers += [
        (f"{spec}.warm_up", lambda strategy=strategy: strategy.warm_up(lm)) for spec, strategy in strategies.items()
    ]
    prefixes = evaluated = 0
    said = False
    for who, warm in warmers:
        try:
            call = warm()
            if call is not None and not isinstance(call, LMCall):
                raise TypeError(f"returned {type(call).__name__}, not an LMCall or None")
        except LMUnavailable:
            raise  # the run cannot go on: the entry points report it
        except LMError:
            continue  # the strategy's own first call reports what is wrong
        except Exception as e:  # noqa: BLE001 (a backend's bug: each probe records it too, as any error in a probe)
            if not said:  # said once, before the probes, naming what raised it
                note = f"{who}: {type(e).__name__}: {e} ({_where(e)}); the run goes on, its probes record their errors"
                print(f"flarebench: warm-up: {note}", file=sys.stderr)
                said = True
            continue
        if call is not None:
            prefixes += 1
            evaluated += call.evaluated_tokens
    try:
        retriever.search("warm up", 1)
    except LMUnavailable:
        raise  # a search service that is gone stops the run, as in a probe
    except Exception:  # noqa: BLE001 (a service may refuse this query: the probes' own retrievals say what is wrong)
        pass
    return {"prefixes": prefixes, "evaluated_tokens": evaluated, "seconds": round(time.perf_counter() - start, 3)}
