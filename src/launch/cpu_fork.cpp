// GNU OpenMP's team threads do not survive fork(): a parallel region started in the child waits for
// them forever (multiprocessing's "fork" start method after the parent ran a CPU loop hung). A fork
// child's loops and copies run on its one thread.
#include <pthread.h>

#include <atomic>

#include "resident/launch/detail/launch_cpu.hpp"

namespace resident::detail {
namespace {
std::atomic<bool> forked{false};
void mark_child() { forked.store(true, std::memory_order_relaxed); }
const int registered = ::pthread_atfork(nullptr, nullptr, &mark_child);
}  // namespace

bool in_forked_child() noexcept {
  (void)registered;
  return forked.load(std::memory_order_relaxed);
}

}  // namespace resident::detail
