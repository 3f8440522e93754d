// fork() and the library's process-wide state: a child starts with one thread, the one that forked.
// Locks another thread held at that moment would stay held in the child for good, and what those
// threads had started (a compile, a program, a temporary folder) is the parent's, not the child's.
#pragma once

#include <mutex>

namespace resident::detail {

/// Whether this process is a fork() child: OpenMP's team threads stay in the parent, so the child's
/// loops and copies run on its one thread (src/io/fork.cpp).
bool in_forked_child() noexcept;

/// Keeps m whole across fork(): the forking thread takes it before the process is copied and lets it
/// go in both processes after, so the child never finds it held by a thread it does not have. Then,
/// in the child only and with m free, in_child forgets what belonged to the parent's other threads.
/// For locks held briefly, never across a wait on a program. A `leaf` lock is one under which no other
/// lock of this list is taken (it may be taken while one of them is held): the leaves are taken last,
/// whatever order the files' initializers registered them in, so the fork cannot take two locks in the
/// opposite order of a thread that holds one and waits for the other. Called once per lock, from a
/// namespace-scope initializer. Returns 0 (for that initializer).
int guard_across_fork(std::mutex& m, void (*in_child)() = nullptr, bool leaf = false) noexcept;

}  // namespace resident::detail
