// The profile report and its advice: figures per call site equal to the ledger's, the caller's file
// and line, each advice provoked by a program that breaks its guideline and absent from a clean one.
#include <nlohmann/json.hpp>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include "resident/detail/source_location.hpp"
#include "resident/detail/tuning.hpp"
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "resident/linalg/matmul.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using insight = backend;

struct affine {
  float a, b;
  RESIDENT_HD float operator()(float v) const { return a * v + b; }
};
// Arithmetic that dominates the bytes: far below the copy rate on any device.
struct heavy {
  int iterations;
  RESIDENT_HD float operator()(float v) const {
    for (int k = 0; k < iterations; ++k) v = sinf(v) * 1.0001f + 0.25f;
    return v;
  }
};

// A pipeline call in place, accounted to the caller's line (the pipeline's own hook records it there).
template <class P, class A>
void profiled(const P& p, A& x, int stages, resident::source_location where = resident::source_location::current()) {
  static_cast<void>(stages);  // the pipeline counts its own stages
  p(x, where);
}

std::string here(unsigned line) { return "test_profile.cpp:" + std::to_string(line); }

const rs::profile_site* find_site(const rs::profile_report& r, unsigned line, const std::string& name) {
  for (const auto& s : r.sites)
    if (s.line == line && s.name == name) return &s;
  return nullptr;
}
bool has_advice(const rs::profile_report& r, const std::string& kind, const std::string& site = "") {
  for (const auto& a : r.advice)
    if (a.kind == kind && (site.empty() || a.site == site)) return true;
  return false;
}
std::string advice_list(const rs::profile_report& r) { return r.table(); }

TEST_P(insight, report_figures_equal_the_ledger_and_name_the_callers_line) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  const std::size_t n = 1 << 14;
  auto h = rs::test::random_vector<float>(n, seed);
  std::vector<float> out(n, rs::test::poison<float>());
  rs::scoped_ledger l(dev);
  rs::profile prof(rs::profile_output::quiet);
  const unsigned up = resident::source_location::current().line() + 1;
  auto x = rs::to_device(h, dev);
  const unsigned run = resident::source_location::current().line() + 1;
  profiled(rs::map(affine{2.f, 1.f}) | rs::map(affine{0.5f, -1.f}), x, 2);
  const unsigned down = resident::source_location::current().line() + 1;
  x.to_host(std::span<float>(out));
  for (std::size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], 0.5f * (2.f * h[i] + 1.f) - 1.f) << i;

  const rs::profile_report r = prof.report();
  const rs::ledger_counts c = l.delta();
  std::uint64_t h2d = 0, d2h = 0, kernels = 0;
  for (const auto& s : r.sites) {
    h2d += s.h2d_bytes;
    d2h += s.d2h_bytes;
    kernels += s.kernels;
  }
  EXPECT_EQ(h2d, c.h2d_bytes);
  EXPECT_EQ(d2h, c.d2h_bytes);
  EXPECT_EQ(kernels, c.kernels);

  const auto* u = find_site(r, up, "to_device");
  const auto* m = find_site(r, run, "pipeline");
  const auto* d = find_site(r, down, "to_host");
  ASSERT_TRUE(u && m && d) << r.table();
  EXPECT_EQ(u->site(), here(up));
  EXPECT_EQ(u->h2d_bytes, n * sizeof(float));
  EXPECT_TRUE(u->transfer);
  EXPECT_EQ(u->allocations, 1u);  // the new array counts to the upload's line
  EXPECT_EQ(m->calls, 1u);
  EXPECT_EQ(m->kernels, 1u);
  EXPECT_EQ(m->bytes_read, n * sizeof(float));
  EXPECT_EQ(m->bytes_written, n * sizeof(float));
  EXPECT_EQ(m->timed_calls, 1u);
  EXPECT_GT(m->seconds, 0.0);
  EXPECT_EQ(d->d2h_bytes, n * sizeof(float));
  EXPECT_EQ(r.copy_rates.size(), 1u);
  EXPECT_GT(r.copy_rate(dev), 0.0);
  EXPECT_TRUE(r.advice.empty()) << r.table();  // a clean program: one upload, one fused pass, one download
}

