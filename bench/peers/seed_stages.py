"""Shared by the Python benchmarks: the seed's three functions as resident.stage Python functions, the
wall-clock timing of calls queued back to back, and the JSON a benchmark writes."""
import json
import math
import statistics
import time

import resident as rs
from json_out import write_text


@rs.stage
def func1(v):
    return 1.5 * v + 0.5


@rs.stage
def func2(v):
    return math.sqrt(v * v + 1.0)


@rs.stage
def func3(v):
    return 0.5 * math.sin(v)


master = func1 | func2 | func3


def per_call_seconds(f, calls, sync, reps=7):
    """Seconds per call of f: `calls` calls queued back to back, then sync(); the median of `reps`
    such batches after one untimed call."""
    f()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        sync()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def write_json(out, path):
    """The benchmark's record as JSON: to stdout for "-", else into the file at path."""
    write_text(path, json.dumps(out, indent=1) + ("" if path == "-" else "\n"))
