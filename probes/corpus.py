"""Build a probe set from a team's folder of documents: ``python -m flarebench.probes corpus DIR --out SET``.

Every Markdown, text, HTML and PDF file under DIR (``flarebench.probes.documents``) is split into
chunks of at most ``chunk_tokens`` tokens, counted with the embedded model's tokenizer (SmolLM2's
vocabulary, loaded by llama.cpp without the weights), by langchain-text-splitters'
RecursiveCharacterTextSplitter; a chunk never crosses a heading. Each chunk is one document of
``corpus.jsonl``: id ``PATH#N`` (PATH relative to DIR, N counting the file's chunks from 1), title the
file's title and the chunk's heading path. The questions (``flarebench.probes.questions``) become
``probes.jsonl``, their gold sources resolved to chunk ids. ``README.md`` and ``build.json`` record
the source, the counts and the chunking; run.json records the chunking from ``build.json``.

The set is written into a temporary folder beside SET, checked by the validator and then renamed:
an interrupted build leaves SET as it was. SET is new, empty or a built set (its files are those
of :data:`BUILT_FILES`, which ``--overwrite`` replaces); a folder holding any other file, the
source folder (or one inside it or holding it) and the current folder are refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from langchain_text_splitters import RecursiveCharacterTextSplitter
from tqdm import tqdm

from flarebench.bench import paths
from flarebench.strategies.backends import smollm2_path
from flarebench.strategies.llamacpp import vocabulary_only

from .documents import FORMATS, DocumentError, SourceDocument, read_document
from .questions import DEFAULT_NAMES, Question, QuestionError, read_questions
from .validate import BUILD_FILE, CORPUS_FILE, PROBES_FILE, README_FILE, check_folder, did_you_mean

DEFAULT_LICENCE = "the source documents' own licence (not recorded here)"
#: Below this, one character (up to 4 UTF-8 bytes, a token each at worst) might not fit a chunk.
MIN_CHUNK_TOKENS = 8
#: The files a build writes: all that --out may hold, and all that --overwrite replaces.
BUILT_FILES = (CORPUS_FILE, PROBES_FILE, README_FILE, BUILD_FILE)


class CorpusError(Exception):
    """A build that cannot go on; ``problems`` holds one ``FILE:LINE: FIELD: message`` line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Chunking:
    """How documents become chunks; recorded in the set's README.md and build.json, and in run.json."""

    chunk_tokens: int = 256
    chunk_overlap: int = 32
    splitter: str = f"{RecursiveCharacterTextSplitter.__module__}.{RecursiveCharacterTextSplitter.__name__}"
    splitter_version: str = metadata.version("langchain-text-splitters")
    tokenizer: str = ""  # set by the build: the tokenizer that counted

    def problem(self) -> str | None:
        """One line naming a bad size or overlap, or None."""
        if self.chunk_tokens < MIN_CHUNK_TOKENS:
            return f"--chunk-tokens: must be at least {MIN_CHUNK_TOKENS}, got {self.chunk_tokens}"
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            return (
                f"--chunk-overlap: must be at least 0 and less than --chunk-tokens ({self.chunk_tokens}), "
                f"got {self.chunk_overlap}"
            )
        return None


class TokenCounter:
    """Counts tokens as the embedded model does: its GGUF file loaded vocabulary-only (no weights),
    which takes a fraction of a second."""

    def __init__(self) -> None:
        path = smollm2_path()
        self._vocab = vocabulary_only(model_path=str(path), verbose=False)
        self.name = f"{path.name} (llama.cpp, vocabulary only)"

    def __call__(self, text: str) -> int:
        return len(self._vocab.tokenize(text.encode("utf-8"), add_bos=False))


