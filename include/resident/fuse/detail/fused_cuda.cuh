#pragma once
/// @file fused_cuda.cuh
/// The CUDA backend of the fused pipeline executors (twin of fused_cpu.hpp; nvcc only): a map with
/// vector loads (grid-stride, or for long maps taking its work from a counter), a single-pass
/// reduction whose last block folds the per-block partials, and a scan on CUB's single-pass scan.

#include <cub/block/block_reduce.cuh>
#include <cub/thread/thread_store.cuh>
#include <cuda/std/limits>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "resident/detail/cuda_check.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/launch/detail/launch_cuda.cuh"

namespace resident::detail {

template <class L>
inline constexpr bool reads_memory = true;
template <class G>
inline constexpr bool reads_memory<generate_loader<G>> = false;


// A vector of one array read through the read-only data path (ld.global.nc), for kernels that never
// write what they read while running (reductions: a result written into the input is written by the
// last block after every read); V > 1 only, where the plan aligned the pointer to the vector's size.
// Other loaders and shapes load as they do.
template <int V, class L>
__device__ __forceinline__ auto load_read_only(const L& in, std::size_t i) {
  return in.template load<V>(i);
}
template <int V, class T>
__device__ __forceinline__ vec<T, V> load_read_only(const view_loader<T>& in, std::size_t i) {
  constexpr std::size_t bytes = sizeof(vec<T, V>);
  if constexpr (V > 1 && (bytes == 4 || bytes == 8 || bytes == 16)) {
    using bits = std::conditional_t<bytes == 4, unsigned, std::conditional_t<bytes == 8, uint2, uint4>>;
    const bits b = __ldg(reinterpret_cast<const bits*>(in.p + i));
    vec<T, V> v;
    memcpy(&v, &b, bytes);
    return v;
  } else {
    return in.template load<V>(i);
  }
}

// Calls visit(i, raw) for vectors j, j + stride, ..., U of them (those below nvec, unless Checked is
// false: all U are) of V elements at head + j * V, with all U loads issued before the first visit
// (ReadOnly: load_read_only). I: the type of the vector indices.
template <int V, int U, bool ReadOnly = false, bool Checked = true, class I, class L, class F>
__device__ __forceinline__ void visit_vectors(const L& in, std::size_t head, I nvec, I j, I stride, F& visit) {
  typename L::template raw<V> raw[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I jj = j + I(u) * stride;
    if (!Checked || jj < nvec) {
      if constexpr (ReadOnly)
        raw[u] = load_read_only<V>(in, head + std::size_t(jj) * V);
      else
        raw[u] = in.template load<V>(head + std::size_t(jj) * V);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I jj = j + I(u) * stride;
    if (!Checked || jj < nvec) visit(head + std::size_t(jj) * V, raw[u]);
  }
}

// visit_vectors over all nvec vectors read only, the grid striding over them U per thread per
// iteration (reductions). The iterations whose U vectors all lie below nvec run unchecked, the one
// after them checked: checked throughout, the loop's bounds and indices took 40 registers a thread.
// I: the indices' type; unsigned only where nvec + (U + 1) x the grid's threads stays below 2^32.
template <int V, int U, class I, class L, class F>
__device__ __forceinline__ void for_each_vector(const L& in, std::size_t head, std::size_t nvec, F&& visit) {
  const I tid = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);
  const I stride = I(gridDim.x) * I(blockDim.x), n = I(nvec);
  const I step = stride * U, reach = stride * (U - 1);  // a trip's vectors: j, j + stride, ... j + reach
  I j = tid;
  for (; j + reach < n; j += step) visit_vectors<V, U, true, false>(in, head, n, j, stride, visit);
  if (j < n) visit_vectors<V, U, true>(in, head, n, j, stride, visit);
}

// Tiles of U * blockDim.x vectors, one per block, each thread taking U of them blockDim.x apart so
// every load instruction is coalesced. Flat (a grid of one block per tile): the block's own tile, no
// loop; else (a fixed launch configuration) the grid strides over them. visit_vectors tests each
// vector: a map is issue-bound enough that a thread's fixed instructions show.
template <int V, int U, bool Flat, class L, class F>
__device__ __forceinline__ void for_each_tile(const L& in, std::size_t head, std::size_t nvec, F&& visit) {
  const std::size_t tile = std::size_t(blockDim.x) * U;
  std::size_t j = std::size_t(blockIdx.x) * tile + threadIdx.x;
  if constexpr (Flat) {
    visit_vectors<V, U>(in, head, nvec, j, std::size_t(blockDim.x), visit);
  } else {
    for (; j < nvec; j += std::size_t(gridDim.x) * tile) visit_vectors<V, U>(in, head, nvec, j, std::size_t(blockDim.x), visit);
  }
}

// V values stored at out's element i as vector stores: nvcc writes a vec<U, V> (a struct of an array)
// element by element, four 4-byte stores for 16 bytes where one 16-byte store does, and a copy
// through CUDA's vector types is split the same way; CUB's ThreadStore emits st.global.v4 itself.
// Other targets store as they do.
template <class W>
inline constexpr bool is_writer = false;
template <class U>
inline constexpr bool is_writer<writer<U>> = true;

template <int V, class W, class R>
__device__ __forceinline__ void store_vector(const W& out, std::size_t i, const R (&r)[V]) {
  if constexpr (is_writer<W>) {
    using U = std::remove_cv_t<std::remove_pointer_t<decltype(out.p)>>;
    constexpr std::size_t bytes = sizeof(U) * V;
    // Vectors only (V > 1: the plan aligned them to their size); one element of a struct type may be
    // less aligned than its size.
    if constexpr (V > 1 && (bytes == 4 || bytes == 8 || bytes == 16 || bytes == 32)) {
      using bits = std::conditional_t<bytes == 4, unsigned, std::conditional_t<bytes == 8, uint2, uint4>>;
      constexpr int parts = bytes == 32 ? 2 : 1;
      vec<U, V> v;
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = static_cast<U>(r[k]);
      bits b[parts];
      memcpy(b, &v, bytes);
#pragma unroll
      for (int q = 0; q < parts; ++q) cub::ThreadStore<cub::STORE_WB>(reinterpret_cast<bits*>(out.p + i) + q, b[q]);
      return;
    }
  }
  out.template store<V>(i, r);
}

/// Generators that make a block of values per call (counter-based random numbers) run over their
/// blocks rather than over vectors of the output: every call is aligned, and the two ends of [0, n) are
/// lanes masked off in the first and last blocks, so the kernel holds one generator call and no scalar
/// head or tail path (fewer registers, faster than cuRAND's fill).
template <class G>
constexpr int block_size_of() {
  if constexpr (makes_aligned_blocks<G>)
    return G::per_block;
  else
    return 0;
}
template <class L>
inline constexpr int generator_group = 0;  ///< values per generator call, 0 for everything else
template <class G>
inline constexpr int generator_group<generate_loader<G>> = block_size_of<G>();

template <class L>
std::size_t generator_groups(const L& in, std::size_t n) {
  constexpr std::size_t P = generator_group<L>;
  if constexpr (P > 0)
    return (in.g.block_lead() + n + P - 1) / P;
  else
    return 0;
}

// Calls visit(i, values, full) for the generator blocks covering [0, n): i is the index of a block's
// first value (below 0, wrapped, for a first block that begins before 0). The blocks wholly inside
// [0, n) form one range, one block per thread per iteration (more, made before the first visit, were
// slower), with full a std::true_type: no checks in the loop, whose trips are counted down in 32 bits
// (a 64-bit bound per block was slower; the outer loop turns again only past 2^32 - 1 trips). The at
// most two blocks cut by the ends of [0, n) come first, one thread each, with full a std::false_type
// (after the loop they would share its registers). Block numbers follow the loop counter.
template <class L, class F>
__device__ __forceinline__ void for_each_generator_block(const L& in, std::size_t n, F&& visit) {
  constexpr int P = generator_group<L>;
  const std::size_t lead = in.g.block_lead();
  const std::size_t full_from = lead ? 1 : 0, full_to = (lead + n) / P, groups = (lead + n + P - 1) / P;
  const std::uint64_t c0 = in.g.first_block();
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  if (stride == 1) {  // a one-thread launch: every block, checked
#pragma unroll 1
    for (std::size_t g = 0; g < groups; ++g) visit(g * P - lead, in.g.values_of_block(c0 + g), std::false_type{});
    return;
  }
  // Thread 0 takes a first block cut by 0, thread 1 a last block cut by n (unless it is the first).
  const bool first_cut = full_from == 1, last_cut = groups > full_to && full_to >= full_from;
  if (tid == 0 ? first_cut : tid == 1 && last_cut) {
    const std::size_t g = tid == 0 ? 0 : full_to;
    visit(g * P - lead, in.g.values_of_block(c0 + g), std::false_type{});
  }
  for (std::size_t g = full_from + tid; g < full_to;) {
    const std::size_t left = (full_to - g - 1) / stride + 1;
    const auto trips = std::uint32_t(left < 0xFFFFFFFFu ? left : 0xFFFFFFFFu);
    std::uint64_t c = c0 + g;  // the loop steps the counter; a reduction never needs g
    g += std::size_t(trips) * stride;
#pragma unroll 1
    for (std::uint32_t t = trips; t; --t, c += stride) visit((c - c0) * P - lead, in.g.values_of_block(c), std::true_type{});
  }
}

// Elements [0, head) and [head + nvec * V, n) one at a time; [head, head + nvec * V) as nvec vectors of
// V.
// Generators: over their blocks (for_each_generator_block), V and head unused.
// Vectors: in tiles (for_each_tile).
template <int V, int U, bool Flat, class L, class Fn, class W>
__device__ __forceinline__ void fused_map_body(const L& in, const Fn& fn, const W& out, std::size_t head,
                                               std::size_t nvec, std::size_t n) {
  using R = decltype(in.eval1(fn, std::size_t(0)));
  dependent_launch_prologue();
  if constexpr (generator_group<L> > 0) {
    constexpr int P = generator_group<L>;
    bool vectors = false;
    if constexpr (W::template stores_vectors<P>) vectors = out.template vectors_aligned<P>(in.g.block_lead());
    for_each_generator_block(in, n, [&](std::size_t i, const auto& raw, auto full) {
      R r[P];
#pragma unroll
      for (int k = 0; k < P; ++k) r[k] = in.template eval<P>(fn, raw, k, i);
      if constexpr (decltype(full)::value && W::template stores_vectors<P>) {
        if (vectors) {
          store_vector<P>(out, i, r);
          return;
        }
      }
#pragma unroll
      for (int k = 0; k < P; ++k)
        if (decltype(full)::value || i + k < n) out.store1(i + k, r[k]);  // i + k wraps above n before 0
    });
    return;
  }
  auto visit = [&](std::size_t i, const auto& raw) {
    R r[V];
#pragma unroll
    for (int k = 0; k < V; ++k) r[k] = in.template eval<V>(fn, raw, k, i);
    store_vector<V>(out, i, r);
  };
  for_each_tile<V, U, Flat>(in, head, nvec, visit);
  // The scalar head and tail (fewer than V elements each): the last block's, one uniform test for the
  // others.
  if (blockIdx.x != gridDim.x - 1) return;
  const std::size_t tail = head + nvec * V;
  for (std::size_t t = threadIdx.x; t < head; t += blockDim.x) out.store1(t, in.eval1(fn, t));
  for (std::size_t t = tail + threadIdx.x; t < n; t += blockDim.x) out.store1(t, in.eval1(fn, t));
}

template <int V, int U, bool Flat, class L, class Fn, class W>
__global__ void fused_map_kernel(L in, Fn fn, W out, std::size_t head, std::size_t nvec, std::size_t n) {
  fused_map_body<V, U, Flat>(in, fn, out, head, nvec, n);
}


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
// wide blocks' loop registers: bench/results/tuning.md).
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
// zero. The fence and the atomic per block were a short sum's largest fixed cost (bench/results/tuning.md).
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

template <int B, int V, int U, class I = std::size_t, class L, class Fn, class Op, class T>
__device__ __forceinline__ void fused_reduce_body(const L& in, const Fn& fn, const Op& op, T init, std::size_t head,
                                                  std::size_t nvec, std::size_t n, maybe<T>* partials,
                                                  unsigned long long* counters, unsigned long long* slots,
                                                  T* result) {
  // The wide shape (blocks of reduce_wide_block, run_reduce) waits first. I: the vectors' index type
  // (unsigned where run_reduce found every index below 2^32).
  constexpr bool wide = B == cuda_tuning::reduce_wide_block;
  using index = I;
  dependent_launch_prologue<wide && cuda_tuning::reduce_wide_waits_first>();
  const std::size_t tid = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // One accumulator per lane of a vector (independent chains of op); each starts from op's identity
  // where known, else empty, as op may have none.
  using id = identity_of<Op, T>;
  constexpr int lanes = generator_group<L> > 0 ? 1 : V;
  maybe<T> acc[lanes];
#pragma unroll
  for (int k = 0; k < lanes; ++k) {
    if constexpr (id::known)
      acc[k] = {id::value(), 1};
    else
      acc[k] = {init, 0};
  }
  auto fold = [&](maybe<T>& a, T v) {
    if constexpr (id::known) {
      a.value = op(a.value, v);
    } else {
      a.value = a.valid ? op(a.value, v) : v;
      a.valid = 1;
    }
  };
  if constexpr (generator_group<L> > 0) {
    constexpr int P = generator_group<L>;
    for_each_generator_block(in, n, [&](std::size_t i, const auto& raw, auto full) {
#pragma unroll
      for (int k = 0; k < P; ++k)  // i + k wraps above n before 0
        if (decltype(full)::value || i + k < n) fold(acc[0], static_cast<T>(in.template eval<P>(fn, raw, k, i)));
    });
  } else {
    // Striding: taking the vectors from a counter, as long maps once did, was slower here.
    auto visit = [&](std::size_t i, const auto& raw) {
#pragma unroll
      for (int k = 0; k < V; ++k) fold(acc[k], static_cast<T>(in.template eval<V>(fn, raw, k, i)));
    };
    if constexpr (std::is_same_v<index, unsigned> && reads_memory<L>) {
      // From the first aligned vector on (the head's offset in the pointers, not in each index; a memory
      // loader's eval ignores the index), the scalar head after the vectors: faster with 32-bit indices,
      // slower with 64-bit ones in blocks of 256 (bench/results/tuning.md).
      for_each_vector<V, U, index>(in.shifted(head), 0, nvec, visit);
      if (tid < head) fold(acc[0], static_cast<T>(in.eval1(fn, tid)));
    } else {
      if (tid < head) fold(acc[0], static_cast<T>(in.eval1(fn, tid)));
      for_each_vector<V, U, index>(in, head, nvec, visit);
    }
    const std::size_t tail = head + nvec * V;
    if (tid < n - tail) fold(acc[0], static_cast<T>(in.eval1(fn, tail + tid)));
  }

  if constexpr (id::known) {
    T mine = acc[0].value;
#pragma unroll
    for (int k = 1; k < lanes; ++k) mine = op(mine, acc[k].value);
    if constexpr (handed_over<T>)
      fold_slots<B>(mine, op, id::value(), slots, [&](T total) { *result = op(init, total); });
    else
      fold_blocks<B>(
          mine, op, id::value(), [&](unsigned b, T v) { partials[b] = {v, 1}; },
          [&](unsigned b) { return partials[b].value; }, counters, [&](T total) { *result = op(init, total); });
  } else {
    const maybe_op<Op> combine{op};
#pragma unroll
    for (int k = 1; k < lanes; ++k) acc[0] = combine(acc[0], acc[k]);
    fold_blocks<B>(
        acc[0], combine, maybe<T>{init, 0}, [&](unsigned b, maybe<T> v) { partials[b] = v; },
        [&](unsigned b) { return partials[b]; }, counters,
        [&](maybe<T> total) { *result = total.valid ? op(init, total.value) : init; });
  }
}

// Blocks of B threads, at least MinBlocks of them resident per SM (the register budget; 0: no minimum).
template <int B, int MinBlocks, int V, int U, class I, class L, class Fn, class Op, class T>
__global__ void __launch_bounds__(B, MinBlocks)
    fused_reduce_kernel(L in, Fn fn, Op op, T init, std::size_t head, std::size_t nvec, std::size_t n,
                        maybe<T>* partials, unsigned long long* counters, unsigned long long* slots, T* result) {
  fused_reduce_body<B, V, U, I>(in, fn, op, init, head, nvec, n, partials, counters, slots, result);
}

// Whether kernel K runs without local memory: the wide reductions' register budget held without
// spilling. Queried once per kernel.
template <auto K>
bool runs_in_registers() {
  static const bool fits = [] {
    cudaFuncAttributes a{};
    RESIDENT_CUDA_TRY(cudaFuncGetAttributes(&a, K));
    return a.localSizeBytes == 0;
  }();
  return fits;
}

// The caller's configuration (pipeline::execute validated it); else one wave of blocks of `block` threads at full occupancy,
// per_thread items per thread, or for work too small to give every resident thread that many, one item
// per thread. The occupancy query runs once per kernel.
template <auto K>
launch_config fused_config(std::size_t items, const std::optional<launch_config>& cfg, int per_thread, int block) {
  if (cfg) return *cfg;
  static const occupancy o = occupancy_with_block(K, block);
  const std::size_t resident_threads = std::size_t(o.max_grid) * unsigned(o.block);
  return wave_config(o, items, items >= resident_threads * unsigned(per_thread) ? std::size_t(per_thread) : 1);
}


// A generator's blocks, or a configured map's items (fused_config).
template <int V, int U, class L, class Fn, class W>
void launch_map(stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t items, std::size_t head,
                std::size_t nvec, std::size_t n, const std::optional<launch_config>& cfg) {
  constexpr auto k = fused_map_kernel<V, U, false, L, Fn, W>;
  if (cfg) fit_kernel(k, *cfg, s.device());  // a caller's shape against the kernel's registers
  launch_dependent(k, fused_config<k>(items, cfg, U, cuda_tuning::generator_block), s, in, fn, out, head,
                   nvec, n);
}

// A map over nvec vectors of V in a flat grid: a block of map_block threads per tile of map_tile
// vectors each, or of one each for maps shorter than map_tile_from (for_each_tile, flat: no loop).
template <int V, int U, class L, class Fn, class W>
void launch_tiles(stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t head, std::size_t nvec,
                  std::size_t n) {
  constexpr auto k = fused_map_kernel<V, U, true, L, Fn, W>;
  constexpr std::size_t tile = std::size_t(cuda_tuning::map_block) * U;
  // head and tail (fewer than V elements each) are the last block's
  const std::size_t tiles = std::max<std::size_t>(1, (nvec + tile - 1) / tile);
  RESIDENT_EXPECTS(tiles <= 0x7FFFFFFFu, "a fused map over " + std::to_string(n) +
                                             " elements needs more blocks than a grid holds; map it in parts",
                   invalid_launch);
  const unsigned grid = unsigned(tiles);
  launch_dependent(k, launch_config{dims(grid), dims(unsigned(cuda_tuning::map_block)), 0}, s, in, fn, out, head, nvec, n);
}
template <int V, class L, class Fn, class W>
void launch_map_flat(stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t head, std::size_t nvec,
                     std::size_t n) {
  constexpr int per_vector = V > 1 ? 1 : 4;  // scalars: as many bytes per thread
  if (nvec / per_vector < cuda_tuning::map_tile_from)
    launch_tiles<V, per_vector>(s, in, fn, out, head, nvec, n);
  else
    launch_tiles<V, cuda_tuning::map_tile * per_vector>(s, in, fn, out, head, nvec, n);
}


inline constexpr std::size_t counter_bytes = 2 * sizeof(unsigned long long);

// The two counters a kernel on s counts in, each kernel leaving them zero: the stream's slot, so a call
// adds no memset; or, given captured_scratch (counter_bytes the graph owns, when s is being captured),
// that scratch zeroed in the graph, since its replays may run on other streams.
inline unsigned long long* launch_counters(stream_ref s, void* captured_scratch) {
  if (!captured_scratch) return cuda::stream_counters(s.device().index(), s.native());
  cuda::memset_async(captured_scratch, 0, counter_bytes, s.native());
  return static_cast<unsigned long long*>(captured_scratch);
}

template <int V, class L, class Fn, class W>
void run_map(cuda_backend, stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t n, vector_plan plan,
             const std::optional<launch_config>& cfg) {
  // Several vectors in flight per thread hide memory latency; a generator reads nothing, and unrolling
  // its arithmetic only costs registers. Without a configuration, maps run a flat grid.
  constexpr int U = reads_memory<L> ? cuda_tuning::map_unroll : 1;
  if constexpr (generator_group<L> > 0)
    launch_map<1, 1>(s, in, fn, out, generator_groups(in, n), 0, 0, n, cfg);
  else if (plan.vectorized && V > 1) {
    if (cfg)
      launch_map<V, U>(s, in, fn, out, plan.vectors, plan.head, plan.vectors, n, cfg);
    else
      launch_map_flat<V>(s, in, fn, out, plan.head, plan.vectors, n);
  } else if (cfg)
    launch_map<1, U>(s, in, fn, out, n, 0, n, n, cfg);
  else
    launch_map_flat<1>(s, in, fn, out, 0, n, n);
  cuda::check_launch("fused pipeline kernel");
  record_kernel(s.device());
}

// Writes one value into device memory with a one-thread kernel (no host transfer).
template <class T>
__global__ void store_value_kernel(T* p, T v) {
  *p = v;
}
template <class T>
void copy_device_to_device_value(T* p, T v, stream_ref s) {
  store_value_kernel<<<1, 1, 0, s.native()>>>(p, v);
  cuda::check_launch("store value");
  record_kernel(s.device());
}

template <int V, class L, class Fn, class Op, class T>
T run_reduce(cuda_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, T init, std::size_t n,
             vector_plan plan, const std::optional<launch_config>& cfg, T* into) {
  constexpr int U = reads_memory<L> ? cuda_tuning::map_unroll : 1;  // U: unused by generators
  if (n == 0) {
    if (into) copy_device_to_device_value(into, init, s);
    return init;
  }
  constexpr bool groups = generator_group<L> > 0;
  const bool vec = !groups && plan.vectorized && V > 1;
  constexpr int Vk = groups ? 1 : V;
  constexpr bool handover = identity_of<Op, T>::known && handed_over<T>;
  constexpr bool widens = handover && reads_memory<L>;
  // Long reductions of memory handing partials over in slots: the wide shape (fewer, larger blocks)
  // where the kernel fits its registers; else, for generators (measured only reading memory) and for
  // configured launches, blocks of reduce_block. In either shape those reductions index their vectors
  // in 32 bits where every index a thread forms (below items + (U + 1) x the grid's threads) fits;
  // others, and longer ones, in 64 bits.
  constexpr int W = cuda_tuning::reduce_wide_block, Wn = cuda_tuning::reduce_wide_per_sm;
  using short_index = std::conditional_t<widens, unsigned, std::size_t>;
  constexpr auto kv = fused_reduce_kernel<reduce_block, 0, Vk, U, std::size_t, L, Fn, Op, T>;
  constexpr auto k1 = fused_reduce_kernel<reduce_block, 0, 1, U, std::size_t, L, Fn, Op, T>;
  constexpr auto kv32 = fused_reduce_kernel<reduce_block, 0, Vk, U, short_index, L, Fn, Op, T>;
  constexpr auto k1_32 = fused_reduce_kernel<reduce_block, 0, 1, U, short_index, L, Fn, Op, T>;
  constexpr auto kv_wide = fused_reduce_kernel<widens ? W : reduce_block, widens ? Wn : 0, Vk, U, short_index, L, Fn, Op, T>;
  constexpr auto k1_wide = fused_reduce_kernel<widens ? W : reduce_block, widens ? Wn : 0, 1, U, short_index, L, Fn, Op, T>;
  const std::size_t items = vec ? plan.vectors : groups ? generator_groups(in, n) : n;
  auto fits32 = [&](const launch_config& k) {
    return items + std::size_t(U + 1) * k.grid.x * k.block.x < (std::size_t(1) << 32);
  };
  auto k = vec ? kv_wide : k1_wide;
  launch_config c;
  const bool wide = widens && !cfg && n >= cuda_tuning::reduce_wide_from &&
                    (vec ? runs_in_registers<kv_wide>() : runs_in_registers<k1_wide>());
  if (wide) c = vec ? fused_config<kv_wide>(items, cfg, U, W) : fused_config<k1_wide>(items, cfg, U, W);
  if (!wide || !fits32(c)) {
    k = vec ? kv32 : k1_32;
    c = vec ? fused_config<kv32>(items, cfg, U, reduce_block) : fused_config<k1_32>(items, cfg, U, reduce_block);
    if (!fits32(c)) {
      k = vec ? kv : k1;
      c = vec ? fused_config<kv>(items, cfg, U, reduce_block) : fused_config<k1>(items, cfg, U, reduce_block);
    }
  }
  // A caller's shape was checked before any work (pipeline::execute: blocks of reduce_block in x, a 1-D
  // grid, since the blocks are told apart by their x index); the shapes chosen here are such.
  const unsigned blocks = c.grid.x;
  // Scratch: the per-block partials and the counters the blocks count their finishing in, or for
  // partials of 4 bytes the slots they are handed over in (fold_slots), from the stream's own slot (no
  // allocation per call); while s is being captured, or where the stream's are too small, a pool block
  // (its counters or slots zeroed here: a graph's replays may run on other streams). The result,
  // unless written into the caller's array, in a pool block.
  const std::size_t partial_bytes = handover ? 0 : (sizeof(maybe<T>) * blocks + 15) / 16 * 16;
  const std::size_t slot_bytes = handover ? (sizeof(unsigned long long) * blocks + 15) / 16 * 16 : 0;
  const bool capturing = cuda::stream_is_capturing(s.native());
  const bool own =
      capturing || (handover ? blocks > cuda::stream_handover_slots : partial_bytes > cuda::stream_scratch_bytes);
  const std::size_t own_counters = capturing && !handover ? counter_bytes : 0;
  const std::size_t own_bytes = own ? partial_bytes + slot_bytes + own_counters : 0;
  const std::size_t bytes = own_bytes + (into ? 0 : sizeof(T));
  void* scratch = bytes ? pool_allocate(bytes, s) : nullptr;
  char* base = static_cast<char*>(scratch);
  const int dev = s.device().index();
  auto* partials = handover ? nullptr : static_cast<maybe<T>*>(own ? scratch : cuda::stream_scratch(dev, s.native()));
  T* result = into ? into : reinterpret_cast<T*>(base + own_bytes);
  T value = init;
  try {
    unsigned long long* slots = nullptr;
    unsigned long long* counters = nullptr;
    if (handover) {
      slots = own ? reinterpret_cast<unsigned long long*>(base) : cuda::stream_handover(dev, s.native());
      if (own) cuda::memset_async(slots, 0, slot_bytes, s.native());
    } else {
      counters = launch_counters(s, own_counters ? base + partial_bytes : nullptr);
    }
    if (vec)
      launch_dependent(k, c, s, in, fn, op, init, plan.head, plan.vectors, n, partials, counters, slots, result);
    else
      launch_dependent(k, c, s, in, fn, op, init, std::size_t(0), n, n, partials, counters, slots, result);
    cuda::check_launch("fused reduction kernel");
    record_kernel(s.device());
    if (!into) copy_device_to_host(&value, result, sizeof(T), s, sync::blocking);
  } catch (...) {
    if (scratch) pool_deallocate(scratch, bytes, s);
    throw;
  }
  if (scratch) pool_deallocate(scratch, bytes, s);
  return value;
}

// Element i of the stages' values, converted to the scan's type: CUB's scan reads its input through it.
template <class U, class L, class Fn>
struct scan_input {
  L in;
  Fn fn;
  __device__ U operator()(std::size_t i) const { return static_cast<U>(in.eval1(fn, i)); }
};

template <class U, class L, class Fn, class Op>
void run_scan(cuda_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, U* out, std::size_t n,
              const std::optional<launch_config>&) {
  auto values = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0), scan_input<U, L, Fn>{in, fn});
  std::size_t bytes = 0;
  RESIDENT_CUDA_TRY(cub::DeviceScan::InclusiveScan(nullptr, bytes, values, out, op, n, s.native()));
  void* scratch = pool_allocate(bytes, s);
  try {
    RESIDENT_CUDA_TRY(cub::DeviceScan::InclusiveScan(scratch, bytes, values, out, op, n, s.native()));
    cuda::check_launch("fused scan kernel");
  } catch (...) {
    pool_deallocate(scratch, bytes, s);
    throw;
  }
  pool_deallocate(scratch, bytes, s);
  record_kernel(s.device());  // the look-back state's set-up
  record_kernel(s.device());  // the scan
}

}  // namespace resident::detail
