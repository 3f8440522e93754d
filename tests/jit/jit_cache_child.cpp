// A second process for the disk-cache tests: runs one run-time stage (its constant from argv[1]) on the
// device argv[2] (cpu by default), checks every value, and prints what the cache did. argv[3] may ask
// for a harder process around it: "fork" (a fork() while another thread compiles the same stage: the
// child must finish the stage too) or "nochild" (SIGCHLD ignored, so no compiler's status can be
// waited for).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../fork_child.hpp"
#include "resident/resident.hpp"

namespace rs = resident;

namespace {

// Runs the stage; "" when every value is right, else what went wrong.
std::string run_stage(const std::string& c, rs::device d) {
  try {
    const std::size_t n = 10000;
    rs::array<float> y = rs::to_device(std::vector<float>(n, 2.f), d);
    rs::jit::map("float k(float v) { return v * 3.0f + " + c + ".0f; }")(y);
    for (float v : y.to_host())
      if (v != 6.f + std::stof(c)) return "wrong value " + std::to_string(v);
    return "";
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

// A fork() while another thread compiles: the child runs the same stage and must end within 60 s.
std::string fork_while_compiling(const std::string& c, rs::device d) {
  std::string in_thread;
  std::thread compiling([&] { in_thread = run_stage(c, d); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the compiler is running now
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string r = run_stage(c, d);
    std::printf("fork child: %s\n", r.empty() ? "ok" : r.c_str());
    std::fflush(stdout);
    ::_exit(r.empty() ? 0 : 1);
  }
  if (pid < 0) {
    compiling.join();
    return "fork() failed";
  }
  const rs::test::child_end end = rs::test::wait_for_child(pid, std::chrono::seconds(60));
  compiling.join();
  if (end.hung) return "the fork child hung: " + end.report;
  if (!in_thread.empty()) return in_thread;
  return end.succeeded() ? "" : "the fork child failed";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string c = argc > 1 ? argv[1] : "1";
  const std::string how = argc > 3 ? argv[3] : "";
  std::string r;
  try {
    const rs::device d = rs::parse_device(argc > 2 ? argv[2] : "cpu");
    if (how == "nochild") std::signal(SIGCHLD, SIG_IGN);
    r = how == "fork" ? fork_while_compiling(c, d) : run_stage(c, d);
  } catch (const std::exception& e) {
    r = std::string("error: ") + e.what();
  }
  if (!r.empty()) {
    std::printf("%s\n", r.c_str());
    return 1;
  }
  const auto s = rs::jit::stats();
  std::printf("ok compiled=%llu disk=%llu rejected=%llu\n", (unsigned long long)s.compiled,
              (unsigned long long)s.disk_loads, (unsigned long long)s.rejected);
  return 0;
}