TEST_P(insight, a_transfer_repeated_in_a_loop_gets_the_transfer_advice) {
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  auto h = rs::test::random_vector<float>(1 << 12, seed);
  rs::profile prof(rs::profile_output::quiet);
  unsigned line = 0;
  for (int i = 0; i < 5; ++i) {
    line = resident::source_location::current().line() + 1;
    auto x = rs::to_device(h, dev);
    profiled(rs::map(affine{2.f, 1.f}), x, 1);
    h = x.to_host();  // the seed's pattern: every step crosses the bus both ways
  }
  const rs::profile_report r = prof.report();
  EXPECT_TRUE(has_advice(r, "repeated_transfer", here(line))) << advice_list(r);
  const auto* s = find_site(r, line, "to_device");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->calls, 5u);
  EXPECT_EQ(s->h2d_bytes, 5u * h.size() * sizeof(float));
  for (const auto& a : r.advice) {
    if (a.kind == "repeated_transfer") {
      EXPECT_EQ(a.example, "examples/seed_pipeline.cpp");
    }
  }
}

TEST_P(insight, a_profiles_per_call_figures_are_those_of_its_own_calls) {
  std::vector<float> tiny(1, 1.f), big(1 << 12, 1.f);
  const unsigned line = resident::source_location::current().line() + 1;
  auto upload = [&](const std::vector<float>& h) { return rs::to_device(h, dev); };
  rs::profile outer(rs::profile_output::quiet);
  (void)upload(tiny);  // before the inner profile: not one of its calls
  rs::profile inner(rs::profile_output::quiet);
  for (int i = 0; i < 3; ++i) (void)upload(big);
  const std::uint64_t big_call = 2 * big.size() * sizeof(float), tiny_call = 2 * sizeof(float);
  const rs::profile_report r = inner.report();
  const auto* s = find_site(r, line, "to_device");
  ASSERT_NE(s, nullptr) << r.table();
  EXPECT_EQ(s->calls, 3u);
  EXPECT_EQ(s->min_call_bytes, big_call);
  EXPECT_EQ(s->max_call_bytes, big_call);
  EXPECT_TRUE(has_advice(r, "repeated_transfer", here(line))) << r.table();
  const rs::profile_report o = outer.report();
  const auto* so = find_site(o, line, "to_device");
  ASSERT_NE(so, nullptr) << o.table();
  EXPECT_EQ(so->calls, 4u);
  EXPECT_EQ(so->min_call_bytes, tiny_call);
  EXPECT_EQ(so->max_call_bytes, big_call);
  // A profile opened after all of them sees none; one reopened sees only its own.
  rs::profile later(rs::profile_output::quiet);
  EXPECT_EQ(find_site(later.report(), line, "to_device"), nullptr);
  (void)upload(tiny);
  const rs::profile_report lr = later.report();  // find_site points into it
  const auto* sl = find_site(lr, line, "to_device");
  ASSERT_NE(sl, nullptr);
  EXPECT_EQ(sl->min_call_bytes, tiny_call);
  EXPECT_EQ(sl->max_call_bytes, tiny_call);
}

TEST_P(insight, two_single_maps_on_adjacent_lines_get_the_fusion_advice) {
  const std::uint64_t seed = rs::test::fresh_seed();
  auto x = rs::to_device(rs::test::random_vector<float>(1 << 12, seed), dev);
  {
    rs::profile prof(rs::profile_output::quiet);
    const unsigned first = resident::source_location::current().line() + 1;
    profiled(rs::map(affine{2.f, 1.f}), x, 1);
    profiled(rs::map(affine{0.5f, 3.f}), x, 1);
    const rs::profile_report r = prof.report();
    EXPECT_TRUE(has_advice(r, "could_fuse", here(first) + "-" + std::to_string(first + 1))) << advice_list(r);
  }
  {
    rs::profile prof(rs::profile_output::quiet);
    profiled(rs::map(affine{2.f, 1.f}) | rs::map(affine{0.5f, 3.f}), x, 2);  // already fused
    profiled(rs::map(affine{2.f, 1.f}) | rs::map(affine{0.5f, 3.f}), x, 2);
    const rs::profile_report r = prof.report();
    EXPECT_FALSE(has_advice(r, "could_fuse")) << advice_list(r);
  }
}

