#pragma once
/// @file launch.hpp
/// Checked launches of a functor on either backend.
///
///   rs::launch(stream, {.grid = 2, .block = 4}, [] RESIDENT_HD (rs::thread_index t, rs::array_view<int> out) {
///     out[t.global_x()] = int(t.thread.x);
///   }, out.view());
///
/// On a CUDA device the functor runs as a kernel (the calling file must be compiled by nvcc); on the
/// CPU each block runs on an OpenMP thread and its threads run one after another (no __syncthreads).

#include <cstddef>
#include <string>

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
}  // namespace detail

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
  const dims g = cfg.grid, b = cfg.block;
  const long blocks = static_cast<long>(g.count());
#pragma omp parallel for schedule(dynamic, 1)
  for (long bi = 0; bi < blocks; ++bi) {
    thread_index t;
    t.grid_dim = g;
    t.block_dim = b;
    const auto ub = static_cast<unsigned long>(bi);
    t.block = dims(unsigned(ub % g.x), unsigned(ub / g.x % g.y), unsigned(ub / (std::size_t(g.x) * g.y)));
    for (unsigned z = 0; z < b.z; ++z)
      for (unsigned y = 0; y < b.y; ++y)
        for (unsigned x = 0; x < b.x; ++x) {
          t.thread = dims(x, y, z);
          f(t, args...);
        }
  }
  detail::record_kernel(d);
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
