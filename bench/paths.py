"""Checks of the path options (``--report-dir``, ``--cache``, ``--prices``, ``--gate``,
``--save-baseline``), made before anything heavy is loaded, so a file where a folder is wanted, a
folder where a file is wanted, a missing input or a place that cannot be written fails at once in
one line (``--report-dir x: is a file, not a folder``) instead of a traceback at the end of a run;
and the one way a run folder's files are replaced (:func:`write_atomic`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from flarebench.strategies.lm import LMUnavailable
from flarebench.strategies.retriever import CACHE_ENV, cache_root


class PathError(ValueError):
    """A path option that cannot serve: one line naming the option, the path and what is wrong."""


class WriteError(OSError):
    """A file that cannot be written (a folder in its place, a full disk): one line naming the path
    and why, shown as a usage error (:func:`write_atomic`)."""


class StorageFailed(LMUnavailable):
    """A file the run writes as it goes (traces.jsonl, the ``--cache`` database) cannot be written
    mid-run: a full disk, a file-size limit, a read-only file. Every probe left would fail the same
    way, so the run stops, as for an unreachable LM, and resumes once there is room."""

    @classmethod
    def writing(cls, path: Path, error: Exception) -> StorageFailed:
        """The stop for ``error`` raised while writing ``path``."""
        return cls(f"cannot write {path} ({getattr(error, 'strerror', None) or error})")


_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once at import: os.umask can only be read by setting it


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half a file.
    When that fails (a folder in its place, a full disk), ``path`` is left as it was, the temporary
    file is removed, and WriteError names the path."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        # surrogateescape: a path given in bytes that are not UTF-8 (quoted in the text) is written
        # back as those bytes, not refused after the run (UnicodeEncodeError).
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes the file 0600; give it the usual permissions
        os.replace(tmp, path)
    except BaseException as e:  # also text no file can hold, or Ctrl-C: no temporary file is left behind
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise WriteError(f"{path}: cannot be written ({e.strerror or e})") from None
        raise


def _first_existing(path: Path) -> Path:
    """The path itself or its nearest ancestor that exists (``Path.exists`` is False below a file)."""
    path = Path(os.path.abspath(path))
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor)


def _creatable(flag: str, path: Path) -> None:
    """``path`` does not exist yet: its nearest existing ancestor must be a folder this process can
    write in (the path is then created with ``mkdir(parents=True)``)."""
    ancestor = _first_existing(path)
    if not ancestor.is_dir():
        raise PathError(f"{flag} {path}: cannot be created: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PathError(f"{flag} {path}: cannot be created: {ancestor} is not writable")
    _try_writing(f"{flag} {path}: cannot be created", ancestor)


def _try_writing(what: str, folder: Path) -> None:
    """Make and remove a folder in ``folder``: some places refuse even root, whose permission bits
    say yes (``/proc``, ``/sys``, a read-only mount), and only trying tells."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".flarebench-check-", dir=folder))
    except OSError as e:
        raise PathError(f"{what}: {folder} refuses it ({e.strerror or e})") from None


def check_folder(flag: str, path: str | os.PathLike) -> None:
    """A folder to write in: an existing writable folder, or one that can be created."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise PathError(f"{flag} {path}: is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PathError(f"{flag} {path}: folder not writable")
        _try_writing(f"{flag} {path}: folder not writable", path)
        return
    _creatable(flag, path)


def check_input_file(flag: str, path: str | os.PathLike) -> None:
    """A file to read: it exists, is a file and can be read."""
    path = Path(path)
    if path.is_dir():
        raise PathError(f"{flag} {path}: is a folder, not a file")
    if not path.exists():
        ancestor = _first_existing(path)
        below = f" ({ancestor} is a file, not a folder)" if not ancestor.is_dir() else ""
        raise PathError(f"{flag} {path}: not found{below}")
    if not os.access(path, os.R_OK):
        raise PathError(f"{flag} {path}: not readable")
    if not path.is_file():  # /dev/zero would be read for ever
        raise PathError(f"{flag} {path}: not a regular file")


def check_output_file(flag: str, path: str | os.PathLike) -> None:
    """A file to (over)write: not a folder, and its folder exists and is writable or can be created
    (it is written through a temporary file in the same folder, then renamed)."""
    path = Path(path)
    if path.is_dir():
        raise PathError(f"{flag} {path}: is a folder, not a file")
    if path.exists() and not path.is_file():  # a device (/dev/zero) or a pipe: no file to replace
        raise PathError(f"{flag} {path}: not a regular file")
    parent = Path(os.path.abspath(path)).parent
    if parent.is_dir():
        if not os.access(parent, os.W_OK | os.X_OK):
            raise PathError(f"{flag} {path}: cannot be written: {parent} is not writable")
        _try_writing(f"{flag} {path}: cannot be written", parent)
        return
    _creatable(flag, path)


def check_cache_root() -> None:
    """flarebench's cache folder (``$FLAREBENCH_CACHE``, or ``~/.cache/flarebench``): every run keeps
    its indexes there, with ``--cache`` or without. It is created now, as the run would create it,
    since a place can refuse even root (``/proc``), which no check of its permissions tells."""
    root = cache_root()
    name = f"${CACHE_ENV}" if os.environ.get(CACHE_ENV) else f"the cache folder (${CACHE_ENV} unset)"
    check_folder(name, root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PathError(f"{name} {root}: cannot be created ({e.strerror or e})") from None
