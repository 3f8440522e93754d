#pragma once
/// @file graph.hpp
/// Capture the work issued on a stream once, replay it many times (a CUDA graph: one launch for the
/// whole sequence). On the CPU a replay runs the captured function again.

#include <cstdint>
#include <functional>
#include <utility>

#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

namespace detail {
void* graph_begin(stream_ref s);                 // starts capturing s
void* graph_end(stream_ref s);                   // ends the capture, returns the instantiated graph
void graph_abort(stream_ref s) noexcept;         // ends a failed capture, discarding it
void graph_launch(void* exec, stream_ref s);
void graph_destroy(void* exec) noexcept;
void forget_kernels(device d, std::uint64_t n);  // captured launches did not run
}  // namespace detail

/// A captured sequence of work. Move-only.
class graph {
 public:
  /// Records what work() issues on s without running it (CUDA: s must be a created stream, not the
  /// default one; allocations inside must not be freed after the capture). On the CPU, stores work to
  /// run at each replay (kernels() is known after the first replay there).
  /// @throws invalid_argument for the default stream; whatever work() throws (the capture is dropped).
  template <class F>
  static graph capture(stream_ref s, F&& work) {
    graph g;
    g.device_ = s.device();
    if (s.device().is_cpu()) {
      g.cpu_work_ = std::function<void()>(std::forward<F>(work));
      return g;
    }
    if (s.native() == nullptr)
      throw invalid_argument("graph::capture needs a created stream (rs::stream), not the default stream");
    detail::graph_begin(s);
    scoped_ledger l(s.device());
    try {
      work();
    } catch (...) {
      detail::graph_abort(s);
      throw;
    }
    g.kernels_ = l.delta().kernels;
    detail::forget_kernels(s.device(), g.kernels_);
    g.exec_ = detail::graph_end(s);
    return g;
  }

  graph() = default;
  ~graph() { detail::graph_destroy(exec_); }
  graph(graph&& o) noexcept
      : device_(o.device_), exec_(std::exchange(o.exec_, nullptr)), cpu_work_(std::move(o.cpu_work_)),
        kernels_(o.kernels_) {}
  graph& operator=(graph&& o) noexcept {
    if (this != &o) {
      detail::graph_destroy(exec_);
      device_ = o.device_;
      exec_ = std::exchange(o.exec_, nullptr);
      cpu_work_ = std::move(o.cpu_work_);
      kernels_ = o.kernels_;
    }
    return *this;
  }
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

  /// Runs the captured work on s (asynchronous on CUDA); counts its kernels in the ledger.
  void replay(stream_ref s) const {
    if (!(s.device() == device_))
      throw device_mismatch("graph captured on " + device_.name() + " replayed on " + s.device().name());
    if (exec_) {
      detail::graph_launch(exec_, s);
      detail::record_kernel(device_, kernels_);
    } else if (cpu_work_) {
      scoped_ledger l(device_);
      cpu_work_();  // counts its own kernels as it runs them
      kernels_ = l.delta().kernels;
    } else {
      throw invalid_argument("replay of an empty or moved-from graph");
    }
  }
  /// Kernels one replay launches.
  std::uint64_t kernels() const noexcept { return kernels_; }

 private:
  device device_{};
  void* exec_ = nullptr;
  std::function<void()> cpu_work_;
  mutable std::uint64_t kernels_ = 0;
};

}  // namespace resident
