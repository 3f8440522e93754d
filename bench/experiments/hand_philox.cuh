// A Philox fill written by hand (one block of four words per thread per float4): the yardstick the
// experiments hold the library's generator kernels to.
#pragma once
#include <cstddef>
#include <cstdint>

#include "resident/random/philox.hpp"

__global__ void philox_fill(float4* y, std::size_t n4, std::uint64_t seed) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n4; j += stride) {
    const resident::random::words4 w = resident::random::philox_block(seed, j);
    y[j] = make_float4(resident::random::unit_float(w.w[0]), resident::random::unit_float(w.w[1]),
                       resident::random::unit_float(w.w[2]), resident::random::unit_float(w.w[3]));
  }
}
