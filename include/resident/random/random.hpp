#pragma once
/// @file random.hpp
/// Random numbers generated INTO existing arrays, and as source stages of fused pipelines.
///
/// Thread safety: there is no generator state to share: a stream of numbers is (seed, offset), values
/// computed from their position. Fills from several threads into different arrays run concurrently.
///
/// Counter-based: value i of the stream (seed, offset) depends only on seed and its position
/// p = (offset + i) mod 2^64. For 32-bit results, p selects Philox block p / 4 and its word p % 4; for
/// 64-bit results, block p / 2 and words 2(p % 2), 2(p % 2) + 1. Positions wrap, so block numbers do
/// too: after the last block (2^62 - 1, or 2^63 - 1 for 64-bit results) comes block 0, on every path
/// (one value, blocks, vectors, the GPU's block loop). So the numbers are the same on the CPU and the
/// GPU and whatever the launch configuration, a fill of [0, n) equals the fills of [0, k) and of [k, n)
/// at offset k, for any offset, and nothing is allocated: the generator is a few registers.
/// Normals are computed by the library's own log, sine and cosine (detail/normal_math.hpp), so they are
/// the same bits on both backends too.
///
///   rs::random::fill_uniform(x, seed);                       // x[i] in [0, 1), one kernel
///   rs::random::fill_normal(x, seed, offset, 0.f, 1.f);
///   double pi = 4.0 * (rs::random::uniform_points<float>(seed) | rs::map(inside) |
///                      rs::reduce(rs::plus{}, std::uint64_t(0)))(n) / n;   // numbers never touch memory

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "resident/error.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/random/detail/normal_math.hpp"
#include "resident/random/philox.hpp"

namespace resident::random {

namespace detail {

/// Block c of a stream with P values a block, block numbers taken mod 2^64 / P: position p =
/// (offset + i) mod 2^64 lies in block p / P, so the block after the last is block 0.
template <int P>
RESIDENT_HD constexpr std::uint64_t wrap_block(std::uint64_t c) {
  static_assert(P == 1 || P == 2 || P == 4, "values per block: 1, 2 or 4");
  return c & (~std::uint64_t(0) / std::uint64_t(P));
}

/// V consecutive values of a distribution D from value i on, when offset + i begins a Philox block:
/// every lane is a compile-time constant once unrolled, so the words stay in registers.
template <int V, class D>
RESIDENT_HD resident::detail::values<typename D::value_type, V> block_values_aligned(const D& d, std::size_t i) {
  constexpr int P = D::per_block;
  resident::detail::values<typename D::value_type, V> out;
  const std::uint64_t c = (d.offset + i) / P;
#pragma unroll
  for (int b = 0; b < (V + P - 1) / P; ++b) {
    const std::uint64_t cb = wrap_block<P>(c + std::uint64_t(b));
    const words4 w = philox_block(d.seed, cb);
#pragma unroll
    for (int l = 0; l < P; ++l)
      if (b * P + l < V) out.v[b * P + l] = d.from(w, l, cb);
  }
  return out;
}

/// V consecutive values of a distribution D, drawing each Philox block once: D gives per_block
/// (values per block) and from(words, lane, block) -> value.
template <int V, class D>
RESIDENT_HD resident::detail::values<typename D::value_type, V> block_values(const D& d, std::size_t i) {
  constexpr int P = D::per_block;
  resident::detail::values<typename D::value_type, V> out;
  const std::uint64_t p = d.offset + i;
  const std::uint64_t c = p / P;
  if (p % P == 0) return block_values_aligned<V>(d, i);
  // Not aligned: the values span NB consecutive blocks; each is drawn once (NB Philox calls, not one per
  // value) and every value picks its block with selects, which keep the words in registers.
  constexpr int NB = (V + P - 1) / P + 1;
  words4 w[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) w[b] = philox_block(d.seed, wrap_block<P>(c + std::uint64_t(b)));
  const int r = int(p % P);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int b = (r + k) / P;
    words4 pick = w[0];
#pragma unroll
    for (int bb = 1; bb < NB; ++bb)
      if (b == bb) pick = w[bb];
    out.v[k] = d.from(pick, (r + k) % P, wrap_block<P>(c + std::uint64_t(b)));
  }
  return out;
}

template <class D>
RESIDENT_HD typename D::value_type one_value(const D& d, std::size_t i) {
  const std::uint64_t p = d.offset + i;
  const std::uint64_t c = p / D::per_block;
  return d.from(philox_block(d.seed, c), int(p % D::per_block), c);
}

template <class T>
inline constexpr bool is_real = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// What every counter-based distribution D offers from its from(words, lane, block): value i, and V
/// consecutive values drawing each Philox block once (for fused kernels). Aggregates built on it are
/// initialized as D{{}, seed, offset, ...}.
template <class D>
struct counter_based {
  using block_generator = void;
  using aligned_blocks = void;
  RESIDENT_HD auto operator()(std::size_t i) const { return one_value(static_cast<const D&>(*this), i); }
  template <int V>
  RESIDENT_HD auto block(std::size_t i) const {
    return block_values<V>(static_cast<const D&>(*this), i);
  }
  /// The Philox block that holds value 0, and how many of its values precede value 0.
  RESIDENT_HD std::uint64_t first_block() const { return static_cast<const D&>(*this).offset / D::per_block; }
  RESIDENT_HD std::size_t block_lead() const {
    return std::size_t(static_cast<const D&>(*this).offset % D::per_block);
  }
  /// The per_block values of Philox block c (taken mod 2^64 / per_block: the GPU's loop counts past the
  /// last block into block 0).
  RESIDENT_HD auto values_of_block(std::uint64_t c) const {
    const D& d = static_cast<const D&>(*this);
    c = wrap_block<D::per_block>(c);
    resident::detail::values<typename D::value_type, D::per_block> out;
    const words4 w = philox_block(d.seed, c);
#pragma unroll
    for (int l = 0; l < D::per_block; ++l) out.v[l] = d.from(w, l, c);
    return out;
  }
};

}  // namespace detail

