// Compiled by nvcc when the CUDA backend is in the build.
#include "busy.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/flow/detail/plan.hpp"
#include "resident/flow/flow.hpp"
#include "resident/fuse/pipeline.hpp"
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

// Keeps one thread busy for about `cycles` clock ticks: stages of random length shake out races.
struct spin {
  long long cycles;
  RESIDENT_HD void operator()(rs::thread_index) const {
#if defined(__CUDA_ARCH__)
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
#else
    volatile long long k = 0;
    for (long long i = 0; i < cycles / 64; ++i) k = k + 1;
#endif
  }
};

// Stages that log their calls, each with its own id: the log shows the order a run called them in (on
// the CPU, the order their work ran; on a GPU, the order it was issued, which the streams' events keep).
struct stage_log {
  std::mutex m;
  std::vector<rs::flow::stage_id> called;
  // The body of the stage that f will number `id` (the next one: f.size() before it is added).
  std::function<void(rs::stream_ref)> stage(rs::flow::stage_id id) {
    return [this, id](rs::stream_ref) {
      std::lock_guard lock(m);
      called.push_back(id);
    };
  }
  // Every stage of f called once, each after its predecessors.
  ::testing::AssertionResult each_once_after_its_predecessors(const rs::flow& f) {
    std::lock_guard lock(m);
    if (called.size() != f.size())
      return ::testing::AssertionFailure() << called.size() << " calls for " << f.size() << " stages";
    std::vector<std::size_t> at(f.size(), f.size());
    for (std::size_t k = 0; k < called.size(); ++k) {
      if (called[k] >= f.size() || at[called[k]] != f.size())
        return ::testing::AssertionFailure() << "stage " << called[k] << " called twice or unknown";
      at[called[k]] = k;
    }
    for (rs::flow::stage_id s = 0; s < f.size(); ++s)
      for (auto p : f.predecessors(s))
        if (!(at[p] < at[s])) return ::testing::AssertionFailure() << "stage " << s << " called before its predecessor " << p;
    return ::testing::AssertionSuccess();
  }
};

using flows = backend;

using flows_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

// Two independent stages, each behind a busy kernel of its own length (one of them 50 ms in most
// trials), then a stage reading both on another stream: one that does not wait for both reads the
// inputs from before.
TEST_P(flows_cuda, stages_see_their_inputs_final_values) {
  const std::size_t n = 1 << 16;
  std::mt19937_64 g(rs::test::fresh_seed());
  auto hx = rs::test::random_vector<float>(n, g()), hy = rs::test::random_vector<float>(n, g());
  for (int trial = 0; trial < 20; ++trial) {
    auto x = rs::to_device(hx, dev), y = rs::to_device(hy, dev);
    rs::array<float> z(n, dev);
    rs::synchronize(dev);
    const double small = double(g() % 1000) / 1000;  // up to 1 ms
    const double da = trial % 3 == 0 ? 50 : small, db = trial % 3 == 1 ? 50 : small;
    rs::flow f(dev);
    f.add("x = 2x + 1", [&, da](rs::stream_ref s) {
      rs::test::queue_busy(s, da);
      x.set_stream(s);
      rs::map([] RESIDENT_HD(float v) { return 2.f * v + 1.f; })(x);
    }, rs::access{}.reads(x).writes(x));
    f.add("y = y * y", [&, db](rs::stream_ref s) {
      rs::test::queue_busy(s, db);
      y.set_stream(s);
      rs::map([] RESIDENT_HD(float v) { return v * v; })(y);
    }, rs::access{}.reads(y).writes(y));
    f.add("z = x + y", [&](rs::stream_ref s) {
      z.set_stream(s);
      (rs::zip(x, y) | rs::map([] RESIDENT_HD(float a, float b) { return a + b; }))(z);
    }, rs::access{}.reads(x, y).writes(z));
    EXPECT_TRUE(f.predecessors(0).empty());
    EXPECT_TRUE(f.predecessors(1).empty()) << "x and y stages are independent";
    EXPECT_EQ(f.predecessors(2), (std::vector<rs::flow::stage_id>{0, 1}));
    f.run();
    z.set_stream(f.stream());
    auto hz = z.to_host();
    for (std::size_t i = 0; i < n; ++i) {
      const double want = (2.0 * hx[i] + 1.0) + double(hy[i]) * hy[i];
      ASSERT_NEAR(hz[i], want, 1e-6 * (1.0 + std::abs(want))) << "trial " << trial << ", i " << i;
    }
    x.set_stream(rs::default_stream(dev));
    y.set_stream(rs::default_stream(dev));
    z.set_stream(rs::default_stream(dev));
  }
}

