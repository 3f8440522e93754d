// The seed's question "if func2 does not depend on func1, can CUDA schedule them asynchronously?"
// answered with a flow: two stages that touch different arrays run side by side (on two streams on a
// GPU), and a third that reads both waits for both. The flow infers all of this from what each stage
// says it reads and writes.
#include <cmath>
#include <cstdio>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

RESIDENT_HD float func1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD float func2(float v) { return sqrtf(v * v + 1.f); }

int main() {
  try {
    const rs::device d = rs::default_device();
    const std::size_t n = 1 << 20;
    rs::array<float> a(n, d), b(n, d), sum(n, d);
    rs::random::fill_uniform(a, 1);
    rs::random::fill_uniform(b, 2);

    rs::flow f(d);
    f.add("func1 on a", [&](rs::stream_ref s) { a.set_stream(s); rs::map<func1>()(a); }, rs::access{}.reads(a).writes(a));
    f.add("func2 on b", [&](rs::stream_ref s) { b.set_stream(s); rs::map<func2>()(b); }, rs::access{}.reads(b).writes(b));
    f.add("a + b", [&](rs::stream_ref s) {
      sum.set_stream(s);
      (rs::zip(a, b) | rs::map([] RESIDENT_HD(float p, float q) { return p + q; }))(sum);
    }, rs::access{}.reads(a, b).writes(sum));
    f.run();
    std::printf("stage 'a + b' waits for stages %zu and %zu; the first two depend on nothing\n", f.predecessors(2)[0],
                f.predecessors(2)[1]);
    std::printf("%s", f.report_table().c_str());

    for (auto* x : {&a, &b, &sum}) x->set_stream(f.stream());
    auto ha = a.to_host(), hb = b.to_host(), hs = sum.to_host();
    for (auto* x : {&a, &b, &sum}) x->set_stream(rs::default_stream(d));
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(hs[i] - (ha[i] + hb[i]))));
    std::printf("the sum read a and b after their stages: max difference from the host's float sum %.1e\n", worst);
    return worst == 0 ? 0 : 1;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "independent_stages: %s\n", e.what());
    return 1;
  }
}
