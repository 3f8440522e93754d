#pragma once
/// @file cuda_check.hpp
/// RESIDENT_CUDA_TRY for code that includes the CUDA runtime headers (src/cuda, .cuh files).

#include <cuda_runtime_api.h>

#include "resident/error.hpp"

namespace resident::detail {
/// Throws device_lost for errors that poison the context, cuda_error otherwise.
[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
/// True for errors after which the context is unusable.
bool is_sticky(cudaError_t e) noexcept;
}  // namespace resident::detail

/// Calls a CUDA runtime function and throws resident::cuda_error (or device_lost) with the call's
/// text, file:line and the error name when it fails.
#define RESIDENT_CUDA_TRY(call)                                                   \
  do {                                                                            \
    cudaError_t resident_e_ = (call);                                             \
    if (resident_e_ != cudaSuccess)                                               \
      ::resident::detail::throw_cuda(resident_e_, #call, __FILE__, __LINE__);     \
  } while (0)
