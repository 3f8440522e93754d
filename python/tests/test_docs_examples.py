"""The documentation's Python, run as a newcomer would copy it.

Every ```python block of README.md and docs/*.md runs here, and so does every script in
examples/python/, each in a fresh interpreter on the default device (the CPU backend where no GPU
answers), with small sizes where a script takes one. A block that fails is a doc to fix, not this test.

The conventions a page follows (docs/testing.md says the same):

- The blocks of one page run in order in ONE namespace, in one interpreter per page whose working
  folder is an empty temporary one: a block may use the names an earlier block of its page defined (a
  page reads as one session), never those of another page.
- A block may carry a marker, an HTML comment on the line just before its fence (invisible when the
  Markdown is rendered), of one or more directives separated by `;`:
    <!-- doc-test: needs torch gpu -->    skipped unless every word holds: `gpu` (a CUDA device
                                          answers), `2gpus` (two do), else a module that imports;
    <!-- doc-test: skip REASON -->        a fragment that cannot run (prefer making it runnable);
    <!-- doc-test: replace "OLD" "NEW" --> run with NEW in place of OLD (a size too big for a test).
  A skipped block must define nothing that later blocks of its page use.
- `# -> TEXT` ending a statement's last line states its result: the statement's value's repr (what
  it printed, where the value is None or it is no expression) must equal TEXT, each `...` in TEXT
  standing for any text. Comment lines just below, with their `#` in the same column, continue TEXT.
"""
import functools
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import resident as rs
from _markdown import ROOT, fences

if not (ROOT / "docs" / "python.md").is_file():
    pytest.skip(f"the repository's docs are not beside the tests ({ROOT})", allow_module_level=True)
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
EXAMPLES = sorted((ROOT / "examples" / "python").glob("*.py"))
GPUS = rs.cuda_device_count()
PAGE_TIMEOUT_S = 300
# The examples' size knobs, set small: the test checks that they run and check themselves, not speed.
EXAMPLE_ENV = {"RESIDENT_EXAMPLE_ELEMENTS": str(1 << 16), "RESIDENT_EXAMPLE_BYTES": "4MiB"}

MARKER = re.compile(r"^\s*<!--\s*doc-test:(?P<body>.*?)-->\s*$")
REPLACE = re.compile(r'^replace\s+"(?P<old>[^"]*)"\s+"(?P<new>[^"]*)"$')


def parse_marker(text, where):
    """The directives of a marker's body as a dict: needs (list), skip (reason or None), replace."""
    spec = {"needs": [], "skip": None, "replace": []}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        word, _, rest = part.partition(" ")
        if word == "needs" and rest.split():
            spec["needs"] += rest.split()
        elif word == "skip" and rest.strip():
            spec["skip"] = rest.strip()
        elif word == "replace" and REPLACE.match(part):
            m = REPLACE.match(part)
            spec["replace"].append((m["old"], m["new"]))
        else:
            raise ValueError(f"{where}: unknown doc-test directive {part!r} (needs / skip / replace)")
    return spec


@functools.cache
def python_blocks(page):
    """The ```python blocks of a page: dicts of path, line (the code's first line), code, marker."""
    lines = page.read_text(encoding="utf-8").split("\n")
    rel = page.relative_to(ROOT).as_posix()
    found = []
    for i, end, lang in fences(lines, rel):
        if lang == "python":
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            mm = MARKER.match(prev)
            spec = parse_marker(mm["body"], f"{rel}:{i}") if mm else parse_marker("", rel)
            code = textwrap.dedent("\n".join(lines[i + 1:end]))
            for old, new in spec["replace"]:
                if old not in code:
                    raise ValueError(f"{rel}:{i}: replace {old!r}: the block does not contain it")
                code = code.replace(old, new)
            found.append({"path": rel, "line": i + 2, "code": code, **spec})
    return found


def unmet(needs):
    """Why a block's needs are not met here (None when they are)."""
    why = []
    for word in needs:
        if word == "gpu" and GPUS < 1:
            why.append("a GPU (" + rs.cuda_unavailable_reason() + ")")
        elif word == "2gpus" and GPUS < 2:
            why.append(f"two GPUs ({GPUS} here)")
        elif word not in ("gpu", "2gpus") and importlib.util.find_spec(word) is None:
            why.append(f"{word} (not installed)")
    return "needs " + " and ".join(why) if why else None


