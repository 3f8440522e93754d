// The CLI's outputs and helper programs (tools/resident): a crafted --from file or TMPDIR runs no
// command, output paths that are not regular files are refused at once, a failed write keeps the
// earlier file, and empty or malformed values are clear errors.
#include <algorithm>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "resident/detail/files.hpp"
#include "seed.hpp"
#include "support.hpp"

extern char** environ;

namespace rd = resident::detail;
namespace fs = std::filesystem;

namespace {

struct work_dir {
  fs::path path;
  work_dir() {
    std::string t = (fs::temp_directory_path() / "resident-cli-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    path = t;
  }
  ~work_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The CLI with args, at most 120 s (a FIFO opened for writing would otherwise wait forever).
rd::program_result cli(std::vector<std::string> args, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  args.insert(args.begin(), {"timeout", "120", RESIDENT_CLI});
  rd::program_result r = rd::run_program(args, env);
  std::replace(r.output.begin(), r.output.end(), '\n', ' ');  // messages wrap at 100 columns
  return r;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A bench pipeline --json file with two rows and the given device name and first log2_n.
std::string pipeline_json(const std::string& device_name_json, const std::string& log2_n_json = "10") {
  return R"({"benchmark": "pipeline", "device_name": )" + device_name_json + R"(, "rows": [)"
         R"({"log2_n": )" + log2_n_json + R"(, "fused_over_memcpy": 1.1, "three_kernels_ms": 2.5, "memcpy_ms": 1.0},)"
         R"({"log2_n": 12, "fused_over_memcpy": 1.05, "three_kernels_ms": 2.4, "memcpy_ms": 1.0}]})";
}

TEST(cli_trust, a_crafted_device_name_in_from_runs_no_command) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  work_dir w;
  const std::string mark = w / "ran", from = w / "p.json", png = w / "p.png";
  // A newline ends gnuplot's `set title '...'` command; what follows would be a command of its own.
  rd::write_file_atomically(from, pipeline_json(R"("x'\nsystem \"touch )" + mark + R"(\"\n#")"));
  const auto r = cli({"bench", "pipeline", "--from", from, "--plot", png});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(mark)) << "gnuplot ran a command from the file's device_name";
  EXPECT_GT(fs::file_size(png), 1000u);
}

// gnuplot runs ~/.gnuplot at start, its `system` through a shell: HOME may be another user's (root with
// their HOME kept), so the plot starts gnuplot without any start-up file.
TEST(cli_trust, a_start_up_file_in_home_runs_no_command) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  work_dir w;
  const std::string mark = w / "ran", from = w / "p.json", png = w / "p.png", home = w / "home";
  fs::create_directories(home);
  rd::write_file_atomically(home + "/.gnuplot", "system \"touch " + mark + "\"\n");
  rd::write_file_atomically(from, pipeline_json("\"test\""));
  const auto r = cli({"bench", "pipeline", "--from", from, "--plot", png}, {{"HOME", home}});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(mark)) << "gnuplot ran HOME's start-up file";
  EXPECT_GT(fs::file_size(png), 1000u);
}

TEST(cli_trust, a_crafted_tmpdir_runs_no_shell_command) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  work_dir w;
  const std::string mark = w / "ran", from = w / "p.json", png = w / "p.png";
  const std::string tmp = w / ("t'$(touch " + mark + ")'");
  fs::create_directories(tmp);
  rd::write_file_atomically(from, pipeline_json("\"test\""));
  const auto r = cli({"bench", "pipeline", "--from", from, "--plot", png}, {{"TMPDIR", tmp}});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(mark)) << "a shell read TMPDIR";
  EXPECT_TRUE(fs::is_empty(tmp)) << "the plot's private folder was left behind";
}

TEST(cli_trust, a_relative_tmpdir_starting_with_a_redirection_runs_no_command) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  work_dir w;
  const std::string from = w / "p.json", png = w / "p.png";
  // The folder in the working folder, named relative to it: a TMPDIR that starts with '<'.
  const std::string name = "<touch resident-test-ran;";
  fs::create_directories(name);
  rd::write_file_atomically(from, pipeline_json("\"test\""));
  const auto r = cli({"bench", "pipeline", "--from", from, "--plot", png}, {{"TMPDIR", name}});
  const bool ran = fs::exists("resident-test-ran");
  std::error_code ec;
  fs::remove_all(name, ec);
  fs::remove("resident-test-ran", ec);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(ran) << "gnuplot ran the folder's name as a command";
}

TEST(cli_trust, a_failed_plot_keeps_the_earlier_png) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  work_dir w;
  const std::string from = w / "zero.json", png = w / "p.png";
  // Zeros on a log scale: gnuplot refuses to draw.
  rd::write_file_atomically(from, R"({"benchmark": "pipeline", "device_name": "test", "rows": [{"log2_n": 10,)"
                                  R"( "fused_over_memcpy": 0, "three_kernels_ms": 0, "memcpy_ms": 1}]})");
  rd::write_file_atomically(png, "earlier");
  const auto r = cli({"bench", "pipeline", "--from", from, "--plot", png});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("gnuplot failed to draw"), std::string::npos) << r.output;
  EXPECT_EQ(read_all(png), "earlier");
}

