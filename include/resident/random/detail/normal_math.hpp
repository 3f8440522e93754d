#pragma once
/// @file normal_math.hpp
/// The logarithm, sine and cosine of the Box-Muller transform, computed by the library itself so that
/// normals are the same bits on every backend (the CPU's libm and CUDA's libdevice differ in the last
/// bit). Each function takes the integer that the uniform draw is made of, so the range reduction is
/// exact integer work, and evaluates a fixed polynomial with one rule for rounding:
/// every a * b + c is written as an explicit fma (fmaf / fma: one rounding on both backends), every
/// other product goes through mul_rn (on the device __fmul_rn / __dmul_rn, which nvcc never contracts
/// into an fma; on the host a plain product). The library's host code for normals is
/// src/random/normal.cpp, compiled with -ffp-contract=off; elsewhere on the host these functions give
/// the same bits where the compiler does not contract products into fmas (it cannot on baseline
/// x86-64, which has no fma instruction). Division and square roots are IEEE (correctly rounded) on
/// both backends.
///
/// Error bounds, tested against double (long double for the double versions) std::log, std::sin and
/// std::cos over the inputs the transform produces (tests/random/test_random.cpp, normal_math.*):
///   minus_two_log_24:  below 1 ulp of float (0.82 at worst), every one of the 2^24 inputs
///   sincos_turn_24:    absolute error below 1.5 x 2^-24 (1.44 at worst), every one of the 2^24 inputs
///   minus_two_log_53:  below 1 ulp of double (0.82 at worst), 2^22 sampled inputs, the ends
///   sincos_turn_53:    absolute error below 2^-52 (1.4 x 2^-53 at worst), the same samples and the
///                      octant edges

#include <cmath>
#include <cstdint>
#include <cstring>

#include "resident/config.hpp"

namespace resident::random::detail {

/// A product that is never fused with a following sum (see the file comment).
RESIDENT_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
RESIDENT_HD inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

template <class To, class From>
RESIDENT_HD inline To bits_as(From f) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  memcpy(&t, &f, sizeof t);
  return t;
}

/// -2 ln(m 2^-24) for m in [1, 2^24]: the squared radius of Box-Muller from a float uniform in (0, 1].
/// m 2^-24 = 2^e (1 + x) with 1 + x in [sqrt(1/2), sqrt(2)), both exact from the bits of float(m); then
/// ln(1 + x) = x - x^2 / 2 + x^3 P(x), with Cephes' logf coefficients, and e ln 2 in two parts. Every
/// term is scaled by -2 (exact), so no product by -2 is left at the end.
RESIDENT_HD inline float minus_two_log_24(std::uint32_t m) {
  constexpr float k = -2.f;
  const std::uint32_t b = bits_as<std::uint32_t>(float(m)) + (0x3f800000u - 0x3f3504f3u);
  // e = (b >> 23) - 151 without an integer conversion: 2^23 + (b >> 23) is a float, less 2^23 + 151.
  const float e = bits_as<float>(0x4b000000u + (b >> 23)) - 8388759.f;
  const float x = bits_as<float>((b & 0x007fffffu) + 0x3f3504f3u) - 1.f;
  const float z = mul_rn(x, x);
  float p = k * 7.0376836292e-2f;
  p = fmaf(p, x, k * -1.1514610310e-1f);
  p = fmaf(p, x, k * 1.1676998740e-1f);
  p = fmaf(p, x, k * -1.2420140846e-1f);
  p = fmaf(p, x, k * 1.4249322787e-1f);
  p = fmaf(p, x, k * -1.6668057665e-1f);
  p = fmaf(p, x, k * 2.0000714765e-1f);
  p = fmaf(p, x, k * -2.4999993993e-1f);
  p = fmaf(p, x, k * 3.3333331174e-1f);
  float y = mul_rn(mul_rn(x, z), p);
  y = fmaf(e, k * -2.12194440e-4f, y);  // ln 2 = 0.693359375 (exact times e) - 2.12194440e-4
  y = z + y;                            // -2 (-x^2 / 2)
  return fmaf(e, k * 0.693359375f, fmaf(k, x, y));
}

template <class T>
struct cos_sin {
  T c, s;
};