TEST_P(insight, a_pool_that_grows_on_every_call_gets_the_pool_advice) {
  const std::uint64_t seed = rs::test::fresh_seed();
  // Large enough on a GPU that each array takes new memory from the device.
  const std::size_t n = dev.is_cuda() ? std::size_t(16) << 20 : std::size_t(1) << 18;
  rs::synchronize(dev);
  rs::trim_pool(dev);
  std::vector<rs::array<float>> kept;
  {
    rs::profile prof(rs::profile_output::quiet);
    unsigned line = 0;
    for (int i = 0; i < 5; ++i) {
      std::vector<float> h = rs::test::random_vector<float>(n + std::size_t(i) * 4096, seed + std::uint64_t(i));
      line = resident::source_location::current().line() + 1;
      kept.push_back(rs::to_device(h, dev));
    }
    const rs::profile_report r = prof.report();
    EXPECT_TRUE(has_advice(r, "pool_grows", here(line))) << advice_list(r);
    EXPECT_FALSE(has_advice(r, "repeated_transfer")) << advice_list(r);  // each size differs
  }
  kept.clear();
  {
    rs::profile prof(rs::profile_output::quiet);
    for (int i = 0; i < 5; ++i) {
      auto x = rs::to_device(rs::test::random_vector<float>(n, seed), dev);  // let go each time
      profiled(rs::map(affine{2.f, 1.f}), x, 1);
    }
    EXPECT_FALSE(has_advice(prof.report(), "pool_grows")) << advice_list(prof.report());
  }
}

TEST_P(insight, a_pipeline_far_below_the_copy_rate_gets_the_memory_advice) {
  const std::uint64_t seed = rs::test::fresh_seed();
  const std::size_t n = 1 << 19;
  auto x = rs::to_device(rs::test::random_vector<float>(n, seed), dev);
  rs::profile prof(rs::profile_output::quiet);
  const unsigned line = resident::source_location::current().line() + 1;
  profiled(rs::map(heavy{dev.is_cuda() ? 4096 : 16}), x, 1);
  const rs::profile_report r = prof.report();
  EXPECT_TRUE(has_advice(r, "below_copy_rate", here(line))) << advice_list(r);
}

TEST_P(insight, a_call_that_throws_is_not_counted_and_the_profile_stays_usable) {
  auto x = rs::to_device(rs::test::random_vector<float>(256, rs::test::fresh_seed()), dev);
  rs::profile prof(rs::profile_output::quiet);
  const unsigned line = resident::source_location::current().line() + 1;
  EXPECT_THROW(([&] { rs::detail::call_scope s("failing", x.stream(), {}, rs::detail::call_kind::compute);
                      throw std::runtime_error("user code"); })(),
               std::runtime_error);
  EXPECT_EQ(find_site(prof.report(), line, "failing"), nullptr);
  EXPECT_EQ(rs::detail::call_scope::current(), nullptr);
  profiled(rs::map(affine{1.f, 1.f}), x, 1);
  EXPECT_EQ(prof.report().sites.size(), 1u);
}

TEST_P(insight, a_matrix_product_is_one_call_at_the_callers_line_with_its_bytes) {
  const std::size_t m = 16, k = 8, n = 4;
  rs::array2d<float> A(m, k, dev), B(k, n, dev), C(m, n, dev);
  rs::matmul(A, B, C);  // warm (cuBLAS's handle)
  rs::profile prof(rs::profile_output::quiet);
  const unsigned line = resident::source_location::current().line() + 1;
  rs::matmul(A, B, C, rs::matmul_algo::automatic, 1.f, 1.f);
  const rs::profile_report r = prof.report();
  const auto* s = find_site(r, line, "matmul");
  ASSERT_NE(s, nullptr) << r.table();
  EXPECT_EQ(s->calls, 1u);
  EXPECT_GE(s->kernels, 1u);
  EXPECT_EQ(s->bytes_read, (m * k + k * n + m * n) * sizeof(float));  // beta = 1: C is read too
  EXPECT_EQ(s->bytes_written, m * n * sizeof(float));
}

