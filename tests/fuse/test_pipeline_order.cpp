// Compiled by nvcc when the CUDA backend is in the build.
// Calls whose inputs were last written on another stream. On a GPU, where streams run at once, a busy
// kernel ahead of the writers keeps them from finishing for a while, so a call that fails to wait for
// them reads the poison from before. On the CPU, the rule its backend keeps instead: a call's work is
// done when the call returns, read straight from memory with no synchronization.
#include <algorithm>
#include <vector>

#include "busy.hpp"
#include "resident/fuse/pipeline.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

struct scale {
  float a;
  RESIDENT_HD float operator()(float v) const { return a * v; }
};
struct plus_one {
  RESIDENT_HD float operator()(float v) const { return v + 1.f; }
};
struct constant {
  float c;
  RESIDENT_HD float operator()(std::size_t) const { return c; }
};
struct to_double {
  RESIDENT_HD double operator()(float v) const { return double(v); }
};
struct product {
  RESIDENT_HD float operator()(float p, float q) const { return p * q; }
};

constexpr int steps = 30;
constexpr float last = 1.f + steps;

// x = 1 + steps and w = 2, both on stream a: poison the host has waited for, then a busy kernel of
// delay_ms, then the writers (x by a queue of `steps` kernels). A reader that overtakes them sees poison.
struct queued_inputs {
  rs::array<float> x, w;
  queued_inputs(std::size_t n, rs::stream_ref a, double delay_ms) : x(n, a), w(n, a) {
    rs::generate(constant{rs::test::poison<float>()})(x);
    rs::generate(constant{rs::test::poison<float>()})(w);
    a.synchronize();
    rs::test::queue_busy(a, delay_ms);
    rs::generate(constant{1.f})(x);
    rs::generate(constant{2.f})(w);
    for (int i = 0; i < steps; ++i) rs::map(plus_one{})(x);
  }
};

// Every element of an output, counted: a call that overtook the inputs' last kernel is off somewhere.
template <class T>
std::ptrdiff_t count_not(const std::vector<T>& v, T want) {
  return std::ptrdiff_t(v.size()) - std::count(v.begin(), v.end(), want);
}

// An array's elements read straight from its memory (the CPU's), with no synchronization.
template <class T>
std::vector<T> in_memory(const rs::array<T>& a) {
  return {a.data(), a.data() + a.size()};
}

using pipeline_order_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(pipeline_order_cuda, inputs_on_other_streams_are_ordered_before_the_call_without_a_host_synchronization) {
  // Every call below reads inputs last written on stream a and writes on stream b (an output, a
  // result array): it must see the last of a's kernels, which start 100 ms late.
  rs::stream a(dev), b(dev);
  const std::size_t n = (std::size_t(1) << 22) + 1;
  const double delay_ms = 100;
  {
    queued_inputs in(n, a, delay_ms);
    rs::array<float> y(n, b);
    rs::map(scale{2.f})(in.x, y);
    EXPECT_EQ(count_not(y.to_host(), 2.f * last), 0) << "map: elements that read an earlier value";
  }
  {
    queued_inputs in(n, a, delay_ms);
    rs::array<float> y(n, b);
    (rs::zip(in.x, in.w) | rs::map(product{}))(y);
    EXPECT_EQ(count_not(y.to_host(), 2.f * last), 0) << "zip";
  }
  {
    queued_inputs in(n, a, delay_ms);
    rs::array<double> r(1, b);
    (rs::map(to_double{}) | rs::reduce(rs::plus{}, 0.0))(in.x, r);
    EXPECT_EQ(r.to_host()[0], double(last) * double(n));  // exact: integers below 2^53
  }
  {
    queued_inputs in(n, a, delay_ms);
    rs::array<double> y(n, b);
    (rs::map(to_double{}) | rs::inclusive_scan(rs::plus{}))(in.x, y);
    const auto h = y.to_host();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += h[i] != double(last) * double(i + 1);
    EXPECT_EQ(bad, 0u) << "scan: prefixes off (exact: integers below 2^53)";
  }
  {
    queued_inputs in(n, a, delay_ms);
    rs::array<float> y(n, b);
    rs::copy(in.x, y);
    EXPECT_EQ(count_not(y.to_host(), last), 0) << "copy";
  }
}

using pipeline_order_cpu = backend;  // the CPU backend's rule: the `cpu` CTest entry

TEST_P(pipeline_order_cpu, cpu_runs_in_issue_order_each_call_is_done_when_it_returns) {
  // Each call is checked in memory the moment it returns, on the stream it was issued on or another:
  // a backend that deferred any of it (a queue, another thread) fails here.
  rs::stream a(dev), b(dev);
  const std::size_t n = (std::size_t(1) << 20) + 1;
  rs::array<float> x(n, a), w(n, a);
  rs::generate(constant{1.f})(x);
  ASSERT_EQ(count_not(in_memory(x), 1.f), 0) << "generate";
  for (int i = 0; i < steps; ++i) {
    rs::map(plus_one{})(x);
    ASSERT_EQ(count_not(in_memory(x), 2.f + float(i)), 0) << "map, step " << i;
  }
  rs::generate(constant{2.f})(w);
  rs::array<float> y(n, b);
  rs::map(scale{2.f})(x, y);
  EXPECT_EQ(count_not(in_memory(y), 2.f * last), 0) << "map onto another stream";
  (rs::zip(x, w) | rs::map(product{}))(y);
  EXPECT_EQ(count_not(in_memory(y), 2.f * last), 0) << "zip";
  rs::array<double> r(1, b);
  (rs::map(to_double{}) | rs::reduce(rs::plus{}, 0.0))(x, r);
  EXPECT_EQ(in_memory(r)[0], double(last) * double(n)) << "reduce";  // exact: integers below 2^53
  rs::array<double> p(n, b);
  (rs::map(to_double{}) | rs::inclusive_scan(rs::plus{}))(x, p);
  const auto h = in_memory(p);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += h[i] != double(last) * double(i + 1);
  EXPECT_EQ(bad, 0u) << "scan";
  rs::array<float> c(n, b);
  rs::copy(x, c);
  EXPECT_EQ(count_not(in_memory(c), last), 0) << "copy";
}

RESIDENT_CUDA_ONLY(pipeline_order_cuda);
RESIDENT_CPU_ONLY(pipeline_order_cpu);

}  // namespace
