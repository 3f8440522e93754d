#!/usr/bin/env python3
"""Checks the measured figures that README.md and docs/*.md quote against the reference JSONs in
bench/results/.

bench/results/ holds one JSON per benchmark, the reference run's output with a "recorded" object
(gpu, commit, date, command) added in front; nothing else lives there. A figure names its source in an
HTML comment right after it (invisible on the rendered page):

    tuned 47.3<!-- src: matmul.json rows[algo=tuned,n=4096].tflops --> TFLOP/s

The path is a file name in bench/results/. `<!-- src-file: NAME -->` sets the file for the markers that
follow it in the same document, which then give the key alone: `<!-- src: rows[n=4096].tflops -->`.
A key is a dotted path; `name[k=v,...]` picks the one element of the list `name` whose fields match
(numbers compare as numbers; quote values with spaces: `[measure="pi, fill then reduce"]`), `name[3]`
an index. `KEY / KEY2` quotes the ratio of two values of the file; a trailing factor scales the value
before the comparison: `... rows[n=1].ms *1000`.

The figure is the number just before the marker (markdown emphasis, an `x` suffix, a unit such as
`ms`, `us`, `%` or `TFLOP/s` may stand between them). It passes when it is the recorded value rounded
to the figure's decimals. Exit status 1, with each failure listed, when any figure disagrees or a
marker cannot be resolved. It also fails when a reference JSON lacks its "recorded" fields, when
bench/results/ holds anything but reference JSONs, and when a document other than docs/performance.md
(or docs/measurements.md, the measurements behind the defaults)
cites a run ("run 18", "runs 29-32"): figures carry their commit and date in the reference JSON, and
the history of figures is one table in docs/performance.md. Python 3 standard library only.
"""
import json
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HISTORY = ROOT / "docs" / "performance.md"
MEASUREMENTS = ROOT / "docs" / "measurements.md"  # how the defaults were chosen, by run
RECORDED = ("gpu", "commit", "date", "command")
RUN_CITATION = re.compile(r"\bruns?[ -]\d+\b", re.IGNORECASE)

MARKER = re.compile(r"<!--\s*(src|src-file):\s*(.*?)\s*-->")
# The figure: a number, then optional emphasis, an "x", a unit, and spaces before the marker.
FIGURE = re.compile(r"(-?\d+(?:\.\d+)?)(?:\*\*|\*|_)?x?(?:\s*(?:ms|us|s|%|TFLOP/s|GB/s|GiB|MiB))?\s*$")
STEP = re.compile(r"([A-Za-z_][\w-]*)(?:\[(.*?)\])?$")


def split_key(key):
    """Splits a dotted key at the dots outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in key:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "." and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return parts


def number(v):
    """v as a float: a JSON number, or the text that older files recorded ("1.6e-07", "2^20" = 20 as an
    exponent); None when it is neither."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        t = v.strip()
        if t.startswith("2^"):
            t = t[2:]
        try:
            return float(t)
        except ValueError:
            return None
    return None


def same(recorded, wanted):
    # A size selector matches its exponent in both forms: [log2_n=2^24] and [log2_n=24].
    if isinstance(recorded, str) and recorded.startswith("2^") or wanted.startswith("2^"):
        a, b = number(recorded), number(wanted)
        return a is not None and a == b
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        try:
            return float(recorded) == float(wanted)
        except ValueError:
            return False
    return str(recorded) == wanted


def resolve(data, key):
    """The value at key in data, or raises KeyError saying where the path stopped."""
    for part in split_key(key):
        m = STEP.match(part)
        if not m:
            raise KeyError(f"cannot read key step '{part}'")
        name, sel = m.groups()
        if not isinstance(data, dict) or name not in data:
            raise KeyError(f"no field '{name}'")
        data = data[name]
        if sel is None:
            continue
        if sel.strip().isdigit():
            data = data[int(sel)]
            continue
        lexer = shlex.shlex(sel, posix=True)
        lexer.whitespace = ","
        lexer.whitespace_split = True
        conds = []
        for c in lexer:
            k, _, v = c.strip().partition("=")
            conds.append((k.strip(), v.strip()))
        hits = [e for e in data if isinstance(e, dict) and all(k in e and same(e[k], v) for k, v in conds)]
        if len(hits) != 1:
            raise KeyError(f"{len(hits)} elements of '{name}' match [{sel}], expected 1")
        data = hits[0]
    value = number(data)
    if value is None or isinstance(data, str) and data.strip().startswith("2^"):
        raise KeyError(f"the value is {data!r}, not a number")
    return value


