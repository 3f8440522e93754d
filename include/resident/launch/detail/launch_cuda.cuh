#pragma once
/// @file launch_cuda.cuh
/// The CUDA backend of launch.hpp (twin of launch_cpu.hpp): kernel templates, occupancy and the
/// checked launch (nvcc only).

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "resident/detail/cuda_check.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/launch/launch.hpp"

namespace resident {

namespace detail {

template <class F, class... Args>
__global__ void functor_kernel(F f, Args... args) {
  thread_index t;
  t.block = dims(blockIdx.x, blockIdx.y, blockIdx.z);
  t.thread = dims(threadIdx.x, threadIdx.y, threadIdx.z);
  t.block_dim = dims(blockDim.x, blockDim.y, blockDim.z);
  t.grid_dim = dims(gridDim.x, gridDim.y, gridDim.z);
  f(t, args...);
}

template <class... Phases>
__global__ void phases_kernel(std::size_t shared, Phases... phases) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  thread_index t;
  t.block = dims(blockIdx.x, blockIdx.y, blockIdx.z);
  t.thread = dims(threadIdx.x, threadIdx.y, threadIdx.z);
  t.block_dim = dims(blockDim.x, blockDim.y, blockDim.z);
  t.grid_dim = dims(gridDim.x, gridDim.y, gridDim.z);
  const block_shared sh{shared_bytes, shared};
  ((phases(t, sh), __syncthreads()), ...);
}

template <class F>
__global__ void grid_stride_kernel(std::size_t n, F f) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  // Stops before i + stride would pass n: near SIZE_MAX the sum wraps and the loop would start over.
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    f(i);
    if (n - i <= stride) break;
  }
}

/// Programmatic dependent launch, device side: the next kernel may be scheduled from the start of this
/// one (before the wait, so a chain of small kernels is launched ahead, each waiting; WaitFirst: after
/// it), and this kernel waits here for its predecessors' completion and memory before its first
/// access. Both are no-ops when the kernel was launched without the attribute (or before sm_90).
template <bool WaitFirst = false>
__device__ __forceinline__ void dependent_launch_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (WaitFirst) asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if constexpr (!WaitFirst) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Block size and a grid that fills the device at full occupancy for kernel, chosen once per kernel.
struct occupancy {
  int block = 256;
  int max_grid = 1;  ///< resident blocks on the whole device: a multiple of the SM count
};

template <class Kernel>
occupancy occupancy_for(Kernel kernel, std::size_t dynamic_shared = 0) {
  occupancy o;
  RESIDENT_CUDA_TRY(cudaOccupancyMaxPotentialBlockSize(&o.max_grid, &o.block, kernel, dynamic_shared, 0));
  return o;
}

/// Like occupancy_for, for a block size fixed by the kernel (block-wide collectives).
template <class Kernel>
occupancy occupancy_with_block(Kernel kernel, int block) {
  int per_sm = 0, dev = 0;
  RESIDENT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
  RESIDENT_CUDA_TRY(cudaGetDevice(&dev));
  int sms = 0;
  RESIDENT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return occupancy{block, per_sm * sms > 0 ? per_sm * sms : sms};
}

/// A 1-D configuration covering n items with the occupancy-chosen block, capped at one full wave.
inline launch_config wave_config(const occupancy& o, std::size_t n, std::size_t per_thread = 1) {
  std::size_t threads = (n + per_thread - 1) / per_thread;
  std::size_t blocks = (threads + unsigned(o.block) - 1) / unsigned(o.block);
  if (blocks > std::size_t(o.max_grid)) blocks = std::size_t(o.max_grid);
  if (blocks == 0) blocks = 1;
  return launch_config{dims(unsigned(blocks)), dims(unsigned(o.block)), 0};
}

/// A kernel's own limits on the current device: the threads a block may have under its registers
/// (or __launch_bounds__), and its static shared memory. Queried once per kernel and device.
struct kernel_limits {
  int max_threads = 0;
  std::size_t static_shared = 0;
};
inline kernel_limits limits_of(const void* kernel) {
  static std::mutex m;
  static std::map<std::pair<const void*, int>, kernel_limits> known;
  int dev = 0;
  RESIDENT_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard lock(m);
  auto it = known.find({kernel, dev});
  if (it == known.end()) {
    cudaFuncAttributes a{};
    RESIDENT_CUDA_TRY(cudaFuncGetAttributes(&a, kernel));
    it = known.emplace(std::pair{kernel, dev}, kernel_limits{a.maxThreadsPerBlock, a.sharedSizeBytes}).first;
  }
  return it->second;
}

