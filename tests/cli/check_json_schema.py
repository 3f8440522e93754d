#!/usr/bin/env python3
"""Runs the CLI with `--json -` and validates its JSON against docs/schema/resident-cli.schema.json.

usage: check_json_schema.py SCHEMA RESIDENT_CLI ARG...   (the CLI's arguments; `--json -` is appended)

Validates with the `jsonschema` package (python3-jsonschema, scripts/setup.sh) when it is there, else with
the subset of JSON Schema 2020-12 that the schema uses, implemented below (RESIDENT_SCHEMA_CHECKER=subset
forces it). Before trusting either, it checks that the validator refuses broken copies of the output: a
count written as a string, the schema version missing or wrong, a field the schema does not know."""
import copy
import json
import os
import re
import subprocess
import sys


class SubsetValidator:
    """type, const, enum, properties, required, additionalProperties, items, minimum, maximum, pattern,
    $ref (#/$defs/...), allOf, if/then: the keywords resident-cli.schema.json uses."""

    TYPES = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer(),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    }
    KNOWN = {"type", "const", "enum", "properties", "required", "additionalProperties", "items", "minimum", "maximum",
             "pattern", "$ref", "allOf", "if", "then", "description", "title", "$schema", "$id", "$defs"}

    def __init__(self, schema):
        self.root = schema

    def errors(self, v, s=None, path="$"):
        s = self.root if s is None else s
        if s is True:
            return []
        if s is False:
            return [f"{path}: not allowed"]
        unknown = set(s) - self.KNOWN
        if unknown:
            raise ValueError(f"the subset checker does not know {sorted(unknown)}")
        out = []
        if "$ref" in s:
            node = self.root
            for part in s["$ref"].removeprefix("#/").split("/"):
                node = node[part]
            out += self.errors(v, node, path)
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(self.TYPES[t](v) for t in types):
                return out + [f"{path}: {v!r} is not of type {s['type']}"]
        if "const" in s and not (v == s["const"] and type(v) is type(s["const"])):
            out.append(f"{path}: {v!r} is not {s['const']!r}")
        if "enum" in s and v not in s["enum"]:
            out.append(f"{path}: {v!r} is not one of {s['enum']}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "minimum" in s and v < s["minimum"]:
                out.append(f"{path}: {v} is below {s['minimum']}")
            if "maximum" in s and v > s["maximum"]:
                out.append(f"{path}: {v} is above {s['maximum']}")
        if isinstance(v, str) and "pattern" in s and not re.search(s["pattern"], v):
            out.append(f"{path}: {v!r} does not match {s['pattern']}")
        if isinstance(v, dict):
            props = s.get("properties", {})
            out += [f"{path}: '{k}' is a required property" for k in s.get("required", []) if k not in v]
            for k, x in v.items():
                if k in props:
                    out += self.errors(x, props[k], f"{path}.{k}")
                elif "additionalProperties" in s:
                    extra = s["additionalProperties"]
                    out += [f"{path}: additional property '{k}'"] if extra is False else self.errors(x, extra, f"{path}.{k}")
        if isinstance(v, list) and "items" in s:
            for i, x in enumerate(v):
                out += self.errors(x, s["items"], f"{path}[{i}]")
        for sub in s.get("allOf", []):
            out += self.errors(v, sub, path)
        if "if" in s and not self.errors(v, s["if"], path):
            out += self.errors(v, s.get("then", True), path)
        return out


def validator(schema):
    if os.environ.get("RESIDENT_SCHEMA_CHECKER") != "subset":
        try:
            import jsonschema

            jsonschema.Draft202012Validator.check_schema(schema)
            v = jsonschema.Draft202012Validator(schema)
            return "jsonschema", lambda doc: [f"$.{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]
        except ImportError:
            pass
    v = SubsetValidator(schema)
    return "subset", v.errors


def broken_copies(doc):
    """Copies of a valid output that the schema must refuse, each with what was broken."""
    out = []
    bad = copy.deepcopy(doc)
    del bad["schema_version"]
    out.append(("schema_version removed", bad))
    bad = copy.deepcopy(doc)
    bad["schema_version"] = 0
    out.append(("schema_version 0", bad))
    bad = copy.deepcopy(doc)
    bad["an_unknown_field"] = 1
    out.append(("an unknown field", bad))
    bad = copy.deepcopy(doc)
    bad["run"]["date"] = "yesterday"
    out.append(("run.date not ISO 8601", bad))

    def first_count(v):  # the path to the first integer in the document
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, int) and not isinstance(x, bool) and k != "schema_version":
                    return [k]
                p = first_count(x)
                if p is not None:
                    return [k] + p
        if isinstance(v, list):
            for i, x in enumerate(v):
                p = first_count(x)
                if p is not None:
                    return [i] + p
        return None

    p = first_count(doc)
    if p is not None:
        bad = copy.deepcopy(doc)
        node = bad
        for k in p[:-1]:
            node = node[k]
        node[p[-1]] = f"{node[p[-1]]} B"
        out.append((f"{'.'.join(map(str, p))} written as text", bad))
    return out


def main(argv):
    schema = json.load(open(argv[1]))
    engine, check = validator(schema)
    cmd = argv[2:] + ["--json", "-"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}", file=sys.stderr)
        return 1
    doc = json.loads(p.stdout)
    what = " ".join(argv[3:])
    problems = check(doc)
    for q in problems:
        print(f"{what}: {q}", file=sys.stderr)
    for why, bad in broken_copies(doc):
        if not check(bad):
            print(f"{what}: the {engine} checker accepted a copy with {why}", file=sys.stderr)
            problems.append(why)
    if not problems:
        print(f"{what}: valid against {os.path.basename(argv[1])} ({engine}), broken copies refused")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
