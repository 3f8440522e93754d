"""resident.dist: sharded arrays over several devices (CPU "devices" here, GPUs where present), work per
shard, reductions against FP64 NumPy, peer copies, arrays of other libraries taken in place, and
communicators from launchers' variables, with typed errors."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import resident as rs
from _support import GPU, gpu

SEED = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
CPUS = ["cpu", "cpu", "cpu"]
SETS = [CPUS] + ([["cuda:%d" % i for i in range(rs.cuda_device_count())]] if GPU else [])


def seed_ref(x):
    v = x.astype(np.float64)
    return 0.5 * np.sin(np.sqrt((1.5 * v + 0.5) ** 2 + 1.0))


def test_extents_cut_as_the_cpp_sharded_array_does():
    assert [rs.dist.extent_of(10, 3, r) for r in range(3)] == [(0, 4), (4, 3), (7, 3)]
    assert [rs.dist.extent_of(2, 3, r) for r in range(3)] == [(0, 1), (1, 1), (2, 0)]
    with pytest.raises(rs.InvalidArgument):
        rs.dist.extent_of(10, 3, 3)


@pytest.mark.parametrize("devices", SETS)
def test_work_per_shard_and_reductions_match_fp64(devices):
    seed = np.random.SeedSequence().entropy
    host = np.random.default_rng(seed).uniform(-1, 1, 100_003).astype(np.float32)
    x = rs.dist.shard(host, devices)
    assert x.size == host.size and x.devices == devices and len(x.shards) == len(devices)
    assert sum(c for _, c in x.extents) == host.size
    np.testing.assert_array_equal(x.to_host(), host)
    assert rs.dist.sum(x) == pytest.approx(host.astype(np.float64).sum(), rel=1e-4)  # float32 sums
    assert rs.dist.min(x) == host.min() and rs.dist.max(x) == host.max()
    assert rs.dist.sum(x, SEED) == pytest.approx(seed_ref(host).sum(), rel=1e-4), f"seed={seed}"
    assert rs.dist.max(x, SEED) == pytest.approx(seed_ref(host).max(), rel=1e-6)
    assert rs.dist.min(x, SEED) == pytest.approx(seed_ref(host).min(), rel=1e-6)
    out = rs.dist.shard(host.size, devices)
    rs.dist.apply(SEED, x, out)
    np.testing.assert_allclose(out.to_host(), seed_ref(host), rtol=2e-6, atol=2e-6, err_msg=f"seed={seed}")
    x.apply(SEED)  # in place
    np.testing.assert_allclose(x.to_host(), seed_ref(host), rtol=2e-6, atol=2e-6)
    chain = rs.stage("float f(float v) { return 2.0f * v; }")
    rs.dist.apply(chain, x)
    np.testing.assert_allclose(x.to_host(), 2 * seed_ref(host), rtol=4e-6, atol=4e-6)
    assert rs.dist.max(x, rs.stage("float g(float v) { return -v; }")) == pytest.approx(-(2 * seed_ref(host)).min(), rel=1e-6)


@pytest.mark.parametrize("devices", SETS)
def test_copy_to_other_devices_keeps_the_values(devices):
    host = np.arange(1001, dtype=np.float64)
    x = rs.dist.shard(host, devices)
    moved = x.copy_to(list(reversed(devices)))
    assert moved.devices == list(reversed(devices)) and moved.extents == x.extents
    np.testing.assert_array_equal(moved.to_host(), host)


@gpu
@pytest.mark.skipif(rs.cuda_device_count() < 2, reason="needs two GPUs")
def test_a_peer_copy_counts_as_peer_bytes_and_crosses_no_host_bus():
    a = rs.to_device(np.arange(1 << 20, dtype=np.float32), "cuda:0")
    b = rs.empty(1 << 20, "float32", "cuda:1")
    before = rs.ledger()
    with rs.transfer_policy("forbid"):
        rs.dist.copy(a, b)
    assert rs.ledger()["cuda:1"]["peer_bytes"] - before.get("cuda:1", {}).get("peer_bytes", 0) == 4 << 20
    np.testing.assert_array_equal(b.to_host(), np.arange(1 << 20, dtype=np.float32))


def test_other_libraries_arrays_are_sharded_in_place():
    parts = [np.arange(4, dtype=np.float32), np.arange(4, 7, dtype=np.float32), np.arange(7, 10, dtype=np.float32)]
    x = rs.dist.from_shards(parts)
    assert x.size == 10 and x.extents == ((0, 4), (4, 3), (7, 3))
    rs.dist.apply(rs.op.mul(2), x)
    np.testing.assert_array_equal(np.concatenate(parts), 2 * np.arange(10, dtype=np.float32))  # no copy was made
    with pytest.raises(rs.ShapeMismatch):
        rs.dist.from_shards([np.ones(2, np.float32), np.ones(5, np.float32)])


def test_bad_arguments_are_typed():
    with pytest.raises(rs.InvalidArgument):
        rs.dist.shard(np.ones(4, np.float32), [])
    with pytest.raises(rs.InvalidArgument):
        rs.dist.shard(-1, CPUS)
    with pytest.raises(rs.InvalidArgument, match="ShardedArray"):
        rs.dist.sum(np.ones(3))
    x = rs.dist.shard(np.ones(10, np.float32), CPUS)
    with pytest.raises(rs.ShapeMismatch):
        rs.dist.apply(SEED, x, rs.dist.shard(11, CPUS))
    with pytest.raises(rs.InvalidArgument):
        x.copy_to(["cpu"])
    with pytest.raises(rs.DeviceUnavailable):
        rs.dist.shard(np.ones(10, np.float32), ["cuda:99"])


def test_a_local_communicator_all_reduces_cpu_ranks():
    with rs.dist.Communicator(["cpu", "cpu"]) as c:
        assert c.size == 2 and c.rank == 0 and c.launcher == "in-process"
        a = rs.to_device(np.array([1.0, 5.0], np.float32), "cpu")
        b = rs.to_device(np.array([2.0, -1.0], np.float32), "cpu")
        c.all_reduce([a, b], "sum")
        np.testing.assert_array_equal(a.to_host(), [3.0, 4.0])
        np.testing.assert_array_equal(b.to_host(), [3.0, 4.0])
        c.all_reduce([a, b], "max")
        with pytest.raises(rs.InvalidArgument, match="op"):
            c.all_reduce([a, b], "mean")
        with pytest.raises(rs.InvalidArgument):
            c.all_reduce([np.ones(2)], "sum")
    with pytest.raises(rs.InvalidArgument, match="closed"):
        c.size


LAUNCHED = r"""
import sys, resident as rs
c = rs.dist.Communicator.from_launcher(timeout=float(sys.argv[1]), device=sys.argv[2] if len(sys.argv) > 2 else None)
import numpy as np
x = rs.dist.shard(np.arange(10, dtype="float32"), c)
print(c.size, c.rank, c.launcher, c.devices, rs.dist.sum(x), x.extents)
"""


def launched(env, *args):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RESIDENT_RANK", "RESIDENT_WORLD_SIZE",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE")}
    clean.update(env)
    return subprocess.run([sys.executable, "-c", LAUNCHED, *args], env=clean, capture_output=True, text=True, timeout=120)


def test_from_launcher_reads_torchrun_mpirun_and_resident_variables():
    r = launched({}, "5", "cpu")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:3] == ["1", "0", "in-process"] or r.stdout.split()[:2] == ["1", "0"]
    for env in ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}, {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"},
                {"RESIDENT_RANK": "0", "RESIDENT_WORLD_SIZE": "1"}):
        r = launched(env, "5", "cpu")
        assert r.returncode == 0, (env, r.stderr)
        size, rank, how = r.stdout.split()[:3]
        # mpirun's variables start MPI itself in a build with MPI.
        assert (size, rank) == ("1", "0") and how in ("environment", "mpi"), (env, how)
        assert "45.0" in r.stdout
    # Two CPU ranks in separate processes need MPI: refused at once, never a hang.
    r = launched({"RANK": "1", "WORLD_SIZE": "2"}, "5", "cpu")
    assert r.returncode != 0 and "InvalidArgument" in r.stderr and "MPI" in r.stderr
    r = launched({"RANK": "3", "WORLD_SIZE": "2"}, "5", "cpu")
    assert r.returncode != 0 and "InvalidArgument" in r.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
def test_two_cpu_ranks_under_mpirun_combine_through_mpi(tmp_path):
    # Each rank writes its line to a file of its own: mpirun may interleave the ranks' standard output.
    code = r"""
