// Waiting for a fork() child that must end: the tests that fork while another thread holds the
// library's locks. A child counts as hung only when it waits on a lock (a futex) past the deadline and
// is still waiting on the same one a little later; a child that is running or in another system call
// on a loaded machine gets more time, up to a hard limit. A hang's report says what the child waited on.
// Meant for children that take no lock for long (these tests' children run one thread): one that waits
// on a condition variable for seconds at a time would be called hung at its second look.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace resident::test {

// Why a fork() while another thread allocates cannot be tested in this build, or nullptr. GCC 12's
// AddressSanitizer takes none of its allocator's locks across fork(): the child of a fork made while
// another thread was inside malloc waits on that allocator's lock for good (seen in CI), whatever the
// library does.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr const char* fork_untestable = "AddressSanitizer's allocator is not fork-safe";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr const char* fork_untestable = "AddressSanitizer's allocator is not fork-safe";
#else
inline constexpr const char* fork_untestable = nullptr;
#endif
#else
inline constexpr const char* fork_untestable = nullptr;
#endif

struct child_end {
  bool hung = false;
  int status = 0;      ///< waitpid's status when it ended
  std::string report;  ///< when hung: its state, system call and kernel wait channel
  bool succeeded() const { return !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

namespace detail {
inline std::string proc_line(pid_t pid, const char* what) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/" + what);
  std::string line;
  std::getline(f, line);
  return line;
}
// The system call a stopped-in-the-kernel child is in ("202 0x7f.. ..." is a futex wait on x86-64),
// "running", or "" where /proc cannot say.
// The one-letter state in /proc/PID/stat (S sleeping, R running, T stopped, D in uninterruptible wait).
inline std::string state(pid_t pid) {
  const std::string stat = proc_line(pid, "stat");
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? "?" : stat.substr(paren + 2, 1);
}
inline bool waits_on_lock(const std::string& syscall) {
  std::istringstream in(syscall);
  long nr = -1;
  return (in >> nr) && nr == SYS_futex;
}
}  // namespace detail

inline child_end wait_for_child(pid_t pid, std::chrono::seconds deadline,
                                std::chrono::seconds hard_limit = std::chrono::seconds(180)) {
  using clock = std::chrono::steady_clock;
  child_end r;
  const auto start = clock::now();
  std::string last;  // the futex wait seen at the last look past the deadline
  for (;;) {
    const pid_t got = ::waitpid(pid, &r.status, WNOHANG);
    if (got == pid) return r;
    if (got < 0 && errno != EINTR) {  // not a child of this process: a failure, never a success
      r.status = 1 << 8;
      return r;
    }
    const auto waited = clock::now() - start;
    if (waited > deadline) {  // look every 2 s: a lock held for good is still waited on the next time
      const std::string sc = detail::proc_line(pid, "syscall");
      const bool locked = detail::waits_on_lock(sc);
      if ((locked && sc == last) || waited > hard_limit) {
        r.hung = true;
        r.report = "state " + detail::state(pid) + ", system call '" + sc + "', wait channel '" +
                   detail::proc_line(pid, "wchan") + "' after " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) + " s";
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &r.status, 0);
        return r;
      }
      last = locked ? sc : std::string();
      std::this_thread::sleep_for(std::chrono::seconds(2));
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace resident::test