using flows_cpu = backend;  // the CPU backend's rule: the `cpu` CTest entry

// On the CPU a stage's work is done when the stage returns, so a stage finds its inputs final the
// moment it is called: read straight from memory, with no synchronization, before its own work.
TEST_P(flows_cpu, cpu_runs_in_issue_order_a_stage_finds_its_inputs_final_when_called) {
  const std::size_t n = 1 << 16;
  std::mt19937_64 g(rs::test::fresh_seed());
  auto hx = rs::test::random_vector<float>(n, g()), hy = rs::test::random_vector<float>(n, g());
  for (int trial = 0; trial < 5; ++trial) {
    auto x = rs::to_device(hx, dev), y = rs::to_device(hy, dev);
    rs::array<float> z(n, dev);
    std::size_t stale = n;
    rs::flow f(dev);
    f.add("x = 2x + 1", [&](rs::stream_ref s) {
      rs::test::queue_busy(s, 1);  // the wait is the stage's own: done before it returns
      x.set_stream(s);
      rs::map([] RESIDENT_HD(float v) { return 2.f * v + 1.f; })(x);
    }, rs::access{}.reads(x).writes(x));
    f.add("y = y * y", [&](rs::stream_ref s) {
      y.set_stream(s);
      rs::map([] RESIDENT_HD(float v) { return v * v; })(y);
    }, rs::access{}.reads(y).writes(y));
    f.add("z = x + y", [&](rs::stream_ref s) {
      stale = 0;
      for (std::size_t i = 0; i < n; ++i) stale += x.data()[i] != 2.f * hx[i] + 1.f || y.data()[i] != hy[i] * hy[i];
      z.set_stream(s);
      (rs::zip(x, y) | rs::map([] RESIDENT_HD(float a, float b) { return a + b; }))(z);
    }, rs::access{}.reads(x, y).writes(z));
    f.run();
    EXPECT_EQ(stale, 0u) << "trial " << trial << ": inputs not final when the reading stage was called";
    std::size_t off = 0;
    for (std::size_t i = 0; i < n; ++i) off += z.data()[i] != (2.f * hx[i] + 1.f) + hy[i] * hy[i];
    EXPECT_EQ(off, 0u) << "trial " << trial << ": z not written when the run returned";
    x.set_stream(rs::default_stream(dev));
    y.set_stream(rs::default_stream(dev));
    z.set_stream(rs::default_stream(dev));
  }
}

