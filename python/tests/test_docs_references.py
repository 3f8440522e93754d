"""What the docs point at exists and still works, checked as a newcomer would follow it.

The pages are README.md, docs/*.md and every README under examples/, bench/, tests/ and scripts/
(python/tests/_markdown.py). test_docs_examples.py runs their ```python blocks; this file checks the
rest of what they name, each failure listed with its page and line:

- links: every relative `[text](path#anchor)` names a file or folder that exists, and its anchor a
  heading of the target (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens, -1, -2 on
  repeats);
- paths: every repository path written in the text, in code spans or in shell blocks (one starting with
  src/, include/, python/, tests/, scripts/, bench/, docs/, examples/, tools/ or cmake/; a placeholder
  such as `tests/<concept>/` or `docs/*.md` is left alone) exists; `path:LINE` and `file.cpp:LINE`
  (a file name unique in the repository) point within the file; a source file named alone
  (`command_line.cpp`) exists somewhere;
- command lines: every `resident ...` line of a ```bash, ```sh, ```console or ```shell block or of a
  code span names subcommands the CLI has and options its `--help` lists for that subcommand, and a
  line without placeholders (`N`, `...`, `FILE`) parses: the CLI run with `--help` appended exits 0
  (its values are checked before help is printed; nothing runs). A line of a table row that also names
  a `cli.` CTest case shows a refused command (docs/errors.md) and is left to that case. Needs a built
  CLI under build/*/tools/resident/ (scripts/test.sh builds one before this suite): skipped without;
- presets (`--preset X`) exist in CMakePresets.json for the command that takes them, `-DRESIDENT_X` and
  `cmake.define.RESIDENT_X` are CMake options or cache variables, `ctest -R REGEX` selects some test and
  `ctest -L LABEL` names a label;
- names: every RESIDENT_* the docs name appears in the code, and one the docs set (`RESIDENT_X=...`)
  is read from the environment (a string literal "RESIDENT_X", `$RESIDENT_X`, `ENV{RESIDENT_X}`);
  CTest names and GoogleTest cases (`cli.bad_count`, `files.a_program_...`, a case list after a test
  binary such as test_fuse `generate_source`), pytest files and functions, test binaries (`test_*`);
  C++ names `rs::x`, `resident::x`, `jit::x` (each part a word of include/resident); Python names
  `rs.x`, `resident.x` (getattr on the package; `rs.random.fill_*` needs one name with that start) and
  `Class.attr` of a class the package exports.

A failure is a doc to fix (or a name the code lost), not this test.
"""
import functools
import importlib
import json
import os
import re
import shlex
import subprocess
import tempfile

import pytest

import resident as rs
from _markdown import ROOT, doc_pages, fences

if not (ROOT / "docs" / "python.md").is_file():
    pytest.skip(f"the repository's docs are not beside the tests ({ROOT})", allow_module_level=True)

PAGES = doc_pages()
TOPS = ("src", "include", "python", "tests", "scripts", "bench", "docs", "examples", "tools", "cmake")
SKIP_DIRS = {"build", ".deps", ".venv", ".git", "__pycache__", "node_modules"}
SHELL_LANGS = {"bash", "sh", "console", "shell", "shell-session"}
CODE_EXT = ("cpp", "hpp", "h", "cu", "cuh", "py", "sh", "cmake")

PATH = re.compile(r"(?<![\w./$<{@-])((?:" + "|".join(TOPS) + r")/[\w./+-]*)(?::(\d+)(?:-(\d+))?)?")
BARE_LINE = re.compile(r"(?<![\w/.-])([\w-]+\.(?:" + "|".join(CODE_EXT) + r"|txt|md|json)):(\d+)(?:-(\d+))?")
SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ENV_NAME = re.compile(r"\bRESIDENT_[A-Z0-9_]*[A-Z0-9]\b")
ENV_SET = re.compile(r"(?<![\w.-])(?<!-D)(RESIDENT_[A-Z0-9_]*[A-Z0-9])=")
CMAKE_DEF = re.compile(r"(?:-D|cmake\.define\.)(RESIDENT_[A-Z0-9_]*[A-Z0-9])")
PLACEHOLDER = re.compile(r"^(\.\.\.|[A-Z][A-Z_]*|<.*>|.*\.\.\..*)$")