TEST(cli_trust, a_malformed_log2_n_in_from_is_a_clear_error) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "--plot is checked for gnuplot first";
  work_dir w;
  const std::string from = w / "p.json";
  for (const std::string bad : {R"("2^x")", R"("x")", R"("2^99")", "-3", "1.5"}) {
    rd::write_file_atomically(from, pipeline_json("\"test\"", bad));
    const auto r = cli({"bench", "pipeline", "--from", from, "--plot", w / "p.png"});
    EXPECT_EQ(r.status, 1) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("has a row whose log2_n is"), std::string::npos) << bad << ": " << r.output;
    EXPECT_EQ(r.output.find("unexpected error"), std::string::npos) << r.output;
  }
  // Another file's JSON, or none: said in the CLI's words, never the reader's ("[json.exception...").
  const std::vector<std::pair<std::string, std::string>> others = {
      {"[1, 2]", "another kind of JSON value where an object"},
      {R"({"benchmark": "pipeline", "rows": [{"log2_n": 10}]})", "it has no field 'fused_over_memcpy'"},
      {"\x89PNG", "it is not JSON from byte 1"}};
  for (const auto& [text, words] : others)
    for (const char* bench : {"pipeline", "matmul"}) {
      rd::write_file_atomically(from, text);
      const auto r = cli({"bench", bench, "--from", from, "--plot", w / "p.png"});
      EXPECT_EQ(r.status, 1) << text << ": " << r.output;
      const std::string& flat = r.output;
      if (std::string(bench) == "pipeline" || words.rfind("it has no field", 0) != 0) {
        EXPECT_NE(flat.find(words), std::string::npos) << text << ": " << r.output;
      }
      EXPECT_EQ(r.output.find("json.exception"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("\x89"), std::string::npos) << "an unprintable byte echoed: " << r.output;
    }
}

TEST(cli_trust, json_into_a_fifo_is_refused_at_once) {
  work_dir w;
  const std::string fifo = w / "out.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = cli({"info", "--json", fifo});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--json: cannot write '" + fifo + "': it is a FIFO (named pipe), not a regular file"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// The JSON that --from and --peers read: a FIFO is refused at once, not waited on.
TEST(cli_trust, json_read_from_a_fifo_is_refused_at_once) {
  if (!rd::program_found("gnuplot")) GTEST_SKIP() << "--plot is checked for gnuplot first";
  work_dir w;
  const std::string fifo = w / "in.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string bench : {"pipeline", "matmul"}) {
    const auto r = cli({"bench", bench, "--from", fifo, "--plot", w / "p.png"});
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("it is a FIFO (named pipe), not a regular file"), std::string::npos) << r.output;
  }
}

TEST(cli_trust, the_profile_json_into_a_fifo_is_refused_at_once) {
  work_dir w;
  const std::string fifo = w / "p.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = cli({"demo", "--device", "cpu", "--n", "4096", "--reps", "1"},
                     {{"RESIDENT_PROFILE", "1"}, {"RESIDENT_PROFILE_JSON", fifo}});
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("could not write the profile to '" + fifo + "': it is a FIFO"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// `ulimit -f`: the write fails midway; the earlier file stays whole (it was truncated and left as a
// fragment of JSON, or the signal ended the process).
TEST(cli_trust, a_json_write_that_fails_keeps_the_earlier_file) {
  work_dir w;
  const std::string json = w / "demo.json";
  rd::write_file_atomically(json, "{\"earlier\": true}\n");
  const auto r = rd::run_program({"sh", "-c", "ulimit -f 1 && exec \"$@\" 2>&1 >/dev/null", "sh", RESIDENT_CLI, "demo", "--device",
                                  "cpu", "--n", "4096", "--reps", "1", "--json", json});
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--json: cannot write '" + json + "': writing failed"), std::string::npos) << r.output;
  EXPECT_EQ(read_all(json), "{\"earlier\": true}\n");
  std::size_t files = 0;
  for (auto it = fs::directory_iterator(w.path); it != fs::directory_iterator(); ++it) ++files;
  EXPECT_EQ(files, 1u) << "a temporary file was left";
}

TEST(cli_trust, options_refuse_an_empty_value) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"info", "--json", ""},
                                              {"demo", "--device", ""},
                                              {"bench", "pipeline", "--plot", ""},
                                              {"bench", "guide", "--json", ""},
                                              {"bench", "matmul", "--algos", ""}}) {
    const auto r = cli(args);
    EXPECT_GE(r.status, 100) << args[args.size() - 2] << ": " << r.output;
    EXPECT_NE(r.output.find("the value is empty"), std::string::npos) << args[args.size() - 2] << ": " << r.output;
  }
}

}  // namespace

