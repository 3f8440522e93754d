// The CPU backend's vectorized loops against FP64 (docs/cpu.md): every math function glibc's vector
// library backs, in a fused map, a reduction and a scan, within the ULP bound docs/cpu.md states.
// Host compiler only: the CPU backend's SIMD copies are GCC's. CTest runs it once per SIMD path
// (RESIDENT_CPU_SIMD = baseline, avx2, avx512; a path the CPU lacks runs its widest).
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "resident/fuse/pipeline.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "support.hpp"
#include "ulps.hpp"

namespace rs = resident;

namespace {

// glibc states at most 4 ULP for its vector functions; sqrt is exact (one rounding).
constexpr double vector_ulp_bound = 4.0;

const rs::device cpu = rs::device::cpu();

using rs::test::ulps;

template <class T>
std::vector<T> inputs(std::size_t n, double lo, double hi) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  return rs::test::random_vector<T>(n, seed, lo, hi);
}

// Odd n: a tail after the vector loop; over serial_below, so pieces run on the team where there is one.
constexpr std::size_t n = (std::size_t(1) << 16) + 13;

/// The largest error of map<F> over n values in [lo, hi) against ref in FP64.
template <auto F, class T>
double map_ulps(long double (*ref)(long double), double lo, double hi) {
  const std::vector<T> x = inputs<T>(n, lo, hi);
  rs::array<T> in = rs::to_device(std::span<const T>(x), cpu), out(n, cpu);
  rs::map([] RESIDENT_HD(T) { return rs::test::poison<T>(); })(in, out);
  rs::map<F>()(in, out);
  const std::vector<T> y = out.to_host();
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = resident::test::worse(worst, ulps<T>(y[i], ref(x[i])));
  return worst;
}

template <auto F, class T>
double map2_ulps(long double (*ref)(long double, long double), double lo, double hi) {
  const std::vector<T> x = inputs<T>(n, lo, hi), z = inputs<T>(n, lo / 4, hi / 4);
  rs::array<T> a = rs::to_device(std::span<const T>(x), cpu), b = rs::to_device(std::span<const T>(z), cpu), out(n, cpu);
  (rs::zip(a, b) | rs::map<F>())(out);
  const std::vector<T> y = out.to_host();
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = resident::test::worse(worst, ulps<T>(y[i], ref(x[i], z[i])));
  return worst;
}

void report(const char* what, double worst) {
  std::printf("  %-8s %-7s max %.2f ulp\n", what, rs::detail::cpu_simd_name(rs::detail::cpu_simd_path()), worst);
  EXPECT_LE(worst, vector_ulp_bound) << what << " on the " << rs::detail::cpu_simd_name(rs::detail::cpu_simd_path())
                                     << " path";
}

// The functions as a user writes them: plain functions calling the C library.
#define RESIDENT_TEST_UNARY(name) \
  float name##_f(float v) { return name##f(v); }
RESIDENT_TEST_UNARY(sin)
RESIDENT_TEST_UNARY(cos)
RESIDENT_TEST_UNARY(tan)
RESIDENT_TEST_UNARY(exp)
RESIDENT_TEST_UNARY(exp2)
RESIDENT_TEST_UNARY(expm1)
RESIDENT_TEST_UNARY(log)
RESIDENT_TEST_UNARY(log2)
RESIDENT_TEST_UNARY(log10)
RESIDENT_TEST_UNARY(log1p)
RESIDENT_TEST_UNARY(asin)
RESIDENT_TEST_UNARY(acos)
RESIDENT_TEST_UNARY(atan)
RESIDENT_TEST_UNARY(sinh)
RESIDENT_TEST_UNARY(cosh)
RESIDENT_TEST_UNARY(tanh)
RESIDENT_TEST_UNARY(asinh)
RESIDENT_TEST_UNARY(acosh)
RESIDENT_TEST_UNARY(atanh)
RESIDENT_TEST_UNARY(cbrt)
RESIDENT_TEST_UNARY(erf)
RESIDENT_TEST_UNARY(erfc)
RESIDENT_TEST_UNARY(sqrt)
#undef RESIDENT_TEST_UNARY
float pow_f(float x, float y) { return powf(x, y); }
float atan2_f(float y, float x) { return atan2f(y, x); }
float hypot_f(float x, float y) { return hypotf(x, y); }
double sin_d(double v) { return sin(v); }
double cos_d(double v) { return cos(v); }
double exp_d(double v) { return exp(v); }
double log_d(double v) { return log(v); }
double tanh_d(double v) { return tanh(v); }
double pow_d(double x, double y) { return pow(x, y); }