/// Checks a caller's cfg against what validate's device figures do not tell, the kernel's own limits,
/// before the launch (else the launch fails with a CUDA error), and raises the kernel's dynamic shared
/// memory limit where cfg asks for more than the default 48 KiB. Run with cfg's device current.
/// @throws invalid_launch.
template <class Kernel>
void fit_kernel(Kernel kernel, const launch_config& cfg, device d) {
  const kernel_limits k = limits_of(reinterpret_cast<const void*>(kernel));
  auto fail = [&](const std::string& what) {
    RESIDENT_FAIL("invalid launch configuration " + cfg.str() + " on " + d.name() + ": " + what, invalid_launch);
  };
  if (cfg.block.count() > std::size_t(k.max_threads))
    fail(std::to_string(cfg.block.count()) + " threads per block exceed this kernel's limit of " +
         std::to_string(k.max_threads) + " (its registers or __launch_bounds__); use at most " +
         std::to_string(k.max_threads));
  const std::size_t most = properties(d).shared_per_block_optin;
  if (k.static_shared + cfg.shared_bytes > most)
    fail(std::to_string(cfg.shared_bytes) + " bytes of dynamic shared memory beside the kernel's " +
         std::to_string(k.static_shared) + " static bytes exceed the device's per-block maximum " +
         std::to_string(most) + " bytes (with opt-in); ask for at most " +
         std::to_string(k.static_shared < most ? most - k.static_shared : 0));
  if (cfg.shared_bytes > 48 * 1024)
    RESIDENT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(cfg.shared_bytes)));
}

inline ::dim3 to_dim3(dims d) { return ::dim3(d.x, d.y, d.z); }

/// Tells the profile collecting, if one is, the shape of a launch of kernel with c on s and the
/// occupancy it reaches. Nothing (one relaxed load) while no profile collects.
template <class... KArgs>
void record_shape(void (*kernel)(KArgs...), const launch_config& c, stream_ref s) {
  if (!profiling()) return;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(c.block.count()), c.shared_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // no figure rather than a failed call
    return;
  }
  call_scope::note_launch(gpu_launch_shape(s.device(), c.grid.count(), c.block.count(), per_sm));
}

/// Launches a kernel that begins with dependent_launch_prologue(), as a programmatic dependent of the
/// stream's previous kernel where dependent launch is on (cuda::dependent_launch).
template <class... KArgs, class... Args>
void launch_dependent(void (*kernel)(KArgs...), const launch_config& c, stream_ref s, Args&&... args) {
  cudaLaunchConfig_t lc{};
  lc.gridDim = to_dim3(c.grid);
  lc.blockDim = to_dim3(c.block);
  lc.dynamicSmemBytes = c.shared_bytes;
  lc.stream = s.native();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  lc.attrs = &attr;
  lc.numAttrs = cuda::dependent_launch(s.device().index()) ? 1 : 0;
  RESIDENT_CUDA_TRY(cudaLaunchKernelEx(&lc, kernel, std::forward<Args>(args)...));
  record_shape(kernel, c, s);
}

template <class F, class... Args>
void launch_functor(cuda_backend, stream_ref s, const launch_config& cfg, F f, Args... args) {
  auto k = functor_kernel<F, Args...>;
  fit_kernel(k, cfg, s.device());
  k<<<to_dim3(cfg.grid), to_dim3(cfg.block), cfg.shared_bytes, s.native()>>>(f, args...);
  detail::cuda::check_launch("launch");
  record_shape(k, cfg, s);
  record_kernel(s.device());
}

template <class... Phases>
void launch_phases_on(cuda_backend, stream_ref s, const launch_config& cfg, Phases... phases) {
  auto k = phases_kernel<Phases...>;
  fit_kernel(k, cfg, s.device());
  k<<<to_dim3(cfg.grid), to_dim3(cfg.block), cfg.shared_bytes, s.native()>>>(cfg.shared_bytes, phases...);
  detail::cuda::check_launch("launch_phases");
  record_shape(k, cfg, s);
  record_kernel(s.device());
}

template <class F>
launch_config for_each_config_on(cuda_backend, std::size_t n) {
  static const occupancy o = occupancy_for(grid_stride_kernel<F>);
  return wave_config(o, n);
}

template <class F>
void for_each_on(cuda_backend, stream_ref s, std::size_t n, F f) {
  auto k = grid_stride_kernel<F>;
  launch_config cfg = for_each_config_on<F>(cuda_backend{}, n);
  k<<<to_dim3(cfg.grid), to_dim3(cfg.block), 0, s.native()>>>(n, f);
  detail::cuda::check_launch("for_each_index");
  record_shape(k, cfg, s);
  record_kernel(s.device());
}

}  // namespace detail

/// Launches a __global__ kernel as kernel[cfg.grid, cfg.block] on s, validated first and checked
/// after, counted in the ledger. CUDA devices only (the CPU backend uses launch() with a functor).
/// @throws invalid_launch, device_mismatch (a CPU stream), cuda_error, device_lost.
template <class... KArgs, class... Args>
void launch_kernel(void (*kernel)(KArgs...), stream_ref s, const launch_config& cfg, Args&&... args) {
  if (!s.device().is_cuda())
    RESIDENT_FAIL("launch_kernel needs a CUDA stream; on the CPU use launch() with a functor", device_mismatch);
  validate(cfg, s.device());
  const device_scope current(s.device());  // the launch and the kernel's limits are the current device's
  detail::fit_kernel(kernel, cfg, s.device());
  kernel<<<detail::to_dim3(cfg.grid), detail::to_dim3(cfg.block), cfg.shared_bytes, s.native()>>>(
      std::forward<Args>(args)...);
  detail::cuda::check_launch("launch_kernel");
  detail::record_shape(kernel, cfg, s);
  detail::record_kernel(s.device());
}

}  // namespace resident
