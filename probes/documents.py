"""Read a team's documents for ``python -m flarebench.probes corpus``: Markdown, plain text, HTML and
PDF, each with a maintained parser, into a title and sections under a heading path.

Markdown is parsed with markdown-it-py (CommonMark): each top-level heading starts a section, whose
text is the Markdown source below it up to the next heading. HTML is parsed with BeautifulSoup
(lxml): the visible text of the body without ``script``, ``style``, ``nav``, ``noscript`` and
``template``, one line per block element, a section per ``h1``-``h6``. PDF text comes from pypdf,
one page after another (a PDF carries no headings to follow). A plain-text file is one section.

A document's title is the HTML ``<title>``, the first Markdown H1 or the PDF's metadata title,
else the file name; a heading whose text is the title is left out of the heading paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pypdf
from bs4 import BeautifulSoup, NavigableString, Tag
from markdown_it import MarkdownIt

#: File suffix -> format name (the README of a built set counts files by it).
FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html", ".pdf": "pdf"}

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_HIDDEN = ("script", "style", "nav", "noscript", "template")
# Elements that start a line of their own in the extracted text.
_BLOCKS = (
    *_HEADINGS,
    *("p", "div", "li", "dt", "dd", "pre", "blockquote", "tr", "table", "section", "article", "main"),
    *("header", "footer", "aside", "figure", "figcaption", "form", "ul", "ol", "dl", "body"),
)

# pypdf reports what it repairs in a damaged file as log warnings: with no logging set up, Python
# would print each on stderr, around the one line the command prints for the file.
logging.getLogger("pypdf").addHandler(logging.NullHandler())


class DocumentError(Exception):
    """A file that cannot be read; the message is one ``FILE:0: (file): problem`` line."""


@dataclass
class Section:
    """A run of text under one heading path (the headings above it, outermost first)."""

    headings: tuple[str, ...]
    text: str


@dataclass
class SourceDocument:
    """One file of the folder: its path relative to the folder (``/``-separated), format, title, sections."""

    path: str
    format: str
    title: str
    sections: list[Section] = field(default_factory=list)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Outline:
    """Collects sections while a reader walks a document's headings in order."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []  # (level, text) of the headings above the current text
        self.sections: list[Section] = []
        self.lines: list[str] = []

    def flush(self) -> None:
        text = "\n".join(self.lines).strip()
        if text:
            self.sections.append(Section(tuple(h for _, h in self.stack), text))
        self.lines = []

    def heading(self, level: int, text: str) -> None:
        self.flush()
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, _one_line(text)))


def _markdown(text: str, name: str) -> tuple[str, list[Section]]:
    tokens = MarkdownIt("commonmark").parse(text)
    lines = text.splitlines()
    outline, title, at = _Outline(), None, 0
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue  # only top-level headings start a section (not one quoted or in a list)
        start, end = token.map
        outline.lines = lines[at:start]
        heading = tokens[i + 1].content  # the heading's inline token
        outline.heading(int(token.tag[1]), heading)
        if title is None and token.tag == "h1":
            title = _one_line(heading)
        at = end
    outline.lines = lines[at:]
    outline.flush()
    return title or name, outline.sections


def _html(data: bytes, name: str) -> tuple[str, list[Section]]:
    soup = BeautifulSoup(data, "lxml")
    for tag in soup.find_all(_HIDDEN):
        tag.decompose()
    title = _one_line(soup.title.get_text()) if soup.title else ""
    outline, line, block = _Outline(), [], None

    def end_line() -> None:
        if text := _one_line("".join(line)):
            outline.lines.append(text)
        line.clear()

    for node in (soup.body or soup).descendants:
        if isinstance(node, Tag) and node.name in _HEADINGS:
            end_line()
            block = None
            outline.heading(int(node.name[1]), node.get_text(" "))
            if node.name == "h1" and not title:
                title = outline.stack[-1][1]
        elif type(node) is NavigableString and not node.find_parent(_HEADINGS):  # not a comment or doctype
            here = node.find_parent(_BLOCKS)
            if here is not block:  # another block element: another line
                end_line()
                block = here
            line.append(str(node))
    end_line()
    outline.flush()
    return title or name, outline.sections


def _pdf(path: Path, name: str) -> tuple[str, list[Section]]:
    reader = pypdf.PdfReader(path)
    if reader.is_encrypted and not reader.decrypt(""):
        raise DocumentError("encrypted with a password")
    text = "\n\n".join(page.extract_text().strip() for page in reader.pages)
    title = _one_line((reader.metadata.title or "") if reader.metadata else "")
    return title or name, [Section((), text.strip())] if text.strip() else []


def _text(text: str, name: str) -> tuple[str, list[Section]]:
    return name, [Section((), text.strip())] if text.strip() else []


def _decoded(read: Callable[[str, str], tuple[str, list[Section]]]):
    """A reader of UTF-8 text (a byte-order mark allowed) from a reader of str; Windows' and old
    Macs' line ends are read as newlines, so no chunk keeps a carriage return."""

    def reader(path: Path, name: str) -> tuple[str, list[Section]]:
        try:
            text = path.read_bytes().decode("utf-8-sig")
            return read(text.replace("\r\n", "\n").replace("\r", "\n"), name)
        except UnicodeDecodeError as e:
            raise DocumentError(f"not UTF-8 ({e.reason} at byte {e.start})") from None

    return reader


_READERS: dict[str, Callable[[Path, str], tuple[str, list[Section]]]] = {
    "markdown": _decoded(_markdown),
    "text": _decoded(_text),
    "html": lambda path, name: _html(path.read_bytes(), name),  # BeautifulSoup finds the encoding
    "pdf": _pdf,
}


def read_document(root: Path, relative: str) -> SourceDocument:
    """Read the file at ``root / relative`` (its suffix one of FORMATS); DocumentError if it cannot be read.

    Headings equal to the title are left out of the sections' heading paths."""
    path = root / relative
    fmt = FORMATS[path.suffix.lower()]
    try:
        title, sections = _READERS[fmt](path, path.name)
    except DocumentError as e:
        raise DocumentError(f"{path}:0: (file): {e}") from None
    except OSError as e:
        raise DocumentError(f"{path}:0: (file): cannot read ({e.strerror or e})") from None
    except Exception as e:  # a damaged file: each parser raises its own kinds; the user needs one line
        msg = _one_line(str(e))[:200] or "no details"
        raise DocumentError(f"{path}:0: (file): cannot parse as {fmt}: {type(e).__name__}: {msg}") from None
    for s in sections:
        s.headings = tuple(h for h in s.headings if h.casefold() != title.casefold())
    return SourceDocument(relative, fmt, title, sections)
