#pragma once
// Test support: one test body per backend, fresh random inputs, and a leak check after every test.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "resident/resident.hpp"

namespace resident::test {

/// A fresh seed per call (printed on failure through SCOPED_TRACE by the caller).
inline std::uint64_t fresh_seed() {
  static std::random_device rd;
  return (std::uint64_t(rd()) << 32) | rd();
}

/// n values uniform in [lo, hi) from seed: never zeros, never a constant.
template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(g));
  return v;
}

/// A pool limit on d for one scope (set_pool_limit), lifted when the scope ends, however it ends.
struct scoped_pool_limit {
  device d;
  scoped_pool_limit(device dev, std::size_t bytes) : d(dev) { set_pool_limit(d, bytes); }
  ~scoped_pool_limit() { clear_pool_limit(d); }
  scoped_pool_limit(const scoped_pool_limit&) = delete;
  scoped_pool_limit& operator=(const scoped_pool_limit&) = delete;
};

/// Value written over outputs before a call, so an element the call skipped shows up.
template <class T>
constexpr T poison() {
  if constexpr (std::is_floating_point_v<T>) return T(-12345.678);
  else return T(0x5A5A5A5A);
}

/// Relative error ||out - ref|| / ||ref|| in double; NaN-safe (NaN anywhere gives +inf).
template <class T>
double rel_error(const std::vector<T>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    double d = double(out[i]) - ref[i];
    if (!std::isfinite(double(out[i]))) return INFINITY;
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// Parameter of backend tests: "cpu" or "cuda". CUDA cases skip, saying why, where no GPU answers.
class backend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && cuda_device_count() == 0)
      GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
    dev = GetParam() == "cuda" ? device::cuda(0) : device::cpu();
    outstanding_before = pool_stats(dev).outstanding;
  }
  void TearDown() override {
    if (IsSkipped()) return;
    synchronize(dev);
    EXPECT_EQ(pool_stats(dev).outstanding, outstanding_before) << "the test leaked pool allocations";
  }
  device dev = device::cpu();
  std::uint64_t outstanding_before = 0;
};

inline std::string backend_name(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

/// call() must throw invalid_argument whose message contains `says`.
template <class F>
void expect_invalid(F&& call, const char* says) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one saying " << says;
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

}  // namespace resident::test

/// Instantiates a backend test suite for the CPU and the CUDA backend.
#define RESIDENT_BACKENDS(suite) \
  INSTANTIATE_TEST_SUITE_P(backends, suite, ::testing::Values("cpu", "cuda"), ::resident::test::backend_name)
