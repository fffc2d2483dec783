"""The ``flarebench`` console script, run as a user runs it, for the end-to-end tests."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

#: The console script of the environment the tests run in.
FLAREBENCH = shutil.which("flarebench") or str(Path(sys.executable).with_name("flarebench"))


def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a run: the user's, with an index cache under ``tmp_path`` unless one is set."""
    return {**os.environ, "FLAREBENCH_CACHE": os.environ.get("FLAREBENCH_CACHE", str(tmp_path / "cache"))}
