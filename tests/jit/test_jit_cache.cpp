// The run-time chains' disk cache seen from other processes: an entry one process compiled loaded by
// the next, folders filled at once, corrupt, truncated or unwritable, a compiler that makes nothing.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "resident/detail/files.hpp"
#include "fork_child.hpp"
#include "private_folder.hpp"
#include "support.hpp"

namespace rs = resident;
namespace fs = std::filesystem;
using rs::test::backend;

namespace {

// Every test binary run gets its own folders for the children's caches (passed to each child).
const std::string cache_root = rs::test::private_folder("resident-jit-cache-test", "cache");

// ---- the disk cache ---------------------------------------------------------------------------------

struct child_result {
  int status = -1;
  std::string out;
};

// Runs the cache child with its cache in dir (and the environment plus env); it prints
// "ok compiled=N disk=M rejected=R". Started without a shell: the paths reach it as they are.
child_result run_child(const std::string& dir, const std::string& constant, const std::string& device = "cpu",
                       std::vector<std::pair<std::string, std::string>> env = {}, const std::string& how = "") {
  env.emplace_back("RESIDENT_JIT_CACHE", dir);
  const auto r = rs::detail::run_program({RESIDENT_JIT_CHILD, constant, device, how}, env, 240);
  return {r.status, r.output};
}

// A compiler script that waits `seconds` before it runs c++ (also before `--version` when slow_version).
std::string slow_compiler(const std::string& name, double seconds, bool slow_version) {
  const std::string path = cache_root + "-" + name + ".sh";
  {
    std::ofstream f(path);
    f << "#!/bin/sh\n";
    if (!slow_version) f << "[ \"$1\" = --version ] && exec c++ --version\n";
    f << "sleep " << seconds << "\nexec c++ \"$@\"\n";
  }
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::replace);
  return path;
}

// The folder's kernel entries (its key file aside).
std::vector<fs::path> entries(const std::string& dir) {
  std::vector<fs::path> e;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().filename() != "key") e.push_back(f.path());
  return e;
}

TEST(jit_cache, a_second_process_loads_what_the_first_compiled) {
  const std::string dir = cache_root + "-processes";
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  auto first = run_child(dir, c);
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_NE(first.out.find("ok compiled=1 disk=0"), std::string::npos) << first.out;
  auto second = run_child(dir, c);
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_NE(second.out.find("ok compiled=0 disk=1"), std::string::npos) << second.out;
}

