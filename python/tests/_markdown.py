"""Shared by the tests that read the docs (test_docs_examples.py, test_docs_references.py): where the
repository is, which Markdown pages are its docs, and the fenced code blocks of a page."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<lang>[^`\s]*)\s*$")


def doc_pages():
    """README.md, docs/*.md and every README under examples/, bench/, tests/ and scripts/."""
    readmes = sorted(p for top in ("examples", "bench", "tests", "scripts")
                     for p in (ROOT / top).rglob("README*.md"))
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *readmes]


def fences(lines, rel):
    """The fenced blocks of a page's lines: (open, close, lang), the 0-based indexes of the fence lines.
    Raises ValueError for a fence that is never closed."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        close = re.compile("^" + re.escape(m["indent"]) + re.escape(m["ticks"]) + r"`*\s*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
        if end is None:
            raise ValueError(f"{rel}:{i + 1}: a fence that is never closed")
        yield i, end, m["lang"]
        i = end + 1
