#pragma once
/// @file fused_cuda.cuh
/// The CUDA backend of the fused pipeline executors (twin of fused_cpu.hpp; nvcc only): a map with
/// vector loads (grid-stride, or for long maps taking its work from a counter), a single-pass
/// reduction whose last block folds the per-block partials, and a scan on CUB's single-pass scan.
/// Split as CUB splits: thread-level loads and stores (cuda/thread_io.cuh), the block-level fold and
/// hand-over of partials (cuda/block_fold.cuh), and here the kernels and the choice of their launch;
/// the figures they are tuned by live in detail/tuning.hpp.

#include <cub/device/device_scan.cuh>
#include <limits>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/fuse/detail/cuda/block_fold.cuh"
#include "resident/fuse/detail/cuda/thread_io.cuh"
#include "resident/launch/detail/launch_cuda.cuh"

namespace resident::detail {

template <int V, int U, bool Flat, class L, class Fn, class W>
__global__ void fused_map_kernel(L in, Fn fn, W out, std::size_t head, std::size_t nvec, std::size_t n) {
  fused_map_body<V, U, Flat>(in, fn, out, head, nvec, n);
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
        if (decltype(full)::value || i + k < n) fold(acc[0], converted<T>(in.template eval<P>(fn, raw, k, i)));
    });
  } else {
    // Striding: taking the vectors from a counter, as long maps once did, was slower here.
    auto visit = [&](std::size_t i, const auto& raw) {
#pragma unroll
      for (int k = 0; k < V; ++k) fold(acc[k], converted<T>(in.template eval<V>(fn, raw, k, i)));
    };
    if constexpr (std::is_same_v<index, unsigned> && reads_memory<L>) {
      // From the first aligned vector on (the head's offset in the pointers, not in each index; a memory
      // loader's eval ignores the index), the scalar head after the vectors: faster with 32-bit indices,
      // slower with 64-bit ones in blocks of 256 (docs/tuning.md).
      for_each_vector<V, U, index>(in.shifted(head), 0, nvec, visit);
      if (tid < head) fold(acc[0], converted<T>(in.eval1(fn, tid)));
    } else {
      if (tid < head) fold(acc[0], converted<T>(in.eval1(fn, tid)));
      for_each_vector<V, U, index>(in, head, nvec, visit);
    }
    const std::size_t tail = head + nvec * V;
    if (tid < n - tail) fold(acc[0], converted<T>(in.eval1(fn, tail + tid)));
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
  __device__ U operator()(std::size_t i) const { return converted<U>(in.eval1(fn, i)); }
};

// One CUB scan of n values from `values` into out, its scratch from the pool.
template <class It, class U, class Op, class Count>
void cub_scan(It values, U* out, const Op& op, Count n, stream_ref s) {
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
}

template <class Fn>
inline constexpr bool no_stages = false;
template <>
inline constexpr bool no_stages<chain<>> = true;

template <class U, class L, class Fn, class Op>
void run_scan(cuda_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, U* out, std::size_t n,
              const std::optional<launch_config>&) {
  // An array of out's type with no stages is read as a pointer (CUB's own loads); 32-bit offsets where n
  // fits them (CUB's faster index arithmetic).
  auto scan = [&](auto count) {
    if constexpr (std::is_same_v<L, view_loader<U>> && no_stages<Fn>) {
      cub_scan(in.p, out, op, count, s);
    } else {
      auto values = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0),
                                                    scan_input<U, L, Fn>{in, fn});
      cub_scan(values, out, op, count, s);
    }
  };
  if (n <= std::size_t(std::numeric_limits<int>::max())) scan(int(n));
  else scan(n);
  record_kernel(s.device());  // the look-back state's set-up
  record_kernel(s.device());  // the scan
}

}  // namespace resident::detail