using jit_cache_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(jit_cache_cuda, a_second_process_loads_the_gpu_kernel_the_first_compiled) {
  const std::string dir = cache_root + "-gpu";
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  auto first = run_child(dir, c, "cuda");
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_NE(first.out.find("ok compiled=1 disk=0"), std::string::npos) << first.out;
  auto second = run_child(dir, c, "cuda");
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_NE(second.out.find("ok compiled=0 disk=1"), std::string::npos) << second.out;
  // A corrupt cubin entry is ignored, compiled again and rewritten.
  auto e = entries(dir);
  ASSERT_EQ(e.size(), 1u);
  { std::ofstream(e[0], std::ios::binary | std::ios::trunc) << "RSJIT1 garbage"; }
  auto third = run_child(dir, c, "cuda");
  EXPECT_NE(third.out.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << third.out;
}

RESIDENT_CUDA_ONLY(jit_cache_cuda);

TEST(jit_cache, processes_filling_one_folder_at_once_leave_one_whole_entry) {
  const std::string dir = cache_root + "-concurrent";
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  std::vector<std::thread> t;
  std::vector<child_result> r(3);
  for (int i = 0; i < 3; ++i) t.emplace_back([&, i] { r[i] = run_child(dir, c); });
  for (auto& th : t) th.join();
  for (auto& x : r) EXPECT_EQ(x.status, 0) << x.out;
  auto e = entries(dir);
  ASSERT_EQ(e.size(), 1u) << "one entry, no temporary files left";
  EXPECT_EQ(run_child(dir, c).out.find("ok compiled=0 disk=1") != std::string::npos, true);
}

TEST(jit_cache, a_corrupt_entry_is_ignored_and_rewritten) {
  const std::string dir = cache_root + "-corrupt";
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  ASSERT_EQ(run_child(dir, c).status, 0);
  auto e = entries(dir);
  ASSERT_EQ(e.size(), 1u);
  for (const char* garbage : {"", "not a kernel at all"}) {
    { std::ofstream(e[0], std::ios::binary | std::ios::trunc) << garbage; }
    auto r = run_child(dir, c);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << r.out;
    EXPECT_GT(fs::file_size(e[0]), 1000u) << "rewritten whole";
  }
  auto again = run_child(dir, c);
  EXPECT_NE(again.out.find("ok compiled=0 disk=1 rejected=0"), std::string::npos) << again.out;
}

TEST(jit_cache, a_truncated_or_damaged_entry_is_verified_before_it_is_loaded) {
  const std::string dir = cache_root + "-damaged";
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  ASSERT_EQ(run_child(dir, c).status, 0);
  auto e = entries(dir);
  ASSERT_EQ(e.size(), 1u);
  const auto whole = fs::file_size(e[0]);
  for (double keep : {0.9, 0.5, 0.2}) {
    fs::resize_file(e[0], std::uintmax_t(double(whole) * keep));
    auto r = run_child(dir, c);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << keep << ": " << r.out;
    EXPECT_EQ(fs::file_size(e[0]), whole) << "rewritten whole";
  }
  {  // same size, bytes changed in the middle
    std::fstream f(e[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(whole / 2));
    f.write("\xcc\xcc\xcc\xcc", 4);
  }
  auto r = run_child(dir, c);
  EXPECT_NE(r.out.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << r.out;
  EXPECT_NE(run_child(dir, c).out.find("ok compiled=0 disk=1 rejected=0"), std::string::npos);
}

TEST(jit_cache, a_folder_that_takes_no_files_is_refused_with_a_warning) {
  // /proc takes no new files, even from root; a path under a plain file cannot be a folder. The program
  // runs on, its kernels cached in a private folder, and says why: never a cache turned off unsaid.
  const std::string file = cache_root + "-a-file";
  { std::ofstream(file) << "x"; }
  for (const std::string& dir : {std::string("/proc"), file, file + "/sub"}) {
    const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
    auto r = run_child(dir, c);
    EXPECT_EQ(r.status, 0) << dir << ": " << r.out;
    EXPECT_NE(r.out.find("ok compiled=1 disk=0 rejected=0"), std::string::npos) << dir << ": " << r.out;
    EXPECT_NE(r.out.find("resident: warning: the kernel cache folder '" + dir + "' is refused: "), std::string::npos)
        << dir << ": " << r.out;
  }
}

TEST(jit_cache, a_compiler_that_makes_no_kernel_is_a_typed_error) {
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  for (const char* cxx : {"true", "/no/such/compiler"}) {
    const auto r = run_child(cache_root + "-compiler", c, "cpu", {{"RESIDENT_JIT_CXX", cxx}});
    const int status = r.status;
    const std::string& out = r.out;
    EXPECT_EQ(status, 1) << cxx << ": " << status << " " << out;
    const std::string found = rs::detail::program_path(cxx);  // named by the path it was found at
    EXPECT_NE(out.find("error: jit: the host compiler '" + (found.empty() ? std::string(cxx) : found) + "'"),
              std::string::npos) << out;
    EXPECT_NE(out.find("RESIDENT_JIT_CXX"), std::string::npos) << out;
  }
  EXPECT_FALSE(fs::exists(cache_root + "-compiler") && !entries(cache_root + "-compiler").empty())
      << "nothing cached";
}

// A fork() while another thread compiles (or asks the compiler its version): the child did not have
// that thread, and waited for it for good on the kernel's slot or the compiler's one-time detection.
TEST(jit_cache, a_fork_while_another_thread_compiles_leaves_the_child_able_to_compile) {
  if (rs::test::fork_untestable) GTEST_SKIP() << rs::test::fork_untestable;
  for (const bool slow_version : {true, false}) {
    const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
    const std::string cxx = slow_compiler(slow_version ? "slow-version" : "slow-compile", 2, slow_version);
    const auto r = run_child(cache_root + "-fork", c, "cpu", {{"RESIDENT_JIT_CXX", cxx}}, "fork");
    EXPECT_EQ(r.status, 0) << (slow_version ? "during --version: " : "during the compile: ") << r.out;
    EXPECT_NE(r.out.find("fork child: ok"), std::string::npos) << r.out;
  }
}

// A compiler that stalls (an #include of a FIFO, a hung file system) is stopped at RESIDENT_JIT_TIMEOUT.
TEST(jit_cache, a_compiler_past_its_time_limit_is_stopped_with_a_typed_error) {
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  const std::string cxx = slow_compiler("stalled", 60, false);
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_child(cache_root + "-stalled", c, "cpu", {{"RESIDENT_JIT_CXX", cxx}, {"RESIDENT_JIT_TIMEOUT", "1"}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("error: jit: the host compiler '" + cxx + "' did not finish in 1 s"), std::string::npos) << r.out;
  for (const char* bad : {"soon", "0", "-5", "1e400"}) {
    const auto b = run_child(cache_root + "-stalled", c, "cpu", {{"RESIDENT_JIT_TIMEOUT", bad}});
    EXPECT_NE(b.out.find(std::string("RESIDENT_JIT_TIMEOUT='") + bad + "' is not a number of seconds"), std::string::npos)
        << bad << ": " << b.out;
  }
}

// SIGCHLD set to SIG_IGN (a daemon, a shell's nohup wrapper): the kernel reaps the compiler at once and
// its status cannot be waited for; the kernel is judged by what the compiler left.
TEST(jit_cache, a_process_ignoring_sigchld_still_compiles) {
  const std::string c = std::to_string(rs::test::fresh_seed() % 100000);
  const auto r = run_child(cache_root + "-nochild", c, "cpu", {}, "nochild");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("ok compiled=1"), std::string::npos) << r.out;
  // The compiler starts with SIGCHLD at its default: clang waits for its own cc1 (it failed with "No
  // child processes" when it inherited the ignored signal; g++ resets it itself).
  if (const std::string clang = rs::detail::program_path("clang++"); !clang.empty()) {
    const auto k = run_child(cache_root + "-nochild-clang", c, "cpu", {{"RESIDENT_JIT_CXX", clang}}, "nochild");
    EXPECT_EQ(k.status, 0) << k.out;
  }
}

TEST(jit_cache, the_folder_follows_the_environment) {
  const char* saved = std::getenv("RESIDENT_JIT_CACHE");
  const std::string keep = saved ? saved : "";
  ::setenv("RESIDENT_JIT_CACHE", "/x/y", 1);
  EXPECT_EQ(rs::jit::cache_directory(), "/x/y");
  ::unsetenv("RESIDENT_JIT_CACHE");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(rs::jit::cache_directory(), "/xdg/resident/jit");
  ::unsetenv("XDG_CACHE_HOME");
  // Without HOME (`env -i`) the disk cache stayed off without a word: the home is the password database's.
  const char* home = std::getenv("HOME");
  const bool had_home = home != nullptr;
  const std::string keep_home = had_home ? home : "";
  ::unsetenv("HOME");
  const passwd* pw = ::getpwuid(::geteuid());
  if (pw && pw->pw_dir && pw->pw_dir[0] == '/') {
    EXPECT_EQ(rs::jit::cache_directory(), std::string(pw->pw_dir) + "/.cache/resident/jit");
  }
  if (had_home) ::setenv("HOME", keep_home.c_str(), 1);
  ::setenv("RESIDENT_JIT_CACHE", keep.c_str(), 1);
}

// bench jit chooses a fresh cache through the library, not setenv (not safe while the pool's threads
// run): the choice wins over the environment until it is given back.
TEST(jit_cache, a_folder_chosen_in_the_process_wins_over_the_environment_until_given_back) {
  const std::string from_env = rs::jit::cache_directory();
  EXPECT_EQ(rs::jit::detail::set_cache_directory("/chosen"), std::nullopt);
  EXPECT_EQ(rs::jit::cache_directory(), "/chosen");
  EXPECT_EQ(rs::jit::detail::set_cache_directory(std::nullopt), std::optional<std::string>("/chosen"));
  EXPECT_EQ(rs::jit::cache_directory(), from_env);
}

// One chain object asked for a float and then a double result compiles a kernel for each (its kernels
// are remembered by result type too), and both equal a fresh object's.
using jit_memo = backend;

TEST_P(jit_memo, one_sum_object_gives_each_result_type_its_own_kernel) {
  std::vector<float> h(4099);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = 1.0f + float(i % 97) * 0.001f;
  auto x = rs::to_device(h, dev);
  auto s = rs::jit::sum();
  const float f = s.result<float>(x);
  const double d = s.result<double>(x);
  double ref = 0;
  for (float v : h) ref += double(v);
  EXPECT_EQ(f, rs::jit::sum().result<float>(x));
  EXPECT_EQ(d, rs::jit::sum().result<double>(x));
  // The sum is in the values' type (float) whatever the result's: within float's bound either way.
  EXPECT_NEAR(d, ref, 1e-5 * ref);
  EXPECT_NEAR(double(f), ref, 1e-5 * ref);
}

RESIDENT_BACKENDS(jit_memo);

}  // namespace
