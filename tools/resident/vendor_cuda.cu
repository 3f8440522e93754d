#include <cuda_runtime_api.h>
#include <curand.h>

#include <string>

#include "resident/insight/timing.hpp"
#include "resident/detail/library_check.hpp"
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

std::pair<int, int> cuda_versions() noexcept {
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  return {driver, runtime};
}

}  // namespace resident::cli
