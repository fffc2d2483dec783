"""The documentation stands on its own: no file of the project cites notes that a clone of the
repository does not hold, every relative link in the README and docs/ resolves (file and heading),
and docs/metrics.md defines every summary column."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Written in pieces so that this file does not match itself.
FORBIDDEN = [re.compile(r"\bDESIGN" + r"\.md\b"), re.compile(re.escape(".." + "/shared"))]

# [text](target) and ![alt](target); the target ends at whitespace or ")".
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def project_files() -> list[Path]:
    """Every file of the project: tracked, or new and not ignored (what a commit would hold)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = [ROOT / p for p in out.decode("utf-8").split("\0") if p]
    return [f for f in files if f.is_file()]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def markdown_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: markup and punctuation dropped, lowercase, spaces to
    hyphens ("Lucene backend: `--retriever pyserini`" -> "lucene-backend---retriever-pyserini")."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    """The link targets of a page, code blocks and inline code left out."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return _LINK.findall(text)


def test_no_file_cites_notes_outside_the_repository():
    offenders = []
    for path in project_files():
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in FORBIDDEN):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert offenders == [], "cite docs/ instead:\n" + "\n".join(offenders)


def test_relative_links_in_the_readme_and_docs_resolve():
    broken = []
    for page in markdown_pages():
        for target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:, ...
                continue
            path_part, _, fragment = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not dest.exists():
                broken.append(f"{where}: no such file {path_part}")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{where}: {dest.name} has no heading #{fragment}")
    assert broken == [], "\n".join(broken)


def test_the_readme_points_to_the_docs_and_their_index_lists_every_page():
    assert any(t.startswith("docs/") for t in links(ROOT / "README.md")), "README.md does not link docs/"
    listed = {t.partition("#")[0] for t in links(DOCS / "README.md")}
    missing = [p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in listed]
    assert missing == [], f"docs/README.md does not link {missing}"


def test_changes_md_has_a_section_for_this_version():
    # A change to what runs answer or how they score bumps the version (a run or a baseline of
    # another version is another configuration): CHANGES.md tells an upgrading team what moved.
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert re.search(rf"^## {re.escape(version)} \(\d{{4}}-\d{{2}}-\d{{2}}\)$", (ROOT / "CHANGES.md").read_text(), re.M)


def test_metrics_doc_defines_every_summary_column():
    from flarebench.bench.metrics import optional_columns, summary_columns

    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z0-9_]+)`", text))
    assert [c for c in [*summary_columns(), *optional_columns()] if c not in named] == []


def test_slug_matches_githubs_rule():
    assert slug("Lucene backend: `--retriever pyserini`") == "lucene-backend---retriever-pyserini"
    assert slug("run.json") == "runjson"
    assert slug("Is the confidence gate informative?") == "is-the-confidence-gate-informative"


_COUNTS = {7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen"}


def test_every_built_in_strategy_and_trigger_is_in_the_pages_that_list_them():
    # A new strategy or trigger is added in one file; these are the places a reader looks it up.
    from flarebench.strategies import triggers
    from flarebench.strategies.registry import BUILTIN

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    strategies = (DOCS / "strategies.md").read_text(encoding="utf-8")
    calibration = (DOCS / "calibration.md").read_text(encoding="utf-8")
    for name in BUILTIN:
        assert f"\n| `{name}` |" in readme, f"README's parameter table has no row for {name}"
        assert f"\n## {name}\n" in strategies and f"[{name}](#{name})" in strategies, f"docs/strategies.md: {name}"
    count = _COUNTS[len(BUILTIN)]
    assert strategies.startswith(f"# Strategies\n\n{count.capitalize()} strategies"), "docs/strategies.md's count"
    assert f"the {count} strategies" in readme and f"the {count} built-in strategies" in (
        DOCS / "scaling.md"
    ).read_text(encoding="utf-8")
    triggers_table = strategies.split("### Triggers", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"`trigger` \| `min_prob` \| the gate: ([^(|]*)", strategies)
    for name in triggers.names():
        assert f"\n| `{name}` |" in triggers_table, f"docs/strategies.md's Triggers table lacks {name}"
        assert listed and all(f"`{name}`" in line for line in listed), f"a trigger parameter row lacks {name}"
        assert f"`{name}`" in readme.split("| `flare_direct` |", 1)[1].split("\n", 1)[0], f"README: {name}"
        if triggers.get(name).grid:  # calibration tunes its threshold over the grid
            assert f"| `flare_direct` (`{name}`) |" in calibration, f"docs/calibration.md's knob table lacks {name}"


def test_every_install_builds_llama_cpp_portably_with_the_same_flags():
    # A native build (-march=native) died with SIGILL on a VM whose CPU advertises AMX the hypervisor
    # does not enable, and a wheel cached on one CI runner can run on another runner's CPU.
    files = ["README.md", ".ci/run", "bench/templates/init/bench/ci/github-actions.yml"]
    files.append("bench/templates/init/bench/ci/gitlab-ci.yml")
    found = {f: re.findall(r'CMAKE_ARGS:?=? ?"([^"]+)"', (ROOT / f).read_text(encoding="utf-8")) for f in files}
    flags = {flag for values in found.values() for flag in values}
    assert all(found.values()) and len(flags) == 1, found
    assert "-DGGML_NATIVE=OFF" in flags.pop().split()
