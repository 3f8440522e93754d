#pragma once
/// @file launch.hpp
/// Checked launches of a functor on either backend.
///
///   rs::launch(stream, {.grid = 2, .block = 4}, [] RESIDENT_HD (rs::thread_index t, rs::array_view<int> out) {
///     out[t.global_x()] = int(t.thread.x);
///   }, out.view());
///
/// On a CUDA device the functor runs as a kernel (the calling file must be compiled by nvcc); on the
/// CPU each block runs on an OpenMP thread and its threads run one after another. Kernels that need
/// block-wide barriers and shared memory are written as phases (launch_phases), which both backends run.

#include <cstddef>
#include <string>
#include <vector>

#include <omp.h>

#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/launch/config.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

namespace detail {
#if defined(__CUDACC__)
inline constexpr bool nvcc_compiled = true;
#else
inline constexpr bool nvcc_compiled = false;
#endif

[[noreturn]] inline void throw_not_nvcc(device d) {
  throw invalid_argument("this code runs on " + d.name() +
                         " but its translation unit was not compiled by nvcc; compile it as CUDA "
                         "(set_source_files_properties(... LANGUAGE CUDA)) or run on the cpu device");
}

template <class F, class... Args>
void launch_cuda(stream_ref s, const launch_config& cfg, F f, Args... args);
template <class F>
void for_each_cuda(stream_ref s, std::size_t n, F f);
template <class F>
launch_config for_each_config_cuda(std::size_t n);
template <class... Phases>
void launch_phases_cuda(stream_ref s, const launch_config& cfg, Phases... phases);

// The CPU backend's emulation: block bi of cfg's grid, and its threads one after another.
inline thread_index cpu_block(long bi, const launch_config& cfg) {
  const dims g = cfg.grid;
  const auto ub = static_cast<unsigned long>(bi);
  thread_index t;
  t.grid_dim = g;
  t.block_dim = cfg.block;
  t.block = dims(unsigned(ub % g.x), unsigned(ub / g.x % g.y), unsigned(ub / (std::size_t(g.x) * g.y)));
  return t;
}
template <class F>
void cpu_threads(thread_index& t, F&& f) {
  const dims b = t.block_dim;
  for (unsigned z = 0; z < b.z; ++z)
    for (unsigned y = 0; y < b.y; ++y)
      for (unsigned x = 0; x < b.x; ++x) {
        t.thread = dims(x, y, z);
        f();
      }
}
}  // namespace detail

/// A block's shared memory (cfg.shared_bytes of it, 16-byte aligned): on-chip on the GPU, a buffer per
/// block on the CPU backend.
struct block_shared {
  /// Start of the block's shared memory.
  void* data;
  /// Its size in bytes (cfg.shared_bytes).
  std::size_t bytes;
  /// The shared memory as an array of T.
  template <class T>
  RESIDENT_HD T* as() const {
    return static_cast<T*>(data);
  }
};

/// Launches f(thread_index, args...) over cfg's grid on s. Validates cfg against the device first and
/// checks the launch after; counts one kernel in the ledger. Asynchronous on CUDA.
/// @throws invalid_launch, cuda_error, device_lost.
template <class F, class... Args>
void launch(stream_ref s, const launch_config& cfg, F f, Args... args) {
  const device d = s.device();
  validate(cfg, d);
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      detail::launch_cuda(s, cfg, f, args...);
    else
      detail::throw_not_nvcc(d);
    return;
  }
  const long blocks = static_cast<long>(cfg.grid.count());
#pragma omp parallel for schedule(dynamic, 1)
  for (long bi = 0; bi < blocks; ++bi) {
    thread_index t = detail::cpu_block(bi, cfg);
    detail::cpu_threads(t, [&] { f(t, args...); });
  }
  detail::record_kernel(d);
}

/// Launches a kernel written as phases with a block-wide barrier between them: every thread of a block
/// runs phase(thread_index, block_shared) for the first phase, the block synchronizes (__syncthreads on
/// the GPU), then the next phase, and so on. What a thread must keep from one phase to the next goes
/// in shared memory (cfg.shared_bytes per block). On the CPU backend each block runs its phases one
/// after another over all of its threads, so the same code is correct on both. One kernel.
///
///   rs::launch_phases(s, {grid, block, block.x * sizeof(float)}, load_tile{...}, use_tile{...});
/// @throws invalid_launch (as launch()).
template <class... Phases>
void launch_phases(stream_ref s, const launch_config& cfg, Phases... phases) {
  static_assert(sizeof...(Phases) >= 1, "launch_phases needs at least one phase");
  const device d = s.device();
  validate(cfg, d);
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      detail::launch_phases_cuda(s, cfg, phases...);
    else
      detail::throw_not_nvcc(d);
    return;
  }
  const long blocks = static_cast<long>(cfg.grid.count());
  const std::size_t words = (cfg.shared_bytes + 15) / 16;
#pragma omp parallel
  {
    struct alignas(16) chunk {
      unsigned char b[16];
    };
    std::vector<chunk> shared(words);
    const block_shared sh{shared.data(), cfg.shared_bytes};
#pragma omp for schedule(dynamic, 1)
    for (long bi = 0; bi < blocks; ++bi) {
      thread_index t = detail::cpu_block(bi, cfg);
      (detail::cpu_threads(t, [&] { phases(t, sh); }), ...);
    }
  }
  detail::record_kernel(d);
}

/// The configuration for_each_index(s, n, f) launches with: on CUDA the occupancy API's block size for
/// f's grid-stride kernel and at most one full wave of blocks (each thread then takes several items);
/// on the CPU one block per OpenMP thread.
template <class F>
launch_config for_each_config(stream_ref s, std::size_t n, F) {
  const device d = s.device();
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      return detail::for_each_config_cuda<F>(n);
    else
      detail::throw_not_nvcc(d);
  }
  return {dims(unsigned(omp_get_max_threads())), dims(1)};
}

/// Runs f(i) for every i in [0, n) on s: a grid-stride kernel with the block size chosen by the
/// occupancy API on CUDA, a parallel loop on the CPU. One kernel in the ledger; n == 0 does nothing.
template <class F>
void for_each_index(stream_ref s, std::size_t n, F f) {
  if (n == 0) return;
  const device d = s.device();
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      detail::for_each_cuda(s, n, f);
    else
      detail::throw_not_nvcc(d);
    return;
  }
  const long ln = static_cast<long>(n);
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < ln; ++i) f(static_cast<std::size_t>(i));
  detail::record_kernel(d);
}

}  // namespace resident

#if defined(__CUDACC__)
#include "resident/launch/detail/launch_cuda.cuh"
#endif
