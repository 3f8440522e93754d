#pragma once
// The seed's three stages, as the tests use them: float stages for both backends and their FP64 math.

#include <cmath>

#include "resident/config.hpp"

namespace resident::test {

RESIDENT_HD inline float f1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD inline float f2(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD inline float f3(float v) { return 0.5f * sinf(v); }
inline double r1(double v) { return 1.5 * v + 0.5; }
inline double r2(double v) { return std::sqrt(v * v + 1.0); }
inline double r3(double v) { return 0.5 * std::sin(v); }
/// The whole seed pipeline in FP64.
inline double seed_ref(double v) { return r3(r2(r1(v))); }

}  // namespace resident::test
