#!/usr/bin/env bash
# The two-GPU check (dist/: peer copies, sharded arrays, NCCL, processes; flows across two GPUs; default
# streams named by their device), in one call on a host with two GPUs: build the targets it needs with
# CUDA, run the multi-GPU tests, two processes under mpirun
# and under environment variables, a lone rank that must time out with a clear error, `resident demo
# --gpus 2` (also --beyond-one: 200 GB over the two GPUs) and `resident bench dist` with --json. With
# fewer than two GPUs it says so and skips the GPU steps.
#
# usage: scripts/gpu_check_x2.sh [LOG_DIR]     (default: $OUT, else build/gpu-x2-logs)
#   LOG_DIR receives one log per step, demo-gpus.json, demo-beyond-one*.json, dist.json / dist-2p30.json
#   and summary.txt.
#   SKIP_BENCH=1 / SKIP_SANITIZER=1 leave those parts out; ONLY_BUILD=1 stops after the build (a call
#   of its own where one command may run 10 minutes; the next call finds the build done).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
logs=${1:-${OUT:-build/gpu-x2-logs}}
mkdir -p "$logs"
build=build/gpu-x2
jobs=$(nproc)
source scripts/steps.sh

# A test binary's CUDA cases must have run, none skipped.
gpu_tests() {  # gpu_tests BINARY FILTER
  local out
  out=$("$1" --gtest_filter="$2" 2>&1)
  local rc=$?
  echo "$out"
  [ $rc -eq 0 ] || return $rc
  echo "$out" | grep -Eq "\[  PASSED  \] [1-9][0-9]* test" || { echo "ran no test"; return 1; }
  if echo "$out" | grep -q "\[  SKIPPED \] [1-9]"; then echo "tests were skipped"; return 1; fi
}

# Open MPI refuses root unless told (containers).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rendezvous="$PWD/$build/nccl-id"

# Two ranks started by mpirun. A build without MPI reads mpirun's OMPI_COMM_WORLD_* variables and
# exchanges NCCL's id through RESIDENT_RENDEZVOUS instead.
two_ranks_mpirun() {
  command -v mpirun >/dev/null || { echo "mpirun not found"; return 1; }
  rm -f "$rendezvous.mpi"
  timeout 300 mpirun -n 2 --oversubscribe -x RESIDENT_RENDEZVOUS="$rendezvous.mpi" "$build/tests/dist_two_ranks"
}
# Two ranks started by hand, described by environment variables.
two_ranks_env() {
  rm -f "$rendezvous.env"
  local common=(env -u OMPI_COMM_WORLD_SIZE RESIDENT_WORLD_SIZE=2 RESIDENT_RENDEZVOUS="$rendezvous.env")
  timeout 300 "${common[@]}" RESIDENT_RANK=0 RESIDENT_LOCAL_RANK=0 "$build/tests/dist_two_ranks" &
  local p0=$!
  timeout 300 "${common[@]}" RESIDENT_RANK=1 RESIDENT_LOCAL_RANK=1 "$build/tests/dist_two_ranks"
  local r1=$?
  wait $p0
  local r0=$?
  [ $r0 -eq 0 ] && [ $r1 -eq 0 ]
}
# One rank of two, alone: it must give up within its timeout with a clear error, never hang.
lone_rank_times_out() {
  rm -f "$rendezvous.lone"
  local t0=$SECONDS
  timeout 120 env RESIDENT_WORLD_SIZE=2 RESIDENT_RANK=0 RESIDENT_RENDEZVOUS="$rendezvous.lone" \
    "$build/tests/dist_two_ranks" --timeout-ms 5000 --expect-timeout || return 1
  echo "gave up after $((SECONDS - t0)) s"
}

step configure cmake -S . -B "$build" -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release
grep -E "resident: (NCCL|MPI)" "$logs/configure.log" >&2
step build cmake --build "$build" -j "$jobs" --target test_dist test_memory test_flow dist_two_ranks resident_cli
# The Python package with the CUDA backend (resident.dist, resident.stream), for the Python steps below.
step python-build python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
  -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90
if [ "${ONLY_BUILD:-0}" = 1 ]; then
  printf 'build: %s\n' "$([ $status -eq 0 ] && echo ok || echo FAIL)" | tee "$logs/summary.txt"
  exit $status
fi

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -lt 2 ]; then
  echo "SKIPPED: found $gpus GPU(s); the multi-GPU steps need two (run on nvidia-h200-x2)" | tee "$logs/summary.txt"
  exit $status
fi
nvidia-smi topo -m >"$logs/topology.log" 2>&1

step test-dist-cpu "$build/tests/test_dist" --gtest_filter='-*/cuda'
# (buffers that overlap cannot be given to GPU ranks, which are distinct GPUs: that case skips there.)
step test-dist-gpu gpu_tests "$build/tests/test_dist" \
  '*/cuda:-*gpu_ranks_from_the_environment*:*communicator_refuses_overlapping_buffers*'