# ---- the repository ------------------------------------------------------------------------------

@functools.cache
def repo_files():
    """Every file of the repository (build outputs and dependencies left out), as relative paths."""
    out = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (top == str(ROOT) and d.startswith("build"))]
        out += [os.path.relpath(os.path.join(top, f), ROOT).replace(os.sep, "/") for f in files]
    return out


@functools.cache
def by_name():
    names = {}
    for f in repo_files():
        names.setdefault(f.rsplit("/", 1)[-1], []).append(f)
    return names


@functools.cache
def text_of(rel):
    return (ROOT / rel).read_text(encoding="utf-8", errors="replace")


def line_count(rel):
    return len(text_of(rel).splitlines())


@functools.cache
def code_text():
    """The text of the code (everything but the docs and Markdown): where a name the docs use lives."""
    keep = [f for f in repo_files() if f.split("/", 1)[0] in TOPS + ("CMakeLists.txt", "CMakePresets.json",
                                                                         "pyproject.toml")
            and not f.startswith("docs/") and not f.endswith(".md") and "/results/" not in f
            and "/corpus/" not in f and "/regressions/" not in f]
    return "\n".join(text_of(f) for f in keep)


@functools.cache
def include_words():
    return set(re.findall(r"\w+", "\n".join(text_of(f) for f in repo_files() if f.startswith("include/resident/"))))


@functools.cache
def cmake_texts():
    return {f: text_of(f) for f in repo_files() if f.endswith(("CMakeLists.txt", ".cmake"))}


def without_functions(text):
    return re.sub(r"^\s*function\(.*?^\s*endfunction\(\)", "", text, flags=re.S | re.M)


@functools.cache
def ctest_names():
    """Regexes of the CTest names the CMake files register (a ${var} of a loop stands for a word)."""
    pats = set()
    for text in cmake_texts().values():
        body = without_functions(text)
        pats |= set(re.findall(r"add_test\(\s*NAME\s+(\S+)", body))
        for fn, names in (("resident_test", ("{}", "{}.gpu")), ("resident_cli_test", ("cli.{}",)),
                          ("resident_cli_check", ("cli.{}",)), ("resident_example", ("example.{}",)),
                          ("resident_cli_json", ("cli.json_numbers_{}", "cli.json_schema_{}"))):
            for call in re.finditer(r"^\s*" + fn + r"\(\s*([\w.${}-]+)", body, re.M):
                name = call[1]
                if re.fullmatch(r"\$\{\w+\}", name):  # a name made in a loop: the last text it was made from
                    made = re.findall(r"(?:set|string)\([^)]*?\b" + name[2:-1] + r"\s+\"([^\"]+)\"\s*\)",
                                      body[:call.start()])
                    name = made[-1] if made else name
                pats |= {n.format(name) for n in names}
    return [re.compile(re.sub(r"\\\$\\\{\w+\\\}", r"[\\w.-]*", re.escape(p))) for p in pats]


def is_ctest(name):
    """name (`...` standing for any text) fits a registered CTest name."""
    if "..." in name:
        want = re.compile(".*".join(re.escape(p) for p in name.split("...")))
        return any(want.fullmatch(p.pattern.replace("\\", "")) for p in ctest_names())
    return any(p.fullmatch(name) for p in ctest_names())


@functools.cache
def ctest_labels():
    labels = set()
    for text in cmake_texts().values():
        for m in re.finditer(r"LABELS\s+\"?([\w;]+)", text):
            labels |= set(m[1].split(";"))
    return labels


@functools.cache
def binary_names():
    return {n for text in cmake_texts().values()
            for n in re.findall(r"^\s*(?:resident_test|add_executable)\(\s*(test_\w+)", text, re.M)}


