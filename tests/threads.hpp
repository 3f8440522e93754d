#pragma once
// Counting this process's threads (Linux), for tests that every worker thread a call started is gone.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <thread>

namespace resident::test {

/// The threads of this process.
inline std::size_t threads_now() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

/// The threads of this process once those just joined have left the kernel's list (a joined thread
/// may stay listed for a moment after join() returns), within a second.
inline std::size_t threads_after_joins(std::size_t expected) {
  std::size_t n = threads_now();
  for (int i = 0; i < 1000 && n > expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = threads_now();
  }
  return n;
}

}  // namespace resident::test