step test-dist-gpu-timeout gpu_tests "$build/tests/test_dist" '*gpu_ranks_from_the_environment*/cuda'
step test-memory-peer gpu_tests "$build/tests/test_memory" '*peer*/cuda:*ledger*/cuda:*arrays*/cuda'
# Flows whose stages run on both GPUs (events across devices, one graph replayed), the null stream of one
# GPU used while the other is current, and every single-GPU flow case on the same build.
step test-flow-peer gpu_tests "$build/tests/test_flow" '*flow_peer*/cuda'
step test-flow gpu_tests "$build/tests/test_flow" '*/cuda'
step test-flow-cpu "$build/tests/test_flow" --gtest_filter='-*/cuda'
step two-ranks-mpirun two_ranks_mpirun
step two-ranks-env two_ranks_env
step lone-rank-times-out lone_rank_times_out
# The same over NCCL's network transport on loopback, the path two hosts take: no NVLink or PCIe peer
# access, no shared memory, sockets on lo (docs/scale.md). NCCL's log must name the socket transport.
over_sockets() {
  local out rc
  out=$(export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO; "$@" 2>&1)
  rc=$?
  echo "$out"
  [ $rc -eq 0 ] || return $rc
  echo "$out" | grep -q "NET/Socket" || { echo "NCCL did not use its socket transport"; return 1; }
}
step two-ranks-env-sockets over_sockets two_ranks_env
step two-ranks-mpirun-sockets over_sockets two_ranks_mpirun
step lone-rank-times-out-sockets over_sockets lone_rank_times_out
# The Python package (resident.dist, resident.stream) on both GPUs: the pytest cases with two GPUs
# (two ranks under torchrun's variables, a lone rank's Timeout), again over sockets, and the sharded seed.
step python-dist python3 -m pytest -q -rs python/tests/test_dist.py python/tests/test_streaming.py \
  python/tests/test_profile.py
step python-dist-sockets over_sockets python3 -m pytest -q -rs -s python/tests/test_dist.py -k "gpu_ranks or never_arrives"
step python-sharded-seed env RESIDENT_EXAMPLE_ELEMENTS=1073741824 python3 examples/python/sharded_seed.py

cli="$build/tools/resident/resident"
# demo --gpus: the seed pipeline over 2^30 floats sharded over both GPUs against cuda:0 alone (exit 1
# when a value misses FP64 or the sharded run crosses the host bus); more GPUs than present are refused.
gpus_beyond_present() {
  local out rc
  out=$("$cli" demo --gpus "$((gpus + 1))" 2>&1)
  rc=$?
  echo "$out"
  [ $rc -eq 1 ] && echo "$out" | grep -q "this host has $gpus GPUs"
}
step demo-gpus "$cli" demo --gpus 2 --json "$logs/demo-gpus.json"
step demo-gpus-beyond-present gpus_beyond_present
# One array larger than one GPU (200 GB; then the default, 1.25x cuda:0's free memory) filled with
# Philox uniforms, mapped in place and summed on both GPUs: the sum and sampled windows against FP64,
# nothing but the two partial sums over the host bus.
step demo-beyond-one-200gb "$cli" demo --gpus 2 --beyond-one --size 200GB --json "$logs/demo-beyond-one-200gb.json"
step demo-beyond-one "$cli" demo --gpus 2 --beyond-one --json "$logs/demo-beyond-one.json"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  step bench-dist "$cli" bench dist --json "$logs/dist.json"
  step bench-dist-2p30 "$cli" bench dist --sizes 30 --reps 10 --json "$logs/dist-2p30.json"
  step bench-dist-sockets over_sockets "$cli" bench dist --json "$logs/dist-sockets.json"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  # NCCL's own kernels and proxy threads are outside what the tools model: the peer copies and the
  # sharded pipelines run under memcheck, the communicator cases do not.
  step sanitize-memcheck-peer timeout 600 compute-sanitizer --tool memcheck --error-exitcode=1 \
    "$build/tests/test_memory" --gtest_filter='*peer*/cuda'
  step sanitize-memcheck-sharded timeout 600 compute-sanitizer --tool memcheck --error-exitcode=1 \
    "$build/tests/test_dist" --gtest_filter='*/cuda:-*communicator*:*gpu_ranks*'
  step sanitize-memcheck-flow-peer timeout 600 compute-sanitizer --tool memcheck --error-exitcode=1 \
    "$build/tests/test_flow" --gtest_filter='*flow_peer*/cuda'
  step sanitize-synccheck-flow-peer timeout 600 compute-sanitizer --tool synccheck --error-exitcode=1 \
    "$build/tests/test_flow" --gtest_filter='*flow_peer*/cuda'
fi

{
  step_table
  echo
  for f in "$logs/demo-gpus.log" "$logs/demo-beyond-one-200gb.log" "$logs/bench-dist.log" "$logs/bench-dist-2p30.log" \
           "$logs/python-sharded-seed.log"; do [ -f "$f" ] && cat "$f"; done
} | tee "$logs/summary.txt"
exit $status
