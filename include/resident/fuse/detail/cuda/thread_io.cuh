#pragma once
/// @file thread_io.cuh
/// Thread-level pieces of the fused CUDA executors (nvcc only): how a thread loads its vectors (through
/// the read-only path where nothing read is written), visits them over a grid (strided or in tiles),
/// stores vectors whole, and walks counter-based generators block by block; fused_map_body puts them
/// together for a map.

#include <cub/thread/thread_store.cuh>
#include <cuda/std/limits>

#include "resident/detail/cuda_check.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/fuse/pipeline.hpp"

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
      for (int k = 0; k < V; ++k) v.v[k] = converted<U>(r[k]);
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

}  // namespace resident::detail
