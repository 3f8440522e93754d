#pragma once
// What the out-of-core-pipeline tests share: stages, a generated source with its reference, the chunk
// size they stream with and the sizes around it.
#include <cstddef>
#include <vector>

#include "resident/out_of_core/out_of_core.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace resident::test::streamed {

inline RESIDENT_HD double combine(float a, double b, int c) { return double(a) * b + double(c); }
inline RESIDENT_HD double square(double v) { return v * v; }
struct ramp {  // element i of a generated source
  RESIDENT_HD float operator()(std::size_t i) const { return float(i % 1000) * 0.001f - 0.25f; }
};
inline double ramp_ref(std::size_t i) { return double(float(i % 1000) * 0.001f - 0.25f); }
constexpr std::size_t chunk = 1024;
inline std::vector<std::size_t> sizes_around_a_chunk() {
  return {0, 1, chunk - 1, chunk, chunk + 1, 5 * chunk + 7};
}
inline std::size_t chunks_of(std::size_t n) { return (n + chunk - 1) / chunk; }
inline void expect_close(const std::vector<float>& out, const std::vector<double>& ref) {
  ASSERT_EQ(out.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 2e-6 * (1.0 + std::abs(ref[i]))) << "element " << i;
}

inline RESIDENT_HD std::int32_t times_four(float v) { return std::int32_t(v * 4.f); }
inline RESIDENT_HD double halved(std::int32_t v) { return double(v) * 0.5; }
inline RESIDENT_HD float add2(float a, float b) { return a + b; }

}  // namespace resident::test::streamed
