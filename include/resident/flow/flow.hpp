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
///
/// Threads: one flow's calls take turns (runs from several threads one after another, as CUDA orders
/// launches of one graph; stages added meanwhile wait). A stage may run other flows, and read its own
/// (validate, predecessors, device_of; so may the threads it waits for), but not add to, order, run,
/// capture or report the flow it is a stage of (flow_error; also from the team threads of its CPU
/// loops). A stage that replaces or destroys the flow it runs in ends the run whole (as any object
/// replaced or destroyed, no other thread may be calling the flow then). A stage that throws ends the run: the stages issued before it stay queued,
/// the home stream waits for them (wait() covers them), and the flow can run again.
/// Different flows run concurrently from different threads; each stage's ledger figures (report)
/// count only the work its running thread issued.
///
/// Several GPUs: a stage runs on the device of the arrays it touches (what it writes, else what it
/// reads; access::on names one), on that device's streams, with that device current. An edge between
/// stages on two devices is an event recorded on the earlier stage's stream and waited on by the later
/// one's (CUDA lets a stream wait on another device's event); nothing synchronizes the host. The flow
/// starts and ends on stream(), a stream of the device it was made on, and capture() records every
/// device's stages into one graph replayed there.
///
///   rs::flow f(rs::device::cuda(0));
///   f.add("x0 = f(x0)", [&](rs::stream_ref s) { ... }, rs::access{}.writes(x0));        // on cuda:0
///   f.add("x1 = g(x1)", [&](rs::stream_ref s) { ... }, rs::access{}.writes(x1));        // on cuda:1, concurrently
///   f.add("y1 = x0 + x1", [&](rs::stream_ref s) { ... }, rs::access{}.reads(x0, x1).writes(y1));  // on cuda:1, after both

#include <cstddef>
#include <cstdint>
#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/device/graph.hpp"
#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

// flow_error (a flow that cannot run: a cycle, two unordered writers of one array, an unknown stage) is
// defined from the error table in error.hpp.

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
/// or raw ranges; and the device the stage runs on (see flow). @throws invalid_argument for a
/// moved-from array, or a raw range whose end passes the top of the address space.
class access {
 public:
  /// One byte range: bytes bytes from begin, on device `where` when known (arrays and slices say;
  /// host memory and raw ranges do not, and a CUDA flow asks the driver where a raw range lives).
  struct range {
    /// First byte of the range.
    const void* begin;
    /// Length of the range in bytes.
    std::size_t bytes;
    /// The device the bytes live on, when known.
    std::optional<resident::device> where = std::nullopt;
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
  /// Runs the stage on d whatever its arrays' devices (a stage that touches no array, or reads arrays
  /// of two GPUs through peer access).
  access& on(resident::device d) {
    on_ = d;
    return *this;
  }
  /// The ranges declared read.
  const std::vector<range>& read_ranges() const noexcept { return reads_; }
  /// The ranges declared written.
  const std::vector<range>& write_ranges() const noexcept { return writes_; }
  /// The device named with on(), if any.
  const std::optional<resident::device>& named_device() const noexcept { return on_; }

 private:
  template <class A>
  static range range_of(const A& a) {
    if constexpr (std::is_same_v<A, range>) {
      // A range past the top of the address space would compare as overlapping nothing.
      if (a.bytes > UINTPTR_MAX - reinterpret_cast<std::uintptr_t>(a.begin))
        RESIDENT_FAIL("access: a range of " + std::to_string(a.bytes) +
                      " bytes runs past the end of the address space; give the bytes the stage touches");
      return a;
    } else {
      if constexpr (requires { a.check_live(); }) a.check_live();
      if constexpr (requires { a.storage().check_live(); }) a.storage().check_live();
      using T = std::remove_cvref_t<decltype(*a.data())>;
      std::optional<resident::device> where;
      if constexpr (requires { { a.device() } -> std::convertible_to<resident::device>; }) where = a.device();
      if constexpr (requires { a.rows(); a.cols(); a.ld(); }) {
        // Row r starts r * ld elements in: the last row ends (rows - 1) * ld + cols elements in.
        const std::size_t rows = a.rows(), cols = a.cols();
        const std::size_t elements = rows && cols ? (rows - 1) * a.ld() + cols : 0;
        return {static_cast<const void*>(a.data()), elements * sizeof(T), where};
      } else {
        return {static_cast<const void*>(a.data()), a.size() * sizeof(T), where};
      }
    }
  }
  std::vector<range> reads_, writes_;
  std::optional<resident::device> on_;
};

/// Whether a stage's edges are inferred from its declared accesses (on) or only explicit (off).
enum class inference { on, off };

/// Per-stage figures from the last run: time between events around the stage's work on its stream,
/// and what the stage issued (ledger delta, on its device).
struct stage_report {
  /// The stage's name.
  std::string name;
  /// Which of the flow's streams on its device it ran on.
  int stream_index;
  /// Milliseconds between the events around its work.
  double ms;
  /// What its work issued: transfers, kernels, allocations.
  ledger_counts issued;
  /// The device it ran on.
  resident::device device{};
};

namespace detail {
/// A check that a thread waiting for a flow's turn makes every few milliseconds: true gives the wait up
/// (flow_error). The Python package sets it: a thread the interpreter stopped at exit inside a stage
/// never hands its turn on. None (the default): a turn is waited for as long as it takes.
void set_turn_abandoned(bool (*check)() noexcept) noexcept;
}  // namespace detail

/// Move-only; every call on a moved-from flow throws invalid_argument except size() (0), destruction
/// and assignment.
class flow {
 public:
  /// A stage's number: its position in the order the stages were added.
  using stage_id = std::size_t;