long double ref_sin(long double v) { return std::sin(v); }
long double ref_cos(long double v) { return std::cos(v); }
long double ref_tan(long double v) { return std::tan(v); }
long double ref_exp(long double v) { return std::exp(v); }
long double ref_exp2(long double v) { return std::exp2(v); }
long double ref_expm1(long double v) { return std::expm1(v); }
long double ref_log(long double v) { return std::log(v); }
long double ref_log2(long double v) { return std::log2(v); }
long double ref_log10(long double v) { return std::log10(v); }
long double ref_log1p(long double v) { return std::log1p(v); }
long double ref_asin(long double v) { return std::asin(v); }
long double ref_acos(long double v) { return std::acos(v); }
long double ref_atan(long double v) { return std::atan(v); }
long double ref_sinh(long double v) { return std::sinh(v); }
long double ref_cosh(long double v) { return std::cosh(v); }
long double ref_tanh(long double v) { return std::tanh(v); }
long double ref_asinh(long double v) { return std::asinh(v); }
long double ref_acosh(long double v) { return std::acosh(v); }
long double ref_atanh(long double v) { return std::atanh(v); }
long double ref_cbrt(long double v) { return std::cbrt(v); }
long double ref_erf(long double v) { return std::erf(v); }
long double ref_erfc(long double v) { return std::erfc(v); }
long double ref_sqrt(long double v) { return std::sqrt(v); }
long double ref_pow(long double x, long double y) { return std::pow(x, y); }
long double ref_atan2(long double y, long double x) { return std::atan2(y, x); }
long double ref_hypot(long double x, long double y) { return std::hypot(x, y); }

// Each function over a domain where its result is a normal number, against glibc's long double
// version (64-bit significand).
TEST(cpu_simd, float_functions_within_the_stated_ulps) {
  report("sinf", map_ulps<sin_f, float>(ref_sin, -100, 100));
  report("cosf", map_ulps<cos_f, float>(ref_cos, -100, 100));
  report("tanf", map_ulps<tan_f, float>(ref_tan, -10, 10));
  report("expf", map_ulps<exp_f, float>(ref_exp, -80, 80));
  report("exp2f", map_ulps<exp2_f, float>(ref_exp2, -120, 120));
  report("expm1f", map_ulps<expm1_f, float>(ref_expm1, -80, 80));
  report("logf", map_ulps<log_f, float>(ref_log, 1e-30, 1e30));
  report("log2f", map_ulps<log2_f, float>(ref_log2, 1e-30, 1e30));
  report("log10f", map_ulps<log10_f, float>(ref_log10, 1e-30, 1e30));
  report("log1pf", map_ulps<log1p_f, float>(ref_log1p, -0.99, 1e6));
  report("asinf", map_ulps<asin_f, float>(ref_asin, -1, 1));
  report("acosf", map_ulps<acos_f, float>(ref_acos, -1, 1));
  report("atanf", map_ulps<atan_f, float>(ref_atan, -100, 100));
  report("sinhf", map_ulps<sinh_f, float>(ref_sinh, -80, 80));
  report("coshf", map_ulps<cosh_f, float>(ref_cosh, -80, 80));
  report("tanhf", map_ulps<tanh_f, float>(ref_tanh, -10, 10));
  report("asinhf", map_ulps<asinh_f, float>(ref_asinh, -1e3, 1e3));
  report("acoshf", map_ulps<acosh_f, float>(ref_acosh, 1, 1e3));
  report("atanhf", map_ulps<atanh_f, float>(ref_atanh, -0.99, 0.99));
  report("cbrtf", map_ulps<cbrt_f, float>(ref_cbrt, -1e6, 1e6));
  report("erff", map_ulps<erf_f, float>(ref_erf, -5, 5));
  report("erfcf", map_ulps<erfc_f, float>(ref_erfc, -5, 9));
  report("powf", map2_ulps<pow_f, float>(ref_pow, 0.01, 10));
  report("atan2f", map2_ulps<atan2_f, float>(ref_atan2, -10, 10));
  report("hypotf", map2_ulps<hypot_f, float>(ref_hypot, -1e3, 1e3));
  const double s = map_ulps<sqrt_f, float>(ref_sqrt, 0, 1e6);
  std::printf("  sqrtf    max %.2f ulp\n", s);
  EXPECT_LE(s, 0.5) << "sqrtf is correctly rounded in every path";
}

TEST(cpu_simd, double_functions_within_the_stated_ulps) {
  report("sin", map_ulps<sin_d, double>(ref_sin, -100, 100));
  report("cos", map_ulps<cos_d, double>(ref_cos, -100, 100));
  report("exp", map_ulps<exp_d, double>(ref_exp, -700, 700));
  report("log", map_ulps<log_d, double>(ref_log, 1e-300, 1e300));
  report("tanh", map_ulps<tanh_d, double>(ref_tanh, -20, 20));
  report("pow", map2_ulps<pow_d, double>(ref_pow, 0.01, 10));
}

