#pragma once
// Warm-up by time before a measurement: a fixed count of calls is not enough on the CPU backend, where
// OpenMP's threads sleep between variants and the first timed calls paid for waking them.

#include <chrono>

#include "resident/device/stream.hpp"

namespace resident::cli {

/// Runs f until it has run at least 3 times and for at least min_ms, then synchronizes s.
template <class F>
void warm_up(stream_ref s, F&& f, double min_ms = 20) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    f();
    s.synchronize();
    if (i >= 2 && std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() >= min_ms)
      break;
  }
}

}  // namespace resident::cli