/// Uniform in [0, 1): float from the top 24 bits of a word, double from 53 bits of two words. The
/// common case of uniform_distribution, with the same bits, without its scaling arithmetic.
template <class T>
struct unit_distribution : detail::counter_based<unit_distribution<T>> {
  static_assert(detail::is_real<T>, "unit_distribution<T>: T is float or double");
  /// The type of the values.
  using value_type = T;
  /// Values drawn from one Philox block (four 32-bit words).
  static constexpr int per_block = sizeof(T) == 4 ? 4 : 2;
  ///@{
  /// The stream's seed, and the position of value 0 in it (value i is value offset + i of the stream).
  std::uint64_t seed, offset;
  ///@}
  /// Value `lane` of Philox block c, whose words are w (what counter_based builds on).
  RESIDENT_HD T from(const words4& w, int lane, std::uint64_t) const {
    if constexpr (sizeof(T) == 4)
      return unit_float(word(w, lane));
    else
      return unit_double(word(w, 2 * lane), word(w, 2 * lane + 1));
  }
};

namespace detail {
/// The largest value below x (x finite): the top of a half-open range [low, x).
template <class T>
RESIDENT_HD T below(T x) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  if (x == T(0)) return -bits_as<T>(U(1));  // below +0 and -0: the negative denormal closest to 0
  const U b = bits_as<U>(x);
  return bits_as<T>(x > T(0) ? U(b - 1) : U(b + 1));
}
}  // namespace detail