// The inferred edges, and a run that calls each stage after its predecessors (the stages record when
// they are called: on the CPU that is when their work runs; on a GPU when it is issued, the order the
// streams' events then keep).
TEST_P(flows, inferred_orders_for_read_write_hazards_and_runs_in_that_order) {
  rs::array<float> a(100, dev), b(100, dev), c(100, dev);
  rs::flow f(dev);
  std::mutex m;
  std::vector<rs::flow::stage_id> called;
  auto record = [&](rs::flow::stage_id id) {
    return [&, id](rs::stream_ref) {
      std::lock_guard lock(m);
      called.push_back(id);
    };
  };
  auto w_a = f.add("write a", record(0), rs::access{}.writes(a));
  auto r_a = f.add("read a", record(1), rs::access{}.reads(a).writes(b));
  auto w_a2 = f.add("write a again", record(2), rs::access{}.writes(a));  // after the reader (WAR) and writer (WAW)
  auto other = f.add("write c", record(3), rs::access{}.writes(c));
  auto slice = f.add("read a[10:20]", record(4), rs::access{}.reads(a.slice(10, 10)));
  ASSERT_EQ(slice, 4u);
  EXPECT_EQ(f.predecessors(r_a), (std::vector<rs::flow::stage_id>{w_a}));
  EXPECT_EQ(f.predecessors(w_a2), (std::vector<rs::flow::stage_id>{w_a, r_a}));
  EXPECT_TRUE(f.predecessors(other).empty());
  EXPECT_EQ(f.predecessors(slice), (std::vector<rs::flow::stage_id>{w_a, w_a2}));
  for (int run = 0; run < 3; ++run) {
    called.clear();
    f.run();
    ASSERT_EQ(called.size(), 5u) << "each stage once";
    std::vector<std::size_t> at(5);
    for (std::size_t k = 0; k < called.size(); ++k) at[called[k]] = k;
    for (rs::flow::stage_id s = 0; s < 5; ++s)
      for (auto p : f.predecessors(s)) EXPECT_LT(at[p], at[s]) << "stage " << s << " called before its predecessor " << p;
  }
}

TEST_P(flows, cycles_and_unordered_writers_are_errors) {
  rs::array<float> a(10, dev);
  auto noop = [](rs::stream_ref) {};
  {
    rs::flow f(dev);
    auto s0 = f.add("first", noop, rs::access{}.writes(a));
    auto s1 = f.add("second", noop, rs::access{}.reads(a));
    f.order(s1, s0);
    try {
      f.run();
      FAIL() << "a cycle ran";
    } catch (const rs::flow_error& e) {
      EXPECT_NE(std::string(e.what()).find("cycle through stages 'first', 'second'"), std::string::npos) << e.what();
    }
  }
  {
    rs::flow f(dev);
    f.add("writer 1", noop, rs::access{}.writes(a), {}, rs::inference::off);
    f.add("writer 2", noop, rs::access{}.writes(a), {}, rs::inference::off);
    EXPECT_THROW(f.validate(), rs::flow_error);
  }
  {
    rs::flow f(dev);
    EXPECT_THROW(f.add("late", noop, {}, {3}), rs::flow_error);
    EXPECT_THROW(f.order(0, 1), rs::flow_error);
    EXPECT_THROW(rs::flow(dev, 0), rs::invalid_argument);
    EXPECT_THROW(rs::flow(dev, rs::flow::max_streams + 1), rs::invalid_argument);
    EXPECT_THROW(rs::flow(dev, std::numeric_limits<int>::max()), rs::invalid_argument);
    EXPECT_NO_THROW(rs::flow(dev, rs::flow::max_streams));
  }
}

TEST_P(flows, a_failing_stage_is_named) {
  rs::flow f(dev);
  f.add("fine", [](rs::stream_ref) {});
  f.add("broken", [](rs::stream_ref) { throw rs::shape_mismatch("the arrays disagree"); });
  try {
    f.run();
    FAIL() << "no exception";
  } catch (const rs::stage_error& e) {
    EXPECT_EQ(e.stage(), "broken");
    EXPECT_NE(std::string(e.what()).find("stage 'broken' failed: the arrays disagree"), std::string::npos);
    EXPECT_THROW(std::rethrow_if_nested(e), rs::shape_mismatch);
  }
}