import sys, numpy as np, resident as rs
c = rs.dist.Communicator.from_launcher(timeout=60, device="cpu")
x = rs.dist.shard(np.arange(1001, dtype=np.float64), c)
line = " ".join(map(str, (c.rank, c.size, c.launcher, x.extents, rs.dist.sum(x), rs.dist.min(x), rs.dist.max(x))))
# Work making other values than x holds: the ranks combine those (signed sums of unsigned x, wider maxima).
u = rs.dist.shard(np.arange(1001, dtype=np.uint32), c)
i = rs.dist.shard(np.arange(1001, dtype=np.int32), c)
line += " " + str(rs.dist.sum(u, rs.stage("long long neg(unsigned int v) { return -(long long)v; }")))
line += " " + str(rs.dist.max(i, rs.stage("long long big(int v) { return v * 10000000000LL; }")))
open(f"{sys.argv[1]}/rank{c.rank}.txt", "w").write(line)
"""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(["mpirun", "-n", "2", "--oversubscribe", sys.executable, "-c", code, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=180)
    if "build resident with MPI" in r.stderr:
        pytest.skip("this build of resident has no MPI")
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        line = (tmp_path / f"rank{rank}.txt").read_text()
        assert line.startswith(f"{rank} 2 mpi"), line
        assert line.endswith("500500.0 0.0 1000.0 -500500 10000000000000"), line


@gpu
def test_a_rank_that_never_arrives_is_a_typed_timeout(tmp_path):
    # Rank 1 of 2 alone, as on a second host (its GPU 0): rank 0 never writes the rendezvous file.
    r = launched({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "RESIDENT_RENDEZVOUS": str(tmp_path / "rdv")}, "3")
    assert r.returncode != 0 and "Timeout" in r.stderr, r.stderr
    # Rank 0 of 2 alone: NCCL's join is aborted after the timeout.
    r = launched({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "RESIDENT_RENDEZVOUS": str(tmp_path / "rdv0")}, "3")
    assert r.returncode != 0 and "Timeout" in r.stderr, r.stderr


@gpu
def test_a_rendezvous_file_others_may_write_is_refused_at_once(tmp_path):
    # Planted by another user (or open to them): its id would join this rank to their communicator.
    planted = tmp_path / "rdv"
    planted.write_bytes(b"resident" + b"A" * 128)
    planted.chmod(0o666)
    r = launched({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                  "RESIDENT_RENDEZVOUS": str(planted)}, "30")
    assert r.returncode != 0 and "others may write it" in r.stderr and "Timeout" not in r.stderr, r.stderr


@gpu
@pytest.mark.skipif(rs.cuda_device_count() < 2, reason="needs two GPUs")
def test_two_gpu_ranks_under_torchrun_variables_combine_through_nccl(tmp_path):
    # Set NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 around the run to force NCCL's socket transport.
    code = r"""