/// Uniform in [low, high) for finite low < high (what uniform() and fill_uniform check): the convex
/// combination low (1 - u) + high u with u from unit_distribution, rounded, and a result that rounds
/// up to high replaced by the largest value below high. float: both products are exact in double
/// (24 x 24 bits), so the one rounding of their sum is the same whether or not a compiler fuses it, and
/// no width high - low is formed, so [-FLT_MAX, FLT_MAX) works; double: one explicit fma, a result
/// outside [low, high) by a rounding clamped to it. low 0 and high 1 give unit_distribution's bits.
template <class T>
struct uniform_distribution : detail::counter_based<uniform_distribution<T>> {
  static_assert(detail::is_real<T>, "uniform_distribution<T>: T is float or double");
  /// The type of the values.
  using value_type = T;
  /// Values drawn from one Philox block (four 32-bit words).
  static constexpr int per_block = sizeof(T) == 4 ? 4 : 2;
  ///@{
  /// The stream's seed, and the position of value 0 in it (value i is value offset + i of the stream).
  std::uint64_t seed, offset;
  ///@}
  ///@{
  /// The bounds: values lie in [low, high).
  T low, high;
  ///@}
  /// Value `lane` of Philox block c, whose words are w (what counter_based builds on).
  RESIDENT_HD T from(const words4& w, int lane, std::uint64_t c) const {
    const T u = unit_distribution<T>{{}, seed, offset}.from(w, lane, c);
    T v;
    if constexpr (sizeof(T) == 4) {
      const double du = u;  // 1 - du is exact, and so is each product (24 x 24 bits)
      v = float(double(low) * (1.0 - du) + double(high) * du);
    } else {
      v = fma(high, u, detail::mul_rn(low, 1.0 - u));
      if (v < low) v = low;
    }
    return v < high ? v : detail::below(high);
  }
};

/// Normal with the given mean and standard deviation (Box-Muller on pairs of uniforms: lanes 2j and
/// 2j + 1 of a float block share one pair; the two doubles of a double block share one pair), through
/// the library's own log, sine and cosine (detail/normal_math.hpp): the same bits on both backends.
/// mean + sd z is one fma.
template <class T>
struct normal_distribution : detail::counter_based<normal_distribution<T>> {
  static_assert(detail::is_real<T>, "normal_distribution<T>: T is float or double");
  /// The type of the values.
  using value_type = T;
  /// Values drawn from one Philox block (four 32-bit words).
  static constexpr int per_block = sizeof(T) == 4 ? 4 : 2;
  ///@{
  /// The stream's seed, and the position of value 0 in it (value i is value offset + i of the stream).
  std::uint64_t seed, offset;
  ///@}
  ///@{
  /// Mean and standard deviation.
  T mean, sd;
  ///@}
  /// Value `lane` of Philox block c, whose words are w (what counter_based builds on).
  RESIDENT_HD T from(const words4& w, int lane, std::uint64_t) const {
    if constexpr (sizeof(T) == 4) {
      const int j = lane & ~1;
      const detail::cos_sin<float> z = detail::normal_pair_here(word(w, j), word(w, j + 1), mean, sd);
      return (lane & 1) ? z.s : z.c;
    } else {
      const detail::cos_sin<double> z = detail::normal_pair_here(w.w[0], w.w[1], w.w[2], w.w[3], mean, sd);
      return lane ? z.s : z.c;
    }
  }
};

