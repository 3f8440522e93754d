#pragma once
// The oracle the random tests hold the library to: the documented counter layout and the textbook maps
// of words to values (Random123's Philox where its headers are found, Lemire's integers, Box-Muller in
// long double), written apart from the library.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "resident/random/random.hpp"

#if RESIDENT_HAVE_RANDOM123
#include <Random123/philox.h>
#endif

namespace resident::test::random_oracle {

namespace rr = resident::random;

// Block c of stream `seed` (counter c low, c high, attempt, 0; key seed low, seed high) by Random123's
// Philox4x32-10. Where its headers are missing, by philox4x32_10, itself held to Random123's published
// answers above.
inline std::array<std::uint32_t, 4> oracle_block(std::uint64_t seed, std::uint64_t c, std::uint32_t attempt = 0) {
#if RESIDENT_HAVE_RANDOM123
  r123::Philox4x32_R<10> philox;
  const auto w = philox({{std::uint32_t(c), std::uint32_t(c >> 32), attempt, 0u}},
                        {{std::uint32_t(seed), std::uint32_t(seed >> 32)}});
  return {w[0], w[1], w[2], w[3]};
#else
  const auto w = rr::philox4x32_10(rr::words4{{std::uint32_t(c), std::uint32_t(c >> 32), attempt, 0u}},
                                   std::uint32_t(seed), std::uint32_t(seed >> 32));
  return {w.w[0], w.w[1], w.w[2], w.w[3]};
#endif
}

// Word p of stream `seed` as the documented layout defines it, computed on the host.
inline std::uint32_t host_word(std::uint64_t seed, std::uint64_t p) { return oracle_block(seed, p / 4)[p % 4]; }

// A value as the oracle has it: exact, or within tol of value (long double: 64-bit significand).
struct oracle_value {
  long double value, tol;
};
template <class T>
::testing::AssertionResult agrees(T got, const oracle_value& o) {
  const long double d = std::fabs(static_cast<long double>(got) - o.value);
  if (o.tol == 0 ? static_cast<long double>(got) == o.value : d <= o.tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " against the oracle's " << double(o.value) << " (off " << double(d)
                                       << ", tolerance " << double(o.tol) << ")";
}
inline long double ulp_of(long double x, int digits) { return std::ldexp(1.0L, std::ilogb(std::fabs(x) + LDBL_MIN) - digits + 1); }

// Uniform [0, 1): the top 24 bits of word i (float); 53 bits of words 2i, 2i + 1 (double), as integers
// times a power of two: exact.
inline long double oracle_unit(const rr::unit_distribution<float>& d, std::uint64_t p) {
  return static_cast<long double>(host_word(d.seed, p) >> 8) / 16777216.0L;
}
inline long double oracle_unit(const rr::unit_distribution<double>& d, std::uint64_t p) {
  const auto w = oracle_block(d.seed, p / 2);
  const int j = int(p % 2) * 2;
  const std::uint64_t m = (std::uint64_t(w[j]) << 21) ^ (w[j + 1] >> 11);
  return static_cast<long double>(m) / 9007199254740992.0L;
}
template <class T>
oracle_value oracle(const rr::unit_distribution<T>& d, std::size_t i) { return {oracle_unit(d, d.offset + i), 0}; }
inline oracle_value oracle(const rr::bits_distribution& d, std::size_t i) {
  return {static_cast<long double>(host_word(d.seed, d.offset + i)), 0};
}
// low + (high - low) u in long double; the library rounds twice (two roundings of T's size at most).
template <class T>
oracle_value oracle(const rr::uniform_distribution<T>& d, std::size_t i) {
  const long double u = oracle_unit(rr::unit_distribution<T>{{}, d.seed, d.offset}, d.offset + i);
  const long double lo = d.low, hi = d.high;
  return {lo + (hi - lo) * u, 2 * ulp_of(std::max(std::fabs(lo), std::fabs(hi)), std::numeric_limits<T>::digits)};
}
// Lemire's multiply-shift with rejection, a rejected word redrawn at the next attempt of its block.
template <class T>
oracle_value oracle(const rr::integer_distribution<T>& d, std::size_t i) {
  const std::uint64_t p = d.offset + i, c = p / 4;
  const int lane = int(p % 4);
  std::uint64_t m = std::uint64_t(oracle_block(d.seed, c)[lane]) * d.range;
  const std::uint32_t threshold = std::uint32_t(-d.range) % d.range;
  for (std::uint32_t attempt = 1; std::uint32_t(m) < threshold; ++attempt)
    m = std::uint64_t(oracle_block(d.seed, c, attempt)[lane]) * d.range;
  return {static_cast<long double>(T(std::uint32_t(d.low) + std::uint32_t(m >> 32))), 0};
}
// Box-Muller in long double: r = sqrt(-2 ln u1), u1 in (0, 1]; z = r cos(2 pi t) (even lane) or
// r sin(2 pi t) (odd). Floats take u1 and t from the top 24 bits of a word pair; doubles from 53 bits
// of words 0-1 (u1 = 1 - u) and 2-3. The library's log is within an ulp, its sine and cosine within
// 1.5 2^-24 (float; double within its own tests' bounds), three roundings after: tol allows 8 ulps of
// r plus two of the value.
template <class T>
oracle_value oracle(const rr::normal_distribution<T>& d, std::size_t i) {
  const std::uint64_t p = d.offset + i;
  constexpr int digits = std::numeric_limits<T>::digits;
  long double u1, t;
  if constexpr (sizeof(T) == 4) {
    const auto w = oracle_block(d.seed, p / 4);
    const int j = int(p % 4) & ~1;
    u1 = static_cast<long double>((w[j] >> 8) + 1) / 16777216.0L;
    t = static_cast<long double>(w[j + 1] >> 8) / 16777216.0L;
  } else {
    const auto w = oracle_block(d.seed, p / 2);
    const std::uint64_t m1 = (std::uint64_t(1) << 53) - ((std::uint64_t(w[0]) << 21) ^ (w[1] >> 11));
    u1 = static_cast<long double>(m1) / 9007199254740992.0L;
    t = static_cast<long double>((std::uint64_t(w[2]) << 21) ^ (w[3] >> 11)) / 9007199254740992.0L;
  }
  const long double two_pi = 6.283185307179586476925286766559L;
  const long double r = std::sqrt(-2 * std::log(u1));
  const long double z = r * ((p % 2) ? std::sin(two_pi * t) : std::cos(two_pi * t));
  const long double v = static_cast<long double>(d.mean) + static_cast<long double>(d.sd) * z;
  const long double eps = std::ldexp(1.0L, 1 - digits);
  return {v, std::fabs(static_cast<long double>(d.sd)) * 8 * eps * (r + 1) + 2 * ulp_of(v, digits)};
}

}  // namespace resident::test::random_oracle