import numpy as np, resident as rs
c = rs.dist.Communicator.from_launcher(timeout=60)
whole = np.arange(100_001, dtype=np.float64)
x = rs.dist.shard(whole, c)
assert len(x.shards) == 1 and x.devices == [f"cuda:{c.rank}"]
s, lo, hi = rs.dist.sum(x), rs.dist.min(x), rs.dist.max(x)
c.barrier()
print("rank", c.rank, "of", c.size, c.transport, s, lo, hi)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI_", "RESIDENT_RANK", "RESIDENT_WORLD"))}
    env.update(WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="localhost", MASTER_PORT="29500",
               RESIDENT_RENDEZVOUS=str(tmp_path / "rdv"))
    ranks = [subprocess.Popen([sys.executable, "-c", code], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=180) for p in ranks]
    for p, (out, err) in zip(ranks, outs):
        sys.stderr.write(err + out)  # NCCL's log (on stdout), when NCCL_DEBUG asks (gpu_check_x2.sh checks the transport)
        assert p.returncode == 0, err
        words = [line for line in out.splitlines() if line.startswith("rank ")][-1].split()  # NCCL_DEBUG logs to stdout
        assert float(words[-3]) == 100_000 * 100_001 / 2 and float(words[-2]) == 0 and float(words[-1]) == 100_000


