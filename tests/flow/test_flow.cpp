// Compiled by nvcc when the CUDA backend is in the build.
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

using rs::test::spin;
using rs::test::stage_log;
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

// Two halves of one array written by two stages are independent: a range and the one right after it do
// not overlap.
TEST_P(flows, adjacent_halves_of_one_array_are_independent_stages) {
  rs::array<float> a(10, dev);
  auto noop = [](rs::stream_ref) {};
  rs::flow f(dev);
  f.add("left", noop, rs::access{}.writes(a.slice(0, 5)));
  const auto right = f.add("right", noop, rs::access{}.writes(a.slice(5, 5)));
  EXPECT_TRUE(f.predecessors(right).empty()) << "the halves share no byte";
  rs::access acc;
  acc.reads(a.slice(0, 5), a.slice(5, 5));
  EXPECT_FALSE(acc.read_ranges()[0].overlaps(acc.read_ranges()[1]));
  EXPECT_FALSE(acc.read_ranges()[1].overlaps(acc.read_ranges()[0]));
}

// Two writers of one array ordered through a third stage, with explicit orders only, are ordered:
// validate() accepts the flow.
TEST_P(flows, writers_ordered_through_a_chain_of_explicit_orders_are_ordered) {
  rs::array<float> a(10, dev), b(10, dev);
  auto noop = [](rs::stream_ref) {};
  rs::flow f(dev);
  const auto w0 = f.add("write a", noop, rs::access{}.writes(a), {}, rs::inference::off);
  const auto mid = f.add("write b", noop, rs::access{}.writes(b), {w0}, rs::inference::off);
  f.add("write a again", noop, rs::access{}.writes(a), {mid}, rs::inference::off);
  EXPECT_NO_THROW(f.validate());
  const std::vector<rs::flow::stage_id> expected{0, 1, 2};
  EXPECT_EQ(f.validate(), expected);
}

// A stage named to run after itself (its own number, the next one) is refused when added, and the flow
// keeps its stages.
TEST_P(flows, a_stage_after_its_own_number_is_refused) {
  auto noop = [](rs::stream_ref) {};
  rs::flow f(dev);
  EXPECT_THROW(f.add("self", noop, {}, {0}), rs::flow_error);
  EXPECT_EQ(f.size(), 0u);
  f.add("first", noop);
  EXPECT_THROW(f.add("second after itself", noop, {}, {1}), rs::flow_error);
  EXPECT_EQ(f.size(), 1u);
}

// On the CPU a captured flow replays its stages in dependency order, not the order they were added: an
// explicit order that runs stage 1 before stage 0 holds at the replay.
TEST_P(flows, a_cpu_graph_replays_stages_in_dependency_order) {
  if (!dev.is_cpu()) GTEST_SKIP() << "the CPU's captured graph";
  std::vector<int> called;
  rs::flow f(dev);
  const auto s0 = f.add("zero", [&](rs::stream_ref) { called.push_back(0); }, {}, {}, rs::inference::off);
  const auto s1 = f.add("one", [&](rs::stream_ref) { called.push_back(1); }, {}, {}, rs::inference::off);
  f.order(s1, s0);
  f.run();
  EXPECT_EQ(called, (std::vector<int>{1, 0}));
  called.clear();
  rs::graph g = f.capture();
  g.replay(f.stream());
  EXPECT_EQ(called, (std::vector<int>{1, 0})) << "the replay follows the order the run took";
}

RESIDENT_BACKENDS(flows);

RESIDENT_CUDA_ONLY(flows_cuda);

RESIDENT_CPU_ONLY(flows_cpu);

}  // namespace
