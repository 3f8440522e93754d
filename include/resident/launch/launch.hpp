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
/// The executors are per backend: detail/launch_cpu.hpp and detail/launch_cuda.cuh.
///
/// Streams: every call here runs on the stream it is given and does not synchronize (the CPU backend
/// runs the work before returning).
///
/// On the CPU backend an exception thrown by a functor reaches the caller: the first one thrown is
/// rethrown after the loop. Other blocks or elements may or may not have run by then (those already
/// started finish, no new ones start), so the output is partly written.

#include <cstddef>

#include "resident/detail/backend.hpp"
#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/launch/config.hpp"
#include "resident/launch/detail/launch_cpu.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

namespace detail {
// The CUDA twins, defined in launch_cuda.cuh (nvcc only).
template <class F, class... Args>
void launch_functor(cuda_backend, stream_ref s, const launch_config& cfg, F f, Args... args);
template <class... Phases>
void launch_phases_on(cuda_backend, stream_ref s, const launch_config& cfg, Phases... phases);
template <class F>
launch_config for_each_config_on(cuda_backend, std::size_t n);
template <class F>
void for_each_on(cuda_backend, stream_ref s, std::size_t n, F f);
}  // namespace detail

/// Launches f(thread_index, args...) over cfg's grid on s, with s's device current (the caller's is
/// restored after; so are the other launch calls here). Validates cfg against the device first and
/// checks the launch after; counts one kernel in the ledger. Asynchronous on CUDA.
/// @throws invalid_launch, cuda_error, device_lost; on the CPU backend, the first exception f threw
/// (other blocks may or may not have run).
template <class F, class... Args>
void launch(detail::located_stream at, const launch_config& cfg, F f, Args... args) {
  const stream_ref s = at.stream;
  validate(cfg, s.device());
  const device_scope current(s.device());  // a launch goes to the current device: make it s's
  detail::call_scope scope("launch", s, {}, detail::call_kind::compute, at.where);
  detail::dispatch(s.device(), [&](auto backend) { detail::launch_functor(backend, s, cfg, f, args...); });
}

/// Launches a kernel written as phases with a block-wide barrier between them: every thread of a block
/// runs phase(thread_index, block_shared) for the first phase, the block synchronizes (__syncthreads on
/// the GPU), then the next phase, and so on. What a thread must keep from one phase to the next goes
/// in shared memory (cfg.shared_bytes per block). On the CPU backend each block runs its phases one
/// after another over all of its threads, so the same code is correct on both. One kernel.
///
///   rs::launch_phases(s, {grid, block, block.x * sizeof(float)}, load_tile{...}, use_tile{...});
/// @throws invalid_launch (as launch()); on the CPU backend, the first exception a phase threw (other
/// blocks may or may not have run).
template <class... Phases>
void launch_phases(detail::located_stream at, const launch_config& cfg, Phases... phases) {
  static_assert(sizeof...(Phases) >= 1, "launch_phases needs at least one phase");
  const stream_ref s = at.stream;
  validate(cfg, s.device());
  const device_scope current(s.device());
  detail::call_scope scope("launch_phases", s, {}, detail::call_kind::compute, at.where);
  detail::dispatch(s.device(), [&](auto backend) { detail::launch_phases_on(backend, s, cfg, phases...); });
}

/// The configuration for_each_index(s, n, f) launches with: on CUDA the occupancy API's block size for
/// f's grid-stride kernel and at most one full wave of blocks (each thread then takes several items);
/// on the CPU one block per OpenMP thread.
template <class F>
launch_config for_each_config(stream_ref s, std::size_t n, F) {
  require(s.device());
  const device_scope current(s.device());  // the occupancy of s's device
  return detail::dispatch(s.device(), [&](auto backend) { return detail::for_each_config_on<F>(backend, n); });
}

/// Runs f(i) for every i in [0, n) on s: a grid-stride kernel with the block size chosen by the
/// occupancy API on CUDA, a parallel loop on the CPU. One kernel in the ledger; n == 0 does nothing.
/// @throws device_unavailable for s of a device that cannot be used (n == 0 too); on the CPU backend, the first exception f threw (other indices may or may not have run).
template <class F>
void for_each_index(detail::located_stream at, std::size_t n, F f) {
  const stream_ref s = at.stream;
  require(s.device());  // at every length: nothing to do is no reason to accept an absent device
  if (n == 0) return;
  const device_scope current(s.device());
  detail::call_scope scope("for_each_index", s, {0, 0, n, 0, nullptr, nullptr}, detail::call_kind::compute, at.where);
  detail::dispatch(s.device(), [&](auto backend) { detail::for_each_on(backend, s, n, f); });
}

}  // namespace resident

#if defined(__CUDACC__)
#include "resident/launch/detail/launch_cuda.cuh"
#endif
