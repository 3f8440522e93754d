#!/usr/bin/env bash
# The GPU check, in one call on a CUDA machine: build with CUDA, run every test, run the GPU tests and
# examples under compute-sanitizer (memcheck with leak check, racecheck, initcheck, synccheck), run the
# benchmarks and the peers on the same GPU, and print a short table last.
#
# usage: scripts/gpu_check.sh [LOG_DIR]       (default: build/gpu-logs)
#   LOG_DIR receives one log per step, the benchmarks' JSON, and summary.txt.
#   SKIP_SANITIZER=1 / SKIP_BENCH=1 / SKIP_PEERS=1 / SKIP_SOAK=1 leave those parts out; SANITIZE_ONLY="test_a test_b"
#   runs the sanitizers over those test binaries only.
#   The summary ends with the pipeline's margins, pass or FAIL: every target of bench/pipeline_targets.py
#   met in every one of the three sweeps of `bench pipeline`. STRICT_MARGINS=1 makes a FAIL there fail
#   the check (exit 1) too.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-build/gpu-logs}
mkdir -p "$logs"
build=build/gpu
jobs=$(nproc)
source scripts/steps.sh

# compute-sanitizer must exist and must have run tests: a missing tool or an empty run is a failure.
sanitize() {  # sanitize TOOL BINARY [ARGS...]
  local tool=$1
  shift
  local extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check full --track-stream-ordered-races all)
  [ "$tool" = memcheck ] && [ "${ORDERED_RACES:-1}" = 0 ] && extra=(--leak-check full)
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 1; }
  local out
  out=$(timeout "${SANITIZER_TIMEOUT:-240}" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode=1 "$@" 2>&1)
  local rc=$?
  echo "$out"
  [ $rc -eq 0 ] || return $rc
  echo "$out" | grep -Eq "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors" ||
    { echo "no clean error summary"; return 1; }
  if [[ "$1" == *tests/test_* ]]; then
    echo "$out" | grep -Eq "\[  PASSED  \] [1-9][0-9]* test" || { echo "ran no test"; return 1; }
    if echo "$out" | grep -q "\[  SKIPPED \]"; then echo "tests were skipped: no GPU?"; return 1; fi
  fi
}

sanitize_unordered() { ORDERED_RACES=0 sanitize "$@"; }

# The negative test: a read one element past a pooled array runs clean alone, and memcheck must flag it.
planted() {  # planted BINARY
  "$1" cuda || { echo "the planted program failed without the tool"; return 1; }
  local out
  out=$(timeout 120 compute-sanitizer --tool memcheck --error-exitcode=1 "$1" cuda 2>&1)
  local rc=$?
  echo "$out"
  [ $rc -ne 0 ] && echo "$out" | grep -q "Invalid __global__ read" || { echo "memcheck missed the planted read"; return 1; }
}