/// Integers uniform in [low, high) without modulo bias (Lemire's multiply-shift with rejection; a
/// rejected word is redrawn from the same block at the next attempt index, so the value still depends
/// only on the seed and the position).
template <class T>
struct integer_distribution : detail::counter_based<integer_distribution<T>> {
  static_assert(std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t>,
                "integer_distribution<T>: T is int32_t or uint32_t");
  /// The type of the values.
  using value_type = T;
  /// Values drawn from one Philox block (four 32-bit words).
  static constexpr int per_block = 4;
  ///@{
  /// The stream's seed, and the position of value 0 in it (value i is value offset + i of the stream).
  std::uint64_t seed, offset;
  ///@}
  /// The lower bound.
  T low;
  std::uint32_t range;  ///< high - low; 0 stands for 2^32, every value of the type
  /// Value `lane` of Philox block c, whose words are w (what counter_based builds on).
  RESIDENT_HD T from(const words4& w, int lane, std::uint64_t c) const {
    std::uint32_t x = word(w, lane);
    if (range == 0) return T(std::uint32_t(low) + x);  // 2^32 values: each word is one, no rejection
    std::uint64_t m = std::uint64_t(x) * range;
    std::uint32_t l = std::uint32_t(m);
    if (l < range) {
      const std::uint32_t threshold = std::uint32_t(-range) % range;
      for (std::uint32_t attempt = 1; l < threshold; ++attempt) {
        x = word(philox_block(seed, c, attempt), lane);
        m = std::uint64_t(x) * range;
        l = std::uint32_t(m);
      }
    }
    return T(std::uint32_t(low) + std::uint32_t(m >> 32));
  }
};

/// The raw 32-bit words.
struct bits_distribution : detail::counter_based<bits_distribution> {
  /// The type of the values.
  using value_type = std::uint32_t;
  /// Values drawn from one Philox block (four 32-bit words).
  static constexpr int per_block = 4;
  ///@{
  /// The stream's seed, and the position of value 0 in it (value i is value offset + i of the stream).
  std::uint64_t seed, offset;
  ///@}
  /// Value `lane` of Philox block c, whose words are w (what counter_based builds on).
  RESIDENT_HD std::uint32_t from(const words4& w, int lane, std::uint64_t) const { return word(w, lane); }
};

/// A point in the unit square.
template <class T>
struct point2 {
  ///@{
  /// The coordinates, each in [0, 1).
  T x, y;
///@}
};

/// Point i = (u[2i], u[2i + 1]) of the uniform [0, 1) stream (seed, 2 * offset): the same numbers
/// fill_uniform writes, taken in pairs.
template <class T>
struct point_distribution {
  ///@{
  /// Tags: the CPU loop draws V points at a time with block(); GPU kernels visit whole Philox blocks.
  using block_generator = void;
  using aligned_blocks = void;
  ///@}
  unit_distribution<T> u;  ///< its offset is even, so a point's two values share a Philox block
  /// Points drawn from one Philox block.
  static constexpr int per_block = unit_distribution<T>::per_block / 2;
  /// Point i.
  RESIDENT_HD point2<T> operator()(std::size_t i) const {
    const std::uint64_t p = u.offset + 2 * i;
    const std::uint64_t c = p / unit_distribution<T>::per_block;
    const int lane = int(p % unit_distribution<T>::per_block);
    const words4 w = philox_block(u.seed, c);
    return {u.from(w, lane, c), u.from(w, lane + 1, c)};
  }
  /// V consecutive points from point i, drawing each Philox block once.
  template <int V>
  RESIDENT_HD resident::detail::values<point2<T>, V> block(std::size_t i) const {
    return pairs<V>(detail::block_values<2 * V>(u, 2 * i));
  }
  /// The Philox block that holds point 0.
  RESIDENT_HD std::uint64_t first_block() const { return u.first_block(); }
  /// How many points of that block precede point 0.
  RESIDENT_HD std::size_t block_lead() const { return u.block_lead() / 2; }
  /// The points of Philox block c.
  RESIDENT_HD resident::detail::values<point2<T>, per_block> values_of_block(std::uint64_t c) const {
    const auto v = u.values_of_block(c);
    resident::detail::values<point2<T>, per_block> out;
#pragma unroll
    for (int k = 0; k < per_block; ++k) out.v[k] = {v.v[2 * k], v.v[2 * k + 1]};
    return out;
  }

 private:
  template <int V>
  RESIDENT_HD static resident::detail::values<point2<T>, V> pairs(const resident::detail::values<T, 2 * V>& v) {
    resident::detail::values<point2<T>, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = {v.v[2 * k], v.v[2 * k + 1]};
    return out;
  }
};