# Runs in the page's own interpreter: reads the blocks (JSON) from stdin, runs each in order in one
# namespace, checks the `# -> TEXT` results, writes one result per block (JSON) to argv[1].
RUNNER = r'''
import ast, contextlib, io, json, re, sys, tokenize, traceback

def stated_results(code, first_line):
    """{line: TEXT} of the `# -> TEXT` comments (with their continuation lines), in page lines."""
    out, last = {}, None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type != tokenize.COMMENT:
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                last = None
            continue
        row, col = tok.start
        own_line = not tok.line[:col].strip()
        if tok.string.startswith("# ->"):
            last = (row + first_line - 1, col)
            out[last[0]] = tok.string[4:].strip()
        elif last and own_line and col == last[1]:
            out[last[0]] += " " + tok.string[1:].strip()
        else:
            last = None
    return out

def matches(want, got):
    pattern = ".*".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got, re.DOTALL) is not None

def run_block(block, ns):
    tree = ast.parse(block["code"], block["path"])
    ast.increment_lineno(tree, block["line"] - 1)
    results = stated_results(block["code"], block["line"])
    body = tree.body
    for k, stmt in enumerate(body):
        want = results.get(stmt.end_lineno)
        if want is not None and k + 1 < len(body) and body[k + 1].end_lineno == stmt.end_lineno:
            want = None                      # the result stated on a line is that of its last statement
        if want is None:
            exec(compile(ast.Module([stmt], []), block["path"], "exec"), ns)
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            if isinstance(stmt, ast.Expr):
                value = eval(compile(ast.Expression(stmt.value), block["path"], "eval"), ns)
            else:
                exec(compile(ast.Module([stmt], []), block["path"], "exec"), ns)
                value = None
        sys.stdout.write(printed.getvalue())
        got = repr(value) if value is not None else printed.getvalue().strip()
        if not matches(want, got):
            raise AssertionError(f"{block['path']}:{stmt.end_lineno}: the doc states {want!r}, "
                                 f"the statement gives {got!r}")

blocks = json.load(sys.stdin)
ns, results = {"__name__": "__main__"}, []
for block in blocks:
    if not block["run"]:
        results.append({"ok": None})
        continue
    try:
        run_block(block, ns)
        results.append({"ok": True})
    except BaseException:
        results.append({"ok": False, "error": traceback.format_exc()})
    with open(sys.argv[1], "w") as f:
        json.dump(results, f)                # as it goes: a crash leaves the results before it
    sys.stdout.flush()
'''


def blocks_of(page):
    return [dict(b, run=b["skip"] is None and unmet(b["needs"]) is None) for b in python_blocks(page)]


@functools.cache
def page_results(page):
    """Runs the page's runnable blocks in one fresh interpreter: (results per block, its output)."""
    blocks = blocks_of(page)
    with tempfile.TemporaryDirectory(prefix="resident-doc-") as work:
        out = Path(work) / "results.json"
        try:
            proc = subprocess.run([sys.executable, "-c", RUNNER, str(out)], input=json.dumps(blocks),
                                  cwd=work, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
            ended = f"exit status {proc.returncode}"
            output = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            ended = f"timed out after {PAGE_TIMEOUT_S} s"
            output = "".join(v.decode(errors="replace") if isinstance(v, bytes) else v or ""
                             for v in (e.stdout, e.stderr))
        results = json.loads(out.read_text()) if out.exists() else []
    gone = {"ok": False, "error": f"the page's interpreter ended ({ended}) before this block finished"}
    return results + [gone] * (len(blocks) - len(results)), output[-6000:]


def block_params():
    params = []
    for page in PAGES:
        for k, b in enumerate(python_blocks(page)):
            params.append(pytest.param(page, k, id=f"{b['path']}:{b['line']}"))
    return params


@pytest.mark.parametrize("page,index", block_params())
def test_doc_block_runs(page, index):
    block = python_blocks(page)[index]
    if block["skip"] is not None:
        pytest.skip(f"{block['path']}:{block['line']}: not runnable: {block['skip']}")
    why = unmet(block["needs"])
    if why is not None:
        pytest.skip(f"{block['path']}:{block['line']}: {why}")
    results, output = page_results(page)
    result = results[index]
    assert result["ok"], (f"{block['path']}:{block['line']} failed:\n{result['error']}\n"
                          f"--- the page's output ---\n{output}")


def test_every_page_with_python_is_collected():
    """Every ```python fence of the pages is a block the test runs (one the parser missed would hide)."""
    counted = {p.relative_to(ROOT).as_posix(): len(python_blocks(p)) for p in PAGES}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert len(re.findall(r"^[ \t]*```python[ \t]*$", text, re.M)) == counted[page.relative_to(ROOT).as_posix()]
    assert counted["docs/python.md"] > 0 and counted["README.md"] > 0


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    """Each example runs to its end (they check their own results against FP64 and the ledger); each
    takes the GPU's path where one answers and the CPU's (NumPy arrays) where none does."""
    env = dict(os.environ, **EXAMPLE_ENV)
    cmd = [sys.executable, str(script)]
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{shlex.join(cmd)} took more than {PAGE_TIMEOUT_S} s")
    assert proc.returncode == 0, f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