TEST_P(flows, graph_replay_equals_eager_and_report) {
  const std::size_t n = 4096;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = rs::to_device(h, dev);
  rs::array<float> y(n, dev), z(n, dev);
  rs::flow f(dev, 3);
  f.add("y = x + 1", [&](rs::stream_ref s) { y.set_stream(s); rs::map([] RESIDENT_HD(float v) { return v + 1.f; })(x, y); },
        rs::access{}.reads(x).writes(y));
  f.add("z = x * 3", [&](rs::stream_ref s) { z.set_stream(s); rs::map([] RESIDENT_HD(float v) { return v * 3.f; })(x, z); },
        rs::access{}.reads(x).writes(z));
  f.add("y = y + z", [&](rs::stream_ref s) {
    y.set_stream(s);
    (rs::zip(y, z) | rs::map([] RESIDENT_HD(float a, float b) { return a + b; }))(y);
  }, rs::access{}.reads(y, z).writes(y));
  f.run();
  y.set_stream(f.stream());
  auto eager = y.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(eager[i], (h[i] + 1.f) + h[i] * 3.f);
  auto rows = f.report();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].issued.kernels, 1u);
  EXPECT_NE(f.report_table().find("y = y + z"), std::string::npos);

  std::vector<float> poison(n, rs::test::poison<float>());
  rs::copy(std::span<const float>(poison), y);
  rs::synchronize(dev);
  rs::graph g = f.capture();
  f.stream().wait_for(rs::default_stream(dev));  // replays come after the poison copy (and the uploads)
  rs::scoped_ledger l(dev);
  for (int r = 0; r < 3; ++r) g.replay(f.stream());
  f.stream().synchronize();
  EXPECT_EQ(l.delta().kernels, 9u);
  EXPECT_EQ(y.to_host(), eager);
  y.set_stream(rs::default_stream(dev));
  z.set_stream(rs::default_stream(dev));
}

TEST_P(flows, graph_update_changes_a_scalar_between_replays) {
  const std::size_t n = 1000;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::stream s(dev);
  auto x = rs::to_device(h, dev);
  rs::array<float> y(n, dev);
  x.set_stream(s);
  y.set_stream(s);
  auto scaled = [&](float a) {
    return [&, a] { rs::map([a] RESIDENT_HD(float v) { return a * v; })(x, y); };
  };
  rs::graph g = rs::graph::capture(s, scaled(2.f));
  g.replay(s);
  auto twice = y.to_host();
  g.update(s, scaled(3.f));  // same kernel, another coefficient
  g.replay(s);
  auto thrice = y.to_host();
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(twice[i], 2.f * h[i]);
    ASSERT_EQ(thrice[i], 3.f * h[i]);
  }
  if (dev.is_cuda()) {
    auto two_kernels = [&] {
      scaled(1.f)();
      scaled(4.f)();
    };
    EXPECT_THROW(g.update(s, two_kernels), rs::invalid_argument) << "a different shape must be refused";
  }
  x.set_stream(rs::default_stream(dev));
  y.set_stream(rs::default_stream(dev));
}