@functools.cache
def gtest_cases():
    cases = set()
    for f in repo_files():
        if f.startswith(("tests/", "bench/")) and f.endswith((".cpp", ".cu", ".hpp")):
            cases |= set(re.findall(r"\b(?:TEST|TEST_P|TEST_F|TYPED_TEST)\(\s*(\w+)\s*,\s*(\w+)\s*\)", text_of(f)))
    return cases


def is_gtest(suite, case):
    want = re.compile(".*".join(re.escape(p) for p in case.split("...")))
    return any((suite is None or s == suite) and want.fullmatch(c) for s, c in gtest_cases())


@functools.cache
def pytest_names():
    files = [f for f in repo_files() if f.startswith("python/tests/") and f.endswith(".py")]
    defs = {n for f in files for n in re.findall(r"^\s*def (test_\w+)", text_of(f), re.M)}
    return {f.rsplit("/", 1)[-1][:-3] for f in files}, defs


@functools.cache
def presets():
    data = json.loads(text_of("CMakePresets.json"))
    return {kind: {p["name"] for p in data.get(kind + "Presets", [])} for kind in ("configure", "build", "test")}


# ---- the pages -----------------------------------------------------------------------------------

@functools.cache
def page(p):
    """A page's parts: prose lines (code spans blanked), its code spans and its fenced blocks."""
    rel = p.relative_to(ROOT).as_posix()
    lines = p.read_text(encoding="utf-8").split("\n")
    in_fence, blocks = set(), []
    for i, end, lang in fences(lines, rel):
        in_fence |= set(range(i, end + 1))
        blocks.append((lang, i + 2, lines[i + 1:end]))
    prose, spans = [], []
    for n, line in enumerate(lines):
        if n in in_fence:
            continue
        spans += [(n + 1, m[2].strip(), line) for m in SPAN.finditer(line)]
        prose.append((n + 1, SPAN.sub(lambda m: " " * len(m[0]), line)))
    return {"rel": rel, "lines": lines, "prose": prose, "spans": spans, "blocks": blocks}


def all_pages():
    return [page(p) for p in PAGES]


def shell_lines(block_lines, first):
    """(line, text) of a shell block's commands: continuations joined, prompts and comments dropped."""
    out, cur, start = [], "", None
    for k, line in enumerate(block_lines):
        if start is None:
            start = first + k
        cur += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            text = re.sub(r"^\$\s+", "", cur.strip())
            out.append((start, re.sub(r"(^|\s)#.*$", "", text).strip()))
            cur, start = "", None
    return [(n, t) for n, t in out if t]


def texts(pg):
    """Every (line, text) of the page where a path or a name may stand: prose, spans, shell blocks."""
    out = list(pg["prose"]) + [(n, s) for n, s, _ in pg["spans"]]
    for lang, first, lines in pg["blocks"]:
        if lang in SHELL_LANGS or lang == "":
            out += [(first + k, line) for k, line in enumerate(lines)]
    return out


def commands():
    """(page, line, words, table row) of every shell command of the pages: shell blocks' segments
    (split at &&, ||, ;, |) and code spans that hold a command."""
    found = []
    for pg in all_pages():
        for lang, first, lines in pg["blocks"]:
            if lang in SHELL_LANGS:
                for n, text in shell_lines(lines, first):
                    found += [(pg["rel"], n, seg.strip(), "") for seg in re.split(r"&&|\|\||;|\|", text)]
        for n, span, line in pg["spans"]:
            for seg in re.split(r"&&|\|\||;", span):
                if re.match(r"\s*(\w+=\S*\s+)*(resident|cmake|ctest|pytest|bash|python3?)\s", seg + " "):
                    found.append((pg["rel"], n, seg.strip(), line if line.lstrip().startswith("|") else ""))
    out = []
    for rel, n, seg, row in found:
        try:
            words = shlex.split(seg)
        except ValueError:
            words = seg.split()
        while words and re.fullmatch(r"\w+=\S*", words[0]):
            words = words[1:]
        if words:
            out.append((rel, n, words, row))
    return out


