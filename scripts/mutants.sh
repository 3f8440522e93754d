#!/usr/bin/env bash
# Mutation check: plants known bugs, one at a time, in a scratch copy of the tree and shows that the
# tests named for each fail. Each mutant replaces one exact piece of text (which must occur once: a
# mutant that no longer applies fails the check, so it is updated with the code), builds the one test
# binary that should catch it, and runs that binary's cases; the unmutated tree passes the same cases
# first, so a failure means the bug was seen.
#
#   scripts/mutants.sh            the CPU mutants (the cpu preset, or MUTANTS_PRESET's: CI takes debug;
#                                 one scratch build, ccache)
#   scripts/mutants.sh --gpu      the GPU mutants (scripts/gpu_check.sh: the cuda preset, a GPU)
#   scripts/mutants.sh --list     every mutant, its test and what it plants
#   scripts/mutants.sh NAME...    only those
#
# The scratch tree is build/mutants/tree (MUTANTS_DIR overrides): the tracked files, built under its
# own build/<preset> so that, with CCACHE_BASEDIR at the checkout's parent, its compiler commands equal
# the main build's and ccache serves every unmutated object.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${MUTANTS_DIR:-$root/build/mutants}/tree
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$root")}
jobs=${JOBS:-$(nproc)}

# name @@ backend @@ test binary @@ gtest filter @@ file @@ exact text @@ its replacement @@ what it plants
mutants=(
"fused_reduce_tail@@cpu@@test_fuse@@backends/pipelines.reductions_for_small_and_odd_sizes/cpu@@include/resident/fuse/detail/fused_cpu.hpp@@for (std::size_t i = head + units * (vec ? V : 1); i < n; ++i) r = op(r, value(i));@@for (std::size_t i = head + units * (vec ? V : 1); i + 1 < n; ++i) r = op(r, value(i));@@the fused CPU reduction's scalar tail stops one element short"
"fused_map_tail@@cpu@@test_fuse@@backends/pipelines.*/cpu@@include/resident/fuse/detail/fused_cpu.hpp@@for (std::size_t i = plan.head + plan.vectors * V; i < n; ++i) out.store1(i, in.eval1(fn, i));@@for (std::size_t i = plan.head + plan.vectors * V; i + 1 < n; ++i) out.store1(i, in.eval1(fn, i));@@the fused CPU map's scalar tail stops one element short"
"scan_piece_carry@@cpu@@test_fuse@@backends/pipelines.inclusive_scans*/cpu@@include/resident/fuse/detail/fused_cpu.hpp@@for (std::size_t i = p.first; i < p.last; ++i) out[i] = op(before, out[i]);@@for (std::size_t i = p.first + 1; i < p.last; ++i) out[i] = op(before, out[i]);@@the CPU scan leaves the first element of each later piece without the total before it"
"dist_shard_border@@cpu@@test_dist@@backends/sharded.reductions_combine_shards_against_fp64/cpu@@include/resident/dist/sharded_array.hpp@@      q(a.local(i), part.back());@@      q(a.local(i).slice(0, a.local(i).size() - 1), part.back());@@a sharded sum drops the last element of every shard"
"streamed_chunk_end@@cpu@@test_out_of_core@@backends/out_of_core.*sum*:backends/out_of_core.reduction*/cpu@@include/resident/out_of_core/out_of_core.hpp@@    q(array_ref<T>(static_cast<T*>((*v.inputs)[0]), v.count, s), out);@@    q(array_ref<T>(static_cast<T*>((*v.inputs)[0]), v.count - 1, s), out);@@a streamed reduction drops the last element of every chunk"
"philox_key@@cpu@@test_random@@philox.*:backends/rng.*/cpu@@include/resident/random/philox.hpp@@std::uint32_t(seed),@@std::uint32_t(seed) ^ 1u,@@Philox blocks take a key one bit off the seed's"
"program_nan_minimum@@cpu@@test_program_simd@@program_simd.every_operation_in_*@@src/fuse/program_cpu.cpp@@RESIDENT_EACH(x < a || a != a ? x : a);@@RESIDENT_EACH(x < a ? x : a);@@a CPU program's minimum with a NaN constant gives NaN (fmin's rule: the NaN loses)"
"parallel_copy_tail@@cpu@@test_memory@@backends/arrays.round_trip_sizes/cpu@@src/memory/transfer.cpp@@bytes / piece + (bytes % piece != 0)@@bytes / piece@@a host copy past 4 MiB drops its short last piece"
"staging_buffer_swap@@gpu@@test_transfer_threads@@*/cuda@@src/backend/cuda/backend.cpp@@    st->used(k, s);
  }
}@@    st->used(k ^ 1, s);
  }
}@@a staged upload records each chunk's copy on the other buffer's event, so after an upload of an odd number of chunks the next call refills buffer 0 while the last chunk's copy still reads it"
"fused_cuda_map_tail@@gpu@@test_fuse@@backends/pipelines.*/cuda@@include/resident/fuse/detail/cuda/thread_io.cuh@@  for (std::size_t t = tail + threadIdx.x; t < n; t += blockDim.x) out.store1(t, in.eval1(fn, t));@@  for (std::size_t t = tail + threadIdx.x; t + 1 < n; t += blockDim.x) out.store1(t, in.eval1(fn, t));@@the fused CUDA map's scalar tail stops one element short"
"fused_cuda_reduce_tail@@gpu@@test_fuse@@backends/pipelines.reductions*/cuda:backends/pipelines.default_reductions*/cuda@@include/resident/fuse/detail/fused_cuda.cuh@@    if (tid < n - tail) fold(acc[0], static_cast<T>(in.eval1(fn, tail + tid)));@@    if (tid + 1 < n - tail) fold(acc[0], static_cast<T>(in.eval1(fn, tail + tid)));@@the fused CUDA reduction's scalar tail drops its last element"
)