namespace {

// bench guide runs programs: a CLI outside its build tree (installed, or copied) has no default folder
// (one beside an install prefix belongs to whoever made it), and a folder or example another user could
// have written is refused before anything runs.
TEST(cli_trust, bench_guide_runs_only_examples_of_this_users_own) {
  work_dir w;
  const std::string copy = w / "resident", mark = w / "ran";
  fs::copy_file(RESIDENT_CLI, copy);
  ASSERT_EQ(::chmod(copy.c_str(), 0700), 0);
  fs::create_directories(w.path / "examples");
  const std::string planted = "#!/bin/sh\ntouch " + mark + "\n";
  for (const char* name : {"memory_kinds", "coalescing", "divergence", "redundant_access", "launch_config", "async_overlap"})
  {
    const std::string path = w / ("examples/example_" + std::string(name));
    rd::write_file_atomically(path, planted);
    ASSERT_EQ(::chmod(path.c_str(), 0700), 0);
  }
  auto r = rd::run_program({"timeout", "120", copy, "bench", "guide", "--device", "cpu"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("not run from the build tree"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--examples DIR"), std::string::npos) << r.output;
  const std::string writable = w / "examples/example_coalescing";
  ASSERT_EQ(::chmod(writable.c_str(), 0777), 0);
  r = cli({"bench", "guide", "--device", "cpu", "--examples", w / "examples"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("no one else can change (others may write"), std::string::npos) << r.output;
  ASSERT_EQ(::chmod(writable.c_str(), 0700), 0);
  ASSERT_EQ(::chmod((w / "examples").c_str(), 0777), 0);
  r = cli({"bench", "guide", "--device", "cpu", "--examples", w / "examples"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("is not safe to run programs from"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(mark));
}

// Output lost on its way is an error (a full disk under stdout), and two spellings of one file are one
// file: the PNG would have replaced the JSON just written.
// The CLI run in folder `dir` with its standard output sent to `out` and its errors to `err`: no shell.
int cli_in(const std::string& dir, const std::string& out, const std::string& err, std::vector<std::string> args) {
  args.insert(args.begin(), RESIDENT_CLI);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), e = ::open(err.c_str(), O_WRONLY | O_CREAT, 0600);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0 || ::chdir(dir.c_str()) != 0) ::_exit(99);
    ::alarm(120);
    ::execv(RESIDENT_CLI, argv.data());
    ::_exit(98);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(cli_trust, lost_output_and_one_file_spelled_twice_are_refused) {
  work_dir w;
  const std::string err = w / "err.txt";
  EXPECT_EQ(cli_in(w.path.string(), "/dev/full", err, {"info", "--json", "-"}), 1) << read_all(err);
  EXPECT_NE(read_all(err).find("could not be written to standard output"), std::string::npos) << read_all(err);
  for (const char* asked : {"--help", "--version"}) {  // the help lost is no success either
    EXPECT_EQ(cli_in(w.path.string(), "/dev/full", err, {asked}), 1) << asked;
    EXPECT_NE(read_all(err).find("could not be written to standard output"), std::string::npos) << read_all(err);
  }
  if (!rd::program_found("gnuplot")) return;  // --plot is checked for gnuplot first
  const std::string png = w / "r.png";
  EXPECT_GE(cli_in(w.path.string(), w / "out.txt", err,
                   {"bench", "matmul", "--device", "cpu", "--sizes", "32", "--algos", "blocked", "--json", "r.png",
                    "--plot", png}),
            1);
  EXPECT_NE(read_all(err).find("name the same file"), std::string::npos) << read_all(err);
  EXPECT_FALSE(fs::exists(png));
}

}  // namespace

// SIGTERM (or SIGINT, SIGHUP) during a benchmark: the CLI removes its private temporary folders (the
// cache of bench jit, the compiler's, the programs') before it ends, still by that signal. They stayed
// in TMPDIR, each run leaving more.
TEST(cli_trust, a_benchmark_ended_by_a_signal_leaves_no_private_folder) {
  work_dir w;
  const std::string tmp = w / "tmp";
  fs::create_directories(tmp);
  // A compiler that takes its time: the signal comes while it works in the private folders.
  const std::string cxx = w / "slow-c++";
  rd::write_file_atomically(cxx, "#!/bin/sh\nsleep 2\nexec c++ \"$@\"\n");
  ASSERT_EQ(::chmod(cxx.c_str(), 0755), 0);
  std::vector<std::string> vars{"TMPDIR=" + tmp, "RESIDENT_JIT_CXX=" + cxx};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TMPDIR=", 0) != 0 && std::string(*e).rfind("RESIDENT_JIT_CXX=", 0) != 0)
      vars.push_back(*e);
  std::vector<char*> envp, argv;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string args[] = {RESIDENT_CLI, "bench", "jit", "--device", "cpu"};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  const auto left = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(tmp)) names.push_back(e.path().filename().string());
    return names;
  };
  // Until its folders are there (the compile has begun), then a moment on.
  for (int i = 0; i < 600 && left().size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(left().size(), 2u) << "bench jit made no private folders in TMPDIR";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a compiler it started, ending too
  std::string names;
  for (const auto& n : left()) names += n + " ";
  EXPECT_EQ(names, "") << "left in TMPDIR";
}