class Chunker:
    """Splits text into chunks of at most ``chunk_tokens`` tokens, the last ``chunk_overlap`` or fewer
    repeated at the start of the next one when a paragraph is split inside."""

    def __init__(self, chunking: Chunking, count: TokenCounter) -> None:
        self.limit, self.overlap, self.count = chunking.chunk_tokens, chunking.chunk_overlap, count

    def split(self, text: str, size: int | None = None) -> list[str]:
        size = size or self.limit
        splitter = RecursiveCharacterTextSplitter(
            chunk_size=size, chunk_overlap=min(self.overlap, size - 1), length_function=self.count
        )
        chunks = []
        for chunk in splitter.split_text(text):
            n = self.count(chunk)
            # The splitter adds up its pieces' counts, and joined pieces can take a token or two more:
            # such a chunk is split again, smaller, so that every chunk fits.
            chunks += [chunk] if n <= self.limit else self.split(chunk, max(1, size - (n - self.limit)))
        return chunks


@dataclass
class Chunk:
    """One document of the built corpus and the file it came from."""

    id: str
    title: str
    text: str
    source: str


@dataclass
class Built:
    """What a build wrote: the counts its summary line and README report."""

    out: Path
    files: dict[str, int]
    skipped: list[str]
    chunks: int
    probes: int


def _files(folder: Path, exclude: set[Path]) -> tuple[list[str], list[str]]:
    """(files to read, skipped files) under folder, relative, ``/``-separated, sorted; hidden files
    and folders (``.git``) are passed over. A link to nothing is a file to read, so that the build
    stops on it as on any file it cannot read."""
    found, skipped = [], []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        wanted = path.is_file() or (path.is_symlink() and not path.exists())
        if any(part.startswith(".") for part in rel.parts) or not wanted or path.resolve() in exclude:
            continue
        (found if path.suffix.lower() in FORMATS else skipped).append(rel.as_posix())
    return sorted(found), sorted(skipped)


def _chunks(doc: SourceDocument, chunker: Chunker) -> list[Chunk]:
    out = []
    for section in doc.sections:
        title = " > ".join((doc.title, *section.headings))
        for text in chunker.split(section.text):
            out.append(Chunk(f"{doc.path}#{len(out) + 1}", title, text, doc.path))
    return out


def _probes(asked: list[Question], where: Path, chunks: list[Chunk]) -> list[dict]:
    """probes.jsonl's rows; a source (a gold source, a long question's fact's doc id) that is a chunk
    id is that chunk, a file is all its chunks."""
    ids = {c.id for c in chunks}
    by_file: dict[str, list[str]] = {}
    for c in chunks:
        by_file.setdefault(c.source, []).append(c.id)
    problems: list[str] = []

    # A name typed on one system and a file named on another (macOS writes file names decomposed,
    # "e" and an accent): the same name when both are put in one Unicode normal form.
    composed = {unicodedata.normalize("NFC", name): name for name in [*by_file, *ids]}

    def resolve(line: int, field: str, sources: list[str]) -> list[str]:
        found: list[str] = []
        for i, source in enumerate(sources):
            name = source.replace("\\", "/").removeprefix("./")
            name = composed.get(unicodedata.normalize("NFC", name), name)
            if name in ids or name in by_file:
                found += [name] if name in ids else by_file[name]
                continue
            hint = did_you_mean(name, [*by_file, *ids])
            problems.append(f"{where}:{line}: {field}[{i}]: '{source}' matches no file or chunk id{hint}")
        return list(dict.fromkeys(found))

    rows = []
    for q in asked:
        gold = resolve(q.line, "gold", q.gold)
        if not q.long:
            row = {"id": q.id, "question": q.question, "answers": q.answers, "answer_type": "single"}
            rows.append({**row, "gold_doc_ids": gold, **({"metadata": q.metadata} if q.metadata else {})})
            continue
        facts = [
            {**fact, "doc_ids": resolve(q.line, f"required_facts[{i}].doc_ids", fact["doc_ids"])}
            for i, fact in enumerate(q.required_facts)
        ]
        # The probe's gold: its own sources, then its facts' (the validator wants every fact's among them).
        gold = list(dict.fromkeys([*gold, *(d for fact in facts for d in fact["doc_ids"])]))
        rows.append(
            {"id": q.id, "question": q.question, "answers": [], "answer_type": "long", "gold_doc_ids": gold,
             "required_facts": facts, **({"metadata": q.metadata} if q.metadata else {})}
        )  # fmt: skip
    if problems:
        raise CorpusError(problems)
    return rows