  /// A flow on d with `streams` streams for independent branches on each GPU it runs stages on (CUDA;
  /// on the CPU the stages run one after another in dependency order, each spread over the cores by
  /// its own loops). d is the home device: stream() is d's, and stages that touch no device's memory
  /// run there.
  /// @throws invalid_argument for streams outside 1 .. max_streams.
  explicit flow(device d = default_device(), int streams = 4);
  /// The most streams per device a flow takes.
  static constexpr int max_streams = 256;
  ~flow();
  /// Takes over another flow's stages and streams.
  flow(flow&&) noexcept;
  /// Drops this flow's stages and takes over another's.
  flow& operator=(flow&&) noexcept;

  /// Adds a stage: work(s) issues its work on the stream s it is given (asynchronously on CUDA), a
  /// stream of the stage's device, which is current while work runs.
  /// @throws flow_error when an id in `after` does not name an earlier stage; device_mismatch when the
  /// stage writes memory of two devices, reads memory of two devices and writes none, or is named
  /// (access::on) a device of the other backend than the flow's; device_unavailable for an absent GPU.
  stage_id add(std::string name, std::function<void(stream_ref)> work, access acc = {},
               std::vector<stage_id> after = {}, inference infer = inference::on);

  /// Orders stage `later` after stage `earlier` (may create a cycle, reported when the flow runs).
  void order(stage_id earlier, stage_id later);

  /// Checks the flow (cycles, unordered writers) and returns a topological order.
  /// @throws flow_error naming the stages.
  std::vector<stage_id> validate() const;

  /// Issues every stage in dependency order, after the work already queued on the default stream of
  /// each device it runs stages on, and returns; wait() blocks until all finished.
  /// @throws flow_error, stage_error.
  void run_async();
  /// Blocks until the stages issued by run_async() have finished. @throws cuda_error, device_lost;
  /// flow_error from a stage of this flow.
  void wait();
  /// run_async(), then wait(). @throws flow_error, stage_error.
  void run();

  /// The whole flow as one graph (CUDA: captured from the flow's streams on every device it runs
  /// stages on, forked from stream() and joined back into it with events; nothing runs during the
  /// capture; on the CPU: the stages' work in dependency order).
  /// Replay it on stream(). The graph holds what it runs: it stays valid after the flow is moved or
  /// destroyed (the arrays the stages use must outlive it).
  graph capture();

  /// The stream that starts and ends the flow: replay captured graphs here; synchronize it to wait.
  stream_ref stream() const;

  /// Direct predecessors of a stage (explicit and inferred).
  const std::vector<stage_id>& predecessors(stage_id s) const;
  /// The device a stage runs on. @throws flow_error for an unknown stage.
  device device_of(stage_id s) const;
  /// Number of stages.
  std::size_t size() const noexcept;

  /// The last run's per-stage figures, and the same as an aligned table (none after a run that threw).
  std::vector<stage_report> report() const;
  /// The last run's per-stage figures as an aligned text table.
  std::string report_table() const;

 private:
  struct impl;
  impl& live() const;  // @throws invalid_argument on a moved-from flow
  // Shared with a run in progress: a stage that replaces or destroys the flow it runs in leaves the
  // run what it is reading.
  std::shared_ptr<impl> p_;
};

}  // namespace resident
