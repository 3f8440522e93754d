#!/usr/bin/env python3
"""The figures of an experiment's printed output as JSON, so docs can quote them with `<!-- src: -->`
markers (scripts/check_doc_figures.py reads JSON only). Parses exactly what the program printed; a
line it does not recognize is an error, not a silent gap.

usage: logs_to_json.py call_cost LOG JSON        (bench/experiments/call_cost.cu's output)
       logs_to_json.py torch_kernel LOG JSON     (the rounds of bench/peers/torch_kernel.py)
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
from json_out import write_text  # noqa: E402  the benchmarks' one file writer


def call_cost(lines):
    out = {"source": "call_cost", "host_ns": [], "device_us": [], "register_gbs": []}
    section = None
    for line in lines:
        if line.startswith("# host cost"):
            section = "host"
        elif line.startswith("# device time"):
            section = "device"
        elif line.startswith("# cudaHostRegister"):
            section = "register"
        elif line.startswith("#") or not line.strip():
            continue
        elif section == "host":
            m = re.fullmatch(r"\s+(.*?)\s+(\d+) ns", line)
            if not m:
                raise ValueError(f"not a host cost line: {line!r}")
            out["host_ns"].append({"call": m.group(1), "ns": int(m.group(2))})
        elif section == "device":
            if line.split()[:2] == ["n", "call"]:
                continue
            m = re.fullmatch(r"\s+2\^(\d+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
            if not m:
                raise ValueError(f"not a device time line: {line!r}")
            out["device_us"].append({"log2_n": int(m.group(1)), "call": m.group(2), "eager_us": float(m.group(3)),
                                     "replay_us": float(m.group(4)), "eager_over_replay": float(m.group(5))})
        elif section == "register":
            if line.split()[0] == "chunk":
                continue
            m = re.fullmatch(r"\s+(\d+) MiB\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
            if not m:
                raise ValueError(f"not a registration line: {line!r}")
            for threads, v in zip((1, 2, 4), m.groups()[1:]):
                out["register_gbs"].append({"chunk_mib": int(m.group(1)), "threads": threads, "gbs": float(v)})
        else:
            raise ValueError(f"a line outside any section: {line!r}")
    return out


def torch_kernel(lines):
    out = {"source": "torch_kernel", "rounds": []}
    for line in lines:
        m = re.fullmatch(r"2\^(\d+) round (\d+): torch.compile ([\d.]+) us, copy ([\d.]+) us, ratio ([\d.]+)", line.strip())
        if m:
            out["rounds"].append({"log2_n": int(m.group(1)), "round": int(m.group(2)), "torch_compile_us": float(m.group(3)),
                                  "copy_us": float(m.group(4)), "over_copy": float(m.group(5))})
    if not out["rounds"]:
        raise ValueError("no timing rounds in the log")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("call_cost", "torch_kernel"):
        sys.exit(__doc__)
    try:
        with open(sys.argv[2]) as f:
            lines = f.read().splitlines()
        data = {"call_cost": call_cost, "torch_kernel": torch_kernel}[sys.argv[1]](lines)
    except (OSError, ValueError) as e:
        sys.exit(f"logs_to_json: {sys.argv[2]}: {e}; nothing written")
    write_text(sys.argv[3], json.dumps(data, indent=1) + "\n")
