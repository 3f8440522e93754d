#pragma once
// Test support: one test body per backend, fresh random inputs, and a leak check after every test.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
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

/// Unit roundoff of T: half an ulp of 1, the relative error of one rounding.
template <class T>
constexpr double unit_roundoff() {
  return double(std::numeric_limits<T>::epsilon()) / 2;
}

/// gamma_k = k u / (1 - k u): bound on the relative error that k roundings of unit roundoff u add
/// (Higham, Accuracy and Stability of Numerical Algorithms, lemma 3.1); +inf once k u reaches 1.
inline double gamma(double k, double u) { return k * u < 1 ? k * u / (1 - k * u) : INFINITY; }

/// A bound on |computed - exact| for a sum of n terms whose absolute values add to abs_sum, folded in
/// Acc in any order (sequential, lanes, blocks, trees: no term passes through more than n - 1 additions,
/// so gamma_{n-1} bounds them all) and rounded once to Out. term_error: the sum of |error| the terms
/// carry into the fold (0 when the reference adds the very terms the code under test adds).
template <class Acc, class Out = Acc>
double sum_tolerance(std::size_t n, double abs_sum, double term_error = 0) {
  const double terms = abs_sum + term_error;
  const double fold = gamma(double(n > 0 ? n - 1 : 0), unit_roundoff<Acc>()) * terms;
  return term_error + fold + unit_roundoff<Out>() * (terms + fold);
}

/// got within tol of ref, where tol is tight enough to see one term go missing or count twice: a
/// term of magnitude smallest_term moves the result by at least smallest_term - tol, more than tol.
/// The planted tests call it with a reference that drops or doubles a term and expect a failure.
inline ::testing::AssertionResult sum_matches(double got, double ref, double tol, double smallest_term) {
  if (!(2 * tol < smallest_term))
    return ::testing::AssertionFailure() << "the tolerance " << tol << " cannot see a term of " << smallest_term
                                         << " go missing: the check could not fail";
  if (!(std::fabs(got - ref) <= tol))
    return ::testing::AssertionFailure() << "sum " << got << " is " << got - ref << " from the reference " << ref
                                         << " (tolerance " << tol << ")";
  return ::testing::AssertionSuccess();
}

/// The first i where the scan output got[i] is off the prefix sum ref[i] by more than the bound of a
/// fold of i + 1 terms in Acc (abs_prefix[i]: the prefix sums of the terms' |.|, each term carrying a
/// relative error of at most term_rel_error); got.size() when every prefix holds.
template <class Acc, class T>
std::size_t first_scan_mismatch(const std::vector<T>& got, const std::vector<double>& ref,
                                const std::vector<double>& abs_prefix, double term_rel_error) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - ref[i]) <= sum_tolerance<Acc>(i + 1, abs_prefix[i], term_rel_error * abs_prefix[i])))
      return i;
  return got.size();
}

/// Sum and sum of |.| of v in long double (exact enough to be the reference: 64-bit significand).
template <class T>
std::pair<double, double> sum_and_abs(const std::vector<T>& v) {
  long double s = 0, a = 0;
  for (const T& x : v) {
    s += static_cast<long double>(x);
    a += std::fabs(static_cast<long double>(x));
  }
  return {double(s), double(a)};
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

/// Instantiates a backend test suite for the CUDA backend alone: cases that mean nothing on the CPU
/// run in the `.gpu` CTest entry only, which reports them skipped where no GPU answers.
#define RESIDENT_CUDA_ONLY(suite) \
  INSTANTIATE_TEST_SUITE_P(backends, suite, ::testing::Values("cuda"), ::resident::test::backend_name)
/// Instantiates a backend test suite for the CPU backend alone (cases that mean nothing on a GPU).
#define RESIDENT_CPU_ONLY(suite) \
  INSTANTIATE_TEST_SUITE_P(backends, suite, ::testing::Values("cpu"), ::resident::test::backend_name)

/// Instantiates a backend test suite for the CPU and the CUDA backend.
#define RESIDENT_BACKENDS(suite) \
  INSTANTIATE_TEST_SUITE_P(backends, suite, ::testing::Values("cpu", "cuda"), ::resident::test::backend_name)
