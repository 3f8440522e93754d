"""torch.compile's kernel for the seed pipeline: its Triton source and PTX math instructions, and its
back-to-back time per call at 2^26 / 2^28 against y.copy_(x) (20 calls between two events, median of 30)."""
import glob, os, re, statistics, sys
import torch

out = sys.argv[1]
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(out, "triton"))
def run(f, reps=30, batch=20):
    for _ in range(3): f()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch): f()
        b.record(); b.synchronize()
        t.append(a.elapsed_time(b) / batch)
    return statistics.median(t)
for l in (26, 28):
    x = torch.rand(1 << l, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    g = torch.compile(lambda v: torch.sin(torch.sqrt((v * 1.5 + 0.5) ** 2 + 1.0)) * 0.5, dynamic=False)
    o = {}
    def f(): o["y"] = g(x)
    f()
    for r in range(2):
        mc = run(lambda: y.copy_(x)); tc = run(f)
        print(f"2^{l} round {r + 1}: torch.compile {tc * 1e3:.1f} us, copy {mc * 1e3:.1f} us, ratio {tc / mc:.3f}")
ptx = glob.glob(os.path.join(out, "triton", "**", "*.ptx"), recursive=True)
for p in ptx:
    s = open(p).read()
    ops = sorted(set(re.findall(r"\b(sqrt\.[a-z0-9.]+|sin\.[a-z0-9.]+|rsqrt\.[a-z0-9.]+|ex2\.[a-z0-9.]+|ld\.global[a-z0-9.]*|st\.global[a-z0-9.]*|griddepcontrol[a-z._]*|fma\.rn[a-z0-9.]*)", s)))
    print(os.path.basename(p), "instructions:", " ".join(ops))
    m = re.search(r"\.maxntid\s+([0-9, ]+)", s); print("  maxntid", m.group(1) if m else "?")
srcs = glob.glob(os.path.join(out, "inductor", "**", "*.py"), recursive=True)
for p in srcs:
    s = open(p).read()
    if "triton_heuristics" in s and "def triton_" in s:
        print("---", os.path.basename(p)); print(s[s.find("@triton_heuristics"):][:1500])