namespace detail {
/// x with every digit that tells it apart (17 significant digits; integers as they are).
template <class T>
std::string exact_text(T x) {
  if constexpr (std::is_integral_v<T>) {
    return std::to_string(x);
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", std::is_same_v<T, float> ? 9 : 17, double(x));
    return buf;
  }
}
/// [low, high) must hold a value: low < high, both finite.
template <class T>
void check_range(T low, T high, const char* what) {
  if constexpr (std::is_floating_point_v<T>)
    RESIDENT_EXPECTS(std::isfinite(low) && std::isfinite(high),
                     std::string(what) + ": the range [low, high) needs finite bounds (got low " + exact_text(low) +
                         ", high " + exact_text(high) + "); use the largest finite values instead");
  RESIDENT_EXPECTS(low < high, std::string(what) + ": low must be below high (got low " + exact_text(low) + ", high " +
                                   exact_text(high) + "); the range is [low, high), so swap them or widen it");
}
/// mean + sd z must be finite for every z the transform makes (|z| < 5.8 for float, < 8.6 for double).
template <class T>
void check_normal(T mean, T sd, const char* what) {
  RESIDENT_EXPECTS(std::isfinite(mean) && std::isfinite(sd),
                   std::string(what) + ": mean and standard deviation must be finite (got mean " + exact_text(mean) +
                       ", sd " + exact_text(sd) + ")");
  RESIDENT_EXPECTS(sd >= T(0), std::string(what) + ": the standard deviation must be >= 0 (got " + exact_text(sd) +
                                   "); pass its absolute value");
  constexpr double z_max = sizeof(T) == 4 ? 6.0 : 9.0;
  RESIDENT_EXPECTS(std::abs(double(mean)) + z_max * double(sd) <= double(std::numeric_limits<T>::max()),
                   std::string(what) + ": mean " + exact_text(mean) + " and sd " + exact_text(sd) +
                       " give values beyond the largest finite value (|mean| + " + exact_text(z_max) +
                       " sd must stay below " + exact_text(std::numeric_limits<T>::max()) +
                       "); scale the values after generating them");
}
template <class A>
using value_of = typename std::remove_cvref_t<A>::value_type;
/// x as written with the fewest digits that read back as x (1e+39, not 9.9999999999999994e+38).
inline std::string shortest_text(double x) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}
/// A real bound or parameter as a T, checked as given: a finite value beyond T's range would turn
/// into an infinity, and the error would name that instead of the value given.
template <class T, class V>
T real_parameter(V v, const char* what, const char* which) {
  static_assert(std::is_arithmetic_v<V>, "random: bounds and parameters are numbers");
  const T t = static_cast<T>(v);
  if constexpr (std::is_floating_point_v<V>)
    RESIDENT_EXPECTS(!std::isfinite(v) || std::isfinite(t),
                     std::string(what) + ": " + which + " " + shortest_text(double(v)) + " does not fit " +
                         (sizeof(T) == 4 ? "float" : "double") + ", the element type (its largest finite value is " +
                         exact_text(std::numeric_limits<T>::max()) + ")");
  return t;
}
/// An integer bound as a T, checked as given: converting a value T cannot hold would wrap it into
/// another range, which then passes every other check.
template <class T, std::integral V>
T integer_bound(V v, const char* what, const char* which) {
  const bool fits = std::is_signed_v<V> ? std::in_range<T>(static_cast<std::intmax_t>(v))
                                        : std::in_range<T>(static_cast<std::uintmax_t>(v));
  RESIDENT_EXPECTS(fits, std::string(what) + ": " + which + " " +
                             (std::is_signed_v<V> ? std::to_string(static_cast<std::intmax_t>(v))
                                                  : std::to_string(static_cast<std::uintmax_t>(v))) +
                             " does not fit " + (std::is_signed_v<T> ? "int32_t" : "uint32_t") +
                             ", the element type (it holds " + exact_text(std::numeric_limits<T>::min()) + " to " +
                             exact_text(std::numeric_limits<T>::max()) + ")");
  return static_cast<T>(v);
}
/// An integer as the widest integer of its signedness (what std::cmp_less and to_string take).
template <std::integral V>
auto widest(V v) {
  if constexpr (std::is_signed_v<V>)
    return static_cast<std::intmax_t>(v);
  else
    return static_cast<std::uintmax_t>(v);
}
/// The excluded upper bound of an integer range as a 64-bit value: any value of T, or one past T's
/// largest (NumPy's `integers(0, 2**31, dtype=int32)`), the only way to reach T's largest value.
template <class T, std::integral V>
std::int64_t integer_high(V v, const char* what) {
  constexpr std::int64_t past = std::int64_t(std::numeric_limits<T>::max()) + 1;
  if (std::cmp_equal(widest(v), past)) return past;
  RESIDENT_EXPECTS(std::cmp_greater_equal(widest(v), std::numeric_limits<T>::min()) &&
                       std::cmp_less(widest(v), past),
                   std::string(what) + ": high " + std::to_string(widest(v)) + " does not fit " +
                       (std::is_signed_v<T> ? "int32_t" : "uint32_t") + ", the element type (it holds " +
                       exact_text(std::numeric_limits<T>::min()) + " to " + exact_text(std::numeric_limits<T>::max()) +
                       "; high, which is excluded, may be one past: " + std::to_string(past) + ")");
  return std::int64_t(v);
}
/// A bound as the caller wrote it.
template <class V>
std::string given_text(V v) {
  if constexpr (std::is_integral_v<V>)
    return std::to_string(widest(v));
  else
    return shortest_text(double(v));
}
/// Bounds that differ as given but convert to one value of T (float holds every integer only up to
/// 2^24): the range check would report "low 1, high 1" and suggest swapping them; name them as given.
template <class T, class L, class H>
void check_distinct_as_given(L low, H high, T lo, T hi, const char* what) {
  bool below;
  if constexpr (std::is_integral_v<L> && std::is_integral_v<H>)
    below = std::cmp_less(widest(low), widest(high));
  else
    below = static_cast<long double>(low) < static_cast<long double>(high);
  RESIDENT_EXPECTS(!(below && lo == hi), std::string(what) + ": low " + given_text(low) + " and high " +
                                             given_text(high) + " are both " + exact_text(lo) + " as " +
                                             (sizeof(T) == 4 ? "float" : "double") +
                                             ", the element type, so [low, high) holds no value; give bounds "
                                             "that differ in it (or fill a double array)");
}
}  // namespace detail

