#pragma once
/// @file block_fold.cuh
/// Block-level pieces of the fused CUDA reductions (nvcc only): values with a validity flag where the
/// operator has no known identity, the identities that let a fold skip it, and the single-pass hand-over
/// of per-block partials to the last block (by counters, or for 4-byte partials by flagged slots).

#include <cub/block/block_reduce.cuh>
#include <cuda/std/limits>

#include "resident/detail/tuning.hpp"
#include "resident/fuse/pipeline.hpp"

namespace resident::detail {

template <class T>
struct maybe {
  T value;
  int valid;
};

template <class Op>
struct maybe_op {
  Op op;
  template <class T>
  __device__ maybe<T> operator()(const maybe<T>& a, const maybe<T>& b) const {
    if (!a.valid) return b;
    if (!b.valid) return a;
    return {op(a.value, b.value), 1};
  }
};

inline constexpr int reduce_block = cuda_tuning::reduce_block;

// A value e with op(e, v) == v for every v (NaN included), where one is known: a fold then starts from
// it and skips the per-value validity select. -0.0, not +0.0, for floating sums: -0.0 + x is x.
template <class Op, class T>
struct identity_of {
  static constexpr bool known = false;
};
template <class T>
struct identity_of<plus, T> {
  static constexpr bool known = std::is_arithmetic_v<T>;
  __device__ static T value() { return std::is_floating_point_v<T> ? T(-0.0) : T(0); }
};
template <class T>
struct identity_of<minimum, T> {
  static constexpr bool known = std::is_arithmetic_v<T>;
  __device__ static T value() {
    using lim = ::cuda::std::numeric_limits<T>;
    return std::is_floating_point_v<T> ? lim::infinity() : lim::max();
  }
};
template <class T>
struct identity_of<maximum, T> {
  static constexpr bool known = std::is_arithmetic_v<T>;
  __device__ static T value() {
    using lim = ::cuda::std::numeric_limits<T>;
    return std::is_floating_point_v<T> ? -lim::infinity() : lim::lowest();
  }
};

// Partials a thread of the last block loads before folding them: a wave of blocks of B (2048 / B per SM)
// on up to 256 SMs in one trip: eight for blocks of 256, one for blocks of 1024 (a second load cost the
// wide blocks' loop registers: docs/tuning.md).
template <int B>
inline constexpr int fold_loads_for = B >= 2048 || (2048 / B) * 256 / B < 1 ? 1 : (2048 / B) * 256 / B;

// Each block folds its threads' values (cub::BlockReduce) into its partial (put); the last block to
// finish folds every block's partial (get) in a fixed order, hands the total to done and leaves the
// counters zero (every other block is done with them). M is T where op's identity is known (one word
// per shuffle, no validity select), else maybe<T>.
template <int B, class M, class C, class Put, class Get, class Done>
__device__ __forceinline__ void fold_blocks(M mine, const C& combine, M empty, Put put, Get get,
                                            unsigned long long* counters, Done done) {
  using block_reduce = cub::BlockReduce<M, B>;
  __shared__ typename block_reduce::TempStorage tmp;
  __shared__ bool last;
  const M block_total = block_reduce(tmp).Reduce(mine, combine);
  if (threadIdx.x == 0) {
    put(blockIdx.x, block_total);
    __threadfence();  // the partial is visible device-wide before the count says so
    last = atomicAdd(counters + 1, 1ull) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // A thread's partials (b, b + blockDim.x, ...) loaded fold_loads at a time, then folded in that order:
  // one trip to memory instead of one per partial.
  constexpr int fold_loads = fold_loads_for<B>;
  M p = empty;
  for (unsigned first = threadIdx.x; first < gridDim.x; first += fold_loads * blockDim.x) {
    M v[fold_loads];
#pragma unroll
    for (int k = 0; k < fold_loads; ++k) {
      const unsigned b = first + unsigned(k) * blockDim.x;
      v[k] = b < gridDim.x ? get(b) : empty;
    }
#pragma unroll
    for (int k = 0; k < fold_loads; ++k)
      if (first + unsigned(k) * blockDim.x < gridDim.x) p = combine(p, v[k]);
  }
  __syncthreads();  // tmp is reused
  const M total = block_reduce(tmp).Reduce(p, combine);
  if (threadIdx.x == 0) {
    done(total);
    counters[0] = 0;
    counters[1] = 0;
  }
}

// Partials of 4 bytes are handed over in slots instead: each block but the last stores its partial
// and a flag in one 8-byte word (seen whole or not at all), with no fence and no atomic; the last
// block by index, dispatched after every other (so it never waits on a block that is not running),
// waits for each slot, folds the partials in fold_blocks' order and leaves the slots
// zero. The fence and the atomic per block were a short sum's largest fixed cost (docs/tuning.md).
// The wait relies on blocks being dispatched in index order, as CUB's single-pass scan does (CUDA does
// not document it): then every block the last one waits on is running or done.
template <class M>
inline constexpr bool handed_over = sizeof(M) == 4 && std::is_trivially_copyable_v<M>;

__device__ __forceinline__ unsigned long long load_slot(const unsigned long long* p) {
  unsigned long long w;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
  return w;
}

template <int B, class M, class C, class Done, int fold_loads = fold_loads_for<B>>
__device__ __forceinline__ void fold_slots(M mine, const C& combine, M empty, unsigned long long* slots, Done done) {
  static_assert(handed_over<M>);
  using block_reduce = cub::BlockReduce<M, B>;
  __shared__ typename block_reduce::TempStorage tmp;
  __shared__ M own;
  const M block_total = block_reduce(tmp).Reduce(mine, combine);
  const unsigned last = gridDim.x - 1;
  if (blockIdx.x != last) {
    if (threadIdx.x == 0) {
      unsigned bits;
      memcpy(&bits, &block_total, sizeof bits);
      const unsigned long long w = (1ull << 32) | bits;
      asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(slots + blockIdx.x), "l"(w) : "memory");
    }
    return;
  }
  if (threadIdx.x == 0) own = block_total;
  __syncthreads();  // own is set; tmp is reused below
  M p = empty;
  for (unsigned first = threadIdx.x; first < gridDim.x; first += fold_loads * blockDim.x) {
    unsigned long long w[fold_loads];
#pragma unroll
    for (int k = 0; k < fold_loads; ++k) {
      const unsigned b = first + unsigned(k) * blockDim.x;
      w[k] = b < last ? load_slot(slots + b) : 0;
    }
#pragma unroll
    for (int k = 0; k < fold_loads; ++k) {
      const unsigned b = first + unsigned(k) * blockDim.x;
      if (b > last) break;
      M v = own;
      if (b < last) {
        while ((w[k] >> 32) == 0) w[k] = load_slot(slots + b);
        const unsigned bits = unsigned(w[k]);
        memcpy(&v, &bits, sizeof bits);
        slots[b] = 0;
      }
      p = combine(p, v);
    }
  }
  const M total = block_reduce(tmp).Reduce(p, combine);
  if (threadIdx.x == 0) done(total);
}

}  // namespace resident::detail
