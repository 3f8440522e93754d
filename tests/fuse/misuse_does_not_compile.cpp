// Pipelines that must not compile, one per MISUSE_* macro (tests/CMakeLists.txt builds each and expects
// its static_assert's message): a misuse found at compile time is said in one line, not in pages of
// template instantiations.
#include <cstdint>

#include "resident/fuse/pipeline.hpp"

namespace rs = resident;

namespace {
struct twice {
  RESIDENT_HD float operator()(float v) const { return 2.f * v; }
};
struct point {
  float x, y;
};
struct to_point {
  RESIDENT_HD point operator()(float v) const { return {v, v}; }
};
}  // namespace

void misuse(rs::array<float>& x, rs::array<float>& y) {
  (void)x;
  (void)y;
#if defined(MISUSE_map_after_a_reduction)
  auto p = rs::reduce(rs::plus{}, 0.f) | rs::map(twice{});
#elif defined(MISUSE_two_reductions)
  auto p = rs::map(twice{}) | rs::reduce(rs::plus{}, 0.f) | rs::reduce(rs::plus{}, 0.f);
#elif defined(MISUSE_reduction_after_a_scan)
  auto p = rs::inclusive_scan(rs::plus{}) | rs::reduce(rs::plus{}, 0.f);
#elif defined(MISUSE_a_source_in_the_middle)
  auto p = rs::map(twice{}) | rs::zip(x, y);
#elif defined(MISUSE_a_result_the_output_cannot_hold)
  rs::map(to_point{})(x, y);
#elif defined(MISUSE_a_scan_result_the_output_cannot_hold)
  (rs::map(to_point{}) | rs::inclusive_scan(rs::plus{}))(x, y);
#elif defined(MISUSE_a_result_the_init_cannot_hold)
  (void)(rs::map(to_point{}) | rs::reduce(rs::plus{}, 0.f))(x);
#elif defined(MISUSE_an_integer_init_for_floating_values)
  (void)rs::reduce(rs::plus{}, 0)(x);  // 1,000 values of 0.5 would sum to 0
#else
#error "define one MISUSE_ case"
#endif
#if defined(MISUSE_map_after_a_reduction) || defined(MISUSE_two_reductions) || \
    defined(MISUSE_reduction_after_a_scan) || defined(MISUSE_a_source_in_the_middle)
  (void)p;
#endif
}
