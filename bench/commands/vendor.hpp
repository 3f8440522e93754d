#pragma once
// Vendor libraries the benchmarks compare against (cuRAND). Implemented in vendor_cuda.cu in CUDA
// builds; vendor_none.cpp says they are missing otherwise.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "resident/device/stream.hpp"

namespace resident::cli {

/// Median milliseconds of cuRAND's Philox4x32-10 generator filling n floats at p (device memory) on s.
double curand_uniform_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps);
/// The same for normals (mean 0, sd 1): curandGenerateNormal, n even.
double curand_normal_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps);

/// The bar an out-of-core pipeline over pinned memory is measured against: the seed map over n floats of
/// pinned host memory from in to out, written by hand as CUDA's samples overlap copies and kernels:
/// chunks of `chunk` floats taken in turn by `streams` streams, each uploading its chunk, mapping it
/// and downloading the result on its own stream (device buffers of its own, outside the pool). Wall
/// milliseconds of each of reps runs after one unmeasured run, on the device with CUDA index dev.
std::vector<double> hand_chunked_pipeline_ms(const float* in, float* out, std::size_t n, std::size_t chunk,
                                             int streams, int dev, int reps);

/// The CUDA driver's and runtime's versions (e.g. 12080 for 12.8); 0 for one that does not answer or
/// a build without CUDA.
std::pair<int, int> cuda_versions() noexcept;

}  // namespace resident::cli