TEST_P(insight, calls_from_two_threads_add_up) {
  auto x = rs::to_device(rs::test::random_vector<float>(1 << 10, rs::test::fresh_seed()), dev);
  auto y = rs::to_device(rs::test::random_vector<float>(1 << 10, rs::test::fresh_seed()), dev);
  rs::profile prof(rs::profile_output::quiet);
  auto work = [&](rs::array<float>& a) {
    for (int i = 0; i < 200; ++i) {
      rs::detail::call_scope s("threaded", a.stream(), {a.bytes(), a.bytes(), a.size(), 1, nullptr, nullptr},
                               rs::detail::call_kind::compute, resident::source_location());
    }
  };
  std::thread t1(work, std::ref(x)), t2(work, std::ref(y));
  t1.join();
  t2.join();
  std::uint64_t calls = 0;
  for (const auto& s : prof.report().sites)
    if (s.name == "threaded") calls += s.calls;
  EXPECT_EQ(calls, 400u);
}

// Past a site's first calls a GPU times one call in timing_stride, which counts for the untimed calls
// before it: the site's timed calls fall short of its calls by less than a stride, its time and rate
// whole-run estimates. Each profile counts from its own start, so one opened after many calls of a site
// still times that site's first calls. The CPU times every call on the host clock.
TEST_P(insight, a_sites_time_counts_every_call_it_stands_for) {
  using tuning = rs::detail::profile_tuning;
  auto x = rs::to_device(rs::test::random_vector<float>(1 << 12, rs::test::fresh_seed()), dev);
  const int calls = int(tuning::timed_first + 5 * tuning::timing_stride + 3);
  rs::profile outer(rs::profile_output::quiet);
  const unsigned line = resident::source_location::current().line() + 3;
  auto run = [&](int k) {
    for (int i = 0; i < k; ++i)
      profiled(rs::map(affine{1.f, 0.f}), x, 1);
  };
  run(calls);
  const rs::profile_report r = outer.report();
  const auto* s = find_site(r, line, "pipeline");
  ASSERT_NE(s, nullptr) << r.table();
  EXPECT_EQ(s->calls, std::uint64_t(calls));
  EXPECT_EQ(s->timed_calls, std::uint64_t(dev.is_cpu() ? calls : calls - 3));
  EXPECT_GT(s->seconds, 0.0);
  EXPECT_GT(s->gbps(), 0.0);
  rs::profile inner(rs::profile_output::quiet);
  run(20);
  const rs::profile_report ri = inner.report();
  const auto* si = find_site(ri, line, "pipeline");
  ASSERT_NE(si, nullptr) << ri.table();
  EXPECT_EQ(si->calls, 20u);
  EXPECT_EQ(si->timed_calls, 20u);  // the inner profile's first calls: every one timed
  EXPECT_GT(si->seconds, 0.0);
}

TEST(profile, a_sampled_call_counts_for_itself_and_the_untimed_calls_before_it) {
  using tuning = rs::detail::profile_tuning;
  std::uint64_t counted = 0, timed = 0;
  for (std::uint64_t seen = 0; seen < 1000; ++seen) {
    const std::uint64_t w = tuning::weight(seen);
    EXPECT_TRUE(seen < tuning::timed_first ? w == 1 : w == 0 || w == tuning::timing_stride) << seen;
    counted += w;
    timed += w != 0;
    const std::uint64_t calls = seen + 1;
    const std::uint64_t left = calls <= tuning::timed_first ? 0 : (calls - tuning::timed_first) % tuning::timing_stride;
    EXPECT_EQ(counted, calls - left) << seen;  // never more than the calls made, short by less than a stride
  }
  EXPECT_LT(timed, 1000u / 4);  // most calls record no events
}

// An entry point whose parameters end in a pack takes its stream as a located_stream.
template <class... Args>
unsigned launch_like(rs::detail::located_stream s, Args...) {
  rs::detail::call_scope scope("launch_like", s.stream, {}, rs::detail::call_kind::compute, s.where);
  return s.where.line();
}