def failures(items):
    return "\n".join(sorted(set(items)))


# ---- links, anchors and paths --------------------------------------------------------------------

def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@functools.cache
def anchors(rel):
    seen, out = {}, set()
    in_fence = set()
    lines = text_of(rel).split("\n")
    for i, end, _ in fences(lines, rel):
        in_fence |= set(range(i, end + 1))
    for n, line in enumerate(lines):
        m = HEADING.match(line)
        if m and n not in in_fence:
            s = slug(m[2])
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def test_links_and_anchors():
    bad = []
    for pg in all_pages():
        base = (ROOT / pg["rel"]).parent
        for n, text in pg["prose"]:
            for target in [m[1] for m in LINK.finditer(text)] + [m[1] for m in REF_LINK.finditer(text)]:
                if re.match(r"[a-z][a-z+.-]*:", target):
                    continue  # a URL
                path, _, anchor = target.partition("#")
                dest = (base / path).resolve() if path else ROOT / pg["rel"]
                where = f"{pg['rel']}:{n}: [..]({target})"
                if not dest.exists():
                    bad.append(f"{where}: {path} does not exist")
                elif anchor and dest.suffix == ".md":
                    rel = dest.relative_to(ROOT).as_posix()
                    if anchor not in anchors(rel):
                        bad.append(f"{where}: no heading of {rel} has the anchor #{anchor}")
    assert not bad, "broken links:\n" + failures(bad)


def check_line(rel, lo, hi, where, bad):
    if lo is None:
        return
    count = line_count(rel)
    for k in filter(None, (lo, hi)):
        if not 1 <= int(k) <= count:
            bad.append(f"{where}: line {k} is past the end of {rel} ({count} lines)")


def test_repository_paths_exist():
    bad = []
    for pg in all_pages():
        for n, text in texts(pg):
            for m in PATH.finditer(text):
                after = text[m.end():m.end() + 1]
                path = m[1].rstrip(".,")
                if after in "<{*" and after or path.endswith((".", "/.")) or "//" in path:
                    continue  # a placeholder: tests/<concept>/, src/{a,b}.cpp, docs/*.md
                where = f"{pg['rel']}:{n}: {m[0]}"
                if not (ROOT / path).exists():
                    bad.append(f"{where}: {path} does not exist")
                elif (ROOT / path).is_file():
                    check_line(path, m[2], m[3], where, bad)
            for m in BARE_LINE.finditer(text):
                hits = by_name().get(m[1], [])
                if not hits:
                    continue  # not one of ours: the user's program of an example output (app.cpp:12)
                if len(hits) != 1:
                    bad.append(f"{pg['rel']}:{n}: {m[0]}: {len(hits)} files are named {m[1]}"
                                              + f" ({', '.join(sorted(hits))}): write its path")
                else:
                    check_line(hits[0], m[2], m[3], f"{pg['rel']}:{n}: {m[0]}", bad)
        for n, span, _ in pg["spans"]:
            if re.fullmatch(r"[\w-]+\.(?:" + "|".join(CODE_EXT) + ")", span) and span not in by_name():
                bad.append(f"{pg['rel']}:{n}: `{span}`: no file of the repository has that name")
    assert not bad, "paths the docs name that are not in the repository:\n" + failures(bad)


# ---- the CLI -------------------------------------------------------------------------------------

@functools.cache
def cli():
    """The newest built CLI of the checkout (build/<preset>/tools/resident/resident), else None."""
    found = [p for p in ROOT.glob("build*/*/tools/resident/resident") if os.access(p, os.X_OK)]
    found += [p for p in ROOT.glob("build*/tools/resident/resident") if os.access(p, os.X_OK)]
    return str(max(found, key=lambda p: p.stat().st_mtime)) if found else None


