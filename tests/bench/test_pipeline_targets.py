#!/usr/bin/env python3
"""The pipeline margins' verdict (bench/pipeline_targets.py, bench/summary.py) on a fixture of three
sweeps whose medians would pass where one sweep does not. With PIPELINE_JSON set, also the contract with
the CLI: that file, written by `resident bench pipeline --repeat 2 --json`, reads as two sweeps."""
import copy, io, json, os, sys, tempfile, unittest
from contextlib import redirect_stdout

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import pipeline_targets as pt  # noqa: E402
import summary  # noqa: E402

FIXTURE = os.path.join(here, "pipeline_three_repetitions.json")


def fixture():
    with open(FIXTURE) as f:
        return json.load(f)


def by_key(verdicts):
    return {(v["figure"], v["log2_n"]): v for v in verdicts}


def set_figure(pipe, figure, log2_n, values):
    for rep, value in zip(pipe["repetitions"], values):
        for r in rep["rows"]:
            if r["log2_n"] == f"2^{log2_n}":
                r[figure] = value


class verdict(unittest.TestCase):
    def test_one_sweep_over_the_bound_fails_a_target_whose_median_meets_it(self):
        pipe = fixture()
        median = {r["log2_n"]: r for r in pipe["rows"]}["2^26"]["fused_over_memcpy"]
        self.assertLessEqual(median, 1.01)  # the fixture's point: judged by the median it would pass
        v = by_key(pt.judge(pipe))[("fused_over_memcpy", 26)]
        self.assertFalse(v["ok"])
        self.assertAlmostEqual(v["worst"], 1.012)
        self.assertEqual(v["why"], "missed in 1 of 3 repetitions")

    def test_bounds_are_inclusive_and_worst_is_the_far_side(self):
        v = by_key(pt.judge(fixture()))
        self.assertTrue(v[("fused_over_memcpy", 24)]["ok"])
        self.assertAlmostEqual(v[("fused_over_memcpy", 24)]["worst"], 1.03)  # the largest time ratio
        self.assertTrue(v[("sum_rate_over_memcpy_rate", 24)]["ok"])
        self.assertAlmostEqual(v[("sum_rate_over_memcpy_rate", 24)]["worst"], 0.95)  # the lowest rate ratio
        self.assertTrue(v[("fused_over_memcpy", 28)]["ok"])
        self.assertAlmostEqual(v[("fused_over_memcpy", 28)]["worst"], 1.009)

    def test_sizes_as_exponents_judge_as_the_older_text(self):
        # The CLI writes log2_n as the integer exponent; files recorded before wrote "2^24".
        pipe = fixture()
        for rows in [pipe["rows"]] + [rep["rows"] for rep in pipe["repetitions"]]:
            for r in rows:
                r["log2_n"] = int(r["log2_n"][2:])
        self.assertEqual(pt.judge(pipe), pt.judge(fixture()))

    def test_every_target_and_size_is_judged(self):
        got = sorted(by_key(pt.judge(fixture())))
        want = sorted([("fused_over_memcpy", n) for n in (20, 22, 24, 26, 28)] +
                      [("sum_rate_over_memcpy_rate", n) for n in (20, 22, 24, 26, 28)])
        self.assertEqual(got, want)
        v = by_key(pt.judge(fixture()))
        self.assertEqual(v[("fused_over_memcpy", 20)]["target"], "<= 1.10")
        self.assertEqual(v[("fused_over_memcpy", 26)]["target"], "<= 1.01")
        self.assertEqual(v[("sum_rate_over_memcpy_rate", 22)]["target"], ">= 0.70")
        self.assertEqual(v[("sum_rate_over_memcpy_rate", 28)]["target"], ">= 0.95")

    def test_the_fixture_misses_three_and_the_verdict_says_fail(self):
        verdicts = pt.judge(fixture())
        missed = sorted((v["figure"], v["log2_n"]) for v in verdicts if not v["ok"])
        self.assertEqual(missed, [("fused_over_memcpy", 26), ("sum_rate_over_memcpy_rate", 22),
                                  ("sum_rate_over_memcpy_rate", 26)])
        self.assertTrue(pt.verdict_line(verdicts).startswith("pipeline margins: FAIL (3 of 10 targets missed"))

    def test_all_met_in_every_sweep_passes(self):
        pipe = fixture()
        set_figure(pipe, "fused_over_memcpy", 26, [1.005, 1.008, 1.01])
        set_figure(pipe, "sum_rate_over_memcpy_rate", 22, [0.73, 0.70, 0.74])
        set_figure(pipe, "sum_rate_over_memcpy_rate", 26, [0.97, 0.95, 0.98])
        verdicts = pt.judge(pipe)
        self.assertTrue(all(v["ok"] for v in verdicts), [v for v in verdicts if not v["ok"]])
        self.assertEqual(pt.verdict_line(verdicts),
                         "pipeline margins: pass (10 of 10 targets met in every one of 3 repetitions)")

    def test_fewer_than_three_sweeps_pass_nothing(self):
        pipe = fixture()
        pipe["repetitions"] = pipe["repetitions"][:2]
        v = by_key(pt.judge(pipe))[("fused_over_memcpy", 28)]
        self.assertFalse(v["ok"])
        self.assertEqual(v["why"], "2 repetitions, 3 needed")

    def test_a_size_not_measured_fails(self):
        pipe = fixture()
        for rep in pipe["repetitions"]:
            rep["rows"] = [r for r in rep["rows"] if r["log2_n"] != "2^28"]
        v = by_key(pt.judge(pipe))[("fused_over_memcpy", 28)]
        self.assertFalse(v["ok"])
        self.assertIsNone(v["worst"])
        self.assertIn("not measured", v["why"])

    def test_a_figure_without_a_value_fails(self):
        pipe = fixture()  # the bench writes null for a figure that is not finite
        set_figure(pipe, "fused_over_memcpy", 28, [1.0, None, 1.0])
        v = by_key(pt.judge(pipe))[("fused_over_memcpy", 28)]
        self.assertFalse(v["ok"])
        self.assertEqual(v["why"], "not measured in 1 of 3 repetitions")

    def test_larger_sizes_count_toward_and_above_targets(self):
        pipe = fixture()
        for rep in pipe["repetitions"]:
            big = copy.deepcopy(rep["rows"][-1])
            big.update(log2_n="2^30", fused_over_memcpy=1.02, sum_rate_over_memcpy_rate=0.99)
            rep["rows"].append(big)
        v = by_key(pt.judge(pipe))
        self.assertFalse(v[("fused_over_memcpy", 30)]["ok"])
        self.assertTrue(v[("sum_rate_over_memcpy_rate", 30)]["ok"])
        self.assertNotIn(("fused_over_memcpy", 32), v)

    def test_a_run_from_before_repeat_is_one_sweep(self):
        pipe = fixture()
        del pipe["repetitions"]
        verdicts = pt.judge(pipe)
        self.assertEqual({v["repetitions"] for v in verdicts}, {1})
        self.assertFalse(any(v["ok"] for v in verdicts))

    def test_summary_prints_the_worst_sweep_and_the_verdict(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "pipeline.json"), "w") as f:
                json.dump(fixture(), f)
            text = io.StringIO()
            with redirect_stdout(text):
                ok = summary.main(d)
        out = text.getvalue()
        self.assertFalse(ok)
        self.assertRegex(out, r"pipeline 2\^26: fused / memcpy time, worst of 3 +1\.012 +<= 1\.01 +FAIL")
        self.assertRegex(out, r"pipeline 2\^24: map\+sum into a device array, rate / copy rate, worst of 3 +0\.950 "
                              r"+>= 0\.95 +pass")
        self.assertIn("\npipeline margins: FAIL (3 of 10 targets missed", out)

    def test_summary_without_a_pipeline_run_says_fail(self):
        with tempfile.TemporaryDirectory() as d:
            text = io.StringIO()
            with redirect_stdout(text):
                ok = summary.main(d)
        self.assertFalse(ok)
        self.assertIn("pipeline margins: FAIL (no pipeline.json in", text.getvalue())

    @unittest.skipUnless(os.environ.get("PIPELINE_JSON"), "PIPELINE_JSON names no output of the CLI")
    def test_the_clis_json_reads_as_its_sweeps(self):
        with open(os.environ["PIPELINE_JSON"]) as f:
            pipe = json.load(f)
        runs = pt.sweeps(pipe)
        self.assertEqual(len(runs), pipe["repeat"])
        self.assertGreaterEqual(len(runs), 2)
        self.assertIn("device array", pipe["sum_form"])
        sizes = [pt.log2_of(r) for r in pipe["rows"]]
        for run in runs:
            self.assertEqual(sorted(run), sorted(sizes))
        for r in pipe["rows"]:
            n = pt.log2_of(r)
            for figure in ("fused_over_memcpy", "sum_rate_over_memcpy_rate", "scan_over_memcpy"):
                each = [run[n][figure] for run in runs]
                self.assertAlmostEqual(r[figure + "_min"], min(each))
                self.assertAlmostEqual(r[figure + "_max"], max(each))
                self.assertLessEqual(r[figure + "_min"], r[figure])
                self.assertLessEqual(r[figure], r[figure + "_max"])
        # A target at a size this run measured is judged from every sweep.
        target = [{"figure": "fused_over_memcpy", "at_most": 1e9, "log2_n": sizes}]
        verdicts = pt.judge(pipe, target, min_repetitions=len(runs))
        self.assertTrue(all(v["ok"] for v in verdicts), verdicts)


if __name__ == "__main__":
    unittest.main()
