// Compiled by nvcc when the CUDA backend is in the build.
// Flows over two devices: the plan (streams, cross-device edges as events) without a GPU, and stages
// on two GPUs with peer copies between them, replayed against FP64.
#include "busy.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/flow/detail/plan.hpp"
#include "resident/flow/flow.hpp"
#include "resident/fuse/pipeline.hpp"
#include "flow/flow_support.hpp"
#include "support.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

namespace rs = resident;
using rs::test::backend;

namespace {

using rs::test::spin, rs::test::stage_log;

// Planning a flow over two GPUs needs no GPU: which stream each stage takes, and which edges become
// event waits within a device or across two.
TEST(flow_plan, stages_take_their_devices_streams_and_cross_device_edges_wait_on_events) {
  namespace plan = rs::detail::flow_plan;
  const rs::device g0 = rs::device::cuda(0), g1 = rs::device::cuda(1);
  // a (g0), b (g1) independent; c (g1) after a and b; d (g0) after c; e (g1) after c.
  const std::vector<rs::device> dev_of{g0, g1, g1, g0, g1};
  const std::vector<std::vector<std::size_t>> preds{{}, {}, {0, 1}, {2}, {2}};
  const auto p = plan::make(g0, 2, dev_of, preds, {0, 1, 2, 3, 4});
  ASSERT_EQ(p.steps.size(), 5u);
  auto lane = [](rs::device d, int k) { return plan::lane{d, k}; };
  EXPECT_TRUE(p.steps[0].on == lane(g0, 0));
  EXPECT_FALSE(p.steps[0].first_on_lane) << "the home stream starts the flow";
  EXPECT_TRUE(p.steps[1].on == lane(g1, 0));
  EXPECT_TRUE(p.steps[1].first_on_lane) << "cuda:1's first stream waits for the flow's start";
  EXPECT_TRUE(p.steps[2].on == lane(g1, 0)) << "c continues after b on b's stream";
  EXPECT_EQ(p.steps[2].waits, (std::vector<std::size_t>{0})) << "c waits for a across devices, for b not at all";
  EXPECT_TRUE(p.steps[3].on == lane(g0, 1)) << "d takes cuda:0's next stream";
  EXPECT_TRUE(p.steps[3].first_on_lane);
  EXPECT_EQ(p.steps[3].waits, (std::vector<std::size_t>{2}));
  EXPECT_TRUE(p.steps[4].on == lane(g1, 0)) << "e continues after c, the last stage on c's stream";
  EXPECT_TRUE(p.steps[4].waits.empty());
  ASSERT_EQ(p.tails.size(), 2u) << "every stream but the home one joins back";
  for (const auto& [l, last] : p.tails) {
    if (l == lane(g0, 1)) EXPECT_EQ(last, 3u);
    else if (l == lane(g1, 0)) EXPECT_EQ(last, 4u);
    else ADD_FAILURE() << "a tail on " << l.dev.name() << " stream " << l.index;
  }

  // The CPU: one stream, nothing to wait for, nothing to join.
  const rs::device c = rs::device::cpu();
  const auto q = plan::make(c, 1, {c, c, c}, {{}, {0}, {0, 1}}, {0, 1, 2});
  for (const auto& st : q.steps) {
    EXPECT_TRUE(st.on == lane(c, 0));
    EXPECT_FALSE(st.first_on_lane);
    EXPECT_TRUE(st.waits.empty());
  }
  EXPECT_TRUE(q.tails.empty());
  // All stages on another GPU than home: the home stream only forks and joins.
  const auto r = plan::make(g0, 1, {g1, g1}, {{}, {0}}, {0, 1});
  EXPECT_TRUE(r.steps[0].on == lane(g1, 0) && r.steps[0].first_on_lane);
  EXPECT_TRUE(r.steps[1].on == lane(g1, 0) && r.steps[1].waits.empty());
  ASSERT_EQ(r.tails.size(), 1u);
  EXPECT_EQ(r.tails[0].second, 1u);

  EXPECT_THROW(plan::make(g0, 0, {g0}, {{}}, {0}), rs::invalid_argument);
  EXPECT_THROW(plan::make(g0, 1, {g0, g0}, {{}, {0}}, {1, 0}), rs::invalid_argument) << "a stage before its predecessor";
  EXPECT_THROW(plan::make(g0, 1, {g0}, {{}, {}}, {0, 1}), rs::invalid_argument) << "tables of two sizes";
}

// A stage's device from its declarations, on any machine: ranges say where they live.
TEST(flow_plan, a_stage_runs_where_it_writes_and_touching_two_devices_is_refused) {
  namespace plan = rs::detail::flow_plan;
  const rs::device g0 = rs::device::cuda(0), g1 = rs::device::cuda(1), cpu = rs::device::cpu();
  float host[8] = {};
  const rs::access::range on0{host, 16, g0}, on1{host + 4, 16, g1}, unknown{host, 32}, cpu_range{host, 32, cpu};
  EXPECT_EQ(plan::stage_device("s", rs::access{}.writes(on1), g0), g1);
  EXPECT_EQ(plan::stage_device("s", rs::access{}.reads(on0).writes(on1), g0), g1) << "a peer copy runs where it writes";
  EXPECT_EQ(plan::stage_device("s", rs::access{}.reads(on1), g0), g1);
  EXPECT_EQ(plan::stage_device("s", rs::access{}.reads(unknown).writes(cpu_range), g1), g1) << "host memory: home";
  EXPECT_EQ(plan::stage_device("s", rs::access{}, g1), g1);
  EXPECT_EQ(plan::stage_device("s", rs::access{}.reads(on0, on1).on(g1), g0), g1) << "access::on decides";
  EXPECT_EQ(plan::stage_device("s", rs::access{}.writes(on1), cpu), cpu) << "a CPU flow: GPU memory is not its device";
  EXPECT_EQ(plan::stage_device("s", rs::access{}.writes(rs::access::range{host, 0, g1}), g0), g0) << "no bytes, no device";
  try {
    (void)plan::stage_device("both", rs::access{}.writes(on0, on1), g0);
    ADD_FAILURE() << "a stage writing two GPUs' memory was placed";
  } catch (const rs::device_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("stage 'both' writes memory of cuda:0 and of cuda:1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)plan::stage_device("s", rs::access{}.reads(on0, on1), g0), rs::device_mismatch);
  EXPECT_THROW((void)plan::stage_device("s", rs::access{}.on(cpu), g0), rs::device_mismatch);
  EXPECT_THROW((void)plan::stage_device("s", rs::access{}.on(g1), cpu), rs::device_mismatch);
}

// A flow over two devices: two GPUs on CUDA (skipped, saying so, where fewer answer); on the CPU both
// are the one CPU and the same stages, edges and replays run on its one stream.
class flow_peer : public backend {
 protected:
  void SetUp() override {
    backend::SetUp();
    if (IsSkipped()) return;
    if (dev.is_cuda()) {
      if (rs::cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs, " << rs::cuda_device_count() << " answer";
      d0 = rs::device::cuda(0);
      d1 = rs::device::cuda(1);
    }
  }
  void TearDown() override {
    if (IsSkipped()) return;
    rs::synchronize(d0);
    rs::synchronize(d1);
    backend::TearDown();
  }
  rs::device d0 = rs::device::cpu(), d1 = rs::device::cpu();
};

TEST_P(flow_peer, stages_on_two_devices_with_edges_between_them_replay_against_fp64) {
  const std::size_t n = (std::size_t(1) << 20) + 7;
  std::mt19937_64 g(rs::test::fresh_seed());
  const auto hx0 = rs::test::random_vector<float>(n, g()), hx1 = rs::test::random_vector<float>(n, g());
  rs::flow f(d0, 2);  // before the arrays: they are freed on its streams
  auto x0 = rs::to_device(hx0, d0);
  auto x1 = rs::to_device(hx1, d1);
  rs::array<float> a0(n, d0), b1(n, d1), a1(n, d1), y1(n, d1), y0(n, d0), z0(n, d0);
  const auto sa = static_cast<long long>(g() % 400000), sb = static_cast<long long>(g() % 400000);
  const auto a = f.add("a0 = 2 x0 + 1 (first device)", [&, sa](rs::stream_ref s) {
    rs::launch(s, {rs::dims(1), rs::dims(1)}, spin{sa});
    a0.set_stream(s);
    rs::map([] RESIDENT_HD(float v) { return 2.f * v + 1.f; })(x0, a0);
  }, rs::access{}.reads(x0).writes(a0));
  const auto b = f.add("b1 = x1 * x1 (second device)", [&, sb](rs::stream_ref s) {
    rs::launch(s, {rs::dims(1), rs::dims(1)}, spin{sb});
    b1.set_stream(s);
    rs::map([] RESIDENT_HD(float v) { return v * v; })(x1, b1);
  }, rs::access{}.reads(x1).writes(b1));
  const auto c = f.add("a1 = a0 (peer copy)", [&](rs::stream_ref s) {
    a1.set_stream(s);
    rs::copy(a0, a1);
  }, rs::access{}.reads(a0).writes(a1));
  const auto d = f.add("y1 = a1 + b1", [&](rs::stream_ref s) {
    y1.set_stream(s);
    (rs::zip(a1, b1) | rs::map([] RESIDENT_HD(float p, float q) { return p + q; }))(y1);
  }, rs::access{}.reads(a1, b1).writes(y1));
  const auto e = f.add("y0 = y1 (peer copy back)", [&](rs::stream_ref s) {
    y0.set_stream(s);
    rs::copy(y1, y0);
  }, rs::access{}.reads(y1).writes(y0));
  const auto z = f.add("z0 = y0 - x0 / 2", [&](rs::stream_ref s) {
    z0.set_stream(s);
    (rs::zip(y0, x0) | rs::map([] RESIDENT_HD(float p, float q) { return p - 0.5f * q; }))(z0);
  }, rs::access{}.reads(y0, x0).writes(z0));
  EXPECT_EQ(f.device_of(a), d0);
  EXPECT_EQ(f.device_of(b), d1);
  EXPECT_EQ(f.device_of(c), d1) << "a copy runs where it writes";
  EXPECT_EQ(f.device_of(d), d1);
  EXPECT_EQ(f.device_of(e), d0);
  EXPECT_EQ(f.device_of(z), d0);
  EXPECT_TRUE(f.predecessors(b).empty()) << "the two devices' first stages are independent";
  EXPECT_EQ(f.predecessors(c), (std::vector<rs::flow::stage_id>{a}));
  EXPECT_EQ(f.predecessors(d), (std::vector<rs::flow::stage_id>{b, c}));
  EXPECT_EQ(f.predecessors(e), (std::vector<rs::flow::stage_id>{d}));
  EXPECT_EQ(f.predecessors(z), (std::vector<rs::flow::stage_id>{e}));

  std::vector<double> want_y(n), want_z(n);
  for (std::size_t i = 0; i < n; ++i) {
    want_y[i] = (2.0 * hx0[i] + 1.0) + double(hx1[i]) * hx1[i];
    want_z[i] = want_y[i] - 0.5 * hx0[i];
  }
  const std::vector<float> poison(n, rs::test::poison<float>());
  auto poison_outputs = [&] {
    for (auto* o : {&a0, &b1, &a1, &y1, &y0, &z0}) rs::copy(std::span<const float>(poison), *o);
    rs::synchronize(d0);
    rs::synchronize(d1);
  };
  auto check = [&](const char* what) {
    SCOPED_TRACE(what);
    EXPECT_LT(rs::test::rel_error(y1.to_host(), want_y), 1e-6);
    EXPECT_LT(rs::test::rel_error(z0.to_host(), want_z), 1e-6);
  };

  poison_outputs();
  rs::scoped_ledger e0(d0), e1(d1);
  f.run();
  const auto eager0 = e0.delta(), eager1 = e1.delta();
  check("eager run");
  const auto rows = f.report();
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[c].device, d1);
  EXPECT_EQ(rows[e].device, d0);
  if (dev.is_cuda()) {
    EXPECT_EQ(rows[c].issued.peer_copies, 1u) << "counted on the receiving device";
    EXPECT_EQ(rows[e].issued.peer_copies, 1u);
    EXPECT_EQ(eager0.h2d_copies + eager0.d2h_copies + eager1.h2d_copies + eager1.d2h_copies, 0u)
        << "nothing crossed the host bus";
  }
  EXPECT_NE(f.report_table().find(d1.name()), std::string::npos) << f.report_table();

  poison_outputs();
  f.run();
  check("second eager run");

  rs::graph gr = f.capture();
  rs::scoped_ledger r0(d0), r1(d1);
  const int replays = 3;
  for (int r = 0; r < replays; ++r) {
    poison_outputs();
    gr.replay(f.stream());
    f.stream().synchronize();  // the home stream joins both devices' streams
    check(("replay " + std::to_string(r)).c_str());
  }
  EXPECT_EQ(r0.delta().kernels, replays * eager0.kernels) << "each replay launches the stages' kernels on cuda:0";
  EXPECT_EQ(r1.delta().kernels, replays * eager1.kernels) << "and on cuda:1";
  EXPECT_EQ(gr.kernels(), dev.is_cuda() ? eager0.kernels + eager1.kernels : eager0.kernels);
}

// A stage touching memory of two devices at once is refused when it is added (on the CPU, both
// devices are the one CPU and the same stages are accepted).
TEST_P(flow_peer, a_stage_touching_two_devices_is_a_device_mismatch) {
  rs::flow f(d0);
  rs::array<float> p(16, d0), q(16, d1);
  auto noop = [](rs::stream_ref) {};
  const bool two = !(d0 == d1);
  if (two) {
    EXPECT_THROW(f.add("writes both", noop, rs::access{}.writes(p, q)), rs::device_mismatch);
    EXPECT_THROW(f.add("reads both", noop, rs::access{}.reads(p, q)), rs::device_mismatch);
    EXPECT_THROW(f.add("writes both slices", noop, rs::access{}.writes(p.slice(0, 4), q.slice(4, 4))),
                 rs::device_mismatch);
    EXPECT_EQ(f.size(), 0u);
  }
  stage_log log;
  const auto on1 = f.add("reads both on the second", log.stage(f.size()), rs::access{}.reads(p, q).on(d1));
  EXPECT_EQ(f.device_of(on1), d1);
  const auto copy = f.add("q = p", log.stage(f.size()), rs::access{}.reads(p).writes(q));
  EXPECT_EQ(f.device_of(copy), d1);
  const auto view = f.add("a view of p", log.stage(f.size()), rs::access{}.writes(p.view()));
  EXPECT_EQ(f.device_of(view), d0) << "a CUDA flow asks the driver where a view's memory lives";
  EXPECT_NO_THROW(f.run());
  EXPECT_TRUE(log.each_once_after_its_predecessors(f));
  EXPECT_EQ(f.predecessors(copy), (std::vector<rs::flow::stage_id>{on1})) << "writes q after its reader";
  EXPECT_EQ(f.predecessors(view), (std::vector<rs::flow::stage_id>{on1, copy})) << "writes p after both its readers";
}

// A null stream handle names its own device's default stream, whichever device is current: the
// launches, synchronization, events, waits, allocations and copies of one GPU issued while the other
// is current.
TEST_P(flow_peer, default_streams_are_their_devices_whichever_device_is_current) {
  const std::size_t n = 1 << 16;
  const auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = rs::to_device(h, d0);
  rs::array<float> y(n, d0);
  {
    rs::device_scope other(d1);
    rs::launch(rs::default_stream(d0), {rs::dims(1), rs::dims(1)}, spin{400'000'000});  // about 0.2 s
    if (d0.is_cuda()) {
      EXPECT_FALSE(rs::detail::cuda::stream_done(0, nullptr)) << "the launch went to another device's stream";
    }
    rs::map([] RESIDENT_HD(float v) { return 3.f * v; })(x, y);
    if (d0.is_cuda()) {
      EXPECT_EQ(rs::detail::cuda::current_device(), 1) << "a launch restores the caller's device";
    }
    rs::default_stream(d0).synchronize();
    if (d0.is_cuda()) {
      EXPECT_TRUE(rs::detail::cuda::stream_done(0, nullptr)) << "synchronize() waited for another device's stream";
      EXPECT_EQ(rs::detail::cuda::current_device(), 1) << "the caller's device is restored";
    }
    rs::event ev(d0);
    ev.record(rs::default_stream(d0));
    ev.wait_on(rs::default_stream(d1));
    rs::default_stream(d1).wait_for(rs::default_stream(d0));
    ev.synchronize();
    rs::array<float> w(n, d0);  // from cuda:0's pool, ordered on cuda:0's default stream
    rs::copy(y, w);
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = 3.f * h[i];
    EXPECT_EQ(w.to_host(), want);
    if (d0.is_cuda()) {
      EXPECT_EQ(rs::detail::cuda::current_device(), 1);
    }
  }
}

// On one device of two streams, a stage after two stages that ran on different streams continues one's
// stream and waits for the other.
TEST(flow_plan, an_edge_between_two_streams_of_one_device_is_a_wait) {
  namespace plan = rs::detail::flow_plan;
  const rs::device g0 = rs::device::cuda(0);
  // a, b independent (streams 0 and 1), c after both.
  const auto p = plan::make(g0, 2, {g0, g0, g0}, {{}, {}, {0, 1}}, {0, 1, 2});
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_TRUE(p.steps[0].on == (plan::lane{g0, 0}));
  EXPECT_TRUE(p.steps[1].on == (plan::lane{g0, 1}));
  EXPECT_TRUE(p.steps[2].on == (plan::lane{g0, 0})) << "c continues after a on a's stream";
  EXPECT_EQ(p.steps[2].waits, (std::vector<std::size_t>{1})) << "c waits for b, on the device's other stream";
}

RESIDENT_BACKENDS(flow_peer);

}  // namespace
