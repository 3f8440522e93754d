#pragma once
// The seed document's pipeline: three element-wise functions applied one after another, with its FP64
// reference; shared by the CLI's demo, the benchmarks and the experiments.

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "resident/config.hpp"

namespace resident::cli {

RESIDENT_HD inline float func1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD inline float func2(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD inline float func3(float v) { return 0.5f * sinf(v); }

/// The same math in double: the reference every mode is checked against.
inline double seed_reference(double v) { return 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)); }

/// n floats uniform in [0, 1) from a fresh seed, filled in parallel.
inline std::vector<float> seed_input(std::size_t n) {
  std::vector<float> v(n);
  const std::uint64_t seed = std::random_device{}();
#pragma omp parallel
  {
    std::mt19937_64 g(seed);
#pragma omp for schedule(static)
    for (long i = 0; i < long(n); ++i) {
      if (i % 4096 == 0) g.seed(seed + std::uint64_t(i));
      v[std::size_t(i)] = std::generate_canonical<float, 24>(g);
    }
  }
  return v;
}

/// max |y - ref| / max |ref| over all elements, NaN-safe (NaN gives +inf).
inline double seed_error(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  bool bad = false;
#pragma omp parallel for reduction(max : num, den) reduction(|| : bad)
  for (long i = 0; i < long(x.size()); ++i) {
    double r = seed_reference(x[std::size_t(i)]);
    double d = std::fabs(double(y[std::size_t(i)]) - r);
    if (!std::isfinite(double(y[std::size_t(i)]))) bad = true;
    num = std::max(num, d);
    den = std::max(den, std::fabs(r));
  }
  return bad ? INFINITY : (den > 0 ? num / den : num);
}

/// max over i of |y[i] - ref[i]| / ref[i] for the running sums ref[i] = sum of func1(x[0..i]) in
/// double (every element checked; func1's values are positive). NaN gives +inf.
inline double scan_error(const std::vector<float>& x, const std::vector<float>& y) {
  double acc = 0, worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    acc += double(func1(x[i]));
    const double e = std::fabs(double(y[i]) - acc) / acc;
    if (!(e <= worst)) worst = std::isfinite(e) ? e : INFINITY;
  }
  return worst;
}

}  // namespace resident::cli