TEST_P(insight, a_located_stream_carries_the_callers_line_through_a_pack) {
  rs::stream owner(dev);
  const unsigned line = resident::source_location::current().line() + 1;
  EXPECT_EQ(launch_like(owner, 1, 2.0, 'c'), line);
  EXPECT_EQ(launch_like(rs::default_stream(dev)), line + 1);
  rs::profile prof(rs::profile_output::quiet);
  const unsigned at = resident::source_location::current().line() + 1;
  launch_like(owner.ref(), 3);
  const rs::profile_report r = prof.report();
  const auto* s = find_site(r, at, "launch_like");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->site(), here(at));
}

// y = 2y + 1 over the whole array from every thread's share (a grid-stride loop): correct for any shape.
struct twice_plus_one {
  rs::array_view<float> y;
  RESIDENT_HD void operator()(rs::thread_index t) const {
    for (std::size_t i = t.global_x(); i < y.size(); i += t.grid_stride()) y[i] = 2.f * y[i] + 1.f;
  }
};

TEST_P(insight, a_launch_with_a_tiny_fixed_shape_gets_the_occupancy_advice) {
  // The CPU as a team of 8 threads (whatever this machine has): a grid of one block keeps one busy.
  const int team = omp_get_max_threads();
  if (dev.is_cpu()) omp_set_num_threads(8);
  const std::uint64_t seed = rs::test::fresh_seed();
  SCOPED_TRACE(seed);
  const std::size_t n = std::size_t(1) << 20;
  const std::vector<float> h = rs::test::random_vector<float>(n, seed);
  auto x = rs::to_device(h, dev);
  rs::profile prof(rs::profile_output::quiet);
  const unsigned tiny = resident::source_location::current().line() + 2;
  for (int i = 0; i < 3; ++i)
    rs::launch(x.stream(), rs::launch_config{rs::dims(1), rs::dims(32), 0}, twice_plus_one{x.view()});
  const unsigned chosen = resident::source_location::current().line() + 1;
  for (int i = 0; i < 3; ++i) profiled(rs::map(affine{2.f, 1.f}), x, 1);
  const rs::profile_report r = prof.report();
  if (dev.is_cpu()) omp_set_num_threads(team);

  std::vector<float> out(n, rs::test::poison<float>());
  x.to_host(std::span<float>(out));
  for (std::size_t i = 0; i < n; ++i) {
    double v = h[i];
    for (int k = 0; k < 6; ++k) v = 2 * v + 1;
    ASSERT_NEAR(out[i], v, 1e-5 * std::abs(v) + 1e-6) << i;
  }
  const auto* t = find_site(r, tiny, "launch");
  ASSERT_NE(t, nullptr) << advice_list(r);
  EXPECT_EQ(t->shaped_launches, 3u);
  EXPECT_EQ(t->grid_blocks, 1u);
  EXPECT_EQ(t->block_threads, dev.is_cuda() ? 32u : 0u);
  EXPECT_EQ(t->workers, dev.is_cuda() ? 32u : 1u);
  EXPECT_LT(t->occupancy, 0.25);
  EXPECT_GT(t->occupancy, 0.0);
  if (dev.is_cuda()) {
    EXPECT_GE(t->blocks_per_sm, 1);
  }
  EXPECT_TRUE(has_advice(r, "low_occupancy", here(tiny))) << advice_list(r);
  const auto* c = find_site(r, chosen, "pipeline");
  ASSERT_NE(c, nullptr) << advice_list(r);
  EXPECT_GE(c->shaped_launches, 3u);
  EXPECT_GE(c->occupancy, 0.25) << c->shape();
  EXPECT_FALSE(has_advice(r, "low_occupancy", here(chosen))) << advice_list(r);
  EXPECT_NE(r.table().find("occupancy"), std::string::npos);
}

RESIDENT_BACKENDS(insight);

// The advice is a pure function of the figures: conditions a CPU cannot produce are checked here.
rs::profile_site gpu_site(const char* name, std::uint64_t calls, double seconds, std::uint64_t bytes_per_call) {
  rs::profile_site s;
  s.file = "/src/app.cpp";
  s.line = 42;
  s.name = name;
  s.dev = rs::device::cuda(0);
  s.calls = s.timed_calls = calls;
  s.kernels = calls;
  s.seconds = seconds;
  s.bytes_read = s.bytes_written = calls * bytes_per_call / 2;
  s.min_call_bytes = s.max_call_bytes = bytes_per_call;
  return s;
}