def _questions_file(folder: Path, given: Path | None) -> Path:
    if given is not None:
        return given
    present = [folder / name for name in DEFAULT_NAMES if (folder / name).is_file()]
    if len(present) > 1:
        both = " and ".join(DEFAULT_NAMES)
        raise CorpusError([f"{folder}:0: (questions): both {both}; keep one or give --questions"])
    if not present:
        names = " or ".join(DEFAULT_NAMES)
        raise CorpusError([f"{folder}:0: (questions): no questions: give --questions FILE, or put {names} in it"])
    return present[0]


def _command(folder: Path, out: Path, questions: Path | None, chunking: Chunking, licence: str | None) -> str:
    """The command that rebuilds the set in place, every option spelt out."""
    words = ["python", "-m", "flarebench.probes", "corpus", str(folder), "--out", str(out)]
    words += ["--questions", str(questions)] if questions else []
    words += ["--chunk-tokens", str(chunking.chunk_tokens), "--chunk-overlap", str(chunking.chunk_overlap)]
    words += ["--licence", licence] if licence else []
    return shlex.join([*words, "--overwrite"])


def _readme(source: str, command: str, built: Built, chunking: Chunking, licence: str) -> str:
    formats = ", ".join(f"{fmt}: {n}" for fmt, n in built.files.items())
    skipped = f"; skipped (not a supported format, or no text): {len(built.skipped)}" if built.skipped else ""
    return f"""# {built.out.name}: probes over the documents in `{source}`

Built by flarebench's `python -m flarebench.probes corpus` from a folder of documents.

Licence: {licence}

## Counts

- source folder: `{source}`
- files by format: {formats}{skipped}
- chunks (documents of `corpus.jsonl`): {built.chunks}
- probes: {built.probes}

## Chunking

- splitter: `{chunking.splitter}` {chunking.splitter_version}, within each section (a chunk never crosses a heading)
- tokenizer: {chunking.tokenizer}
- chunk size: at most {chunking.chunk_tokens} tokens of text (the title is not counted)
- overlap: up to {chunking.chunk_overlap} tokens, where a paragraph is split inside

A chunk's id is `PATH#N`: the file's path in the folder and the chunk's number in the file, from 1.
Its title is the file's title (the HTML `<title>`, the first Markdown H1, the PDF's metadata title,
else the file name) and the headings above the chunk, joined by ` > `. `build.json` holds the same
in JSON; run.json records the chunking.

## Rebuild

```
{command}
```
"""


def _write(out: Path, files: dict[str, str]) -> None:
    """Write the set into a temporary folder beside out, check it, then put it in out's place."""
    # Through a link, the folder it names is swapped: the link stays a link, with no swap left beside it.
    out = out.resolve() if out.is_symlink() else out
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        for name, text in files.items():
            (partial / name).write_bytes(text.encode("utf-8"))
        if problems := check_folder(partial, require_readme=True).problems:
            raise CorpusError(problems)  # a bug of this module's, not of the input: said all the same
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            out.rename(old)
            try:
                partial.rename(out)
            except OSError:
                old.rename(out)  # the set that was there stays as it was
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            partial.rename(out)
    except OSError as e:  # a place _check_out could not foresee (root may write where nothing can be made)
        raise CorpusError([f"--out {out}: cannot be written ({e.strerror or e})"]) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _check_out(folder: Path, out: Path, overwrite: bool) -> None:
    """Refuse an --out that a build would damage: out is swapped whole for the new set
    (:func:`_write`), so it must hold nothing but a set's own files, nor the documents, nor the
    folder this process works in."""
    if out.exists() and not out.is_dir():
        raise CorpusError([f"{out}:0: (out): exists and is not a folder"])
    source, target = folder.resolve(), out.resolve()
    if target == source:
        raise CorpusError([f"{out}:0: (out): is the source folder; give the set a folder of its own"])
    if target.is_relative_to(source):
        raise CorpusError([f"{out}:0: (out): inside the source folder {folder}; a rebuild would read the set"])
    if source.is_relative_to(target):
        raise CorpusError([f"{out}:0: (out): holds the source folder {folder}; give the set a folder of its own"])
    if Path.cwd().is_relative_to(target):
        raise CorpusError([f"{out}:0: (out): is or holds the current folder; give the set a folder of its own"])
    if out.is_dir():
        entries = sorted(out.iterdir())
        if foreign := [p.name for p in entries if p.name not in BUILT_FILES or not p.is_file()]:
            raise CorpusError(
                [
                    f"{out}:0: (out): holds {foreign[0]!r}, which no build writes; give a new or empty folder "
                    "(--overwrite replaces a built set, never other files)"
                ]
            )
        if entries and not overwrite:
            raise CorpusError([f"{out}:0: (out): holds a built set; pass --overwrite to replace it"])
    try:  # before the documents are read: a place that cannot be written fails at once
        paths.check_folder("--out", out)
    except paths.PathError as e:
        raise CorpusError([str(e)]) from None


