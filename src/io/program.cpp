// Programs resident starts (the host compiler, gnuplot, the guide's examples, a second CLI process):
// posix_spawn with an argument vector, so no shell parses a path, a title or an environment value.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <climits>
#include <cstring>
#include <mutex>
#include <set>

#include "resident/detail/files.hpp"
#include "resident/detail/fork.hpp"

extern char** environ;

namespace resident::detail {
namespace {

// The programs run_program started and has not waited for yet, for stop_programs_now. Never destroyed:
// a signal during exit still finds it.
struct running_programs {
  std::mutex mutex;
  std::set<pid_t> pids;
  bool ending = false;  // stop_programs_now ran: the process is about to end
};
running_programs& running() {
  static running_programs* r = new running_programs;
  return *r;
}
// A fork() child has not started its parent's programs (it cannot wait for them, nor should it kill
// them when it ends).
void forget_parent_programs() {
  running().pids.clear();
  running().ending = false;
}
const int running_guarded = guard_across_fork(running().mutex, &forget_parent_programs, true);

// The program pid has ended: forgotten. Once the process is ending, the caller waits here for the end
// (its signals are blocked in this thread), so that what it would do next cannot race the cleanup.
void ended(pid_t pid) {
  {
    std::lock_guard<std::mutex> lock(running().mutex);
    running().pids.erase(pid);
    if (!running().ending) return;
  }
  for (;;) ::pause();
}

// Search-path variables of the programs resident starts (the host compiler's helpers and headers, the
// loader's libraries): an empty or relative entry (a trailing ':', ".") names the current folder, where
// another user may have left an `as`, a `math.h` or a library of the same name. Only absolute entries
// are kept; a variable left with none is dropped (PATH takes the default of program_path).
constexpr const char* search_paths[] = {"PATH",         "CPATH",        "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
                                        "LIBRARY_PATH", "COMPILER_PATH", "LD_LIBRARY_PATH", "GCC_EXEC_PREFIX",
                                        "LD_RUN_PATH"};  // ld writes it into the kernel as its RUNPATH

// The absolute entries of a ':'-separated search path, in order: an empty or relative one (a trailing
// ':', ".") names the current folder, where another user may have left a file of the name looked up.
std::vector<std::string> absolute_entries(const std::string& value) {
  std::vector<std::string> kept;
  for (std::size_t start = 0; start <= value.size();) {
    const std::size_t end = std::min(value.find(':', start), value.size());
    std::string d = value.substr(start, end - start);
    start = end + 1;
    if (!d.empty() && d[0] == '/') kept.push_back(std::move(d));
  }
  return kept;
}

std::string joined(const std::vector<std::string>& entries) {
  std::string s;
  for (const auto& e : entries) s += (s.empty() ? "" : ":") + e;
  return s;
}

// waitpid failed (ECHILD): the program has ended, but its status was taken elsewhere (SIGCHLD set to
// SIG_IGN reaps children at once; another thread's waitpid(-1) may take it). Its output is all there;
// its pid is no longer this process's to signal.
program_result lost(pid_t pid, const std::string& log) {
  ended(pid);
  program_result r;
  r.status = program_result::status_lost;
  r.output = read_regular_file(log, std::size_t(1) << 30).value_or("");
  return r;
}

}  // namespace

void stop_programs_now() noexcept {
  std::set<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(running().mutex);
    running().ending = true;
    pids = running().pids;
    for (const pid_t p : pids) ::kill(-p, SIGKILL);  // each program's group: what it started too
  }
  for (const pid_t p : pids) {  // gone before their folders are removed; not reaped (run_program does)
    siginfo_t info {};
    while (::waitid(P_PID, id_t(p), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
  }
}

program_result run_program(const std::vector<std::string>& argv,
                           const std::vector<std::pair<std::string, std::string>>& env, double seconds) {
  program_result r;
  if (argv.empty()) return r;
  const private_dir dir("resident-run");
  const std::string log = dir.file("output");
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) return r;
  // The environment: this process's, with env's names replaced or added. The program's own temporary
  // files go to the private folder too: a compiler writes its objects under TMPDIR, and one that others
  // can write would let them swap an object into the kernel resident then loads (private_dir refuses
  // such a TMPDIR for resident's files, not for the programs it starts).
  std::vector<std::pair<std::string, std::string>> set{{"TMPDIR", dir.path()}, {"TMP", dir.path()}, {"TEMP", dir.path()}};
  set.insert(set.end(), env.begin(), env.end());  // the caller's choice last: it wins
  std::vector<std::string> vars;
  bool has_path = false;
  for (char** e = environ; e && *e; ++e) {
    std::string v = *e;
    bool replaced = false;
    for (const auto& [name, value] : set) replaced = replaced || v.rfind(name + "=", 0) == 0;
    if (replaced) continue;
    for (const char* name : search_paths) {
      const std::string prefix = std::string(name) + "=";
      if (v.rfind(prefix, 0) != 0) continue;
      const std::string kept = joined(absolute_entries(v.substr(prefix.size())));
      if (prefix == "PATH=") has_path = !kept.empty();
      v = kept.empty() ? "" : prefix + kept;
    }
    if (!v.empty()) vars.push_back(v);
  }
  if (!has_path && std::none_of(set.begin(), set.end(), [](const auto& e) { return e.first == "PATH"; }))
    vars.push_back("PATH=/usr/local/bin:/usr/bin:/bin");
  for (std::size_t i = 0; i < set.size(); ++i) {  // a name given twice: its last value
    bool later = false;
    for (std::size_t j = i + 1; j < set.size(); ++j) later = later || set[j].first == set[i].first;
    if (!later) vars.push_back(set[i].first + "=" + set[i].second);
  }
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out, 1);  // dup2 clears close-on-exec on the copies
  posix_spawn_file_actions_adddup2(&fa, out, 2);
  // Started in its private folder: a program looks up what it runs and reads in the current folder (g++
  // finds `as` through an empty PATH entry, headers through an empty CPATH one), which may be a shared
  // one where another user left theirs. Relative paths in argv are therefore not the caller's.
  posix_spawn_file_actions_addchdir_np(&fa, dir.path().c_str());
  // No signal blocked in the program: a mask of the calling thread's (one that waits for signals with
  // sigwait) would keep SIGINT or SIGTERM from stopping a compiler.
  // Signals this process ignores start at their defaults there (an ignored SIGCHLD made clang fail to
  // wait for its own cc1; Python ignores SIGPIPE). Its own process group: a time limit or the end of
  // this process stops the program and everything it started (g++'s cc1plus, as, ld), not g++ alone.
  // A Ctrl-C at the terminal therefore leaves a compile to finish (within its time limit).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (const int sig : {SIGCHLD, SIGPIPE, SIGXFSZ}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  // Found here, not by posix_spawnp: it reads an empty PATH entry as the current folder. The absolute
  // path is argv[0] too: g++ finds its cc1plus and specs from argv[0], which a relative one would make
  // relative to the private folder it starts in (/tmp/lib/gcc/..., a path anyone may make).
  const std::string exe = program_path(argv[0]);
  args[0] = const_cast<char*>(exe.c_str());
  const int rc = exe.empty() ? ENOENT : ::posix_spawn(&pid, exe.c_str(), &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out);
  if (rc != 0) return r;
  {
    std::lock_guard<std::mutex> lock(running().mutex);
    running().pids.insert(pid);
    if (running().ending) ::kill(-pid, SIGKILL);  // started as the process ends: it and what it started
  }
  int status = 0;
  if (seconds > 0) {  // polled: a program past its time is killed, and says so
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno != EINTR) return lost(pid, log);
      if (std::chrono::steady_clock::now() > end) {
        ::kill(-pid, SIGKILL);  // its group: what it started too
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        ended(pid);
        r.status = program_result::timed_out;
        r.output = read_regular_file(log, std::size_t(1) << 30).value_or("");
        return r;
      }
      ::usleep(10000);
    }
  } else {
    while (::waitpid(pid, &status, 0) < 0)
      if (errno != EINTR) return lost(pid, log);
  }
  ended(pid);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.output = read_regular_file(log, std::size_t(1) << 30).value_or("");
  return r;
}

std::string program_path(const std::string& name) {
  const auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) {  // relative to the caller's folder now: made absolute
    char here[PATH_MAX];
    const std::string path = name[0] == '/' ? name : ::getcwd(here, sizeof here) ? std::string(here) + "/" + name : "";
    return !path.empty() && runnable(path) ? path : "";
  }
  const char* path = std::getenv("PATH");
  for (const std::string& d : absolute_entries(path && *path ? path : "/usr/local/bin:/usr/bin:/bin"))
    if (runnable(d + "/" + name)) return d + "/" + name;
  return "";
}

bool program_found(const std::string& name) { return !program_path(name).empty(); }

}  // namespace resident::detail
