"""The in-process backend (strategies/llamacpp.py) without the model: the files in which its
warm-up keeps static prefix states between runs (whole or not at all, checked on reading, the most
recently used kept), and its thread count. That a restored state answers as an evaluated one, and
that the thread count changes no answer: tests/test_llamacpp.py, with the model."""

from __future__ import annotations

import os

import pytest

from flarebench.strategies import llamacpp
from flarebench.strategies.llamacpp import _read_state, _write_state
from flarebench.strategies.lm import LMError


def test_a_state_reads_back_as_written_and_a_damaged_one_not_at_all(tmp_path):
    path = tmp_path / "states" / "a.state"
    _write_state(path, b"kv" * 1000)
    assert _read_state(path) == b"kv" * 1000
    assert [p.name for p in path.parent.iterdir()] == ["a.state"]  # no temporary file left
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    assert _read_state(path) is None
    path.write_bytes(b"x" + data[1:])
    assert _read_state(path) is None
    assert _read_state(tmp_path / "none.state") is None


def test_the_folder_keeps_the_most_recently_used_states(tmp_path, monkeypatch):
    for i, name in enumerate("abc", start=1):
        _write_state(tmp_path / f"{name}.state", name.encode())
        os.utime(tmp_path / f"{name}.state", (i, i))  # last used: a, then b, then c
    monkeypatch.setattr(llamacpp, "MAX_STATES", 2)
    assert _read_state(tmp_path / "a.state") == b"a"  # a is used again: now the most recent
    _write_state(tmp_path / "d.state", b"d")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.state", "d.state"]


def test_the_models_threads_come_from_the_environment_else_the_fixed_default(monkeypatch):
    monkeypatch.delenv(llamacpp.THREADS_ENV, raising=False)
    assert llamacpp.default_threads() == llamacpp.N_THREADS == 2
    monkeypatch.setenv(llamacpp.THREADS_ENV, "1")
    assert llamacpp.default_threads() == 1
    for bad in ("0", "two", "-1", ""):
        monkeypatch.setenv(llamacpp.THREADS_ENV, bad)
        with pytest.raises(LMError, match=rf"^\$FLAREBENCH_LM_THREADS must be a whole number >= 1, got {bad!r}$"):
            llamacpp.default_threads()
