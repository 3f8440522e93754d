#pragma once
// What the flow tests share: a kernel of random length that shakes out races, and stages that log
// the order a run called them in.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <vector>

#include "resident/flow/flow.hpp"
#include "resident/launch/launch.hpp"

namespace resident::test {

// Keeps one thread busy for about `cycles` clock ticks: stages of random length shake out races.
struct spin {
  long long cycles;
  RESIDENT_HD void operator()(resident::thread_index) const {
#if defined(__CUDA_ARCH__)
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
#else
    volatile long long k = 0;
    for (long long i = 0; i < cycles / 64; ++i) k = k + 1;
#endif
  }
};

// Stages that log their calls, each with its own id: the log shows the order a run called them in (on
// the CPU, the order their work ran; on a GPU, the order it was issued, which the streams' events keep).
struct stage_log {
  std::mutex m;
  std::vector<resident::flow::stage_id> called;
  // The body of the stage that f will number `id` (the next one: f.size() before it is added).
  std::function<void(resident::stream_ref)> stage(resident::flow::stage_id id) {
    return [this, id](resident::stream_ref) {
      std::lock_guard lock(m);
      called.push_back(id);
    };
  }
  // Every stage of f called once, each after its predecessors.
  ::testing::AssertionResult each_once_after_its_predecessors(const resident::flow& f) {
    std::lock_guard lock(m);
    if (called.size() != f.size())
      return ::testing::AssertionFailure() << called.size() << " calls for " << f.size() << " stages";
    std::vector<std::size_t> at(f.size(), f.size());
    for (std::size_t k = 0; k < called.size(); ++k) {
      if (called[k] >= f.size() || at[called[k]] != f.size())
        return ::testing::AssertionFailure() << "stage " << called[k] << " called twice or unknown";
      at[called[k]] = k;
    }
    for (resident::flow::stage_id s = 0; s < f.size(); ++s)
      for (auto p : f.predecessors(s))
        if (!(at[p] < at[s])) return ::testing::AssertionFailure() << "stage " << s << " called before its predecessor " << p;
    return ::testing::AssertionSuccess();
  }
};

}  // namespace resident::test