def run_cli(args):
    with tempfile.TemporaryDirectory(prefix="resident-doc-cli-") as work:
        proc = subprocess.run([cli(), *args], cwd=work, capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, RESIDENT_DEVICE="cpu"))
    return proc.returncode, proc.stdout + proc.stderr


@functools.cache
def help_of(path):
    """(subcommands, options) of `resident PATH... --help`, or None when that is no command."""
    rc, out = run_cli([*path, "--help"])
    if rc != 0:
        return None
    subs, opts, section = set(), {"--help", "-h"}, None
    for line in out.splitlines():
        if re.match(r"^\S", line):
            section = line.strip().rstrip(":")
        elif section == "Subcommands" and re.match(r"^  \S", line):
            subs |= {s.strip() for s in re.split(r"\s{2,}", line.strip())[0].split(",")}
        elif section == "Options" and re.match(r"^\s+-", line):
            opts |= set(line.split()[0].split(":")[0].split(","))
    return subs, opts


def cli_problem(words):
    """What is wrong with a `resident ...` command line, or None."""
    path, rest = [], words[1:]
    while rest and not rest[0].startswith("-") and rest[0] in help_of(tuple(path))[0]:
        path.append(rest.pop(0))
    subs, opts = help_of(tuple(path))
    if rest and not rest[0].startswith("-") and not PLACEHOLDER.match(rest[0]) and subs:
        return f"'{rest[0]}' is no subcommand of `resident {' '.join(path)}` ({', '.join(sorted(subs))})"
    if subs and not rest and path:
        return None  # a command group named alone (`resident bench`)
    for w in rest:
        name = w.split("=", 1)[0]
        if re.match(r"--?[A-Za-z]", w) and name not in opts:
            return f"`resident {' '.join(path)}` has no option {name} ({', '.join(sorted(opts))})"
    if any(PLACEHOLDER.match(w) for w in rest):
        return None
    rc, out = run_cli([*words[1:], "--help"])
    return None if rc == 0 else f"the CLI refuses it (exit {rc}): {out.strip()[-300:]}"


def test_cli_command_lines():
    lines = [(rel, n, w, row) for rel, n, w, row in commands() if re.fullmatch(r"(.*/)?resident", w[0])]
    assert lines, "no `resident ...` command line found in the docs: the parser missed them"
    if cli() is None:
        pytest.skip("no built CLI under build/*/tools/resident/ (cmake --preset cpu && cmake --build "
                    "--preset cpu builds one; scripts/test.sh does before this suite)")
    bad = []
    for rel, n, words, row in lines:
        if re.search(r"`cli\.\w+`", row):
            continue  # a refused command line, shown by the CTest case its row names
        why = cli_problem(words)
        if why:
            bad.append(f"{rel}:{n}: `{shlex.join(words)}`: {why}")
    assert not bad, "command lines of the docs the CLI does not take:\n" + failures(bad)


# ---- build, test and environment names -----------------------------------------------------------

def test_script_options():
    """`python3 bench/x.py --opt` and `bash scripts/x.sh --opt`: the script exists and names --opt."""
    bad, checked = [], 0
    for rel, n, words, _ in commands():
        if words[0] not in ("python", "python3", "bash", "sh") or len(words) < 2 or words[1] == "-m":
            continue
        script = words[1]
        if not (ROOT / script).is_file():
            bad.append(f"{rel}:{n}: {shlex.join(words)}: {script} does not exist")
            continue
        checked += 1
        for w in words[2:]:
            name = w.split("=", 1)[0]
            if re.match(r"--[A-Za-z]", name) and not re.search(rf"[\"' |(]{re.escape(name)}\b", text_of(script)):
                bad.append(f"{rel}:{n}: {shlex.join(words)}: {script} takes no {name}")
    assert checked, "no script command line found in the docs: the parser missed them"
    assert not bad, "script command lines of the docs that do not work:\n" + failures(bad)


