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
  const T r = static_cast<T>(ref);
  const int e = std::max(std::ilogb(r == 0 ? std::numeric_limits<T>::min() : r),
                         std::numeric_limits<T>::min_exponent - 1);
  return double(std::fabs(static_cast<long double>(got) - ref) /
                std::ldexp(1.0L, e - (std::numeric_limits<T>::digits - 1)));
}

}  // namespace resident::test
