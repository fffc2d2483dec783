"""The ``flarebench`` console script, run as a user runs it, for the end-to-end tests, and the check
that what a run leaves behind holds no secret."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

#: The console script of the environment the tests run in.
FLAREBENCH = shutil.which("flarebench") or str(Path(sys.executable).with_name("flarebench"))


def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a run: the user's, with an index cache under ``tmp_path`` unless one is set."""
    return {**os.environ, "FLAREBENCH_CACHE": os.environ.get("FLAREBENCH_CACHE", str(tmp_path / "cache"))}


def files_holding(folder: Path, secret: str) -> list[str]:
    """The files under ``folder`` whose bytes hold ``secret`` (what a run wrote, or a Ray session's
    folder while it runs: sockets and files gone meanwhile are skipped)."""
    found = []
    for path in Path(folder).rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and secret.encode() in path.read_bytes():
                found.append(str(path))
    return found
