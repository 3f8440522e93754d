#pragma once
// The seed's three stages, as the tests use them: float stages for both backends and their FP64 math.

#include <algorithm>
#include <cmath>
#include <vector>

#include "resident/config.hpp"
#include "support.hpp"

namespace resident::test {

RESIDENT_HD inline float f1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD inline float f2(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD inline float f3(float v) { return 0.5f * sinf(v); }
inline double r1(double v) { return 1.5 * v + 0.5; }
inline double r2(double v) { return std::sqrt(v * v + 1.0); }
inline double r3(double v) { return 0.5 * std::sin(v); }
/// The whole seed pipeline in FP64.
inline double seed_ref(double v) { return r3(r2(r1(v))); }

/// The seed chain's float values for in as dev's fused map computes them, each checked against FP64
/// here: the terms a reduction over the chain must add, with their exact-enough sum, sum of |.| and
/// smallest |.|. A reduction kernel may contract a stage the map's did not: its terms may sit one
/// rounding away, which term_error() allows.
struct seed_terms {
  std::vector<float> v;
  double sum = 0, abs_sum = 0, smallest = INFINITY;
  /// The terms' own error entering another kernel's fold: one float rounding each.
  double term_error() const { return unit_roundoff<float>() * abs_sum; }
  /// The same terms with term k dropped (times 0) or doubled (times 2): references a check must refuse.
  double sum_with(std::size_t k, double times) const { return sum + (times - 1) * double(v[k]); }
};
inline seed_terms seed_terms_on(device dev, const std::vector<float>& in, double scale = 1) {
  array<float> x = to_device(in, dev);
  array<float> y = to_device(std::vector<float>(in.size(), poison<float>()), dev);
  (map<f1>() | map<f2>() | map<f3>())(x, y);
  seed_terms t;
  t.v = y.to_host();
  std::vector<double> ref(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) ref[i] = seed_ref(in[i]);
  EXPECT_LT(rel_error(t.v, ref), 1e-6) << "the seed chain's values against FP64";
  for (float& e : t.v) e = float(scale * double(e));
  const auto [s, a] = sum_and_abs(t.v);
  t.sum = s;
  t.abs_sum = a;
  for (float e : t.v) t.smallest = std::min(t.smallest, double(std::fabs(e)));
  return t;
}

}  // namespace resident::test
