// Minimal reproducers of the failures fuzz_api found outside the defects known when it was written,
// one test each, on both backends; each failed before its fix.
#include <vector>

#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

class fuzz_regressions : public backend {};

// fuzz_api (probe "ledger"): an empty to_device counted one H2D copy of 0 bytes; copy(a, a) counted
// device-to-device bytes although nothing moves; a copy between empty arrays counted a copy; an empty
// to_device was refused under transfer_policy::forbid.
TEST_P(fuzz_regressions, empty_and_self_copies_count_nothing) {
  {
    rs::scoped_ledger l(dev);
    auto a = rs::to_device(std::vector<float>{}, dev);
    EXPECT_EQ(l.delta().h2d_copies, 0u) << "an empty upload moves nothing";
    EXPECT_TRUE(a.to_host().empty());
  }
  {
    rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
    EXPECT_NO_THROW((void)rs::to_device(std::vector<float>{}, dev)) << "nothing crosses the bus";
  }
  {
    auto a = rs::to_device(std::vector<float>{1.f, 2.f, 3.f}, dev);
    rs::scoped_ledger l(dev);
    rs::copy(a, a);
    EXPECT_EQ(l.delta().d2d_bytes, 0u) << "a self-copy moves nothing";
    EXPECT_EQ(l.delta().d2d_copies, 0u);
    EXPECT_EQ(a.to_host(), (std::vector<float>{1.f, 2.f, 3.f}));
  }
  {
    rs::array<float> a(0, dev), b(0, dev);
    rs::scoped_ledger l(dev);
    rs::copy(a, b);
    EXPECT_EQ(l.delta().d2d_copies, 0u) << "a copy of 0 bytes moves nothing";
  }
}

// fuzz_api (probe "padded"): a flow stage reading the last row of a 2-D array with ld > cols got no
// edge from the stage writing the array: the written range was taken as rows * cols elements.
TEST_P(fuzz_regressions, flow_edges_cover_padded_rows) {
  const std::size_t rows = 3, cols = 2, ld = 5;
  rs::array2d<float> a(rows, cols, dev, ld);
  rs::array_ref<float> last_row(a.data() + (rows - 1) * ld, cols, a.stream());
  rs::flow f(dev);
  f.add("write a", [](rs::stream_ref) {}, rs::access{}.writes(a));
  const auto reader = f.add("read its last row", [](rs::stream_ref) {}, rs::access{}.reads(last_row));
  EXPECT_EQ(f.predecessors(reader), (std::vector<rs::flow::stage_id>{0}));
}

// fuzz_api (probe "unrecorded"): elapsed_ms with an event that was never recorded returned a meaningless
// figure on the CPU (the time since the clock's epoch); CUDA refuses it.
TEST_P(fuzz_regressions, elapsed_ms_needs_recorded_events) {
  rs::event recorded(dev), fresh(dev);
  recorded.record(rs::default_stream(dev));
  EXPECT_THROW((void)elapsed_ms(fresh, recorded), rs::error);
  EXPECT_THROW((void)elapsed_ms(recorded, fresh), rs::error);
}

// fuzz_api (probe "foreign"): event::record, event::wait_on and stream_ref::wait_for with a stream of
// another device were accepted and did nothing, so the order they promise does not hold.
TEST_P(fuzz_regressions, events_and_streams_refuse_another_devices_stream) {
  const rs::stream_ref foreign(dev.is_cpu() ? rs::device::cuda(0) : rs::device::cpu(), nullptr);
  rs::event e(dev);
  EXPECT_THROW(e.record(foreign), rs::device_mismatch);
  e.record(rs::default_stream(dev));
  EXPECT_THROW(e.wait_on(foreign), rs::device_mismatch);
  EXPECT_THROW(rs::default_stream(dev).wait_for(foreign), rs::device_mismatch);
}

// fuzz_api (probe "update_empty"): graph::update of a graph that holds nothing (default-constructed or
// moved from) succeeded on the CPU and made it replayable; CUDA refuses it ("capture one first").
TEST_P(fuzz_regressions, updating_an_empty_graph_is_refused) {
  rs::stream s(dev);
  rs::graph empty;
  EXPECT_THROW(empty.update(s, [] {}), rs::invalid_argument);
  rs::graph captured = rs::graph::capture(s, [] {});
  rs::graph taken(std::move(captured));
  EXPECT_THROW(captured.update(s, [] {}), rs::invalid_argument);
  EXPECT_THROW(captured.replay(s), rs::invalid_argument);
}

// fuzz_api (probe "moved"): set_stream on a moved-from array succeeded; every other use of a moved-from
// array throws "use of a moved-from array".
TEST_P(fuzz_regressions, set_stream_of_a_moved_from_array_throws) {
  rs::stream s(dev);
  rs::array<float> a(8, dev);
  rs::array<float> b(std::move(a));
  EXPECT_THROW(a.set_stream(s), rs::invalid_argument);
  b.set_stream(rs::default_stream(dev));
}

// fuzz_api (probe "foreign"): a host-to-device copy that failed (to an array on a CUDA device this
// build or machine cannot use) was counted in that device's ledger before it failed.
TEST_P(fuzz_regressions, a_failed_copy_is_not_counted) {
  const rs::device unusable_device = rs::device::cuda(rs::cuda_device_count());  // one past the last GPU
  std::vector<float> h(4, 1.f), memory(4, 0.f);
  rs::array_ref<float> unusable(memory.data(), memory.size(), rs::stream_ref(unusable_device, nullptr));
  // The device's own counts cannot be read either (a device this machine lacks is refused, never zeros):
  // no device's counts move.
  EXPECT_THROW(rs::scoped_ledger{unusable_device}, rs::device_unavailable);
  const rs::ledger_snapshot before = rs::ledger();
  EXPECT_THROW(rs::copy_async(std::span<const float>(h), unusable), rs::device_unavailable);
  const rs::ledger_snapshot after = rs::ledger();
  for (const auto& [d, c] : after.devices) {
    EXPECT_EQ(c.h2d_copies, before.of(d).h2d_copies) << d.name();
    EXPECT_EQ(c.h2d_bytes, before.of(d).h2d_bytes) << d.name();
  }
  EXPECT_EQ(memory, std::vector<float>(4, 0.f));
}

RESIDENT_BACKENDS(fuzz_regressions);
