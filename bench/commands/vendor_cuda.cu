#include <cuda_runtime_api.h>
#include <curand.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "resident/detail/cuda_check.hpp"
#include "resident/insight/timing.hpp"
#include "resident/detail/library_check.hpp"
#include "common/seed.hpp"
#include "vendor.hpp"

namespace resident::cli {
namespace {
// Median milliseconds of fill(generator) on s, with cuRAND's Philox4x32-10 generator seeded.
template <class Fill>
double curand_fill_ms(std::uint64_t seed, stream_ref s, int reps, Fill fill) {
  curandGenerator_t g;
  RESIDENT_CURAND_TRY(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  struct destroy {
    curandGenerator_t g;
    ~destroy() { curandDestroyGenerator(g); }
  } d{g};
  RESIDENT_CURAND_TRY(curandSetStream(g, s.native()));
  RESIDENT_CURAND_TRY(curandSetPseudoRandomGeneratorSeed(g, seed));
  return time_region(s, reps, 3, [&] { fill(g); }).median();
}
}  // namespace

double curand_uniform_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps) {
  return curand_fill_ms(seed, s, reps, [&](curandGenerator_t g) {
    RESIDENT_CURAND_TRY(curandGenerateUniform(g, p, n));
  });
}

double curand_normal_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps) {
  return curand_fill_ms(seed, s, reps, [&](curandGenerator_t g) {
    RESIDENT_CURAND_TRY(curandGenerateNormal(g, p, n, 0.f, 1.f));
  });
}

namespace {
__global__ void hand_seed_map(const float* x, float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    y[i] = func3(func2(func1(x[i])));
}
}  // namespace

std::vector<double> hand_chunked_pipeline_ms(const float* in, float* out, std::size_t n, std::size_t chunk,
                                             int streams, int dev, int reps) {
  int was = 0;
  RESIDENT_CUDA_TRY(cudaGetDevice(&was));
  RESIDENT_CUDA_TRY(cudaSetDevice(dev));
  int sms = 0;
  RESIDENT_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  chunk = std::max<std::size_t>(1, std::min(chunk, n));
  // Every stream and buffer is released on the way out, thrown or not.
  struct lane {
    cudaStream_t s = nullptr;
    float* x = nullptr;
    float* y = nullptr;
  };
  struct lanes_t {
    std::vector<lane> v;
    int was;
    ~lanes_t() {
      for (lane& l : v) {
        if (l.s) cudaStreamSynchronize(l.s), cudaStreamDestroy(l.s);
        cudaFree(l.x);
        cudaFree(l.y);
      }
      cudaSetDevice(was);
    }
  } lanes{std::vector<lane>(std::size_t(std::max(streams, 1))), was};
  for (lane& l : lanes.v) {
    RESIDENT_CUDA_TRY(cudaStreamCreateWithFlags(&l.s, cudaStreamNonBlocking));
    RESIDENT_CUDA_TRY(cudaMalloc(&l.x, chunk * sizeof(float)));
    RESIDENT_CUDA_TRY(cudaMalloc(&l.y, chunk * sizeof(float)));
  }
  auto run = [&] {
    std::size_t k = 0;
    for (std::size_t first = 0; first < n; first += chunk, k = (k + 1) % lanes.v.size()) {
      const std::size_t c = std::min(chunk, n - first);
      const lane& l = lanes.v[k];
      RESIDENT_CUDA_TRY(cudaMemcpyAsync(l.x, in + first, c * sizeof(float), cudaMemcpyHostToDevice, l.s));
      hand_seed_map<<<unsigned(sms) * 4, 256, 0, l.s>>>(l.x, l.y, c);
      RESIDENT_CUDA_TRY(cudaGetLastError());
      RESIDENT_CUDA_TRY(cudaMemcpyAsync(out + first, l.y, c * sizeof(float), cudaMemcpyDeviceToHost, l.s));
    }
    for (const lane& l : lanes.v) RESIDENT_CUDA_TRY(cudaStreamSynchronize(l.s));
  };
  run();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

std::pair<int, int> cuda_versions() noexcept {
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  return {driver, runtime};
}

}  // namespace resident::cli
