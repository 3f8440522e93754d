#pragma once
/// @file launch.hpp
/// Checked launches of a functor on either backend.
///
///   rs::launch(stream, {.grid = 2, .block = 4}, [] RESIDENT_HD (rs::thread_index t, rs::array_view<int> out) {
///     out[t.global_x()] = int(t.thread.x);
///   }, out.view());
///
/// On a CUDA device the functor runs as a kernel (the calling file must be compiled by nvcc); on the
/// CPU each block runs on an OpenMP thread and its threads run one after another. Kernels that need
/// block-wide barriers and shared memory are written as phases (launch_phases), which both backends run.
///
/// On the CPU backend an exception thrown by a functor reaches the caller: the first one thrown is
/// rethrown after the loop. Other blocks or elements may or may not have run by then (those already
/// started finish, no new ones start), so the output is partly written.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/launch/config.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

namespace detail {
#if defined(__CUDACC__)
inline constexpr bool nvcc_compiled = true;
#else
inline constexpr bool nvcc_compiled = false;
#endif

[[noreturn]] inline void throw_not_nvcc(device d) {
  RESIDENT_FAIL("this code runs on " + d.name() +
                         " but its translation unit was not compiled by nvcc; compile it as CUDA "
                         "(set_source_files_properties(... LANGUAGE CUDA)) or run on the cpu device");
}

template <class F, class... Args>
void launch_cuda(stream_ref s, const launch_config& cfg, F f, Args... args);
template <class F>
void for_each_cuda(stream_ref s, std::size_t n, F f);
template <class F>
launch_config for_each_config_cuda(std::size_t n);
template <class... Phases>
void launch_phases_cuda(stream_ref s, const launch_config& cfg, Phases... phases);

/// How the CPU backend spreads a loop over the OpenMP team.
struct cpu_policy {
  /// Loops over fewer elements (or emulated GPU threads) run on the calling thread: a second thread
  /// would save at most what waking and joining the team costs (~1 us; 1024 seed elements take 3 us).
  static constexpr std::size_t serial_below = 1024;
  /// Pieces per thread, taken one at a time: the others take over from a thread the OS put aside.
  static constexpr std::size_t pieces_per_thread = 2;
  /// The fewest elements in a piece: taking a piece (an atomic on a shared line) stays negligible.
  static constexpr std::size_t min_piece = std::size_t(1) << 15;
  /// A team thread starting its region this late was waiting for a core (a woken thread gets one in
  /// well under a millisecond on an idle core): other processes hold the cores ...
  static constexpr std::chrono::microseconds late_start{1000};
  /// ... and when it came after the calling thread had done all the work, and over twice as late as
  /// that work took, loops of up to twice that size run on the calling thread for this long, then try
  /// the team again.
  static constexpr std::chrono::milliseconds serial_after_late{1000};
};

/// The largest loop (in items) whose team came too late to help, and when (steady_clock ticks).
inline std::atomic<std::size_t> cpu_late_items{0};
inline std::atomic<std::int64_t> cpu_late_at{0};

/// Whether a loop of this many items should leave the team alone: one as large came too late lately.
inline bool cpu_team_too_late_for(std::size_t items) {
  const std::int64_t at = cpu_late_at.load(std::memory_order_relaxed);
  if (at == 0) return false;
  const auto since = std::chrono::steady_clock::now().time_since_epoch() - std::chrono::steady_clock::duration(at);
  return since < cpu_policy::serial_after_late && items <= 2 * cpu_late_items.load(std::memory_order_relaxed);
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
/// body(cpu_piece) for each: on the calling thread when the work is small (cpu_policy::serial_below
/// items, a unit being items_per_unit of them), there is one thread, or the team of a loop as large
/// recently came too late to help (cpu_policy::late_start), else on the OpenMP team, each thread taking
/// its next piece from a shared counter. In the last case the calling thread runs the same pieces, so
/// a reduction's result does not change. An exception must not leave an OpenMP region
/// (the runtime would terminate the process): the first one a body throws is kept, no thread takes a
/// piece after it, and it is rethrown here after the region. Pieces already taken finish.
class cpu_loop {
 public:
  cpu_loop(std::size_t units, std::size_t items_per_unit, cut how = cut::even)
      : units_(units), items_(units * items_per_unit) {
    const auto threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    if (units <= 1 || threads == 1 || units * items_per_unit < cpu_policy::serial_below) {
      grain_ = std::max<std::size_t>(units, 1);
    } else if (how == cut::one_each) {
      grain_ = 1;
    } else {
      const std::size_t want = threads * cpu_policy::pieces_per_thread;
      const std::size_t least = (cpu_policy::min_piece + items_per_unit - 1) / items_per_unit;
      grain_ = std::max((units + want - 1) / want, std::min(least, (units + threads - 1) / threads));
    }
    pieces_ = units == 0 ? 0 : (units + grain_ - 1) / grain_;
    workers_ = static_cast<int>(std::min(threads, pieces_));
  }
  std::size_t pieces() const { return pieces_; }
  int workers() const { return std::max(workers_, 1); }

  template <class Body>
  void run(Body&& body) const {
    if (pieces_ == 0) return;
    if (workers_ <= 1 || cpu_team_too_late_for(items_)) {
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
#pragma omp parallel num_threads(workers_)
    {
      const int w = omp_get_thread_num();
      if (w != 0) {
        const clock::rep after = (clock::now() - start).count();
        for (clock::rep seen = latest.load(); after > seen && !latest.compare_exchange_weak(seen, after);) {
        }
      }
      try {
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
    if (!helped.load() && late > cpu_policy::late_start && late > 2 * worked) cpu_team_came_late(items_);
    if (first) std::rethrow_exception(first);
  }

 private:
  cpu_piece piece(std::size_t p, int w) const { return {p, p * grain_, std::min(units_, (p + 1) * grain_), w}; }
  std::size_t units_, items_, grain_ = 1, pieces_ = 0;
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
}  // namespace detail

/// A block's shared memory (cfg.shared_bytes of it, 16-byte aligned): on-chip on the GPU, a buffer per
/// block on the CPU backend.
struct block_shared {
  /// Start of the block's shared memory.
  void* data;
  /// Its size in bytes (cfg.shared_bytes).
  std::size_t bytes;
  /// The shared memory as an array of T.
  template <class T>
  RESIDENT_HD T* as() const {
    return static_cast<T*>(data);
  }
};

/// Launches f(thread_index, args...) over cfg's grid on s. Validates cfg against the device first and
/// checks the launch after; counts one kernel in the ledger. Asynchronous on CUDA.
/// @throws invalid_launch, cuda_error, device_lost; on the CPU backend, the first exception f threw
/// (other blocks may or may not have run).
template <class F, class... Args>
void launch(stream_ref s, const launch_config& cfg, F f, Args... args) {
  const device d = s.device();
  validate(cfg, d);
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      detail::launch_cuda(s, cfg, f, args...);
    else
      detail::throw_not_nvcc(d);
    return;
  }
  detail::cpu_loop(cfg.grid.count(), cfg.block.count(), detail::cut::one_each).run([&](detail::cpu_piece p) {
    for (std::size_t bi = p.first; bi < p.last; ++bi) {
      thread_index t = detail::cpu_block(long(bi), cfg);
      detail::cpu_threads(t, [&] { f(t, args...); });
    }
  });
  detail::record_kernel(d);
}

/// Launches a kernel written as phases with a block-wide barrier between them: every thread of a block
/// runs phase(thread_index, block_shared) for the first phase, the block synchronizes (__syncthreads on
/// the GPU), then the next phase, and so on. What a thread must keep from one phase to the next goes
/// in shared memory (cfg.shared_bytes per block). On the CPU backend each block runs its phases one
/// after another over all of its threads, so the same code is correct on both. One kernel.
///
///   rs::launch_phases(s, {grid, block, block.x * sizeof(float)}, load_tile{...}, use_tile{...});
/// @throws invalid_launch (as launch()); on the CPU backend, the first exception a phase threw (other
/// blocks may or may not have run).
template <class... Phases>
void launch_phases(stream_ref s, const launch_config& cfg, Phases... phases) {
  static_assert(sizeof...(Phases) >= 1, "launch_phases needs at least one phase");
  const device d = s.device();
  validate(cfg, d);
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      detail::launch_phases_cuda(s, cfg, phases...);
    else
      detail::throw_not_nvcc(d);
    return;
  }
  const detail::cpu_loop loop(cfg.grid.count(), cfg.block.count(), detail::cut::one_each);
  // One block's shared memory per worker, reused by the blocks it runs (not zeroed, as on the GPU).
  struct alignas(16) chunk {
    unsigned char b[16];
  };
  const std::size_t words = (cfg.shared_bytes + 15) / 16;
  const std::unique_ptr<chunk[]> shared(new chunk[words * std::size_t(loop.workers())]);
  loop.run([&](detail::cpu_piece p) {
    const block_shared sh{shared.get() + words * std::size_t(p.worker), cfg.shared_bytes};
    for (std::size_t bi = p.first; bi < p.last; ++bi) {
      thread_index t = detail::cpu_block(long(bi), cfg);
      (detail::cpu_threads(t, [&] { phases(t, sh); }), ...);
    }
  });
  detail::record_kernel(d);
}

/// The configuration for_each_index(s, n, f) launches with: on CUDA the occupancy API's block size for
/// f's grid-stride kernel and at most one full wave of blocks (each thread then takes several items);
/// on the CPU one block per OpenMP thread.
template <class F>
launch_config for_each_config(stream_ref s, std::size_t n, F) {
  const device d = s.device();
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      return detail::for_each_config_cuda<F>(n);
    else
      detail::throw_not_nvcc(d);
  }
  return {dims(unsigned(omp_get_max_threads())), dims(1)};
}

/// Runs f(i) for every i in [0, n) on s: a grid-stride kernel with the block size chosen by the
/// occupancy API on CUDA, a parallel loop on the CPU. One kernel in the ledger; n == 0 does nothing.
/// @throws on the CPU backend, the first exception f threw (other indices may or may not have run).
template <class F>
void for_each_index(stream_ref s, std::size_t n, F f) {
  if (n == 0) return;
  const device d = s.device();
  if (d.is_cuda()) {
    if constexpr (detail::nvcc_compiled)
      detail::for_each_cuda(s, n, f);
    else
      detail::throw_not_nvcc(d);
    return;
  }
  detail::cpu_loop(n, 1).run([&](detail::cpu_piece p) {
    // ivdep, not omp simd: the elements are independent, and an exception may leave this loop.
#pragma GCC ivdep
    for (std::size_t i = p.first; i < p.last; ++i) f(i);
  });
  detail::record_kernel(d);
}

}  // namespace resident

#if defined(__CUDACC__)
#include "resident/launch/detail/launch_cuda.cuh"
#endif
