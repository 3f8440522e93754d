#pragma once
// Distance in units of the last place, for the accuracy tests of vectorized math (the CPU SIMD paths
// and op programs).
#include <algorithm>
#include <cmath>
#include <limits>

namespace resident::test {

/// |got - ref| in units of the last place of ref rounded to T (subnormal spacing below the normals).
template <class T>
double ulps(T got, long double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0.0 : INFINITY;
  if (std::isinf(ref)) return static_cast<long double>(got) == ref ? 0.0 : INFINITY;
  if (std::isnan(got)) return INFINITY;  // a NaN for a number: never within a bound (nor lost in a max)
  const T r = static_cast<T>(ref);
  const int e = std::max(std::ilogb(r == 0 ? std::numeric_limits<T>::min() : r),
                         std::numeric_limits<T>::min_exponent - 1);
  return double(std::fabs(static_cast<long double>(got) - ref) /
                std::ldexp(1.0L, e - (std::numeric_limits<T>::digits - 1)));
}

/// The larger of two error figures, a NaN (an error that is not a number) worse than any: std::max drops
/// a NaN in its second place and would let a wrong value pass.
inline double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? INFINITY : std::max(a, b); }

}  // namespace resident::test
