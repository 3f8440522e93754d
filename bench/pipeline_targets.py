#!/usr/bin/env python3
"""The seed pipeline's margins: its targets as data, and the verdict on one `resident bench pipeline
--json` run. A target is met only when EVERY repetition (sweep) of the run meets it, and only in a run
of at least MIN_REPETITIONS sweeps; each verdict carries the worst sweep's figure.

usage: bench/pipeline_targets.py PIPELINE_JSON     prints one line per target and size, then the verdict;
                                                   exits 0 when every target is met, 3 when one is not.
"""
import json, sys

# The H200 targets, each in every one of three sweeps of one call. "at_most" / "at_least": the bound;
# "log2_n": the sizes it must hold at; "and_above": also at every larger size the run measured.
MIN_REPETITIONS = 3
TARGETS = [
    {"figure": "fused_over_memcpy", "at_most": 1.01, "log2_n": [26, 28], "and_above": True},
    {"figure": "fused_over_memcpy", "at_most": 1.03, "log2_n": [24]},
    {"figure": "fused_over_memcpy", "at_most": 1.10, "log2_n": [20, 22]},
    {"figure": "sum_rate_over_memcpy_rate", "at_least": 0.95, "log2_n": [24, 26, 28], "and_above": True},
    {"figure": "sum_rate_over_memcpy_rate", "at_least": 0.70, "log2_n": [20, 22]},
]
# The bench's `map + sum` is the form into a device array, sum(x, total): nothing is downloaded.
LABELS = {
    "fused_over_memcpy": "fused / memcpy time",
    "sum_rate_over_memcpy_rate": "map+sum into a device array, rate / copy rate",
}


def log2_of(row):
    """The row's size as log2 n: the integer exponent (files recorded before it wrote numbers: "2^24")."""
    v = row["log2_n"]
    return int(v[2:]) if isinstance(v, str) and v.startswith("2^") else int(v)


def sweeps(pipe):
    """Each sweep's rows by log2 n. A run from before --repeat holds one sweep, its rows."""
    reps = pipe.get("repetitions")
    if reps is None:
        reps = [{"repetition": 1, "rows": pipe["rows"]}]
    return [{log2_of(r): r for r in rep["rows"]} for rep in reps]


def judge(pipe, targets=TARGETS, min_repetitions=MIN_REPETITIONS):
    """One verdict per target and size: {"log2_n", "figure", "label", "target", "worst", "repetitions",
    "ok", "why"}; worst is the sweep farthest from the bound (None when a sweep lacks the figure)."""
    runs = sweeps(pipe)
    measured = sorted({n for run in runs for n in run})
    verdicts = []
    for t in targets:
        upper = "at_most" in t
        bound = t["at_most"] if upper else t["at_least"]
        sizes = list(t["log2_n"])
        if t.get("and_above"):
            sizes += [n for n in measured if n > max(t["log2_n"])]
        for n in sizes:
            values = [run.get(n, {}).get(t["figure"]) for run in runs]
            v = {"log2_n": n, "figure": t["figure"], "label": LABELS.get(t["figure"], t["figure"]),
                 "target": f"{'<=' if upper else '>='} {bound:.2f}", "repetitions": len(runs)}
            if not values or any(x is None for x in values):
                missing = sum(x is None for x in values)
                v.update(worst=None, ok=False, why=f"not measured in {missing} of {len(runs)} repetitions")
            else:
                worst = max(values) if upper else min(values)
                missed = sum((x > bound) if upper else (x < bound) for x in values)
                v.update(worst=worst, ok=missed == 0 and len(runs) >= min_repetitions)
                if missed:
                    v["why"] = f"missed in {missed} of {len(runs)} repetitions"
                elif len(runs) < min_repetitions:
                    v["why"] = f"{len(runs)} repetitions, {min_repetitions} needed"
                else:
                    v["why"] = f"met in all {len(runs)} repetitions"
            verdicts.append(v)
    figures = list(dict.fromkeys(t["figure"] for t in targets))  # each figure's rows together, by size
    return sorted(verdicts, key=lambda v: (figures.index(v["figure"]), v["log2_n"]))


def verdict_line(verdicts):
    """One line: pass when every target is met, else FAIL with the count missed."""
    if not verdicts:
        return "pipeline margins: FAIL (no targets judged)"
    missed = [v for v in verdicts if not v["ok"]]
    reps = max(v["repetitions"] for v in verdicts)
    if not missed:
        return f"pipeline margins: pass ({len(verdicts)} of {len(verdicts)} targets met in every one of {reps} repetitions)"
    return (f"pipeline margins: FAIL ({len(missed)} of {len(verdicts)} targets missed; a target counts only when "
            f"every one of at least {MIN_REPETITIONS} repetitions meets it)")


def main(path):
    pipe = json.load(open(path))
    verdicts = judge(pipe)
    for v in verdicts:
        worst = "-" if v["worst"] is None else f"{v['worst']:.3f}"
        print(f"2^{v['log2_n']}  {v['label']}: worst {worst}, target {v['target']}: "
              f"{'pass' if v['ok'] else 'FAIL'} ({v['why']})")
    print(verdict_line(verdicts))
    return 0 if all(v["ok"] for v in verdicts) else 3


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
