#pragma once
// Vendor libraries the benchmarks compare against (cuRAND). Implemented in vendor_cuda.cu in CUDA
// builds; vendor_none.cpp says they are missing otherwise.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "resident/device/stream.hpp"

namespace resident::cli {

/// Median milliseconds of cuRAND's Philox4x32-10 generator filling n floats at p (device memory) on s.
double curand_uniform_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps);
/// The same for normals (mean 0, sd 1): curandGenerateNormal, n even.
double curand_normal_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps);

/// The CUDA driver's and runtime's versions (e.g. 12080 for 12.8); 0 for one that does not answer or
/// a build without CUDA.
std::pair<int, int> cuda_versions() noexcept;

}  // namespace resident::cli