TEST(advice, launch_bound_calls_on_a_gpu_are_told_to_capture_a_graph) {
  const std::vector<std::pair<rs::device, double>> rate = {{rs::device::cuda(0), 4000.0}};
  auto small = gpu_site("map|map", 1000, 1000 * 3e-6, 8192);  // 3 us per call
  auto a = rs::advise({small}, rate);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, "launch_bound");
  EXPECT_EQ(a[0].site, "app.cpp:42");
  EXPECT_NE(a[0].message.find("graph"), std::string::npos);

  auto big = gpu_site("map|map", 100, 100 * 180e-6, std::size_t(512) << 20);  // ~3 TB/s: near the copy rate
  EXPECT_TRUE(rs::advise({big}, rate).empty());
  auto few = gpu_site("map", 4, 4 * 3e-6, 8192);  // too few calls to call it a pattern
  EXPECT_TRUE(rs::advise({few}, rate).empty());
}

TEST(advice, low_occupancy_is_told_only_for_calls_long_enough_to_matter) {
  const std::vector<std::pair<rs::device, double>> rate = {{rs::device::cuda(0), 4000.0}};
  auto shaped = [](rs::profile_site s, double occupancy) {
    s.shaped_launches = s.calls;
    s.grid_blocks = 1;
    s.block_threads = 32;
    s.blocks_per_sm = 16;
    s.workers = 32;
    s.occupancy = occupancy;
    return s;
  };
  auto kinds = [&](const rs::profile_site& s) {
    std::string k;
    for (const auto& a : rs::advise({s}, rate)) k += a.kind + " ";
    return k;
  };
  // 1 MiB per call in 2 ms: long calls with a sliver of the device busy.
  const auto slow = gpu_site("launch", 10, 10 * 2e-3, std::size_t(1) << 20);
  EXPECT_NE(kinds(shaped(slow, 0.016)).find("low_occupancy"), std::string::npos) << kinds(shaped(slow, 0.016));
  EXPECT_EQ(kinds(shaped(slow, 0.5)).find("low_occupancy"), std::string::npos);
  EXPECT_EQ(kinds(slow).find("low_occupancy"), std::string::npos) << "no shape recorded: no advice";
  // 3 us per call: the launch's fixed cost explains the time (launch-bound), not the shape.
  const auto quick = gpu_site("launch", 1000, 1000 * 3e-6, 8192);
  EXPECT_EQ(kinds(shaped(quick, 0.016)), "launch_bound ");
  const auto a = rs::advise({shaped(slow, 0.016)}, rate);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.back().example, "examples/launch_config.cpp");
  EXPECT_NE(a.back().message.find("1x32, 16/SM"), std::string::npos) << a.back().message;
}

TEST(advice, no_advice_where_nothing_was_measured) {
  auto untimed = gpu_site("map", 1000, 0, std::size_t(64) << 20);
  untimed.timed_calls = 0;  // captured into a graph: no time
  EXPECT_TRUE(rs::advise({untimed}, {{rs::device::cuda(0), 4000.0}}).empty());
  auto slow = gpu_site("map", 10, 10 * 1e-3, std::size_t(64) << 20);  // 67 GB/s
  EXPECT_TRUE(rs::advise({slow}, {{rs::device::cuda(0), 0.0}}).empty());  // no copy rate: no comparison
  EXPECT_EQ(rs::advise({slow}, {{rs::device::cuda(0), 4000.0}}).at(0).kind, "below_copy_rate");
}

