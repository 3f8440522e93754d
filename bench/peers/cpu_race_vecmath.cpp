// Which vector math library the CPU backend uses: sinf over 2^22 floats and sqrtf, speed (fastest of 7)
// and the largest error in ULP against FP64, for glibc's libmvec (what GCC calls for a vectorized
// sinf), SLEEF 3.5 (u10 and u35), xsimd 8 and Highway 1.0's contrib/math, all on AVX2. A standalone
// program, not built by CMake (docs/cpu.md has its figures and the choice):
//
//   apt-get install libsleef-dev libhwy-dev libxsimd-dev
//   g++ -std=c++17 -O2 -mavx2 -mfma bench/peers/cpu_race_vecmath.cpp -lsleef -lm -o vecmath
//   ./vecmath -10 10; ./vecmath -1000 1000
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <immintrin.h>
#include <sleef.h>
#include <xsimd/xsimd.hpp>
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
extern "C" __m256 _ZGVdN8v_sinf(__m256);
namespace hn = hwy::HWY_NAMESPACE;
using clk = std::chrono::steady_clock;
static double ulp_err(float got, double ref) {
  float r = (float)ref;
  double u = std::ldexp(1.0, std::ilogb(r) - 23);
  if (r == 0) u = std::ldexp(1.0, -149);
  return std::fabs((double)got - ref) / u;
}
template <class F> void bench(const char* name, const std::vector<float>& a, std::vector<float>& b, F f, bool sinref) {
  double best = 1e9;
  for (int r = 0; r < 7; ++r) { auto t = clk::now(); f(a.data(), b.data(), a.size()); best = std::min(best, std::chrono::duration<double>(clk::now() - t).count()); }
  double mu = 0;
  for (size_t i = 0; i < a.size(); ++i) mu = std::max(mu, ulp_err(b[i], sinref ? std::sin((double)a[i]) : std::sqrt((double)a[i])));
  std::printf("%-22s %7.2f ms  %6.2f ns/elem  max ulp %.3f\n", name, best * 1e3, best * 1e9 / a.size(), mu);
}
int main(int argc, char** argv) {  // [lo, hi]: the range of the inputs
  double lo = argc > 1 ? atof(argv[1]) : -10, hi = argc > 2 ? atof(argv[2]) : 10;
  size_t n = size_t(1) << 22;
  std::vector<float> a(n), b(n);
  std::mt19937 g(1); std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : a) x = d(g);
  std::printf("range [%g, %g]\n", lo, hi);
  bench("scalar sinf", a, b, [](const float* x, float* y, size_t n) { for (size_t i = 0; i < n; ++i) y[i] = ::sinf(x[i]); }, true);
  bench("libmvec avx2 sinf", a, b, [](const float* x, float* y, size_t n) { for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, _ZGVdN8v_sinf(_mm256_loadu_ps(x + i))); }, true);
  bench("sleef u10 avx2", a, b, [](const float* x, float* y, size_t n) { for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, Sleef_sinf8_u10avx2(_mm256_loadu_ps(x + i))); }, true);
  bench("sleef u35 avx2", a, b, [](const float* x, float* y, size_t n) { for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, Sleef_sinf8_u35avx2(_mm256_loadu_ps(x + i))); }, true);
  bench("xsimd avx2 sin", a, b, [](const float* x, float* y, size_t n) { using B = xsimd::batch<float, xsimd::avx2>; for (size_t i = 0; i < n; i += 8) xsimd::sin(B::load_unaligned(x + i)).store_unaligned(y + i); }, true);
  bench("hwy avx2 Sin", a, b, [](const float* x, float* y, size_t n) { hn::ScalableTag<float> dd; for (size_t i = 0; i < n; i += hn::Lanes(dd)) hn::StoreU(hn::Sin(dd, hn::LoadU(dd, x + i)), dd, y + i); }, true);
  for (auto& x : a) x = std::fabs(x);
  bench("sqrtps avx2", a, b, [](const float* x, float* y, size_t n) { for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i))); }, false);
  bench("sleef sqrt u05 avx2", a, b, [](const float* x, float* y, size_t n) { for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, Sleef_sqrtf8_u05avx2(_mm256_loadu_ps(x + i))); }, false);
}
