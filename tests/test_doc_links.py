"""Every relative link and image in the project's Markdown resolves, and the README and docs pages stay short.

Scans README.md, docs/**/*.md and research/**/*.md. A relative link (or image) must name a file or folder
that exists; a link with an anchor into a Markdown file must name one of that file's headings, slugged as
GitHub slugs them (lower case, punctuation other than ``-`` and ``_`` dropped, each space a ``-``, ``-1``,
``-2``... for repeats). Links inside fenced code blocks and inline code are examples, not links, and are
skipped; so are absolute URLs (``http:``, ``mailto:``...). README.md holds at most 250 lines and each docs/
page at most 400: reference beyond that goes to a page of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target), with an optional "title"; text may hold one level of brackets
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files(root: Path = ROOT) -> list[Path]:
    """README.md plus every Markdown file under docs/ and research/."""
    files = [root / "README.md"] if (root / "README.md").exists() else []
    for folder in ("docs", "research"):
        if (root / folder).is_dir():
            files += sorted((root / folder).rglob("*.md"))
    return files


def prose_lines(text: str, blank_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked unless told."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, INLINE_CODE.sub("", line) if blank_code else line))
    return out


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline link, image and reference definition outside code."""
    found = []
    for number, line in prose_lines(text):
        found += [(number, m.group(1)) for m in INLINE_LINK.finditer(line)]
        ref = REFERENCE_DEF.match(line)
        if ref:
            found.append((number, ref.group(1)))
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (github-slugger): links reduced to their text, lower case,
    every character but letters, digits, ``-``, ``_`` and spaces dropped, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return "".join(ch for ch in text if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(text, blank_code=False):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(files: list[Path], root: Path = ROOT) -> list[str]:
    """``file:line: target (why)`` for every relative link whose file or heading does not exist."""
    problems = []
    cache: dict[Path, set[str]] = {}
    for md in files:
        text = md.read_text(encoding="utf-8")
        for number, target in links(text):
            if SCHEME.match(target) or target.startswith("//"):
                continue
            path_part, _, anchor = target.partition("#")
            dest = (md.parent / path_part).resolve() if path_part else md.resolve()
            where = f"{md.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where} (no such file)")
                continue
            if anchor and dest.is_file() and dest.suffix == ".md":
                if dest not in cache:
                    cache[dest] = anchors(dest.read_text(encoding="utf-8"))
                if anchor.lower() not in cache[dest]:
                    problems.append(f"{where} (no heading with this anchor)")
    return problems


def test_every_relative_link_in_the_docs_resolves() -> None:
    files = markdown_files()
    assert (ROOT / "README.md") in files and any(f.parent.name == "docs" for f in files)
    assert sum(len(links(f.read_text(encoding="utf-8"))) for f in files) > 50  # the scan finds links
    problems = broken_links(files)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_slug_follows_github() -> None:
    assert slug("Head version 5 (dcf31c16be1c), on an H200") == "head-version-5-dcf31c16be1c-on-an-h200"
    assert slug("`polytox train-scorer`: timings") == "polytox-train-scorer-timings"
    assert slug("EMT / EP / AT of a real run") == "emt--ep--at-of-a-real-run"
    assert slug("lora_trial and lora_bundle: LoRA") == "lora_trial-and-lora_bundle-lora"
    assert slug("Corpus (RTP §6)") == "corpus-rtp-6"
    assert anchors("# A\n## A\n```\n# A\n```\n## A\n") == {"a", "a-1", "a-2"}


@pytest.mark.parametrize("target, why", [
    ("missing.md", "no such file"),
    ("other.md#nowhere", "no heading with this anchor"),
    ("#nowhere", "no heading with this anchor"),
])
def test_broken_links_are_reported(tmp_path: Path, target: str, why: str) -> None:
    (tmp_path / "other.md").write_text("# Title\n\n## A part\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\nSee [it]({target}).\n", encoding="utf-8")
    assert broken_links([page], tmp_path) == [f"page.md:3: {target} ({why})"]


def test_good_links_and_code_are_not_reported(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(b"png")
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` part\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-code-part) ![img](img/a.png) [web](https://example.org/x.md) [self](#page)\n"
        "`[not a link](missing.md)`\n\n```\n[also not](missing.md)\n```\n\n[ref]: other.md\n[bad]: gone.md\n",
        encoding="utf-8")
    assert broken_links([page], tmp_path) == ["page.md:11: gone.md (no such file)"]


README_LINES = 250  # the front door: what polytox is, the two commands, one example per capability
PAGE_LINES = 400  # a docs/ page; reference beyond it goes to a page of its own


def oversized(files: list[Path], root: Path = ROOT) -> list[str]:
    """``file: N lines (limit L)`` for README.md over README_LINES and every docs/ page over PAGE_LINES."""
    out = []
    for md in files:
        rel = md.relative_to(root)
        limit = README_LINES if rel == Path("README.md") else PAGE_LINES if rel.parts[0] == "docs" else None
        n = len(md.read_text(encoding="utf-8").splitlines())
        if limit is not None and n > limit:
            out.append(f"{rel}: {n} lines (limit {limit})")
    return out


def test_the_readme_and_every_docs_page_stay_short() -> None:
    files = markdown_files()
    assert sum(f.relative_to(ROOT).parts[0] == "docs" for f in files) >= 20
    problems = oversized(files)
    assert not problems, "move reference material to a docs/ page of its own:\n" + "\n".join(problems)


def test_an_oversized_page_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("line\n" * (README_LINES + 1), encoding="utf-8")
    (tmp_path / "docs" / "ok.md").write_text("line\n" * PAGE_LINES, encoding="utf-8")
    (tmp_path / "docs" / "long.md").write_text("line\n" * (PAGE_LINES + 1), encoding="utf-8")
    assert oversized(markdown_files(tmp_path), tmp_path) == [
        f"README.md: {README_LINES + 1} lines (limit {README_LINES})",
        f"docs/long.md: {PAGE_LINES + 1} lines (limit {PAGE_LINES})",
    ]
