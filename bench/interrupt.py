"""Stopping a run from outside. Ctrl-C (SIGINT) raises KeyboardInterrupt; SIGTERM, which a CI system
sends when a job is cancelled or times out (GitLab, Jenkins, a stopped container), would kill
Python at once: no summary, and run.json left saying ``running``. While a run is under way SIGTERM
raises :class:`Terminated` instead, a KeyboardInterrupt, so it takes Ctrl-C's path: what finished
is summarised, the run is marked interrupted, and the same command resumes it."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

#: The exit status of a run stopped by SIGTERM: 128 + the signal's number, as a shell reports it.
TERMINATED_EXIT = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a run was under way."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated("terminated (SIGTERM)")


def _main_thread() -> bool:
    # Python takes signals in the main thread only; elsewhere a handler cannot be set.
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigterm_kept() -> Iterator[None]:
    """Put the SIGTERM handler back after the block: ``ray.init`` installs its own (``sys.exit``),
    which would stop the driver without summarising the run. Off the main thread, nothing."""
    handler = signal.getsignal(signal.SIGTERM) if _main_thread() else None
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread; the handler that
    was there before is put back after it. Off the main thread nothing changes."""
    with sigterm_kept():
        if _main_thread():
            signal.signal(signal.SIGTERM, _raise_terminated)
        yield


@contextlib.contextmanager
def interrupts_polled() -> Iterator[Callable[[], None]]:
    """Within the block, Ctrl-C (SIGINT), and SIGTERM where :func:`sigterm_interrupts` is in force,
    are recorded instead of raised; the function yielded raises what arrived first
    (KeyboardInterrupt, :class:`Terminated`) where the caller polls it. For a loop that spends its
    time in a native wait (Ray's ``ray.wait``): an exception a handler raises inside such a wait can
    be lost there, and the signal with it (the run then went on, or waited on a stuck worker for
    ever). The handlers that were there before are put back after the block. Off the main thread,
    nothing changes and the function never raises."""
    if not _main_thread():
        yield lambda: None
        return
    arrived: list[int] = []
    polled = [signal.SIGINT, *([signal.SIGTERM] if signal.getsignal(signal.SIGTERM) is _raise_terminated else [])]
    before = {signum: signal.signal(signum, lambda signum, frame: arrived.append(signum)) for signum in polled}

    def poll() -> None:
        if arrived:
            first = arrived[0]
            arrived.clear()
            if first == signal.SIGTERM:
                _raise_terminated(first, None)
            raise KeyboardInterrupt

    try:
        yield poll
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
