#!/usr/bin/env python3
"""The GPU check's summary verdicts that read peers.json and stream.json (bench/summary.py), and the
parser that turns an experiment's printed output into JSON (bench/experiments/logs_to_json.py)."""
import io, json, os, sys, tempfile, unittest
from contextlib import redirect_stdout

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
sys.path.insert(0, os.path.join(here, "..", "..", "bench", "experiments"))
import summary  # noqa: E402
import logs_to_json  # noqa: E402


def summary_lines(files):
    """bench/summary.py's table over a folder holding `files` (name -> JSON)."""
    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            with open(os.path.join(d, name), "w") as f:
                json.dump(data, f)
        out = io.StringIO()
        with redirect_stdout(out):
            summary.main(d)
        return out.getvalue().splitlines()


def verdicts(lines, start):
    return {l.split()[1]: l.split()[-1] for l in lines if l.startswith(start)}


class race(unittest.TestCase):
    def peers(self, mine, theirs):
        rows = [{"system": "torch.compile", "log2_n": n, "over_memcpy": t, "over_memcpy_back_to_back": t,
                 "over_memcpy_one_per_pair": t} for n, t in theirs.items()]
        dev = [{"system": "resident fused", "kind": "map", "log2_n": n, "over_memcpy_back_to_back": m,
                "over_memcpy_one_per_pair": m} for n, m in mine.items()]
        return {"rows": rows, "device_peers": {"rows": dev}}

    def test_behind_torch_compile_fails_and_level_or_ahead_passes(self):
        lines = summary_lines({"peers.json": self.peers({26: 1.004, 28: 1.029, 24: 0.998}, {26: 1.018, 28: 0.998, 24: 0.998})})
        v = verdicts(lines, "race")
        self.assertEqual(v, {"2^24:": "pass", "2^26:": "pass", "2^28:": "FAIL"})

    def test_a_size_torch_compile_did_not_run_is_not_judged(self):
        lines = summary_lines({"peers.json": self.peers({26: 1.0, 28: 1.0}, {26: 1.1})})
        self.assertEqual(verdicts(lines, "race"), {"2^26:": "pass"})


class stream_verdict(unittest.TestCase):
    def stream(self, ratio, slowest):
        row = {"measure": "streamed, pageable in/out", "gbs": 40.0, "ratio": ratio, "target": 0.80, "note": ""}
        if slowest is not None:
            row["slowest_ratio"] = slowest
        return {"rows": [row], "ok": True}

    def test_the_slowest_repetition_decides(self):
        lines = summary_lines({"stream.json": self.stream(0.82, 0.79)})
        row = next(l for l in lines if l.startswith("stream: streamed, pageable"))
        self.assertTrue(row.endswith("FAIL"), row)
        lines = summary_lines({"stream.json": self.stream(0.82, 0.80)})
        row = next(l for l in lines if l.startswith("stream: streamed, pageable"))
        self.assertTrue(row.endswith("pass"), row)

    def test_the_pinned_stream_keeps_up_with_the_hand_written_pipeline(self):
        def with_hand(streamed, hand):
            row = {"measure": "streamed, pinned in/out", "gbs": streamed, "ratio": 1.0, "slowest_ratio": 1.0,
                   "target": 0.97, "note": ""}
            return {"rows": [row], "ok": True, "hand_written_pinned": {"chunk_bytes": 1 << 26, "streams": 3,
                                                                       "gbs": hand, "ratio": 1.0, "slowest_ratio": 1.0}}
        for streamed, hand, verdict in ((49.4, 49.6, "pass"), (49.0, 49.6, "FAIL"), (50.0, 49.3, "pass")):
            lines = summary_lines({"stream.json": with_hand(streamed, hand)})
            row = next(l for l in lines if l.startswith("stream: pinned stream / hand-written"))
            self.assertTrue(row.endswith(verdict), row)
        lines = summary_lines({"stream.json": self.stream(0.81, None)})  # files from before the bar: not judged
        self.assertFalse(any(l.startswith("stream: pinned stream / hand-written") for l in lines))

    def test_older_files_without_the_slowest_use_the_median(self):
        lines = summary_lines({"stream.json": self.stream(0.81, None)})
        row = next(l for l in lines if l.startswith("stream: streamed, pageable"))
        self.assertTrue(row.endswith("pass"), row)


CALL_COST = """# host cost of issuing, ns per call (n = 10000 for the library's calls)
  empty<<<1, 32>>>                                         3655 ns
  fused seed map master(x, y)                              3315 ns
# device time per call, us: 20 calls back-to-back between two events (eager) against the same
# 20 calls captured in one graph and replayed; median of 15
  n      call            eager     replay eager/replay
  2^20   memcpy           4.40       2.20        2.004
# cudaHostRegister + cudaHostUnregister of 2 GiB pageable memory in chunks, GB/s (median of 3)
  chunk         1 thr    2 thr    4 thr
     4 MiB        7.5      9.0      8.6
""".splitlines()


class parse(unittest.TestCase):
    def test_call_cost_sections_become_rows(self):
        j = logs_to_json.call_cost(CALL_COST)
        self.assertEqual(j["host_ns"], [{"call": "empty<<<1, 32>>>", "ns": 3655},
                                        {"call": "fused seed map master(x, y)", "ns": 3315}])
        self.assertEqual(j["device_us"], [{"log2_n": 20, "call": "memcpy", "eager_us": 4.40, "replay_us": 2.20,
                                           "eager_over_replay": 2.004}])
        self.assertEqual([r["gbs"] for r in j["register_gbs"]], [7.5, 9.0, 8.6])
        self.assertEqual([r["threads"] for r in j["register_gbs"]], [1, 2, 4])

    def test_a_line_it_does_not_know_is_an_error(self):
        with self.assertRaises(ValueError):
            logs_to_json.call_cost(CALL_COST[:2] + ["  something else entirely"])
        with self.assertRaises(ValueError):
            logs_to_json.call_cost(["  3655 ns before any section"])

    def test_torch_kernel_rounds(self):
        j = logs_to_json.torch_kernel(["2^28 round 2: torch.compile 514.5 us, copy 506.9 us, ratio 1.015", "other"])
        self.assertEqual(j["rounds"], [{"log2_n": 28, "round": 2, "torch_compile_us": 514.5, "copy_us": 506.9,
                                        "over_copy": 1.015}])
        with self.assertRaises(ValueError):
            logs_to_json.torch_kernel(["nothing timed"])


if __name__ == "__main__":
    unittest.main()