// Every call on a moved-from flow throws (it dereferenced null); size() reads 0; destroying it and
// assigning onto it stay safe.
TEST_P(flows, moved_from_flow_throws_on_every_call) {
  rs::array<float> a(10, dev);
  auto noop = [](rs::stream_ref) {};
  stage_log log;
  rs::flow f(dev);
  f.add("one", log.stage(0), rs::access{}.writes(a));
  rs::flow g = std::move(f);
  EXPECT_EQ(g.size(), 1u);
  EXPECT_EQ(f.size(), 0u);
  try {
    f.add("two", noop);
    ADD_FAILURE() << "add on a moved-from flow";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moved-from flow"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.order(0, 1), rs::invalid_argument);
  EXPECT_THROW(f.validate(), rs::invalid_argument);
  EXPECT_THROW(f.run(), rs::invalid_argument);
  EXPECT_THROW(f.run_async(), rs::invalid_argument);
  EXPECT_THROW(f.wait(), rs::invalid_argument);
  EXPECT_THROW(f.capture(), rs::invalid_argument);
  EXPECT_THROW(f.stream(), rs::invalid_argument);
  EXPECT_THROW(f.predecessors(0), rs::invalid_argument);
  EXPECT_THROW(f.report(), rs::invalid_argument);
  EXPECT_THROW(f.report_table(), rs::invalid_argument);
  rs::flow h(dev);
  h = std::move(g);
  EXPECT_THROW(g.run(), rs::invalid_argument);
  f = std::move(h);  // assigning onto a moved-from flow makes it usable again
  EXPECT_EQ(f.size(), 1u);
  EXPECT_TRUE(log.called.empty()) << "a refused call ran a stage";
  EXPECT_NO_THROW(f.run());
  EXPECT_EQ(log.called, (std::vector<rs::flow::stage_id>{0})) << "the stage that moved back, once";
}

// A moved-from graph throws on replay and update; its kernel count reads 0.
TEST_P(flows, moved_from_graph_throws) {
  auto x = rs::to_device(rs::test::random_vector<float>(100, rs::test::fresh_seed()), dev);
  rs::stream s(dev);
  x.set_stream(s);
  auto twice = [&] { rs::map([] RESIDENT_HD(float v) { return 2.f * v; })(x); };
  rs::graph g = rs::graph::capture(s, twice);
  g.replay(s);
  rs::graph h = std::move(g);
  EXPECT_EQ(g.kernels(), 0u);
  try {
    g.replay(s);
    ADD_FAILURE() << "replay of a moved-from graph";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moved-from graph"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.update(s, twice), rs::invalid_argument);
  EXPECT_THROW(rs::graph{}.update(s, twice), rs::invalid_argument);
  g = std::move(h);
  EXPECT_NO_THROW(g.replay(s));
  s.synchronize();
  x.set_stream(rs::default_stream(dev));
}

// A captured graph holds what it runs: replaying it after its flow was moved or destroyed runs the
// stages (on the CPU the graph once called back into the flow object).
TEST_P(flows, captured_graph_outlives_its_flow) {
  const std::size_t n = 3000;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = rs::to_device(h, dev);
  rs::array<float> y(n, dev);
  rs::stream s(dev);
  auto make_flow = [&] {
    rs::flow f(dev, 2);
    f.add("y = 3x", [&](rs::stream_ref st) {
      y.set_stream(st);
      rs::map([] RESIDENT_HD(float v) { return 3.f * v; })(x, y);
    }, rs::access{}.reads(x).writes(y));
    f.add("y = y + 1", [&](rs::stream_ref st) {
      y.set_stream(st);
      rs::map([] RESIDENT_HD(float v) { return v + 1.f; })(y);
    }, rs::access{}.reads(y).writes(y));
    return f;
  };
  auto check = [&](rs::graph& g, const char* what) {
    SCOPED_TRACE(what);
    std::vector<float> poison(n, rs::test::poison<float>());
    y.set_stream(rs::default_stream(dev));
    rs::copy(std::span<const float>(poison), y);
    rs::synchronize(dev);
    g.replay(s);
    s.synchronize();
    y.set_stream(rs::default_stream(dev));
    auto out = y.to_host();
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 3.f * h[i] + 1.f) << "i " << i;
  };
  rs::graph destroyed;
  {
    rs::flow f = make_flow();
    destroyed = f.capture();
    y.set_stream(rs::default_stream(dev));  // off the flow's streams before they go
  }
  check(destroyed, "flow destroyed");
  rs::flow f = make_flow();
  rs::graph moved = f.capture();
  rs::flow g = std::move(f);
  check(moved, "flow moved from");
}

// A padded 2-D array's declared range reaches its last row: ((rows - 1) * ld + cols) elements, not
// rows * cols, so a stage reading the last row is ordered after the stage writing the array.
TEST_P(flows, padded_two_dimensional_arrays_order_their_stages) {
  const std::size_t rows = 4, cols = 3, ld = 8;
  rs::array2d<float> m(rows, cols, dev, ld);
  auto last_row = m.storage().slice((rows - 1) * ld, cols);
  stage_log log;
  rs::flow f(dev);
  auto w = f.add("write m", log.stage(f.size()), rs::access{}.writes(m));
  auto r = f.add("read the last row", log.stage(f.size()), rs::access{}.reads(last_row));
  auto rv = f.add("read the view's last row", log.stage(f.size()),
                  rs::access{}.reads(rs::array_view<float>(m.data() + (rows - 1) * ld + cols - 1, 1)));
  auto wv = f.add("write the view", log.stage(f.size()), rs::access{}.writes(m.view()));
  auto past = f.add("read padding after the last row", log.stage(f.size()),
                    rs::access{}.reads(m.storage().slice((rows - 1) * ld + cols, ld - cols)));
  EXPECT_EQ(f.predecessors(r), (std::vector<rs::flow::stage_id>{w}));
  EXPECT_EQ(f.predecessors(rv), (std::vector<rs::flow::stage_id>{w}));
  EXPECT_EQ(f.predecessors(wv), (std::vector<rs::flow::stage_id>{w, r, rv}));
  EXPECT_TRUE(f.predecessors(past).empty()) << "the padding after the last row is not the array's";

  rs::array2d<float> empty(0, 5, dev, 7);
  auto e = f.add("write nothing", log.stage(f.size()), rs::access{}.writes(empty));
  EXPECT_TRUE(f.predecessors(e).empty());
  rs::array2d<float> moved = std::move(empty);
  EXPECT_THROW(rs::access{}.reads(empty), rs::invalid_argument);
  rs::array<float> a(4, dev);
  rs::array<float> b = std::move(a);
  EXPECT_THROW(rs::access{}.writes(a), rs::invalid_argument);
  EXPECT_NO_THROW(f.run());
  EXPECT_TRUE(log.each_once_after_its_predecessors(f));
  log.called.clear();
  f.run();  // and again, the same order kept
  EXPECT_TRUE(log.each_once_after_its_predecessors(f));
}

// An access holds the byte ranges it was given, in order, each with its device: an array from its
// first byte to its last, a slice from its own first element, a padded 2-D array through its last row,
// host memory with no device; on() names the device.
TEST_P(flows, access_records_each_declared_range_and_the_named_device) {
  rs::array<double> a(100, dev);
  rs::array2d<float> m(4, 3, dev, 8);
  std::vector<int> host(7);
  rs::access acc;
  acc.reads(a, a.slice(10, 20)).writes(m, host);
  const auto& r = acc.read_ranges();
  const auto& w = acc.write_ranges();
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(r[0].begin, static_cast<const void*>(a.data()));
  EXPECT_EQ(r[0].bytes, 100 * sizeof(double));
  EXPECT_EQ(r[0].where, dev);
  EXPECT_EQ(r[1].begin, static_cast<const void*>(a.data() + 10));
  EXPECT_EQ(r[1].bytes, 20 * sizeof(double));
  EXPECT_EQ(w[0].begin, static_cast<const void*>(m.data()));
  EXPECT_EQ(w[0].bytes, (3 * 8 + 3) * sizeof(float)) << "through the last row, not rows x ld";
  EXPECT_EQ(w[1].begin, static_cast<const void*>(host.data()));
  EXPECT_EQ(w[1].bytes, 7 * sizeof(int));
  EXPECT_FALSE(w[1].where.has_value()) << "host memory names no device";
  EXPECT_TRUE(r[0].overlaps(r[1]));
  EXPECT_FALSE(r[0].overlaps(w[0]));
  EXPECT_FALSE(acc.named_device().has_value());
  acc.on(rs::device::cpu());
  EXPECT_EQ(acc.named_device(), rs::device::cpu());
}

// A stage named to run on a device of the other backend is refused when it is added.
TEST_P(flows, a_stage_on_the_other_backend_is_a_device_mismatch) {
  rs::flow f(dev);
  const rs::device other = dev.is_cpu() ? rs::device::cuda(0) : rs::device::cpu();
  try {
    f.add("elsewhere", [](rs::stream_ref) {}, rs::access{}.on(other));
    ADD_FAILURE() << "a stage on " << other.name() << " was added to a flow on " << dev.name();
  } catch (const rs::device_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("stage 'elsewhere' is to run on " + other.name()), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.size(), 0u);
  // Memory of the other backend is host memory to this flow: the stage stays on the flow's device.
  rs::array<float> a(10, dev);
  const auto s = f.add("here", [](rs::stream_ref) {}, rs::access{}.writes(a).reads(rs::access::range{a.data(), 4, other}));
  EXPECT_EQ(f.device_of(s), dev);
  EXPECT_THROW((void)f.device_of(7), rs::flow_error);
}

RESIDENT_BACKENDS(flows);
RESIDENT_CUDA_ONLY(flows_cuda);
RESIDENT_CPU_ONLY(flows_cpu);

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

RESIDENT_BACKENDS(flow_peer);

// Counts how many callers are inside at once: the most seen, and the calls.
struct overlap_probe {
  std::atomic<int> inside{0}, most{0};
  int calls = 0;  // not atomic: calls that overlap would lose counts
  void enter() {
    const int now = ++inside;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    const int before = calls;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    calls = before + 1;
    --inside;
  }
};

// A stage that calls back into the flow running it (add, order, run, capture, validate, report) is
// refused with a flow_error, nested in the stage's stage_error; the flow is unchanged and runs again.
// Reading it (validate, predecessors, device_of) is not refused.
TEST(flow_reentry, a_stage_calling_its_own_flow_is_refused_and_the_flow_stays_usable) {
  rs::flow f(rs::device::cpu());
  int ran = 0;
  std::function<void()> inner;
  f.add("first", [&](rs::stream_ref) { ++ran; });
  f.add("calls back", [&](rs::stream_ref) {
    ++ran;
    if (inner) inner();
  });
  const std::pair<const char*, std::function<void()>> calls[] = {
      {"add", [&] { f.add("added inside", [](rs::stream_ref) {}); }},
      {"order", [&] { f.order(0, 1); }},
      {"run", [&] { f.run(); }},
      {"run_async", [&] { f.run_async(); }},
      {"capture", [&] { (void)f.capture(); }},
      {"report", [&] { (void)f.report(); }},
      {"wait", [&] { f.wait(); }},
  };
  for (const auto& [what, call] : calls) {
    SCOPED_TRACE(what);
    inner = call;
    ran = 0;
    try {
      f.run();
      ADD_FAILURE() << "a stage called " << what << " on its own flow";
    } catch (const rs::stage_error& e) {
      EXPECT_EQ(e.stage(), "calls back");
      try {
        std::rethrow_if_nested(e);
        ADD_FAILURE() << "nothing nested";
      } catch (const rs::flow_error& inner_error) {
        EXPECT_NE(std::string(inner_error.what()).find("from a stage of the flow"), std::string::npos)
            << inner_error.what();
      }
    }
    EXPECT_EQ(ran, 2);
    EXPECT_EQ(f.size(), 2u);
    EXPECT_TRUE(f.predecessors(1).empty());
    EXPECT_TRUE(f.report().empty()) << "a failed run leaves no figures";
  }
  // Reading the flow from a stage is fine.
  inner = [&] {
    EXPECT_EQ(f.validate().size(), 2u);
    EXPECT_TRUE(f.predecessors(1).empty());
    EXPECT_EQ(f.device_of(1), rs::device::cpu());
  };
  EXPECT_NO_THROW(f.run());
  // A graph's replay calls the stages too: a stage that runs its flow is refused there as well.
  inner = nullptr;
  rs::graph g = f.capture();
  inner = [&] { f.run(); };
  EXPECT_THROW(g.replay(f.stream()), rs::stage_error);
  inner = nullptr;
  ran = 0;
  EXPECT_NO_THROW(f.run());
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(f.report().size(), 2u);
  EXPECT_NO_THROW(g.replay(f.stream()));
  // Another flow run from inside a stage (nesting) is fine.
  rs::flow outer(rs::device::cpu());
  outer.add("runs f", [&](rs::stream_ref) { f.run(); });
  ran = 0;
  EXPECT_NO_THROW(outer.run());
  EXPECT_EQ(ran, 2);
}

// After a run whose stage failed, report() has no figures (not the stages before the failure mixed
// with an earlier run's); the next good run reports every stage.
TEST(flow_reentry, a_failed_run_leaves_no_stale_report) {
  rs::flow f(rs::device::cpu());
  bool fail = false;
  f.add("a", [](rs::stream_ref) {});
  f.add("b", [&](rs::stream_ref) {
    if (fail) throw std::runtime_error("planted");
  });
  f.run();
  EXPECT_EQ(f.report().size(), 2u);
  fail = true;
  EXPECT_THROW(f.run(), rs::stage_error);
  EXPECT_TRUE(f.report().empty());
  fail = false;
  f.run();
  EXPECT_EQ(f.report().size(), 2u);
}

// One flow run from several threads at once: the runs take turns (each run's stages in order, no two
// runs' stages at once), as CUDA orders launches of one graph; so do replays of one captured graph.
TEST(flow_threads, runs_and_replays_of_one_flow_from_several_threads_take_turns) {
  rs::flow f(rs::device::cpu());
  overlap_probe probe;
  f.add("one", [&](rs::stream_ref) { probe.enter(); });
  f.add("two", [&](rs::stream_ref) { probe.enter(); });
  const int threads = 4, runs = 25;
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (int r = 0; r < runs; ++r) {
          f.run();
          (void)f.report();
        }
      });
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(probe.most.load(), 1) << "two runs' stages ran at once";
  EXPECT_EQ(probe.calls, 2 * threads * runs);
  rs::graph g = f.capture();
  probe.most = 0;
  probe.calls = 0;
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (int r = 0; r < runs; ++r) g.replay(f.stream());
      });
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(probe.most.load(), 1) << "two replays of one graph ran at once";
  EXPECT_EQ(probe.calls, 2 * threads * runs);
  EXPECT_EQ(g.kernels(), 0u);
}