/// cos and sin of the angle 2 pi k 2^-24, k in [0, 2^24). The nearest multiple q of a quarter turn is
/// taken off in integers; the rest is (pi / 4) s with s = j 2^-21 in [-1, 1) exact, and Cephes' sinf
/// and cosf polynomials (for |x| <= pi / 4) are evaluated in s (coefficients times (pi / 4)^k).
RESIDENT_HD inline cos_sin<float> sincos_turn_24(std::uint32_t k) {
  const std::uint32_t t = k + (1u << 21);  // quarter turns q in bits 22 and 23
  // s = j 2^-21, j = (t mod 2^22) - 2^21, without an integer conversion: 1.5 2^23 + j is a float.
  const float s = fmaf(bits_as<float>(0x4b400000u - (1u << 21) + (t & 0x3fffffu)), 0x1p-21f, -6.f);
  const float z = mul_rn(s, s);
  float ps = -0x1.2dc85ap-15f;
  ps = fmaf(ps, z, 0x1.466004p-9f);
  ps = fmaf(ps, z, -0x1.4abbbep-4f);
  ps = fmaf(ps, z, 0x1.921fb6p-1f);
  const float sn = mul_rn(s, ps);
  float pc = 0x1.dacc30p-19f;
  pc = fmaf(pc, z, -0x1.55c9e0p-12f);
  pc = fmaf(pc, z, 0x1.03c1e8p-6f);
  pc = fmaf(pc, z, -0x1.3bd3ccp-2f);
  const float cs = fmaf(pc, z, 1.f);
  // The angle is q quarter turns plus (pi / 4) s: an odd q swaps cos and sin; cos is negated for q = 1,
  // 2 (bit 1 of q + 1) and sin for q = 2, 3 (bit 1 of q), each bit moved to the sign bit.
  const bool odd = (t & (1u << 22)) != 0;
  const std::uint32_t neg_c = ((t + (1u << 22)) << 8) & 0x80000000u, neg_s = (t << 8) & 0x80000000u;
  return {bits_as<float>(bits_as<std::uint32_t>(odd ? sn : cs) ^ neg_c),
          bits_as<float>(bits_as<std::uint32_t>(odd ? cs : sn) ^ neg_s)};
}