def check(doc, cache):
    failures, checked = [], 0
    current = None
    rel = doc.relative_to(ROOT)
    for lineno, line in enumerate(doc.read_text().splitlines(), 1):
        for m in MARKER.finditer(line):
            kind, body = m.groups()
            where = f"{rel}:{lineno}"
            if kind == "src-file":
                current = body
                continue
            words = shlex.split(body)
            path = words.pop(0) if words and words[0].endswith(".json") else current
            factor = 1.0
            if words and words[-1].startswith("*"):
                factor = float(words.pop()[1:])
            divisor = None
            if len(words) == 3 and words[1] == "/":
                divisor = words.pop()
                words.pop()
            if not path or len(words) != 1:
                failures.append(f"{where}: marker '{body}' needs 'PATH KEY' (or a src-file before it)")
                continue
            key = words[0]
            if "/" in path:
                failures.append(f"{where}: {path}: name a reference JSON of bench/results/ (no folders)")
                continue
            fig = FIGURE.search(line[: m.start()])
            if not fig:
                failures.append(f"{where}: no figure just before the marker '{body}'")
                continue
            text = fig.group(1)
            try:
                if path not in cache:
                    cache[path] = json.loads((RESULTS / path).read_text())
                value = resolve(cache[path], key) * factor
                if divisor:
                    value /= resolve(cache[path], divisor)
                    key = f"{key} / {divisor}"
            except FileNotFoundError:
                failures.append(f"{where}: {text}: bench/results/{path} does not exist")
                continue
            except (KeyError, IndexError, TypeError, ValueError) as e:
                failures.append(f"{where}: {text}: {path} {key}: {e}")
                continue
            decimals = len(text.partition(".")[2])
            if abs(value - float(text)) > 0.5 * 10.0**-decimals * (1 + 1e-9):
                shown = f"{value:.{decimals + 2}f}"
                failures.append(f"{where}: the doc says {text}, {path} {key} records {shown}")
            checked += 1
    return failures, checked


def check_results():
    """bench/results/ holds reference JSONs only, each with its recorded gpu, commit, date and command."""
    failures = []
    for p in sorted(RESULTS.rglob("*")):
        rel = p.relative_to(ROOT)
        if p.is_dir() or p.suffix != ".json" or p.parent != RESULTS:
            failures.append(f"{rel}: bench/results/ keeps one reference JSON per benchmark and nothing else")
            continue
        try:
            recorded = json.loads(p.read_text()).get("recorded", {})
        except (ValueError, AttributeError) as e:
            failures.append(f"{rel}: not a JSON object: {e}")
            continue
        missing = [k for k in RECORDED if not str(recorded.get(k, "")).strip()]
        if missing:
            failures.append(f"{rel}: its \"recorded\" object lacks {', '.join(missing)}")
    return failures


def check_citations(doc):
    """Runs are cited in docs/performance.md (and the measurements behind the defaults) alone."""
    if doc in (HISTORY, MEASUREMENTS):
        return []
    rel = doc.relative_to(ROOT)
    return [f"{rel}:{n}: cites a run ('{m.group(0)}'); quote the reference JSON, or move the history to "
            "docs/performance.md" for n, line in enumerate(doc.read_text().splitlines(), 1)
            for m in RUN_CITATION.finditer(line)]


def main():
    cache, failures, checked = {}, check_results(), 0
    for doc in DOCS:
        f, c = check(doc, cache)
        failures += f + check_citations(doc)
        checked += c
    for f in failures:
        print(f"check_doc_figures: {f}", file=sys.stderr)
    if failures:
        print(f"check_doc_figures: {len(failures)} failures: correct each figure from its reference JSON (or "
              "the marker), and keep run citations to docs/performance.md", file=sys.stderr)
        return 1
    print(f"check_doc_figures: {checked} figures in {len(DOCS)} documents agree with bench/results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
