#pragma once
// Timing what one stream's events cannot: work over several streams (one per shard), by events on
// each, or work that synchronizes itself (streamed calls, flows), by host wall time.

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "resident/resident.hpp"

namespace resident::cli {

/// The median of t (t not empty).
inline double median_of(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Milliseconds of `work` between events recorded on each stream, the slowest stream's; the median of
/// reps after one warm-up. Synchronizes the events.
inline double events_ms(const std::vector<stream_ref>& streams, int reps, const std::function<void()>& work) {
  std::vector<event> start, stop;
  for (auto s : streams) {
    start.emplace_back(s.device());
    stop.emplace_back(s.device());
  }
  work();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < streams.size(); ++i) start[i].record(streams[i]);
    work();
    for (std::size_t i = 0; i < streams.size(); ++i) stop[i].record(streams[i]);
    double worst = 0;
    for (std::size_t i = 0; i < streams.size(); ++i) worst = std::max(worst, elapsed_ms(start[i], stop[i]));
    t.push_back(worst);
  }
  return median_of(t);
}

/// Milliseconds of host wall time of each of reps runs of `work` (which synchronizes), after
/// `warm_ups` untimed runs.
inline std::vector<double> wall_samples_ms(int reps, const std::function<void()>& work, int warm_ups = 1) {
  for (int i = 0; i < warm_ups; ++i) work();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto a = std::chrono::steady_clock::now();
    work();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  return t;
}

/// The median of wall_samples_ms.
inline double wall_ms(int reps, const std::function<void()>& work, int warm_ups = 1) {
  return median_of(wall_samples_ms(reps, work, warm_ups));
}

/// The median and the slowest of wall_samples_ms: a target holds only where the slowest run meets it.
struct wall_spread {
  double median_ms, slowest_ms;
};
inline wall_spread wall_spread_ms(int reps, const std::function<void()>& work, int warm_ups = 1) {
  const std::vector<double> t = wall_samples_ms(reps, work, warm_ups);
  return {median_of(t), *std::max_element(t.begin(), t.end())};
}

}  // namespace resident::cli
