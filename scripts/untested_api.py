#!/usr/bin/env python3
"""Lists the public names of the C++ headers (include/resident/**.hpp, outside detail/) and of the
Python package (python/resident) that no test mentions, and fails for those docs/testing.md gives no
reason for.

A C++ name is a namespace-scope function, class, enum or variable, a public member function
(class::member) or a RESIDENT_ macro; a Python name is one the package or its submodules export (their
__all__, else what does not start with _) and the public methods of its classes (Class.method). A name
is "mentioned" when the word appears in a test: tests/ (C++ and Python), python/tests/ and examples/
(CTest runs every example). Names the docs give a reason for are listed in docs/testing.md under
"## Public names without a test", one per line as "- `name`: reason".

    python3 scripts/untested_api.py [--list]   # --list: print every public name with its status

Exit status: 0 when every untested name has a reason, 1 otherwise (the names printed).
"""
import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SKIP_WORDS = {"operator", "if", "for", "while", "switch", "return", "sizeof", "static_assert", "decltype",
              "requires", "template", "noexcept", "alignas", "alignof", "explicit", "defined"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def cpp_names(path):
    """(name, line) for the public names of one header: a small scanner of scopes, not a parser."""
    text = strip_comments(path.read_text())
    names = []
    for m in re.finditer(r"^\s*#\s*define\s+(RESIDENT_\w+)", text, re.M):
        if "_DETAIL_" not in m.group(1):
            names.append(m.group(1))
    # Scopes: namespace (detail or not), class (with its access), or a block (function body, init).
    stack = []  # entries: ("ns", is_detail) | ("class", name, public) | ("block",)
    pending = None  # what the next "{" opens
    i, n = 0, len(text)
    stmt = ""
    while i < n:
        c = text[i]
        if c == "{":
            s = stmt.strip()
            m_ns = re.search(r"\bnamespace\s*([\w:]*)\s*$", s)
            m_cls = re.search(r"\b(struct|class|union)\s+(?:\[\[[^\]]*\]\]\s*)?(\w+)\s*(?:final\s*)?(?::[^;{]*)?$", s)
            m_enum = re.search(r"\benum\s+(?:class\s+|struct\s+)?(\w+)", s)
            in_detail = any(e[0] == "ns" and e[1] for e in stack)
            in_private = any(e[0] == "class" and not e[2] for e in stack)
            in_block = any(e[0] == "block" for e in stack)
            visible = not (in_detail or in_private or in_block)
            if m_ns:
                stack.append(("ns", "detail" in m_ns.group(1) or any(e[0] == "ns" and e[1] for e in stack)))
            elif m_cls and "(" not in s and "=" not in s:
                if visible:
                    names.append(scoped(stack, m_cls.group(2)))
                stack.append(("class", m_cls.group(2), m_cls.group(1) != "class"))
            elif m_enum and "(" not in s:
                if visible:
                    names.append(scoped(stack, m_enum.group(1)))
                stack.append(("block",))
            else:
                if visible:
                    f = function_name(s)
                    if f:
                        names.append(scoped(stack, f))
                stack.append(("block",))
            stmt = ""
        elif c == "}":
            if stack:
                stack.pop()
            stmt = ""
        elif c == ";":
            s = stmt.strip()
            in_detail = any(e[0] == "ns" and e[1] for e in stack)
            in_private = any(e[0] == "class" and not e[2] for e in stack)
            in_block = any(e[0] == "block" for e in stack)
            if not (in_detail or in_private or in_block):
                f = function_name(s)
                if f:
                    names.append(scoped(stack, f))
                else:
                    m_var = re.search(r"\binline\s+constexpr\s+[\w:<>,\s]+?\b(\w+)\s*(=|\{|$)", s)
                    if m_var and not stack_has_class(stack):
                        names.append(scoped(stack, m_var.group(1)))
                    m_using = re.match(r"using\s+(\w+)\s*=", s)
                    if m_using and not stack_has_class(stack):
                        names.append(scoped(stack, m_using.group(1)))
            stmt = ""
        elif c == ":" and re.search(r"\b(public|private|protected)\s*$", stmt):
            access = re.search(r"\b(public|private|protected)\s*$", stmt).group(1)
            for k in range(len(stack) - 1, -1, -1):
                if stack[k][0] == "class":
                    stack[k] = ("class", stack[k][1], access == "public")
                    break
            stmt = ""
        else:
            stmt += c
        i += 1
    return names


def stack_has_class(stack):
    return any(e[0] == "class" for e in stack)


def scoped(stack, name):
    classes = [e[1] for e in stack if e[0] == "class"]
    return "::".join(classes + [name])


def function_name(stmt):
    """The name a declaration or definition head declares as a function, or None."""
    s = re.sub(r"\[\[[^\]]*\]\]", "", stmt)
    s = re.sub(r"^\s*template\s*<.*?>\s*(requires[^()]*(\([^)]*\))?\s*)?", "", s, flags=re.S)
    if s.lstrip().startswith(("using", "typedef", "friend", "return", "#", "static_assert")):
        return None
    m = re.search(r"(~?\b\w+)\s*\(", s)
    if not m:
        return None
    name = m.group(1)
    before = s[: m.start()]
    if name in SKIP_WORDS or name.startswith("~") or "operator" in before[-12:] or name.startswith("RESIDENT_"):
        return None
    if "=" in before or "(" in before:
        return None  # a variable initialized by a call, or a call
    if not re.search(r"[\w>&*]\s*$", before.strip() + " ") and before.strip() == "":
        return name  # a constructor (name alone): kept, its class filters it below
    return name


def cpp_public():
    out = {}
    for h in sorted((ROOT / "include" / "resident").rglob("*.hpp")):
        if "detail" in h.relative_to(ROOT / "include" / "resident").parts:
            continue
        for name in cpp_names(h):
            parts = name.split("::")
            if len(parts) >= 2 and parts[-1] == parts[-2]:
                continue  # a constructor
            if parts[-1].startswith("_") or parts[-1].endswith("_"):
                continue
            out.setdefault(name, str(h.relative_to(ROOT)))
    return out


def python_public():
    out = {}
    pkg = ROOT / "python" / "resident"
    stub = pkg / "_core.pyi"
    for f in sorted(pkg.glob("*.py")) + ([stub] if stub.exists() else []):
        tree = ast.parse(f.read_text())
        mod = "" if f.stem in ("__init__", "_core") else f.stem + "."
        if f.stem.startswith("_") and f.stem not in ("__init__", "_core"):
            continue
        exported = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                try:
                    exported = set(ast.literal_eval(node.value))
                except ValueError:
                    exported = None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                if node.name.startswith("_") or (exported is not None and node.name not in exported and f.stem != "_core"):
                    continue
                out.setdefault(mod + node.name, str(f.relative_to(ROOT)))
                if isinstance(node, ast.ClassDef):
                    for m in node.body:
                        if isinstance(m, ast.FunctionDef) and not m.name.startswith("_"):
                            out.setdefault(f"{mod}{node.name}.{m.name}", str(f.relative_to(ROOT)))
            elif isinstance(node, ast.Assign) and f.stem != "_core":
                for t in node.targets:
                    if isinstance(t, ast.Name) and (t.id == "__version__" or (not t.id.startswith("_") and exported and t.id in exported)):
                        out.setdefault(mod + t.id, str(f.relative_to(ROOT)))
    return out


def test_text():
    """The text of the C++ tests and of the Python tests, apart: a name counts in its own language."""
    def read(globs):
        files = []
        for d, pats in globs:
            for p in pats:
                files += [f for f in (ROOT / d).rglob(p) if f.is_file()]
        return "\n".join(f.read_text(errors="replace") for f in sorted(set(files)))
    cpp = read((("tests", ("*.cpp", "*.cu", "*.hpp", "*.txt", "*.cmake")), ("examples", ("*.cpp", "*.cu"))))
    py = read((("tests", ("*.py",)), ("python/tests", ("*.py",)), ("examples", ("*.py",))))
    return {"C++": cpp, "Python": py}


def documented_reasons():
    doc = ROOT / "docs" / "testing.md"
    if not doc.exists():
        return {}
    text = doc.read_text()
    m = re.search(r"^## Public names without a test\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        return {}
    return {k: v.strip() for k, v in re.findall(r"^- `([^`]+)`:\s*(.+)$", m.group(1), re.M)}


def mentioned(lang, name, texts, cache={}):
    """A member (class::m, Class.m) counts where it is reached as a member (.m, ->m, ::m); other names
    as a word."""
    parts = re.split(r"::|\.", name)
    word = parts[-1]
    member = len(parts) > 1
    key = (lang, word, member)
    if key not in cache:
        pat = (r"(\.|->|::)" if member else r"(?<![\w])") + re.escape(word) + r"(?![\w])"
        cache[key] = re.search(pat, texts[lang]) is not None
    return cache[key]


def main():
    list_all = "--list" in sys.argv[1:]
    text = test_text()
    reasons = documented_reasons()
    api = {**{"C++ " + k: v for k, v in cpp_public().items()}, **{"Python " + k: v for k, v in python_public().items()}}
    untested, excused = [], []
    for key in sorted(api):
        lang, name = key.split(" ", 1)
        if mentioned(lang, name, text):
            if list_all:
                print(f"tested    {key}")
            continue
        (excused if name in reasons else untested).append((key, api[key]))
    for key, where in excused:
        print(f"reason    {key} ({where}): {reasons[key.split(' ', 1)[1]]}")
    for key, where in untested:
        print(f"UNTESTED  {key} ({where})")
    print(f"untested_api: {len(api)} public names, {len(excused)} without a test for a reason given in "
          f"docs/testing.md, {len(untested)} without a test or a reason")
    stale = [r for r in reasons if not any(k.split(" ", 1)[1] == r for k in api)]
    for r in stale:
        print(f"note: docs/testing.md gives a reason for '{r}', which is no public name")
    return 1 if untested else 0


if __name__ == "__main__":
    sys.exit(main())
