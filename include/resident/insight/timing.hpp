#pragma once
/// @file timing.hpp
/// Timing a region the honest way: warm-up first, device events around each repetition, the median.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "resident/device/event.hpp"
#include "resident/error.hpp"

namespace resident {

/// Times of repeated runs of one region, in milliseconds.
struct timing {
  std::vector<double> ms;  ///< each repetition, sorted ascending
  /// The median repetition (0 when none ran).
  double median() const { return ms.empty() ? 0 : ms[ms.size() / 2]; }
  /// The fastest repetition (0 when none ran).
  double min() const { return ms.empty() ? 0 : ms.front(); }
  /// The slowest repetition (0 when none ran).
  double max() const { return ms.empty() ? 0 : ms.back(); }
};

/// Runs f() `warmup` times, then `reps` times each between two events recorded on s, and returns the
/// sorted times. f issues its work on s (on the CPU it simply runs).
/// @throws invalid_argument when reps < 1 or warmup < 0 (before f runs).
template <class F>
timing time_region(stream_ref s, int reps, int warmup, F&& f) {
  RESIDENT_EXPECTS(reps >= 1, "time_region: " + std::to_string(reps) + " repetitions; time at least one");
  RESIDENT_EXPECTS(warmup >= 0, "time_region: " + std::to_string(warmup) + " warm-up calls; give 0 or more");
  for (int i = 0; i < warmup; ++i) f();
  s.synchronize();
  event a(s.device()), b(s.device());
  timing t;
  t.ms.reserve(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    a.record(s);
    f();
    b.record(s);
    b.synchronize();
    t.ms.push_back(elapsed_ms(a, b));
  }
  std::sort(t.ms.begin(), t.ms.end());
  return t;
}

/// Like time_region, but timing `batch` back-to-back calls per repetition and reporting per call:
/// for regions shorter than an event's resolution or launch-bound ones.
/// @throws invalid_argument when batch < 1 (and as time_region does).
template <class F>
timing time_batched(stream_ref s, int reps, int warmup, int batch, F&& f) {
  RESIDENT_EXPECTS(batch >= 1, "time_batched: a batch of " + std::to_string(batch) + " calls; give 1 or more");
  timing t = time_region(s, reps, warmup, [&] {
    for (int i = 0; i < batch; ++i) f();
  });
  for (auto& v : t.ms) v /= batch;
  return t;
}

}  // namespace resident