TEST(profile, the_report_prints_a_table_with_units_and_valid_json) {
  rs::profile_report r;
  r.sites = {gpu_site("map", 1000, 1000 * 3e-6, 8192)};
  r.sites[0].file = "/a \"quoted\"\\dir/app.cpp";
  r.copy_rates = {{rs::device::cuda(0), 4000.0}};
  r.advice = rs::advise(r.sites, r.copy_rates);
  const std::string t = r.table();
  EXPECT_NE(t.find("site"), std::string::npos);
  EXPECT_NE(t.find("GB/s"), std::string::npos);
  EXPECT_NE(t.find(" us"), std::string::npos);
  EXPECT_NE(t.find("KiB"), std::string::npos);
  EXPECT_NE(t.find("[launch_bound]"), std::string::npos);
  const auto j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j["schema"], "resident.profile");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_TRUE(j["sites"][0]["calls"].is_number_unsigned());
  EXPECT_EQ(j["sites"][0]["calls"], 1000);
  EXPECT_TRUE(j["sites"][0]["seconds"].is_number_float());
  EXPECT_EQ(j["sites"][0]["file"], "/a \"quoted\"\\dir/app.cpp");
  EXPECT_EQ(j["advice"][0]["kind"], "launch_bound");
  EXPECT_EQ(j["copy_rates"][0]["device"], "cuda:0");

  const rs::profile_report empty;
  EXPECT_NE(empty.table().find("nothing recorded"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(empty.json())["sites"].size(), 0u);
}

TEST(profile, figures_that_are_not_numbers_and_names_that_are_not_utf8_stay_valid_json) {
  rs::profile_report r;
  r.sites = {gpu_site("map", 10, 1e-3, 8192), gpu_site("map", 10, 1e-3, 8192)};
  r.sites[0].seconds = NAN;
  r.sites[0].occupancy = INFINITY;
  r.sites[0].shaped_launches = 1;
  r.sites[1].file = "caf\xe9/\xff\xfe.py";  // a Latin-1 path from a foreign site
  r.sites[1].name = "ok \xe2\x82\xac";      // valid UTF-8 stays as it is
  r.copy_rates = {{rs::device::cuda(0), -INFINITY}};
  r.advice = rs::advise(r.sites, r.copy_rates);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.json())) << r.json();
  EXPECT_TRUE(j["sites"][0]["seconds"].is_null());
  EXPECT_TRUE(j["sites"][0]["occupancy"].is_null());
  EXPECT_TRUE(j["copy_rates"][0]["gbps"].is_null());
  EXPECT_EQ(j["sites"][1]["file"], "caf\xef\xbf\xbd/\xef\xbf\xbd\xef\xbf\xbd.py");
  EXPECT_EQ(j["sites"][1]["name"], "ok \xe2\x82\xac");
  EXPECT_NO_THROW((void)r.table());
}

// RESIDENT_PROFILE_JSON's file: a path that cannot be written is named with the reason, and a reader
// (or another process writing the same path, as ranks of one job do) never sees a half-written file.
TEST(profile, a_saved_report_names_a_bad_path_and_is_never_seen_half_written) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("resident_profile_" + std::to_string(rs::test::fresh_seed()));
  fs::create_directories(dir);
  rs::profile_report small, large;
  for (int i = 0; i < 300; ++i) large.sites.push_back(gpu_site("map", 10, 1e-3, 8192));
  rs::test::expect_invalid([&] { small.save_json(dir.string()); }, "it is a directory; give a file name inside it");
  EXPECT_TRUE(fs::is_directory(dir));
  rs::test::expect_invalid([&] { small.save_json((dir / "missing" / "p.json").string()); },
                           "the folder");
  const fs::path file = dir / "p.json";
  large.save_json(file.string());
  std::atomic<bool> done{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t)
    writers.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) (t ? small : large).save_json(file.string());
    });
  std::thread reader([&] {
    while (!done.load()) {
      std::ifstream in(file);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!nlohmann::json::accept(text)) ++torn;
    }
  });
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0) << "a reader saw a file that was not a whole JSON document";
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() != "p.json";
  EXPECT_EQ(entries, 0u) << "temporary files were left behind";
  fs::remove_all(dir);
}

TEST(profile, copy_rate_of_an_absent_device_is_refused) {
  EXPECT_THROW((void)rs::copy_rate(rs::device::cuda(63)), rs::device_unavailable);
  const double cpu = rs::copy_rate(rs::device::cpu());
  EXPECT_GT(cpu, 0.0);
  EXPECT_EQ(rs::copy_rate(rs::device::cpu()), cpu);  // measured once, then cached
}

