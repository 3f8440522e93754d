#pragma once
/// @file backend.hpp
/// The one dispatch point between backends. Each executor (run_map, run_reduce, run_scan, launch, ...)
/// is an overload set over the backend tags, one overload per backend in that backend's file:
/// `*_cpu.hpp` (host compiler, OpenMP) next to its twin `*_cuda.cuh` (nvcc). Public headers only check
/// arguments and call `dispatch(device, [&](auto backend) { executor(backend, ...); })`: a new backend
/// is a new tag, its files, and one line here.

#include <string>

#include "resident/device/device.hpp"
#include "resident/error.hpp"

namespace resident::detail {

/// Tag of the CPU backend (OpenMP loops; executors in detail/*_cpu.hpp).
struct cpu_backend {};
/// Tag of the CUDA backend (kernels; executors in detail/*_cuda.cuh, compiled by nvcc only).
struct cuda_backend {};

#if defined(__CUDACC__)
inline constexpr bool nvcc_compiled = true;
#else
inline constexpr bool nvcc_compiled = false;
#endif

/// A CUDA device was asked to run kernels from a translation unit nvcc did not compile. A device this
/// process cannot use at all (a library built without CUDA, no such GPU) says so first: compiling the
/// caller with nvcc would not help there. @throws device_unavailable, else invalid_argument.
[[noreturn]] inline void throw_not_nvcc(device d) {
  require(d);
  RESIDENT_FAIL("this code runs on " + d.name() +
                " but its translation unit was not compiled by nvcc; compile it as CUDA "
                "(set_source_files_properties(... LANGUAGE CUDA)) or run on the cpu device");
}

/// Calls run(backend tag of d) and returns what it returns.
template <class Run>
decltype(auto) dispatch(device d, Run&& run) {
  if (d.is_cuda()) {
    if constexpr (nvcc_compiled)
      return run(cuda_backend{});
    else
      throw_not_nvcc(d);
  }
  return run(cpu_backend{});
}

}  // namespace resident::detail
