#pragma once
// Work of a known length. Queued on a stream before the work a test orders, it keeps that work from
// starting for a while, so a call on another stream that fails to wait for it reads the values from
// before (on a GPU, where streams run at once); between two events it is a time they must measure.

#include <chrono>
#include <cstdint>

#include "resident/launch/launch.hpp"

namespace resident::test {

/// Keeps one thread busy for at least `ns` nanoseconds of wall time: on a GPU by its global timer (in
/// nanoseconds, whatever the clock rate), on the CPU by the steady clock. A kernel of one thread.
struct busy_for {
  std::int64_t ns;
  RESIDENT_HD void operator()(thread_index) const {
#if defined(__CUDA_ARCH__)
    unsigned long long t0 = 0, t = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < static_cast<unsigned long long>(ns));
#else
    const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < end) {
    }
#endif
  }
};

/// Queues on s one thread busy for `ms` milliseconds: work queued after it on s starts no earlier.
/// On a CUDA stream the calling file must be compiled by nvcc.
inline void queue_busy(stream_ref s, double ms) {
  launch(s, {dims(1), dims(1)}, busy_for{static_cast<std::int64_t>(ms * 1e6)});
}

}  // namespace resident::test