def build(
    folder: Path,
    out: Path,
    *,
    questions: Path | None = None,
    chunking: Chunking | None = None,
    licence: str | None = None,
    overwrite: bool = False,
) -> Built:
    """Build the probe set at out from the documents and questions in folder; CorpusError when the
    input is bad."""
    chunking = chunking or Chunking()
    if problem := chunking.problem():
        raise CorpusError([problem])
    if not folder.is_dir():
        raise CorpusError([f"{folder}:0: (folder): {'not a folder' if folder.exists() else 'not found'}"])
    _check_out(folder, out, overwrite)
    question_files = {(folder / name).resolve() for name in DEFAULT_NAMES}
    files, skipped = _files(folder, question_files | ({questions.resolve()} if questions else set()))
    if not files:
        raise CorpusError([f"{folder}:0: (folder): no Markdown, text, HTML or PDF files"])
    qfile = _questions_file(folder, questions)
    try:
        asked, problems = read_questions(qfile), []
    except QuestionError as e:
        if not e.questions:
            raise CorpusError(e.problems) from None
        asked, problems = e.questions, e.problems  # said with any problem of the documents or gold sources
    said = [f"skipped {name}: not a supported format ({', '.join(sorted(FORMATS))})" for name in skipped]
    count = TokenCounter()
    chunking = dataclasses.replace(chunking, tokenizer=count.name)
    chunker, chunks, unread, formats = Chunker(chunking, count), [], [], Counter()
    for name in tqdm(files, desc="reading", unit="file", file=sys.stderr, delay=2):
        try:
            doc = read_document(folder, name)
        except DocumentError as e:
            unread.append(str(e))
            continue
        if not (found := _chunks(doc, chunker)):
            said.append(f"skipped {name}: no text (a scanned PDF has none to extract)")
            skipped.append(name)  # listed as skipped in build.json and the README, not counted as read
            continue
        formats[doc.format] += 1
        chunks += found
    if unread:  # gold sources are matched once every document is read
        raise CorpusError(problems + unread)
    if not chunks:
        raise CorpusError([f"{folder}:0: (folder): no text in any of its {len(files)} documents"])
    try:
        probes = _probes(asked, qfile, chunks)
    except CorpusError as e:
        problems += e.problems
    if problems:
        raise CorpusError(problems)
    print("\n".join(said), end="\n" if said else "")  # a build refused says only what to fix
    built = Built(out, dict(sorted(formats.items())), skipped, len(chunks), len(probes))
    record = {"source": str(folder), "files": built.files, "skipped": skipped, "chunks": len(chunks)}
    _write(
        out,
        {
            CORPUS_FILE: "".join(json.dumps({"id": c.id, "title": c.title, "text": c.text}) + "\n" for c in chunks),
            PROBES_FILE: "".join(json.dumps(p) + "\n" for p in probes),
            README_FILE: _readme(
                str(folder),
                _command(folder, out, questions, chunking, licence),
                built,
                chunking,
                licence or DEFAULT_LICENCE,
            ),
            BUILD_FILE: json.dumps({**record, "chunking": dataclasses.asdict(chunking)}, indent=2) + "\n",
        },
    )
    return built