// ---- source stages -------------------------------------------------------------------------

/// A pipeline source yielding value i of the uniform stream (seed, offset) in [low, high); the bounds
/// may be of any arithmetic type. @throws invalid_argument when a bound does not fit T, low >= high,
/// low < high as given but one value of T, or a bound is not finite.
template <class T, class L = T, class H = T>
auto uniform(std::uint64_t seed, std::uint64_t offset = 0, L low = L(0), H high = H(1)) {
  const T lo = detail::real_parameter<T>(low, "random::uniform", "low");
  const T hi = detail::real_parameter<T>(high, "random::uniform", "high");
  detail::check_distinct_as_given(low, high, lo, hi, "random::uniform");
  detail::check_range(lo, hi, "random::uniform");
  return generate(uniform_distribution<T>{{}, seed, offset, lo, hi});
}
/// A pipeline source yielding value i of the normal stream (seed, offset); mean and sd may be of any
/// arithmetic type. @throws invalid_argument as fill_normal.
template <class T, class M = T, class S = T>
auto normal(std::uint64_t seed, std::uint64_t offset = 0, M mean = M(0), S sd = S(1)) {
  const T m = detail::real_parameter<T>(mean, "random::normal", "mean");
  const T d = detail::real_parameter<T>(sd, "random::normal", "sd");
  detail::check_normal(m, d, "random::normal");
  return generate(normal_distribution<T>{{}, seed, offset, m, d});
}
/// A pipeline source yielding value i of the integer stream (seed, offset) in [low, high), T int32_t or
/// uint32_t; the bounds may be of any integer type, high up to one past T's largest value.
/// @throws invalid_argument as fill_integers.
template <class T, std::integral L, std::integral H>
auto integers(std::uint64_t seed, std::uint64_t offset, L low, H high) {
  static_assert(std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t>,
                "random::integers<T>: T is int32_t or uint32_t");
  const T lo = detail::integer_bound<T>(low, "random::integers", "low");
  const std::int64_t hi = detail::integer_high<T>(high, "random::integers");
  RESIDENT_EXPECTS(std::int64_t(lo) < hi, "random::integers: low must be below high (got low " + std::to_string(lo) +
                                              ", high " + std::to_string(hi) +
                                              "); the range is [low, high), so swap them or widen it");
  return generate(integer_distribution<T>{{}, seed, offset, lo, std::uint32_t(hi - std::int64_t(lo))});
}
/// A pipeline source yielding point i of the unit square (see point_distribution).
template <class T>
auto uniform_points(std::uint64_t seed, std::uint64_t offset = 0) {
  return generate(point_distribution<T>{unit_distribution<T>{{}, seed, 2 * offset}});
}