def test_presets_options_and_ctest_selections():
    bad = []
    options = {m for text in cmake_texts().values() for m in re.findall(
        r"(?:option|cmake_dependent_option)\(\s*(RESIDENT_\w+)|set\(\s*(RESIDENT_\w+)\s[^)]*\bCACHE\b", text)}
    options = {a or b for a, b in options}
    for pg in all_pages():
        for n, text in texts(pg):
            for m in CMAKE_DEF.finditer(text):
                if m[1] not in options:
                    bad.append(f"{pg['rel']}:{n}: {m[0]}: no CMake option or cache variable {m[1]}")
    for rel, n, words, _ in commands():
        if words[0] not in ("cmake", "ctest"):
            continue
        kind = "test" if words[0] == "ctest" else "build" if "--build" in words else "configure"
        for k, w in enumerate(words):
            value = words[k + 1] if k + 1 < len(words) else ""
            if w == "--preset" and value not in presets()[kind]:
                bad.append(f"{rel}:{n}: {shlex.join(words)}: no {kind} preset {value!r}")
            if words[0] == "ctest" and w == "-R" and not any(re.search(value, p.pattern.replace("\\", ""))
                                                             for p in ctest_names()):
                bad.append(f"{rel}:{n}: {shlex.join(words)}: -R {value} selects no test")
            if words[0] == "ctest" and w == "-L" and value not in ctest_labels():
                bad.append(f"{rel}:{n}: {shlex.join(words)}: no test has the label {value}")
    assert not bad, "build and test commands of the docs that do not work:\n" + failures(bad)


def test_environment_and_macro_names():
    bad = []
    code = code_text()
    for pg in all_pages():
        for n, text in texts(pg):
            for name in set(ENV_NAME.findall(text)):
                if not re.search(r"\b" + name + r"\b", code):
                    bad.append(f"{pg['rel']}:{n}: {name}: the code never names it")
            for m in ENV_SET.finditer(text):
                read = re.escape(m[1])
                if not re.search(rf"[\"']{read}[\"']|\$\{{?{read}\b|ENV\{{{read}\}}", code):
                    bad.append(f"{pg['rel']}:{n}: {m[1]}=...: no code reads {m[1]} from the environment")
    assert not bad, "RESIDENT_* names of the docs that the code does not have:\n" + failures(bad)


def test_test_names():
    bad = []
    files, defs = pytest_names()
    binaries = binary_names()
    prefixes = {p.pattern.split(r"\.")[0] for p in ctest_names()} | {s for s, _ in gtest_cases()}
    for pg in all_pages():
        for n, span, line in pg["spans"]:
            where = f"{pg['rel']}:{n}: `{span}`"
            m = re.fullmatch(r"(\w+)\.([a-z_][\w.]*?)(?:/\w+)?", span.replace("...", "_DOTS_"))
            if m and not re.search(r"\.(json|hpp|cpp|py|md|png|sh|txt|cmake|cu)$", span) and m[1] in prefixes:
                name = span.split("/")[0]
                suite, _, case = name.partition(".")
                if not (is_ctest(name) or is_gtest(suite, case) or python_name(f"resident.{span}") is None):
                    bad.append(f"{where}: no CTest test, GoogleTest case or name of the package")
            elif m := re.fullmatch(r"([\w/]*test_\w+\.py)::(test_\w+)(\[.*\])?", span):
                hits = [f for f in repo_files() if f.endswith("/" + m[1].rsplit("/", 1)[-1])
                        and f.startswith("python/tests/") and f.endswith(m[1])]
                if len(hits) != 1 or not re.search(rf"def {m[2]}\b", text_of(hits[0])):
                    bad.append(f"{where}: no test function {m[2]} in {m[1]}")
            elif re.fullmatch(r"test_\w+(\.py)?", span):
                stem = span.removesuffix(".py")
                if not (stem in files or stem in defs or stem in binaries or is_ctest(stem)):
                    bad.append(f"{where}: no test file, test function, test binary or CTest test")
        for n, text in pg["prose"]:
            line = pg["lines"][n - 1]
            for m in re.finditer(r"`([^`]+)` in (" + PATH.pattern + ")", line):
                word = re.match(r"[\w:.-]*\w", m[1].strip("$"))
                path = m[2].rstrip(".,")
                if word and (ROOT / path).is_file() and word[0] not in text_of(path):
                    bad.append(f"{pg['rel']}:{n}: `{m[1]}` in {path}: the file has no {word[0]}")
            for m in re.finditer(r"(?<![\w/])(test_\w+|python/tests/test_\w+\.py)((?:[ ,(]*`[\w.]+(?:/\w+)?`)+)", line):
                owner = m[1]
                for case in re.findall(r"`([^`]+)`", m[2]):
                    case = case.split("/")[0]
                    if not re.fullmatch(r"[\w.]+", case):
                        continue
                    if owner.endswith(".py"):
                        ok = re.search(rf"def {re.escape(case)}\b", text_of(owner))
                    elif owner in binaries and case.startswith("."):
                        ok = is_ctest(owner + case)  # an entry of the binary: test_x `.gpu`
                    elif owner in binaries:
                        suite, _, rest = case.replace("...", "\0").rpartition(".")
                        ok = is_gtest(suite or None, rest.replace("\0", "..."))
                    else:
                        continue
                    if not ok:
                        bad.append(f"{pg['rel']}:{n}: {owner} `{case}`: no such case in it")
    assert not bad, "test names of the docs that no test has:\n" + failures(bad)


