#pragma once
/// @file graph.hpp
/// Capture the work issued on a stream once, replay it many times (a CUDA graph: one launch for the
/// whole sequence). On the CPU a replay runs the captured function again.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include "resident/detail/source_location.hpp"
#include <utility>
#include <vector>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

/// A captured sequence of work. Move-only; replaying or updating a moved-from graph throws
/// invalid_argument.
///
/// Thread safety: replay() and kernels() may be called on one graph from several threads at once
/// (replays take turns: CUDA orders them on the device, the CPU runs one at a time). update(), moves
/// and destruction need the graph to themselves. Captures on different streams may run concurrently
/// (CUDA captures in thread-local mode; each counts the kernels its own thread issued).
class graph {
 public:
  /// Records what work() issues on s without running it (CUDA: s must be a created stream, not the
  /// default one; allocations inside must not be freed after the capture). On the CPU, stores work to
  /// run at each replay (kernels() is known after the first replay there).
  /// @throws invalid_argument for the default stream; whatever work() throws (the capture is dropped).
  template <class F>
  static graph capture(stream_ref s, F&& work) {
    detail::nvtx_scope range("graph capture");
    graph g;
    g.device_ = s.device();
    if (s.device().is_cpu()) {
      g.cpu_work_ = std::function<void()>(std::forward<F>(work));
      g.cpu_turn_ = std::make_shared<cpu_turn>();
      return g;
    }
    if (s.native() == nullptr)
      RESIDENT_FAIL("graph::capture needs a created stream (rs::stream), not the default stream");
    g.set_kernels(record(s, work));
    g.exec_ = detail::cuda::graph_end(s);
    return g;
  }

  /// Re-records work() (issued on s, not run) into this graph in place, keeping its instantiation:
  /// the way to change scalar parameters (an RNG offset, a coefficient) between replays. The new work
  /// must have the same shape: the same kernels in the same order and dependencies.
  /// @throws invalid_argument when it does not (capture a new graph then), or the graph is empty or
  /// moved from.
  template <class F>
  void update(stream_ref s, F&& work) {
    check_live();
    detail::nvtx_scope range("graph update");
    if (!exec_ && !cpu_work_) RESIDENT_FAIL("graph::update of an empty graph: capture one first");
    if (device_.is_cpu()) {
      const cpu_turn::held turn(*cpu_turn_, "update");
      cpu_work_ = std::function<void()>(std::forward<F>(work));
      return;
    }
    auto k = record(s, work);
    if (!detail::cuda::graph_end_update(s, exec_))
      RESIDENT_FAIL("graph::update: the new work differs in shape from the captured graph (other "
                             "kernels, node count or dependencies); capture a new graph with graph::capture");
    set_kernels(std::move(k));
  }

  /// An empty graph; replaying it throws invalid_argument.
  graph() = default;
  ~graph() { detail::cuda::graph_destroy(exec_); }
  /// Takes over o's captured work; o is left empty.
  graph(graph&& o) noexcept
      : device_(o.device_), exec_(std::exchange(o.exec_, nullptr)), cpu_work_(std::exchange(o.cpu_work_, {})),
        kernels_(o.kernels_.exchange(0)), kernels_on_(std::exchange(o.kernels_on_, {})),
        cpu_turn_(std::move(o.cpu_turn_)), moved_(std::exchange(o.moved_, true)) {}
  /// Destroys this graph's work and takes over o's; o is left empty.
  graph& operator=(graph&& o) noexcept {
    if (this != &o) {
      detail::cuda::graph_destroy(exec_);
      device_ = o.device_;
      exec_ = std::exchange(o.exec_, nullptr);
      cpu_work_ = std::exchange(o.cpu_work_, {});
      kernels_ = o.kernels_.exchange(0);
      kernels_on_ = std::exchange(o.kernels_on_, {});
      cpu_turn_ = std::move(o.cpu_turn_);
      moved_ = std::exchange(o.moved_, true);
    }
    return *this;
  }
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  /// Runs the captured work on s (asynchronous on CUDA); counts its kernels in the ledger, and in the
  /// profile at the caller's line (`where`). Replays of one graph from several threads take turns (CUDA
  /// orders them on the device; the CPU runs one at a time). @throws invalid_argument, on the CPU, for a
  /// replay from inside the same graph's work.
  void replay(stream_ref s, resident::source_location where = resident::source_location::current()) const {
    check_live();
    detail::call_scope scope("graph replay", s, {}, detail::call_kind::compute, where);
    if (!(s.device() == device_))
      RESIDENT_FAIL("graph captured on " + device_.name() + " replayed on " + s.device().name(), device_mismatch);
    if (exec_) {
      detail::cuda::graph_launch(exec_, s);
      for (std::size_t d = 0; d < kernels_on_.size(); ++d)
        if (kernels_on_[d]) detail::record_kernel(device::cuda(int(d)), kernels_on_[d]);
    } else if (cpu_work_) {
      const cpu_turn::held turn(*cpu_turn_, "replay");
      scoped_ledger l(device_, ledger_scope::this_thread);  // other threads' kernels meanwhile are not its
      cpu_work_();  // counts its own kernels as it runs them
      kernels_ = l.delta().kernels;
    } else {
      RESIDENT_FAIL("replay of an empty graph: capture one first");
    }
  }
  /// Kernels one replay launches (on every device the captured work reached).
  std::uint64_t kernels() const noexcept { return kernels_; }

