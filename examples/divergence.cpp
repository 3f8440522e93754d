// Divergence: the 32 threads of a warp execute one instruction at a time together. When a branch
// splits a warp, the warp runs both sides one after the other with half its threads idle. Both
// variants do the same work (half the elements take path A, half path B); only which threads take
// which path changes: alternating threads (every warp splits) or alternating warps (none does).
#include <cmath>
#include <cstdio>

#include "guide.hpp"

namespace rs = resident;

// Two arithmetic paths of equal cost: long dependent chains, so the kernel is bound by the ALUs.
RESIDENT_HD inline float path_a(float v) {
  for (int k = 0; k < 256; ++k) v = v * 0.999f + 0.25f;
  return v;
}
RESIDENT_HD inline float path_b(float v) {
  for (int k = 0; k < 256; ++k) v = v * 0.998f - 0.125f;
  return v;
}

struct branch {
  rs::array_view<float> x, y;
  std::size_t group;  // 1: alternate threads; 32: alternate warps
  RESIDENT_HD void operator()(std::size_t i) const { y[i] = (i / group) % 2 == 0 ? path_a(x[i]) : path_b(x[i]); }
};

int main() {
  try {
    const rs::device d = rs::default_device();
    const rs::stream_ref s = rs::default_stream(d);
    const std::size_t n = guide::elements(d, std::size_t(1) << 24, std::size_t(1) << 18);
    auto x = guide::random_array(n, d, guide::fresh_seed());
    rs::array<float> y(n, d);
    const auto h = x.to_host();
    guide::report r("divergence", d);
    for (std::size_t group : {1, 32}) {
      rs::map([] RESIDENT_HD(float) { return std::nanf(""); })(y);
      const double ms = r.time(s, [&] { rs::for_each_index(s, n, branch{x.view(), y.view(), group}); });
      const auto got = y.to_host();
      for (std::size_t i = 0; i < n; i += 101) {
        double v = h[i];
        const bool a = (i / group) % 2 == 0;
        for (int k = 0; k < 256; ++k) v = a ? v * 0.999 + 0.25 : v * 0.998 - 0.125;
        if (std::abs(got[i] - v) > 1e-4 * (1 + std::abs(v))) {
          std::fprintf(stderr, "divergence: element %zu is %g, FP64 says %g\n", i, double(got[i]), v);
          return 1;
        }
      }
      r.add(group == 1 ? "branch splits every warp" : "each warp takes one path", ms,
            group == 1 ? "(i % 2): both paths in every warp" : "(i / 32 % 2): one path per warp");
    }
    r.print("The same branch, split inside warps or between them",
            "a split warp runs path A and then path B with half of its lanes masked off each time, so it "
            "does the work of both paths.",
            "a CPU core has no warps: how much the order matters depends on how the compiler "
            "vectorized the loop.");
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "divergence: %s\n", e.what());
    return 1;
  }
}
