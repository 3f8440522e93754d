#include <curand.h>

#include <string>

#include "resident/insight/timing.hpp"
#include "resident/error.hpp"
#include "vendor.hpp"

namespace resident::cli {
namespace {
void curand_try(curandStatus_t st, const char* what) {
  if (st != CURAND_STATUS_SUCCESS) throw error(std::string(what) + " failed with cuRAND status " + std::to_string(int(st)));
}

// Median milliseconds of fill(generator) on s, with cuRAND's Philox4x32-10 generator seeded.
template <class Fill>
double curand_fill_ms(std::uint64_t seed, stream_ref s, int reps, Fill fill) {
  curandGenerator_t g;
  curand_try(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10), "curandCreateGenerator");
  struct destroy {
    curandGenerator_t g;
    ~destroy() { curandDestroyGenerator(g); }
  } d{g};
  curand_try(curandSetStream(g, s.native()), "curandSetStream");
  curand_try(curandSetPseudoRandomGeneratorSeed(g, seed), "curandSetPseudoRandomGeneratorSeed");
  return time_region(s, reps, 3, [&] { fill(g); }).median();
}
}  // namespace

double curand_uniform_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps) {
  return curand_fill_ms(seed, s, reps, [&](curandGenerator_t g) {
    curand_try(curandGenerateUniform(g, p, n), "curandGenerateUniform");
  });
}

double curand_normal_fill_ms(float* p, std::size_t n, std::uint64_t seed, stream_ref s, int reps) {
  return curand_fill_ms(seed, s, reps, [&](curandGenerator_t g) {
    curand_try(curandGenerateNormal(g, p, n, 0.f, 1.f), "curandGenerateNormal");
  });
}

}  // namespace resident::cli
