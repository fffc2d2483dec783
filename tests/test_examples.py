"""The committed example runs (reports/examples/) rescore to the very files committed beside them:
`flarebench report RUN_DIR` recomputes summary.csv, summary.md, adoption.md, report.html and triggers.csv from
run.json and traces.jsonl alone, and a change to scoring, column definitions or the report that alters any byte
of them shows here: a bug, or (a new metric, a changed definition) a change to commit with the
examples rescored, as CONTRIBUTING.md says. The plots' PNG bytes are matplotlib's to choose (a newer
release, as `.ci/newest` installs, encodes the same figure differently), so report.html is compared
with each embedded image's data replaced by a marker: everything else, byte for byte."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.scripted import run_cli

EXAMPLES = Path(__file__).resolve().parents[1] / "reports" / "examples"
#: What `report` derives from a run folder's run.json and traces.jsonl.
DERIVED = ("summary.csv", "summary.md", "adoption.md", "report.html", "triggers.csv")
_PNG = re.compile(rb"data:image/png;base64,[A-Za-z0-9+/=]+")


def _comparable(name: str, data: bytes) -> bytes:
    """The file's bytes, an embedded PNG reduced to a marker (a plot present is still compared)."""
    return _PNG.sub(b"data:image/png;base64,PNG", data) if name == "report.html" else data


@pytest.mark.slow
@pytest.mark.parametrize("example", ["compare", "theta-sweep"])
def test_an_example_run_rescores_byte_for_byte(tmp_path, example):
    committed = EXAMPLES / example
    run_dir = tmp_path / example
    run_dir.mkdir()
    for name in ("run.json", "traces.jsonl"):
        shutil.copy(committed / name, run_dir / name)
    code, out, err = run_cli("report", str(run_dir))
    assert code == 0, out + err
    changed = [
        name
        for name in DERIVED
        if _comparable(name, (run_dir / name).read_bytes()) != _comparable(name, (committed / name).read_bytes())
    ]
    assert changed == [], (
        f"{example}: rescoring changed {', '.join(changed)}; if that is meant, rescore the example "
        f"(python -m flarebench report reports/examples/{example}: no model) and commit it"
    )