  /// Throws invalid_argument when the graph was moved from.
  void check_live() const {
    if (moved_) RESIDENT_FAIL("use of a moved-from graph: it no longer holds captured work");
  }

 private:
  /// Replays of one graph on the CPU take turns, as CUDA orders launches of one executable graph; a
  /// replay (or update) from inside the graph's own work is refused rather than deadlocking.
  struct cpu_turn {
    std::mutex m;                              ///< held by the replaying thread
    std::atomic<std::thread::id> holder{};     ///< that thread, while it replays
    /// Holds the graph's turn for the calling thread.
    struct held {
      /// Takes the turn for `what` (replay, update). @throws invalid_argument from the holder itself.
      held(cpu_turn& turn, const char* what) : t(turn) {
        if (t.holder.load() == std::this_thread::get_id())
          RESIDENT_FAIL(std::string("graph::") + what + " from inside the same graph's replay; replay it after "
                            "this one returns");
        lock = std::unique_lock<std::mutex>(t.m);
        t.holder.store(std::this_thread::get_id());
      }
      ~held() { t.holder.store(std::thread::id{}); }
      held(const held&) = delete;
      held& operator=(const held&) = delete;
      cpu_turn& t;                       ///< the graph's turn
      std::unique_lock<std::mutex> lock;  ///< on t.m
    };
  };

  // Starts a capture on s and records work() into it, leaving the capture open; returns the kernels
  // the work launched on each GPU (a capture forked to other GPUs' streams records theirs too), taken
  // back out of the ledger: they did not run. Drops the capture on a throw.
  template <class F>
  static std::vector<std::uint64_t> record(stream_ref s, F& work) {
    detail::cuda::graph_begin(s);
    std::vector<scoped_ledger> before;
    std::vector<std::uint64_t> k;
    try {
      // This thread's counts: kernels other threads launch meanwhile ran, and stay in the ledger.
      for (int d = 0; d < cuda_device_count(); ++d) before.emplace_back(device::cuda(d), ledger_scope::this_thread);
      work();
      for (std::size_t d = 0; d < before.size(); ++d) {
        k.push_back(before[d].delta().kernels);
        detail::forget_kernels(device::cuda(int(d)), k.back());
      }
    } catch (...) {
      detail::cuda::graph_abort(s);
      throw;
    }
    return k;
  }
  void set_kernels(std::vector<std::uint64_t> on) {
    std::uint64_t all = 0;
    for (std::uint64_t k : on) all += k;
    kernels_ = all;
    kernels_on_ = std::move(on);
  }

  device device_{};
  void* exec_ = nullptr;
  std::function<void()> cpu_work_;
  mutable std::atomic<std::uint64_t> kernels_{0};  // a CPU replay sets it while kernels() may read it
  std::vector<std::uint64_t> kernels_on_;  // by CUDA device index
  std::shared_ptr<cpu_turn> cpu_turn_;     // the CPU's; shared, so that a moved graph keeps it
  bool moved_ = false;
};

}  // namespace resident