// RESIDENT_PROFILE is read once per process: CTest runs this test once per kind of value
// (test_insight.profile_environment_*). A value that says no ("off", "false") profiles nothing; one
// that cannot be read is named on stderr, once, with what it was taken as.
TEST(profile_environment, the_variable_is_read_as_it_says) {
  const char* v = std::getenv("RESIDENT_PROFILE");
  if (!v) GTEST_SKIP() << "run by CTest with RESIDENT_PROFILE set";
  const std::string value = v;
  struct reading {
    const char* value;
    bool on;
    bool named;  // the value is named on stderr
  };
  const reading readings[] = {{"", false, false},    {"0", false, false},   {"1", true, false},
                              {"off", false, false}, {"OFF", false, false}, {"false", false, false},
                              {"no", false, false},  {"on", true, false},   {"true", true, false},
                              {"yes", true, false},  {"lots", true, true},  {" 1", true, true}};
  const reading* want = nullptr;
  for (const reading& r : readings)
    if (value == r.value) want = &r;
  if (!want) GTEST_SKIP() << "no expectation for RESIDENT_PROFILE='" << value << "'";
  testing::internal::CaptureStderr();
  const bool on = rs::profiling();
  const bool again = rs::profiling();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(on, want->on) << "RESIDENT_PROFILE='" << value << "'";
  EXPECT_EQ(again, on);
  if (want->named) {
    EXPECT_NE(err.find("RESIDENT_PROFILE is '" + value + "'"), std::string::npos) << err;
    EXPECT_NE(err.find("use 1 to profile"), std::string::npos) << err;
    EXPECT_EQ(err.find("RESIDENT_PROFILE"), err.rfind("RESIDENT_PROFILE")) << "named more than once: " << err;
  } else {
    EXPECT_EQ(err.find("RESIDENT_PROFILE"), std::string::npos) << err;
  }
}

TEST(transfer_policy, log_lines_name_the_callers_file_line_and_bytes) {
  const std::vector<float> h(1000, 1.5f);
  rs::scoped_transfer_policy log(rs::transfer_policy::log);
  testing::internal::CaptureStderr();
  const unsigned line = resident::source_location::current().line() + 1;
  auto x = rs::to_device(h, rs::device::cpu());
  const unsigned back = resident::source_location::current().line() + 1;
  std::vector<float> out = x.to_host();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("host-to-device transfer of 3.9 KiB on cpu (4000 bytes) by to_device at " + here(line)),
            std::string::npos) << err;
  EXPECT_NE(err.find("device-to-host transfer of 3.9 KiB on cpu (4000 bytes) by to_host at " + here(back)),
            std::string::npos) << err;

  rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
  const unsigned refused = resident::source_location::current().line() + 2;
  try {
    rs::copy(std::span<const float>(h), x);
    ADD_FAILURE() << "the transfer was not refused";
  } catch (const rs::transfer_forbidden& e) {
    EXPECT_NE(std::string(e.what()).find("by copy at " + here(refused)), std::string::npos) << e.what();
  }
}

// A site's figures, each its own: a transfer's rate counts the bytes it moves once; the JSON keeps read
// and written apart.
TEST(profile, a_transfers_rate_counts_the_bytes_it_moves_once_and_the_json_keeps_each_figure) {
  rs::profile_site t = gpu_site("to_device", 2, 1.0, 4000000000);  // 4e9 bytes read and 4e9 written
  t.transfer = true;
  EXPECT_DOUBLE_EQ(t.gbps(), 4.0) << "a transfer reads 4 GB in 1 s: 4 GB/s across the bus";
  rs::profile_site m = gpu_site("map", 1, 1.0, 0);
  m.bytes_read = 1000;
  m.bytes_written = 3000;
  EXPECT_DOUBLE_EQ(m.gbps(), 4000 / 1e9);
  rs::profile_report r;
  r.sites = {t, m};
  const auto j = nlohmann::json::parse(r.json());
  EXPECT_EQ(j["sites"][1]["bytes_read"], 1000);
  EXPECT_EQ(j["sites"][1]["bytes_written"], 3000);
  EXPECT_DOUBLE_EQ(j["sites"][0]["gbps"].get<double>(), 4.0);
}

}  // namespace
