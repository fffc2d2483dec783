"""``run.lock``: one writer per run folder. A second process writing the same folder would append
duplicate traces; it is refused instead, naming the owner's pid, and the lock of a process that is
no longer running is taken over."""

from __future__ import annotations

import atexit
import errno
import json
import os
import socket
from pathlib import Path
from uuid import uuid4

#: The lock file in a run folder: the pid, host, start time and a token of the process writing it.
LOCK = "run.lock"


class LockHeld(RuntimeError):
    """The run folder is being written by another live process."""


def _alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine (one of another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return not _zombie(pid)


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name, from the state on ([] without /proc:
    macOS). The name is in parentheses and may hold spaces or ")"."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat[stat.rfind(")") + 1 :].split()


def _zombie(pid: int) -> bool:
    """Whether the process has exited and waits to be reaped (its state Z in /proc): a killed run
    whose parent has not reaped it yet, or never will (a container whose PID 1 reaps no orphans)."""
    return _stat(pid)[:1] == ["Z"]


def _started(pid: int) -> str | None:
    """When the process started (clock ticks after boot, /proc's field 22), or None without /proc:
    with the pid it names one process, though the pid of a run that died is given to another."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else None


def _is_live(owner: dict) -> bool:
    """Whether a lock's owner is another process that may still be running: on another host its
    liveness cannot be checked, so it counts as running; this very process does not count."""
    if owner.get("host") != socket.gethostname():
        return True
    if owner.get("started") is not None and owner["started"] != _started(owner["pid"]):
        return False  # that pid is another process's now (a container restarts its pids from 1)
    return owner["pid"] != os.getpid() and _alive(owner["pid"])


class RunLock:
    """``run.lock`` in a run folder: taken by the session that writes the folder, released at its
    close (and, failing that, at interpreter exit). It holds the owner's pid, host, start time and a token; a
    lock whose owner is no longer running (killed, crashed) is taken over; a lock of this very
    process (another session that was not closed) is taken over silently. Readers (``score``,
    ``report``) never take it."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / LOCK
        self.token = uuid4().hex
        self.held = False

    def owner(self) -> dict | None:
        """What the lock file says (pid, host, token), or None when there is none or it is unreadable."""
        try:
            d = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) and isinstance(d.get("pid"), int) else None

    def live_owner(self) -> dict | None:
        """The owner when it is another process that may still be running, else None."""
        owner = self.owner()
        return owner if owner is not None and _is_live(owner) else None

    def held_message(self, owner: dict) -> str:
        """The one-line refusal for a folder another process is writing."""
        host = "" if owner.get("host") == socket.gethostname() else f" on host {owner.get('host')}"
        return (
            f"{self.path.parent} is in use by another flarebench run (pid {owner['pid']}{host}); wait for it "
            f"to end or use another --report-dir (if no such run is going on, delete {self.path})"
        )

    def blocked(self) -> str | None:
        """Why :meth:`acquire` would refuse now, in its words (another live owner, or a folder by the
        lock's name), or None; takes nothing."""
        owner = self.live_owner()
        if owner is not None:
            return self.held_message(owner)
        return self._cannot_take(os.strerror(errno.EISDIR)) if self.path.is_dir() else None

    def _cannot_take(self, why: object) -> str:
        return f"{self.path}: could not take the lock ({why})"

    def acquire(self) -> str | None:
        """Take the lock; LockHeld when another live process holds it. Returns a note to show when
        a stale lock was taken over, else None."""
        note = None
        pid = os.getpid()
        record = json.dumps({"pid": pid, "host": socket.gethostname(), "token": self.token, "started": _started(pid)})
        for _ in range(3):
            if self._create(record):
                self.held = True
                atexit.register(self.release)
                return note
            if not self.path.exists():
                continue  # released in the meantime
            owner = self.owner()
            if owner is not None and _is_live(owner):
                raise LockHeld(self.held_message(owner))
            if owner is None:
                note = f"took over {self.path}: unreadable, so its owner is taken to be gone"
            elif owner["pid"] != os.getpid():
                reused = _alive(owner["pid"])  # gone, though its pid now names another process
                then = " (that pid is another process's now)" if reused else ""
                note = f"took over {self.path}: its owner (pid {owner['pid']}) is no longer running{then}"
            # Two processes taking over the same stale lock at the same instant could both win;
            # that needs two starts within microseconds on a folder whose writer died.
            try:
                self.path.unlink(missing_ok=True)
            except OSError as e:  # no lock file but a folder by its name: not ours to remove
                raise LockHeld(self._cannot_take(e.strerror or e)) from None
        raise LockHeld(self._cannot_take("another process keeps taking it"))

    def _create(self, record: str) -> bool:
        """Create the lock file holding ``record``, atomically: it appears whole or not at all
        (written aside, then hard-linked in place, which fails when the lock exists)."""
        tmp = self.path.with_name(f".{LOCK}.{self.token}")
        tmp.write_text(record + "\n", encoding="utf-8")
        try:
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: exclusive create, then write
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(record + "\n")
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def release(self) -> None:
        """Remove the lock if this session still holds it (idempotent)."""
        if not self.held:
            return
        self.held = False
        atexit.unregister(self.release)
        owner = self.owner()
        if owner is not None and owner.get("token") == self.token:
            self.path.unlink(missing_ok=True)