// A CPU graph whose work replays the same graph is refused (it would wait for itself); replaying it
// again afterwards works.
TEST(flow_threads, a_graph_replayed_from_its_own_work_is_refused) {
  const auto s = rs::default_stream(rs::device::cpu());
  rs::graph g;
  bool again = true;
  int ran = 0;
  g = rs::graph::capture(s, [&] {
    ++ran;
    if (again) g.replay(s);
  });
  try {
    g.replay(s);
    ADD_FAILURE() << "a graph replayed itself";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("from inside the same graph's replay"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran, 1);
  again = false;
  EXPECT_NO_THROW(g.replay(s));
  EXPECT_EQ(ran, 2);
}

// Stages added from one thread while another runs the flow: each run sees a whole flow.
TEST(flow_threads, stages_added_while_another_thread_runs_the_flow) {
  rs::flow f(rs::device::cpu());
  std::atomic<int> ran{0};
  f.add("first", [&](rs::stream_ref) { ++ran; });
  std::thread runner([&] {
    for (int r = 0; r < 200; ++r) f.run();
  });
  for (int i = 0; i < 200; ++i) f.add("added " + std::to_string(i), [&](rs::stream_ref) { ++ran; });
  runner.join();
  EXPECT_EQ(f.size(), 201u);
  ran = 0;
  f.run();
  EXPECT_EQ(ran.load(), 201);
}

// A raw range whose end passes the top of the address space cannot be ordered: refused when declared.
TEST(flow_access, a_range_past_the_end_of_memory_is_refused) {
  int x = 0;
  const rs::access::range wraps{&x, std::size_t(-1)};
  EXPECT_THROW(rs::access{}.reads(wraps), rs::invalid_argument);
  EXPECT_THROW(rs::access{}.writes(wraps), rs::invalid_argument);
  const rs::access::range fine{&x, sizeof x};
  EXPECT_NO_THROW(rs::access{}.reads(fine).writes(fine));
}

}  // namespace