/// -2 ln(m 2^-53) for m in [1, 2^53] (fdlibm's log: ln(1 + x) through s = x / (2 + x) and a minimax
/// polynomial in s^2, e ln 2 in two parts).
RESIDENT_HD inline double minus_two_log_53(std::uint64_t m) {
  const std::uint64_t b = bits_as<std::uint64_t>(double(m)) + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
  const double e = bits_as<double>(0x4330000000000000ull + (b >> 52)) - 4503599627371572.0;  // 2^52 + 1076
  const double x = bits_as<double>((b & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull) - 1.0;
  const double hfsq = mul_rn(mul_rn(0.5, x), x);
  const double s = x / (2.0 + x);
  const double z = mul_rn(s, s), w = mul_rn(z, z);
  const double t1 = mul_rn(w, fma(w, fma(w, 1.531383769920937332e-01, 2.222219843214978396e-01), 3.999999999940941908e-01));
  const double t2 = mul_rn(
      z, fma(w, fma(w, fma(w, 1.479819860511658591e-01, 1.818357216161805012e-01), 2.857142874366239149e-01),
             6.666666666666735130e-01));
  const double r = t2 + t1;
  const double a = fma(s, hfsq + r, mul_rn(e, 1.90821492927058770002e-10));  // ln 2, low part
  const double l = mul_rn(e, 6.93147180369123816490e-01) - ((hfsq - a) - x);   // high part: e times it is exact
  return mul_rn(-2.0, l);
}

/// cos and sin of the angle 2 pi k 2^-53, k in [0, 2^53): as sincos_turn_24, with fdlibm's kernel
/// sine and cosine polynomials (|x| <= pi / 4) in s = j 2^-50.
RESIDENT_HD inline cos_sin<double> sincos_turn_53(std::uint64_t k) {
  const std::uint64_t t = k + (1ull << 50);  // quarter turns q in bits 51 and 52
  const double s = fma(bits_as<double>(0x4338000000000000ull - (1ull << 50) + (t & ((1ull << 51) - 1))), 0x1p-50, -6.0);
  const double z = mul_rn(s, s);
  double ps = 6.878300920269472e-12;
  ps = fma(ps, z, -1.7571531104690878e-09);
  ps = fma(ps, z, 3.133616263034784e-07);
  ps = fma(ps, z, -3.6576204161140105e-05);
  ps = fma(ps, z, 0.0024903945701894793);
  ps = fma(ps, z, -0.08074551218828062);
  ps = fma(ps, z, 0.7853981633974483);
  const double sn = mul_rn(s, ps);
  double pc = -3.8603190178625913e-13;
  pc = fma(pc, z, 1.1500589613778081e-10);
  pc = fma(pc, z, -2.461136515323998e-08);
  pc = fma(pc, z, 3.590860446838099e-06);
  pc = fma(pc, z, -0.0003259918869270431);
  pc = fma(pc, z, 0.015854344243815478);
  pc = fma(pc, z, -0.30842513753404244);
  const double cs = fma(pc, z, 1.0);
  const bool odd = (t & (1ull << 51)) != 0;
  const std::uint64_t neg_c = ((t + (1ull << 51)) << 11) & (1ull << 63), neg_s = (t << 11) & (1ull << 63);
  return {bits_as<double>(bits_as<std::uint64_t>(odd ? sn : cs) ^ neg_c),
          bits_as<double>(bits_as<std::uint64_t>(odd ? cs : sn) ^ neg_s)};
}

/// The two normals (mean + sd r cos, mean + sd r sin) of Box-Muller from two words: u1 = (a >> 8) + 1
/// in 2^-24 units (in (0, 1], so the log stays finite), the angle (b >> 8) in 2^-24 turns.
RESIDENT_HD inline cos_sin<float> normal_pair(std::uint32_t a, std::uint32_t b, float mean, float sd) {
  const float r = sqrtf(minus_two_log_24((a >> 8) + 1u));
  const cos_sin<float> cs = sincos_turn_24(b >> 8);
  return {fmaf(sd, mul_rn(r, cs.c), mean), fmaf(sd, mul_rn(r, cs.s), mean)};
}

/// The same for doubles from four words: u1 = 1 - u (u from the 53 bits of w0, w1, as unit_double),
/// the angle from the 53 bits of w2, w3 in 2^-53 turns.
RESIDENT_HD inline cos_sin<double> normal_pair(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2, std::uint32_t w3,
                                               double mean, double sd) {
  const std::uint64_t m1 = (std::uint64_t(1) << 53) - ((std::uint64_t(w0) << 21) ^ (w1 >> 11));
  const std::uint64_t m2 = (std::uint64_t(w2) << 21) ^ (w3 >> 11);
  const double r = sqrt(minus_two_log_53(m1));
  const cos_sin<double> cs = sincos_turn_53(m2);
  return {fma(sd, mul_rn(r, cs.c), mean), fma(sd, mul_rn(r, cs.s), mean)};
}

/// The same pairs, computed by the library's host code (src/random/normal.cpp: with the fma instruction
/// where the processor has one, chosen once at load time, else libm's fma; the same bits either way).
[[gnu::const]] cos_sin<float> host_normal_pair(std::uint32_t a, std::uint32_t b, float mean, float sd);
[[gnu::const]] cos_sin<double> host_normal_pair(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2,
                                                std::uint32_t w3, double mean, double sd);

/// normal_pair inline on the device; on the host, host_normal_pair (the same bits, faster there).
RESIDENT_HD inline cos_sin<float> normal_pair_here(std::uint32_t a, std::uint32_t b, float mean, float sd) {
#if defined(__CUDA_ARCH__)
  return normal_pair(a, b, mean, sd);
#else
  return host_normal_pair(a, b, mean, sd);
#endif
}
RESIDENT_HD inline cos_sin<double> normal_pair_here(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2,
                                                    std::uint32_t w3, double mean, double sd) {
#if defined(__CUDA_ARCH__)
  return normal_pair(w0, w1, w2, w3, mean, sd);
#else
  return host_normal_pair(w0, w1, w2, w3, mean, sd);
#endif
}

}  // namespace resident::random::detail
