#pragma once
/// @file flow.hpp
/// Flows: named stages with dependencies, run with independent branches on concurrent streams and
/// events on the edges, or captured once into a CUDA graph and replayed.
///
///   rs::flow f(dev);
///   auto a = f.add("fill x", [&](rs::stream_ref s) { ... }, rs::access{}.writes(x));
///   auto b = f.add("fill y", [&](rs::stream_ref s) { ... }, rs::access{}.writes(y));   // independent of a
///   f.add("x + y", [&](rs::stream_ref s) { ... }, rs::access{}.reads(x, y).writes(z));  // after a and b
///   f.run();                       // a and b run concurrently, then the sum
///   rs::graph g = f.capture();     // the whole flow as one graph
///   g.replay(f.stream());
///
/// Dependencies: explicit (`after`), and inferred from declared accesses in the order stages are added:
/// a stage runs after every earlier stage that writes what it reads or writes, and after every earlier
/// stage that reads what it writes. A stage added with inference::off gets only its explicit edges;
/// two stages that write one array with nothing ordering them are then an error, as is a cycle.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/device/graph.hpp"
#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

/// A flow that cannot run: a cycle, two unordered writers of one array, an unknown stage.
class flow_error : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// A stage's work threw: the message names the stage; the original exception is nested
/// (std::rethrow_if_nested recovers it).
class stage_error : public error {
 public:
  /// A stage_error for the stage named `stage` with message `what`.
  stage_error(std::string stage, const std::string& what) : error(what), stage_(std::move(stage)) {}
  /// The failing stage's name.
  const std::string& stage() const noexcept { return stage_; }

 private:
  std::string stage_;
};

/// The memory a stage reads and writes, as byte ranges: arrays, slices, 2-D arrays and views (from
/// the first element to the last, padding between rows included), pinned buffers, host containers,
/// or raw ranges. @throws invalid_argument for a moved-from array.
class access {
 public:
  /// One byte range: bytes bytes from begin.
  struct range {
    /// First byte of the range.
    const void* begin;
    /// Length of the range in bytes.
    std::size_t bytes;
    /// True when the two ranges share a byte.
    bool overlaps(const range& o) const noexcept;
  };
  /// Declares that the stage reads each of `arrays` (arrays, slices or anything with data() and size()).
  template <class... A>
  access& reads(const A&... arrays) {
    (reads_.push_back(range_of(arrays)), ...);
    return *this;
  }
  /// Declares that the stage writes each of `arrays`.
  template <class... A>
  access& writes(const A&... arrays) {
    (writes_.push_back(range_of(arrays)), ...);
    return *this;
  }
  /// The ranges declared read.
  const std::vector<range>& read_ranges() const noexcept { return reads_; }
  /// The ranges declared written.
  const std::vector<range>& write_ranges() const noexcept { return writes_; }

 private:
  template <class A>
  static range range_of(const A& a) {
    if constexpr (std::is_same_v<A, range>) {
      return a;
    } else {
      if constexpr (requires { a.check_live(); }) a.check_live();
      if constexpr (requires { a.storage().check_live(); }) a.storage().check_live();
      using T = std::remove_cvref_t<decltype(*a.data())>;
      if constexpr (requires { a.rows(); a.cols(); a.ld(); }) {
        // Row r starts r * ld elements in: the last row ends (rows - 1) * ld + cols elements in.
        const std::size_t rows = a.rows(), cols = a.cols();
        const std::size_t elements = rows && cols ? (rows - 1) * a.ld() + cols : 0;
        return {static_cast<const void*>(a.data()), elements * sizeof(T)};
      } else {
        return {static_cast<const void*>(a.data()), a.size() * sizeof(T)};
      }
    }
  }
  std::vector<range> reads_, writes_;
};

/// Whether a stage's edges are inferred from its declared accesses (on) or only explicit (off).
enum class inference { on, off };

/// Per-stage figures from the last run: time between events around the stage's work on its stream,
/// and what the stage issued (ledger delta).
struct stage_report {
  /// The stage's name.
  std::string name;
  /// Which of the flow's streams it ran on.
  int stream_index;
  /// Milliseconds between the events around its work.
  double ms;
  /// What its work issued: transfers, kernels, allocations.
  ledger_counts issued;
};

/// Move-only; every call on a moved-from flow throws invalid_argument except size() (0), destruction
/// and assignment.
class flow {
 public:
  /// A stage's number: its position in the order the stages were added.
  using stage_id = std::size_t;

  /// A flow on d with `streams` streams for independent branches (CUDA; on the CPU the stages run one
  /// after another in dependency order, each spread over the cores by its own loops).
  explicit flow(device d = default_device(), int streams = 4);
  ~flow();
  /// Takes over another flow's stages and streams.
  flow(flow&&) noexcept;
  /// Drops this flow's stages and takes over another's.
  flow& operator=(flow&&) noexcept;

  /// Adds a stage: work(s) issues its work on the stream s it is given (asynchronously on CUDA).
  /// @throws flow_error when an id in `after` does not name an earlier stage.
  stage_id add(std::string name, std::function<void(stream_ref)> work, access acc = {},
               std::vector<stage_id> after = {}, inference infer = inference::on);

  /// Orders stage `later` after stage `earlier` (may create a cycle, reported when the flow runs).
  void order(stage_id earlier, stage_id later);

  /// Checks the flow (cycles, unordered writers) and returns a topological order.
  /// @throws flow_error naming the stages.
  std::vector<stage_id> validate() const;

  /// Issues every stage in dependency order, after the work already queued on the device's default
  /// stream, and returns; wait() blocks until all finished.
  /// @throws flow_error, stage_error.
  void run_async();
  /// Blocks until the stages issued by run_async() have finished. @throws cuda_error, device_lost.
  void wait();
  /// run_async(), then wait(). @throws flow_error, stage_error.
  void run() {
    run_async();
    wait();
  }

  /// The whole flow as one graph (CUDA: captured from the flow's streams, forked and joined with
  /// events; nothing runs during the capture; on the CPU: the stages' work in dependency order).
  /// Replay it on stream(). The graph holds what it runs: it stays valid after the flow is moved or
  /// destroyed (the arrays the stages use must outlive it).
  graph capture();

  /// The stream that starts and ends the flow: replay captured graphs here; synchronize it to wait.
  stream_ref stream() const;

  /// Direct predecessors of a stage (explicit and inferred).
  const std::vector<stage_id>& predecessors(stage_id s) const;
  /// Number of stages.
  std::size_t size() const noexcept;

  /// The last run's per-stage figures, and the same as an aligned table.
  std::vector<stage_report> report() const;
  /// The last run's per-stage figures as an aligned text table.
  std::string report_table() const;

 private:
  struct impl;
  impl& live() const;  // @throws invalid_argument on a moved-from flow
  std::unique_ptr<impl> p_;
};

}  // namespace resident