field() { awk -v RS='\x01' -v i="$2" 'BEGIN{FS="@@"} {printf "%s", $i}' <<<"$1"; }

backend=cpu
list=0
only=()
for a in "$@"; do
  case "$a" in
    --gpu) backend=gpu ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) only+=("$a") ;;
  esac
done

if [ $list -eq 1 ]; then
  for m in "${mutants[@]}"; do
    printf '%-22s %-4s %-22s %s\n' "$(field "$m" 1)" "$(field "$m" 2)" "$(field "$m" 3)" "$(field "$m" 8)"
  done
  exit 0
fi

selected=()
for m in "${mutants[@]}"; do
  name=$(field "$m" 1)
  [ "$(field "$m" 2)" = "$backend" ] || continue
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  selected+=("$m")
done
[ ${#selected[@]} -gt 0 ] || { echo "mutants: none selected"; exit 1; }

preset=$([ "$backend" = gpu ] && echo cuda || echo "${MUTANTS_PRESET:-cpu}")
echo "== mutants ($backend): a scratch copy of the tree in $scratch"
mkdir -p "$scratch"
# The tracked files as they are in the working tree (uncommitted edits included), nothing else.
(cd "$root" && git ls-files -z --cached --others --exclude-standard | grep -zv '^build/' |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | (cd "$scratch" && tar -xf -)
(cd "$scratch" && cmake --preset "$preset" -DRESIDENT_BUILD_BENCH=OFF >/dev/null)
build="$scratch/build/$preset"

targets=()
for m in "${selected[@]}"; do targets+=("$(field "$m" 3)"); done
mapfile -t targets < <(printf '%s\n' "${targets[@]}" | sort -u)
echo "-- the unmutated tree: build ${targets[*]} and run the cases each mutant's check uses"
nice cmake --build "$build" -j "$jobs" --target "${targets[@]}" >/dev/null
for m in "${selected[@]}"; do
  bin="$build/tests/$(field "$m" 3)"
  "$bin" --gtest_filter="$(field "$m" 4)" >"$scratch/baseline.log" 2>&1 ||
    { tail -30 "$scratch/baseline.log"; echo "mutants: $(field "$m" 1)'s cases fail WITHOUT the mutation"; exit 1; }
done

plant() {  # plant FILE OLD NEW: replace the one occurrence of OLD
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"the mutant's text occurs {n} times in {path} (once expected): update the mutant")
open(path, "w").write(text.replace(old, new))
EOF
}

caught=()
missed=()
for m in "${selected[@]}"; do
  name=$(field "$m" 1)
  file=$(field "$m" 5)
  target=$(field "$m" 3)
  cp "$scratch/$file" "$scratch/$file.orig"
  echo "-- $name: $(field "$m" 8)"
  plant "$scratch/$file" "$(field "$m" 6)" "$(field "$m" 7)"
  rc=0
  if nice cmake --build "$build" -j "$jobs" --target "$target" >"$scratch/$name.build.log" 2>&1; then
    timeout 600 "$build/tests/$target" --gtest_filter="$(field "$m" 4)" >"$scratch/$name.log" 2>&1 || rc=$?
  else
    echo "   the mutant does not compile (see $scratch/$name.build.log)"
    rc=-1
  fi
  mv "$scratch/$file.orig" "$scratch/$file"
  if [ $rc -gt 0 ]; then
    failed=$(grep -E '^\[  FAILED  \] [^0-9]' "$scratch/$name.log" | sed 's/^\[  FAILED  \] //; s/, where GetParam.*//; s/ (.*//' | sort -u | head -3 | paste -sd' ')
    echo "   caught by $target: ${failed:-exit $rc}"
    caught+=("$name")
  else
    echo "   MISSED: $target's cases passed with the bug planted"
    missed+=("$name")
  fi
done
# Leave the scratch tree's objects unmutated for the next run.
nice cmake --build "$build" -j "$jobs" --target "${targets[@]}" >/dev/null 2>&1 || true

echo "mutants: ${#caught[@]} of ${#selected[@]} caught${missed:+; missed: ${missed[*]}}"
[ ${#missed[@]} -eq 0 ]