step configure cmake -S . -B "$build" -G Ninja -DRESIDENT_CUDA=ON -DCMAKE_BUILD_TYPE=Release
step build cmake --build "$build" -j "$jobs"
step tests ctest --test-dir "$build" --output-on-failure
# Planted bugs, each caught by its test: every CPU mutant (CI runs two) and the GPU ones.
step mutants-cpu bash scripts/mutants.sh
step mutants-gpu bash scripts/mutants.sh --gpu
# The trust boundaries on the GPU (forged cubins, the rendezvous file) and the profile's report of a
# whole program, its time after the work printed (docs/security.md, tests/insight/test_profile_exit.cpp).
step trust "$build/tests/test_security"
step profile_exit "$build/tests/test_profile_exit" --gtest_filter='*/cuda'
# The Python package with the CUDA backend, and its pytest suite with torch, cupy and numba there.
python_check() {
  python3 -m pip install -q --no-build-isolation --no-deps . -Ccmake.define.RESIDENT_CUDA=ON \
    -Cbuild-dir=build/python-gpu -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 &&
    python3 -m pytest -q -rs python/tests &&
    for ex in examples/python/*.py; do python3 "$ex" || return 1; done
}
step python python_check

cli="$build/tools/resident/resident"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  step info "$cli" info --measure --json "$logs/info.json"
  step demo "$cli" demo --json "$logs/demo.json"
  # Three sweeps of every size in one call: each target must hold in every sweep (the summary's margins).
  step bench-pipeline "$cli" bench pipeline --repeat 3 --json "$logs/pipeline.json"
  step bench-small "$cli" bench small --json "$logs/small.json"
  step bench-foundation "$cli" bench foundation --json "$logs/foundation.json"
  step bench-rng "$cli" bench rng --json "$logs/rng.json"
  step bench-matmul "$cli" bench matmul --json "$logs/matmul.json"
  step bench-flow "$cli" bench flow --json "$logs/flow.json"
  step bench-jit "$cli" bench jit --json "$logs/jit.json"
  step bench-guide "$cli" bench guide --json "$logs/guide.json"
  # 8 GiB of host data through a pool capped at 2 GiB (the host holds 128 GiB: pinned and pageable
  # input and output take 32 GiB).
  step bench-stream "$cli" bench stream --size 8GiB --pool-limit 2GiB --json "$logs/stream.json"
  # resident.stream from Python: the seed over a NumPy array twice the GPU's memory, in place.
  step python-stream-large env PYTHONUNBUFFERED=1 python3 examples/python/streamed_seed.py --large
  step bench-python-stream env PYTHONUNBUFFERED=1 python3 bench/peers/python_stream.py --cli "$cli" \
    --json "$logs/python_stream.json"
  step bench-python-profile-cost env PYTHONUNBUFFERED=1 python3 bench/peers/python_profile_cost.py \
    --device cuda:0 --json "$logs/python_profile_cost.json"
  # The host copies of pageable staging alone (no GPU): memcpy against streaming stores, 1-16 threads,
  # up, down and both at once over 4 GiB in 4 and 16 MiB chunks -- a ceiling of the pageable streamed rate.
  step host-staging "$build/bench/host_staging" --size 4GiB --chunk 4MiB,16MiB --json "$logs/host-staging.json"
  # The CPU race on the host's cores (no GPU): the seed map and map + sum, 2^16-2^26, 1 thread and all,
  # resident's CPU backend against NumPy, NumExpr and Numba (docs/cpu.md).
  step cpu-race env PYTHONUNBUFFERED=1 python3 bench/peers/cpu_race.py --cpp "$build/bench/cpu_race" --json "$logs/cpu_race.json"
  # The profile report of the seed demo on the GPU (events, the measured copy rate, advice), and the
  # NVTX timeline where Nsight Systems is installed.
  step demo-profile "$cli" demo --profile --json "$logs/demo-profile.json"
  if command -v nsys > /dev/null; then
    step nsys-demo nsys profile -t cuda,nvtx --force-overwrite true -o "$logs/demo-nvtx" "$cli" demo --n 1048576 --reps 3
  fi
  # NVTX_COST=1: the small pipeline from a build with NVTX and one without, alternated three times
  # (scripts/nvtx_cost.sh; bench/summary.py prints the difference).
  if [ "${NVTX_COST:-0}" = 1 ]; then
    step nvtx-cost env BUILD="$build" scripts/nvtx_cost.sh "$logs"
  fi
  step bench-python env PYTHONUNBUFFERED=1 python3 bench/peers/python_overhead.py --json "$logs/python.json"
  step bench-python-call-layers env PYTHONUNBUFFERED=1 python3 bench/peers/python_call_layers.py --json "$logs/python_call_layers.json"
  # The seed's Python functions (rs.stage) at 2^26 and 2^28 against a device copy (issue 19's ratio).
  step bench-python-stages env PYTHONUNBUFFERED=1 python3 bench/peers/python_stages.py --json "$logs/python_stages.json"
  # The race of issue 37 (item 8): the seed from Python, 2^16-2^28, three sweeps: resident's rs.op / rs.stage /
  # rs.fuse on its arrays, torch tensors and CuPy arrays, torch.compile, cupy.fuse, Numba, against a device copy.
  step bench-python-race env PYTHONUNBUFFERED=1 python3 bench/peers/python_race.py --json "$logs/python_race.json"
  # Scans from Python (resident.cumsum / cummin / cummax) against PyTorch's and CuPy's, over a device copy.
  step bench-python-scans env PYTHONUNBUFFERED=1 python3 bench/peers/python_scans.py --json "$logs/python_scans.json"
  if [ "${SKIP_PEERS:-0}" != 1 ]; then
    step peers env PYTHONUNBUFFERED=1 python3 bench/peers/peers.py --json "$logs/peers.json" \
      --device-peers "$build/bench/device_peers"
  fi
fi

ordered_false_positive='*graph_replay_equals_eager*:*replay_against_fp64*'
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  # Cases that join two GPUs skip on a one-GPU machine: scripts/gpu_check_x2.sh runs them (and their
  # sanitizers) on two.
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  two_gpus=''
  [ "$gpus" -lt 2 ] && two_gpus=':*peer.*'
  for bin in "$build"/tests/test_*; do
    [ -x "$bin" ] || continue
    if [ -n "${SANITIZE_ONLY:-}" ] && [[ " $SANITIZE_ONLY " != *" $(basename "$bin") "* ]]; then continue; fi
    if [ "$gpus" -lt 2 ] && [ "$(basename "$bin")" = test_dist ]; then
      rows+=("sanitize-*-test_dist (needs two GPUs: gpu_check_x2.sh)|skip|0")
      continue
    fi
    # A binary with no CUDA cases (the CPU-only exception tests) has nothing for the tools to watch.
    if ! "$bin" --gtest_list_tests --gtest_filter='*/cuda' | grep -q '^  '; then
      rows+=("sanitize-*-$(basename "$bin") (no CUDA cases)|skip|0")
      continue
    fi
    for tool in memcheck racecheck initcheck synccheck; do
      # The out-of-memory and device-fault tests make CUDA fail on purpose, which the tools report;
      # the large matmul shape and the 64 GiB map take minutes under the tools (the small shapes cover
      # the edges).
      skip="*out_of_memory*:*large_odd_shape*:*beyond_32_bit*:device_fault*$two_gpus"
      [ "$tool" = memcheck ] && skip="$skip:$ordered_false_positive"
      step "sanitize-$tool-$(basename "$bin")" sanitize "$tool" "$bin" --gtest_filter="*/cuda:-$skip"
    done
  done
  # memcheck's stream-ordered race tracking flags a forked branch of a replayed graph that reads
  # pool (cudaMallocAsync) memory, in plain CUDA too (bench/experiments/graph_memcheck_repro.cu,
  # docs/measurements.md): that test runs under memcheck without it.
  step sanitize-memcheck-flow-graph-replay sanitize_unordered memcheck "$build/tests/test_flow" \
    --gtest_filter='*graph_replay_equals_eager_and_report/cuda'
  export RESIDENT_GUIDE_QUICK=1  # the guide's examples at small sizes, one timed run each
  for ex in "$build"/examples/example_*; do
    step "sanitize-memcheck-$(basename "$ex")" sanitize memcheck "$ex"
  done
  unset RESIDENT_GUIDE_QUICK
  step sanitize-memcheck-sees-planted-oob planted "$build/tests/planted_oob"
fi

# The soak (tests/soak/soak.cpp): 16 host threads with their own streams over every layer for
# SOAK_SECONDS (600 by default), every value checked; 4 threads for 60 s under memcheck and racecheck;
# then the threaded tests and the soak in a ThreadSanitizer build with CUDA (the tsan-cuda preset).
soak_under() (  # soak_under TOOL
  export SOAK_DEVICE=cuda SOAK_THREADS=4 SOAK_SECONDS=60 SOAK_MAX_N=5242880 SANITIZER_TIMEOUT=1800
  sanitize "$1" "$build/tests/soak"
)
if [ "${SKIP_SOAK:-0}" != 1 ]; then
  step soak env SOAK_DEVICE=cuda SOAK_THREADS=16 SOAK_SECONDS="${SOAK_SECONDS:-600}" "$build/tests/soak"
  step soak-memcheck soak_under memcheck
  step soak-racecheck soak_under racecheck
  step tsan-configure cmake --preset tsan-cuda
  step tsan-build cmake --build --preset tsan-cuda -j "$jobs"
  step tsan-tests ctest --preset tsan-cuda
fi

{
  step_table
  echo
} >"$logs/summary.txt"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  # The figures against their targets; the last line is the pipeline's margins, pass or FAIL
  # (summary.py exits 3 for a FAIL there, which counts only with STRICT_MARGINS=1).
  python3 bench/summary.py "$logs" --strict >>"$logs/summary.txt" 2>&1
  rc=$?
  if [ $rc -eq 3 ]; then
    [ "${STRICT_MARGINS:-0}" = 1 ] && status=1
  elif [ $rc -ne 0 ]; then
    echo "bench/summary.py failed (exit $rc)" >>"$logs/summary.txt"
    status=1
  fi
fi
cat "$logs/summary.txt"
exit $status