# ---- API names -----------------------------------------------------------------------------------

def python_name(dotted):
    """None when `dotted` (rs.x.y or resident.x.y, a trailing `_*` a prefix) resolves, else why not."""
    parts = dotted.split(".")
    obj, done = rs, ["resident"]
    for part in parts[1:]:
        if part.endswith("*"):
            if not any(a.startswith(part[:-1]) for a in dir(obj)):
                return f"{'.'.join(done)} has no name starting with {part[:-1]}"
            return None
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(".".join(done + [part]))
            except ImportError:
                return f"{'.'.join(done)} has no attribute {part}"
        done.append(part)
    return None


def test_api_names():
    bad = []
    words = include_words()
    classes = {n for n in dir(rs) if isinstance(getattr(rs, n), type)}
    for pg in all_pages():
        for n, span, _ in pg["spans"]:
            where = f"{pg['rel']}:{n}: `{span}`"
            m = re.match(r"(rs|resident|jit)((?:::\w+)+)", span)
            if m:
                missing = [p for p in m[2].split("::")[1:] if p not in words]
                if missing:
                    bad.append(f"{where}: include/resident has no {', '.join(missing)}")
                continue
            m = re.match(r"(rs|resident)((?:\.\w+)+\*?)", span)
            if m and not span.startswith(("resident.json", "resident.md")):
                why = python_name(m[0])
                if why:
                    bad.append(f"{where}: {why}")
                continue
            m = re.match(r"([A-Z]\w+)\.(\w+)", span)
            if m and m[1] in classes and not hasattr(getattr(rs, m[1]), m[2]):
                bad.append(f"{where}: resident.{m[1]} has no attribute {m[2]}")
    assert not bad, "API names of the docs that the library does not have:\n" + failures(bad)


def test_the_checker_sees_each_kind():
    """Each kind of reference is found somewhere (a parser that found none would pass vacuously)."""
    found = {k: 0 for k in ("link", "anchor", "path", "command", "ctest", "cpp", "python")}
    for pg in all_pages():
        for n, text in texts(pg):
            found["path"] += len(PATH.findall(text))
        for n, text in pg["prose"]:
            links = [m[1] for m in LINK.finditer(text)]
            found["link"] += len(links)
            found["anchor"] += sum("#" in t for t in links)
        for n, span, _ in pg["spans"]:
            found["ctest"] += bool(re.fullmatch(r"cli\.\w+", span))
            found["cpp"] += span.startswith("rs::")
            found["python"] += span.startswith("rs.")
    found["command"] = len(commands())
    assert all(found.values()), f"kinds of reference found in no page: {found}"