// An element's value follows its place in the array, never the thread count: pieces start at whole
// vectors (cpu_tuning::piece_items), so an element in a vector call at one thread is in one at two.
// Pieces cut at any element put some values in the scalar tail of a piece (an ulp or two off the
// vector call's: exp(1.0) or log(3.0) in double) depending on the threads.
TEST(cpu_simd, values_do_not_depend_on_the_thread_count) {
  const std::size_t m = 5001;  // two threads cut it at 2501 without the alignment
  const int threads = omp_get_max_threads();
  for (const double v : {1.0, 3.0, 0.7, 2.5, 11.0, -3.3, 0.1, 40.0}) {
    rs::array<double> in = rs::to_device(std::vector<double>(m, v), cpu), one(m, cpu), two(m, cpu);
    omp_set_num_threads(1);
    rs::map<exp_d>()(in, one);
    omp_set_num_threads(2);
    rs::map<exp_d>()(in, two);
    omp_set_num_threads(threads);
    const std::vector<double> a = one.to_host(), b = two.to_host();
    for (std::size_t i = 0; i < m; ++i) ASSERT_EQ(a[i], b[i]) << "exp(" << v << ") at " << i;
    for (std::size_t i = 0; i + rs::detail::cpu_tuning::piece_items < m; ++i) ASSERT_EQ(b[i], b[0]) << "exp(" << v << ") at " << i;
  }
}

// The seed pipeline and the shapes the race measures, against FP64: map, map + sum, map + scan.
float seed1(float v) { return 1.5f * v + 0.5f; }
float seed2(float v) { return sqrtf(v * v + 1.f); }
float seed3(float v) { return 0.5f * sinf(v); }
double seed_ref(double v) { return 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)); }
double to_double(float v) { return double(v); }

TEST(cpu_simd, the_seed_pipeline_its_sum_and_its_scan_match_fp64) {
  const std::vector<float> x = inputs<float>(n, 0, 1);  // the seed's inputs
  rs::array<float> in = rs::to_device(std::span<const float>(x), cpu), out(n, cpu);
  auto seed = rs::map<seed1>() | rs::map<seed2>() | rs::map<seed3>();
  rs::map([] RESIDENT_HD(float) { return rs::test::poison<float>(); })(in, out);
  seed(in, out);
  const std::vector<float> y = out.to_host();
  double worst = 0, sum = 0, scan_worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = resident::test::worse(worst, std::fabs(double(y[i]) - seed_ref(double(x[i]))));
  EXPECT_LE(worst, 1e-6) << "|seed(v) - FP64|: a few float roundings";

  for (std::size_t i = 0; i < n; ++i) sum += double(y[i]);
  const double got = (seed | rs::map<to_double>() | rs::reduce(rs::plus{}, 0.0))(in);
  EXPECT_NEAR(got, sum, 1e-9 * n) << "map + sum in double";
  const float gotf = (seed | rs::reduce(rs::plus{}, 0.f))(in);
  EXPECT_NEAR(double(gotf), sum, 1e-6 * n) << "map + sum in float (lanes)";

  rs::array<double> scanned(n, cpu);
  (seed | rs::map<to_double>() | rs::inclusive_scan(rs::plus{}))(in, scanned);
  const std::vector<double> s = scanned.to_host();
  double acc = 0;
  for (std::size_t i = 0; i < n; ++i) {
    acc += double(y[i]);
    scan_worst = resident::test::worse(scan_worst, std::fabs(s[i] - acc));
  }
  EXPECT_LE(scan_worst, 1e-9 * n) << "map + inclusive scan in double";
}

bool asked_for_no_path() {
  const char* e = std::getenv("RESIDENT_CPU_SIMD");
  const std::string s = e ? e : "";
  return !s.empty() && s != "baseline" && s != "avx2" && s != "avx512";
}

// CTest runs this one with RESIDENT_CPU_SIMD=sse9 (test_cpu_simd.bad_name).
TEST(cpu_simd, a_path_name_that_is_none_is_refused) {
  if (!asked_for_no_path()) GTEST_SKIP() << "RESIDENT_CPU_SIMD names a path or is unset";
  try {
    rs::detail::cpu_simd_path();
    FAIL() << "RESIDENT_CPU_SIMD=" << std::getenv("RESIDENT_CPU_SIMD") << " was accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("baseline, avx2 or avx512"), std::string::npos) << e.what();
  }
  std::vector<float> h(4096, 1.f);
  rs::array<float> x = rs::to_device(std::span<const float>(h), cpu);
  EXPECT_THROW(rs::map<seed3>()(x), rs::invalid_argument) << "a loop refuses it too";
}

TEST(cpu_simd, the_path_is_the_one_asked_for_at_most_the_widest) {
  if (asked_for_no_path()) GTEST_SKIP() << "test_cpu_simd.bad_name";
  const char* e = std::getenv("RESIDENT_CPU_SIMD");
  const std::string path = rs::detail::cpu_simd_name(rs::detail::cpu_simd_path());
  std::printf("  path %s (asked: %s)\n", path.c_str(), e ? e : "widest");
  if (e && std::string(e) == "baseline") {
    EXPECT_EQ(path, "baseline");
  }
  if (e && std::string(e) == "avx2") {
    EXPECT_NE(path, "avx512");
  }
  if (!rs::detail::cpu_simd_copies) {
    EXPECT_EQ(path, "baseline") << "no copies in this build";
  }
}

}  // namespace