@pytest.mark.parametrize("devices", SETS)
def test_a_program_stage_or_fused_function_called_on_a_sharded_array_applies_per_shard(devices):
    import math
    host = np.random.default_rng().uniform(0.5, 4, 10_007).astype(np.float32)
    ref = np.sqrt(host.astype(np.float64)) + 1
    for work in (rs.op.sqrt() | rs.op.add(1), rs.stage(lambda v: math.sqrt(v) + 1.0),
                 rs.fuse(lambda v: math.sqrt(v) + 1.0)):
        x = rs.dist.shard(host, devices)
        assert work(x) is x
        np.testing.assert_allclose(x.to_host(), ref, rtol=1e-6)
        x, y = rs.dist.shard(host, devices), rs.dist.shard(host.size, devices)
        assert work(x, out=y) is y
        np.testing.assert_allclose(y.to_host(), ref, rtol=1e-6)
        np.testing.assert_array_equal(x.to_host(), host)  # the input as it was
        for bad in (lambda: work(x, out=np.zeros_like(host)), lambda: work(x, stream=0),
                    lambda: work(rs.to_device(host, device=devices[0]), out=y)):
            with pytest.raises(rs.InvalidArgument, match="sharded array"):
                bad()
        np.testing.assert_allclose(y.to_host(), ref, rtol=1e-6)  # nothing written by a refused call
    with pytest.raises(rs.InvalidArgument, match="resident.dist.sum"):
        (rs.op.sqrt() | rs.jit.sum())(rs.dist.shard(host, devices))


def test_to_host_into_an_existing_array_fills_every_shards_place():
    values = np.arange(11, dtype=np.float64) * 1.5
    x = rs.dist.shard(values, ["cpu", "cpu", "cpu"])
    out = np.full(11, -1.0)
    assert x.to_host(out=out) is out
    np.testing.assert_array_equal(out, values)
    pinned = rs.streaming.pinned_empty(11, "float64")
    assert x.to_host_async(pinned) is pinned
    rs.synchronize("cpu")
    np.testing.assert_array_equal(pinned, values)
    shaped = np.zeros((1, 11))                      # any shape of its size, filled in C order
    x.to_host(out=shaped)
    np.testing.assert_array_equal(shaped[0], values)
    for bad, error in ((np.zeros(10), rs.InvalidArgument), (np.zeros(11, np.float32), rs.InvalidArgument),
                       (np.zeros(22)[::2], rs.InvalidArgument), ([0.0] * 11, rs.InvalidType)):
        with pytest.raises(error):
            x.to_host(out=bad)
    ro = np.full(11, -1.0)
    ro.flags.writeable = False
    with pytest.raises(rs.InvalidArgument, match="writable"):
        x.to_host_async(ro)
    np.testing.assert_array_equal(ro, np.full(11, -1.0))  # refused whole, before any shard was downloaded


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_sharded_extremes_of_negative_values_and_a_nan_in_a_later_shard(dtype):
    y = np.array([-5, -3, -1, -2, -7], dtype)
    x = rs.dist.shard(y, ["cpu", "cpu"])
    assert rs.dist.max(x) == -1 and rs.dist.min(x) == -7  # not an identity of 0
    if dtype == np.float32:
        z = rs.dist.shard(np.array([1, 2, 3, np.nan, 5, 6], dtype), ["cpu", "cpu", "cpu"])
        assert np.isnan(rs.dist.min(z)) and np.isnan(rs.dist.max(z))  # as rs.min of the whole array
