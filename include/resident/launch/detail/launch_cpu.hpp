#pragma once
/// @file launch_cpu.hpp
/// The CPU backend of launch.hpp (twin of launch_cuda.cuh): the one loop driver every CPU executor
/// uses (cpu_loop), the emulation of blocks and threads, and the launch executors.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include <omp.h>

#include "resident/detail/backend.hpp"
#include "resident/detail/fork.hpp"
#include "resident/detail/thread_context.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/insight/profile.hpp"
#include "resident/device/stream.hpp"
#include "resident/launch/config.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "resident/memory/ledger.hpp"

namespace resident::detail {

/// The largest loop (in items) whose team came too late to help, and when (steady_clock ticks).
inline std::atomic<std::size_t> cpu_late_items{0};
inline std::atomic<std::int64_t> cpu_late_at{0};

/// Whether a loop of this many items should leave the team alone: one as large came too late lately.
inline bool cpu_team_too_late_for(std::size_t items) {
  const std::int64_t at = cpu_late_at.load(std::memory_order_relaxed);
  if (at == 0) return false;
  const auto since = std::chrono::steady_clock::now().time_since_epoch() - std::chrono::steady_clock::duration(at);
  return since < cpu_tuning::serial_after_late && items <= 2 * cpu_late_items.load(std::memory_order_relaxed);
}

/// Records that the team of a loop of this many items came too late to help.
inline void cpu_team_came_late(std::size_t items) {
  if (!cpu_team_too_late_for(items)) cpu_late_items.store(items, std::memory_order_relaxed);
  else if (items > cpu_late_items.load(std::memory_order_relaxed)) cpu_late_items.store(items, std::memory_order_relaxed);
  cpu_late_at.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

/// How a loop's units are cut into pieces: evenly (pieces_per_thread per thread), or one unit each
/// (emulated blocks, whose work may differ).
enum class cut { even, one_each };

/// One piece of a cpu_loop: units [first, last), its number among the pieces, and which worker
/// (0 .. workers() - 1) runs it.
struct cpu_piece {
  std::size_t index, first, last;
  int worker;
};

/// The CPU backend's one way to run a loop. It cuts [0, units) into contiguous pieces and runs
/// body(cpu_piece) for each: on the calling thread when the work is small (cpu_tuning::serial_below
/// items, a unit being items_per_unit of them), there is one thread, or the team of a loop as large
/// recently came too late to help (cpu_tuning::late_start), else on the OpenMP team, each thread taking
/// its next piece from a shared counter. In the last case the calling thread runs the same pieces, so
/// a reduction's result does not change. An exception must not leave an OpenMP region
/// (the runtime would terminate the process): the first one a body throws is kept, no thread takes a
/// piece after it, and it is rethrown here after the region. Pieces already taken finish. The team
/// threads act for the calling thread: its transfer policies and running flows hold in them too.
class cpu_loop {
 public:
  cpu_loop(std::size_t units, std::size_t items_per_unit, cut how = cut::even)
      : units_(units), items_(times_or_max(units, items_per_unit)) {
    const auto threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    if (units <= 1 || threads == 1 || items_ < cpu_tuning::serial_below) {
      grain_ = std::max<std::size_t>(units, 1);
    } else if (how == cut::one_each) {
      grain_ = 1;
    } else {
      const std::size_t want = threads * cpu_tuning::pieces_per_thread;
      const std::size_t least = ceil_div(cpu_tuning::min_piece, std::max<std::size_t>(items_per_unit, 1));
      grain_ = std::max(ceil_div(units, want), std::min(least, ceil_div(units, threads)));
      if (items_per_unit > 0 && items_per_unit <= cpu_tuning::piece_items) {
        const std::size_t align = ceil_div(cpu_tuning::piece_items, items_per_unit);
        grain_ = ceil_div(grain_, align) * align;
      }
    }
    pieces_ = units == 0 ? 0 : ceil_div(units, grain_);
    workers_ = static_cast<int>(std::min(threads, pieces_));
    threads_ = threads;
  }
  std::size_t pieces() const { return pieces_; }
  int workers() const { return std::max(workers_, 1); }
  /// Piece p's units, as run() gives them to its body (worker 0).
  cpu_piece bounds(std::size_t p) const { return piece(p, 0); }

  template <class Body>
  void run(Body&& body) const {
    if (pieces_ == 0) return;
    // The profile's shape and occupancy columns: the threads the cut lets work (a loop whose team
    // came too late runs alone, a choice of the library's, not of the shape's).
    if (profiling()) call_scope::note_launch({pieces_, 0, 0, std::size_t(workers()), double(workers()) / double(threads_)});
    if (workers_ <= 1 || cpu_team_too_late_for(items_) || in_forked_child()) {
      for (std::size_t p = 0; p < pieces_; ++p) body(piece(p, 0));
      return;
    }
    using clock = std::chrono::steady_clock;
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false}, helped{false};
    std::atomic<clock::rep> latest{0};  // the latest start of a team thread, after `start`
    std::exception_ptr first;
    clock::duration worked{};  // the calling thread's time on the pieces
    const clock::time_point start = clock::now();
    const thread_context caller = this_thread_context();  // the team works for the calling thread
#pragma omp parallel num_threads(workers_)
    {
      const int w = omp_get_thread_num();
      if (w != 0) {
        const clock::rep after = (clock::now() - start).count();
        for (clock::rep seen = latest.load(); after > seen && !latest.compare_exchange_weak(seen, after);) {
        }
      }
      try {
        const adopted_context as_caller(w != 0 ? &caller : nullptr);
        for (std::size_t p; !failed.load(std::memory_order_relaxed) &&
                            (p = next.fetch_add(1, std::memory_order_relaxed)) < pieces_;) {
          body(piece(p, w));
          if (w != 0) helped.store(true, std::memory_order_relaxed);
        }
      } catch (...) {
        if (!failed.exchange(true)) first = std::current_exception();
      }
      if (w == 0) worked = clock::now() - start;
    }
    // The team came too late to help when its threads started after the calling thread had done all
    // the work, late enough that waiting for them cost twice the work itself.
    const clock::duration late(latest.load());
    if (!helped.load() && late > cpu_tuning::late_start && late > 2 * worked) cpu_team_came_late(items_);
    if (first) std::rethrow_exception(first);
  }

 private:
  // Written so that lengths near SIZE_MAX do not wrap (the last piece's end would).
  static std::size_t ceil_div(std::size_t a, std::size_t b) { return a / b + (a % b != 0); }
  static std::size_t times_or_max(std::size_t a, std::size_t b) {
    return b && a > std::size_t(-1) / b ? std::size_t(-1) : a * b;
  }
  cpu_piece piece(std::size_t p, int w) const {
    const std::size_t first = p * grain_;
    return {p, first, first + std::min(grain_, units_ - first), w};
  }
  std::size_t units_, items_, grain_ = 1, pieces_ = 0, threads_ = 1;
  int workers_ = 1;
};

// The CPU backend's emulation: block bi of cfg's grid, and its threads one after another.
inline thread_index cpu_block(long bi, const launch_config& cfg) {
  const dims g = cfg.grid;
  const auto ub = static_cast<unsigned long>(bi);
  thread_index t;
  t.grid_dim = g;
  t.block_dim = cfg.block;
  t.block = dims(unsigned(ub % g.x), unsigned(ub / g.x % g.y), unsigned(ub / (std::size_t(g.x) * g.y)));
  return t;
}
template <class F>
void cpu_threads(thread_index& t, F&& f) {
  const dims b = t.block_dim;
  for (unsigned z = 0; z < b.z; ++z)
    for (unsigned y = 0; y < b.y; ++y)
      for (unsigned x = 0; x < b.x; ++x) {
        t.thread = dims(x, y, z);
        f();
      }
}

template <class F, class... Args>
void launch_functor(cpu_backend, stream_ref s, const launch_config& cfg, F f, Args... args) {
  cpu_loop(cfg.grid.count(), cfg.block.count(), cut::one_each).run([&](cpu_piece p) {
    for (std::size_t bi = p.first; bi < p.last; ++bi) {
      thread_index t = cpu_block(long(bi), cfg);
      cpu_threads(t, [&] { f(t, args...); });
    }
  });
  record_kernel(s.device());
}

template <class... Phases>
void launch_phases_on(cpu_backend, stream_ref s, const launch_config& cfg, Phases... phases) {
  const cpu_loop loop(cfg.grid.count(), cfg.block.count(), cut::one_each);
  // One block's shared memory per worker, reused by the blocks it runs (not zeroed, as on the GPU).
  struct alignas(16) chunk {
    unsigned char b[16];
  };
  const std::size_t words = (cfg.shared_bytes + 15) / 16;
  const std::unique_ptr<chunk[]> shared(new chunk[words * std::size_t(loop.workers())]);
  loop.run([&](cpu_piece p) {
    const block_shared sh{shared.get() + words * std::size_t(p.worker), cfg.shared_bytes};
    for (std::size_t bi = p.first; bi < p.last; ++bi) {
      thread_index t = cpu_block(long(bi), cfg);
      (cpu_threads(t, [&] { phases(t, sh); }), ...);
    }
  });
  record_kernel(s.device());
}

template <class F>
launch_config for_each_config_on(cpu_backend, std::size_t) {
  return {dims(unsigned(omp_get_max_threads())), dims(1)};
}

template <class F>
void for_each_on(cpu_backend, stream_ref s, std::size_t n, F f) {
  cpu_loop(n, 1).run([&](cpu_piece p) {
    cpu_simd_run([&] {
      // ivdep, not omp simd: the elements are independent, and an exception may leave this loop.
#pragma GCC ivdep
      for (std::size_t i = p.first; i < p.last; ++i) f(i);
    });
  });
  record_kernel(s.device());
}

}  // namespace resident::detail
