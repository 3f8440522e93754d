// fork() children: GNU OpenMP's team threads do not survive fork(), so a parallel region started in the
// child waits for them forever (multiprocessing's "fork" start method after the parent ran a CPU loop
// hung): a fork child's loops and copies run on its one thread. The library's locks are taken across
// the fork and its process-wide state is reset in the child (guard_across_fork).
#include "resident/detail/fork.hpp"

#include <pthread.h>

#include <atomic>
#include <exception>

namespace resident::detail {
namespace {

std::atomic<bool> forked{false};

// The guarded locks in the order they were registered (at static initialization), a fixed array: the
// handlers run inside fork() and allocate nothing.
struct guarded_lock {
  std::mutex* m;
  void (*in_child)();
  bool leaf;
};
constexpr int max_guarded = 16;
guarded_lock guarded[max_guarded];
std::atomic<int> n_guarded{0};

// The locks in the order they are taken: the others, then the leaves.
void before_fork() {
  for (const bool leaves : {false, true})
    for (int i = 0; i < n_guarded.load(); ++i)
      if (guarded[i].m && guarded[i].leaf == leaves) guarded[i].m->lock();
}
void let_go() {
  for (int i = 0; i < n_guarded.load(); ++i)
    if (guarded[i].m) guarded[i].m->unlock();
}
void after_fork_in_parent() { let_go(); }
void after_fork_in_child() {
  forked.store(true, std::memory_order_relaxed);
  let_go();
  for (int i = 0; i < n_guarded.load(); ++i)
    if (guarded[i].in_child) guarded[i].in_child();
}

const int registered = ::pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);

}  // namespace

bool in_forked_child() noexcept {
  (void)registered;
  return forked.load(std::memory_order_relaxed);
}

int guard_across_fork(std::mutex& m, void (*in_child)(), bool leaf) noexcept {
  // Static initialization runs on one thread; a library loaded later (dlopen) registers under its loader's
  // lock, which fork() does not take: the entry is filled before the count shows it.
  static std::mutex registering;
  const std::lock_guard<std::mutex> one_at_a_time(registering);
  const int i = n_guarded.load();
  if (i >= max_guarded) std::terminate();  // a library limit: raise max_guarded
  guarded[i] = {&m, in_child, leaf};
  n_guarded.store(i + 1);
  return 0;
}

}  // namespace resident::detail