// ---- fills into existing arrays (one kernel, no allocation) ----------------------------------

/// a[i] = value i of the uniform stream (seed, offset) in [low, high). float or double arrays.
/// Every value lies in [low, high), for any finite low < high.
/// The bounds may be of any arithmetic type.
/// @throws invalid_argument when a bound does not fit the element type, low >= high (also bounds that
/// differ as given but are one value of the element type) or a bound is not finite, before any work.
template <array_like A, class L = detail::value_of<A>, class H = detail::value_of<A>>
void fill_uniform(A&& a, std::uint64_t seed, std::uint64_t offset = 0, L low = L(0), H high = H(1)) {
  using T = detail::value_of<A>;
  if (low == L(0) && high == H(1))
    generate(unit_distribution<T>{{}, seed, offset})(a);  // the same bits, less arithmetic
  else
    uniform<T>(seed, offset, low, high)(a);
}

/// a[i] = value i of the normal stream (seed, offset): the same bits on every backend.
/// @throws invalid_argument, before any work, when sd < 0, mean or sd is not finite, or |mean| + 6 sd
/// (9 sd for double) exceeds the largest finite value (a value could overflow), or mean or sd (of any
/// arithmetic type) does not fit the element type. sd = 0 gives mean.
template <array_like A, class M = detail::value_of<A>, class S = detail::value_of<A>>
void fill_normal(A&& a, std::uint64_t seed, std::uint64_t offset = 0, M mean = M(0), S sd = S(1)) {
  normal<detail::value_of<A>>(seed, offset, mean, sd)(a);
}

/// a[i] = an integer uniform in [low, high), int32 or uint32 arrays; high, which is excluded, may be one
/// past the type's largest value (2^31 for int32, 2^32 for uint32). The bounds may be of any
/// integer type. @throws invalid_argument when low does not fit the element type, high is not in
/// [min + 1, max + 1], or low >= high, before any work.
template <array_like A, std::integral L, std::integral H>
void fill_integers(A&& a, std::uint64_t seed, std::uint64_t offset, L low, H high) {
  integers<detail::value_of<A>>(seed, offset, low, high)(a);
}

/// a[i] = raw word i of the stream (seed, offset): Philox block p / 4, word p % 4, p = (offset + i) mod
/// 2^64.
template <array_like A>
void fill_bits(A&& a, std::uint64_t seed, std::uint64_t offset = 0) {
  static_assert(std::is_same_v<detail::value_of<A>, std::uint32_t>, "fill_bits writes uint32_t arrays");
  generate(bits_distribution{{}, seed, offset})(a);
}

}  // namespace resident::random
