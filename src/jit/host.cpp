// The CPU backend of run-time chains: the generated C++ (host flavor) compiled by the host compiler
// into a shared object, loaded with dlopen, its range function run by the library's CPU loop.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "jit/backend.hpp"
#include "resident/launch/launch.hpp"
#include "resident/memory/ledger.hpp"

extern char** environ;

namespace resident::jit::detail {
namespace {

using range_fn = void (*)(const kernel_args&, unsigned long long, unsigned long long, void*);
using finish_fn = void (*)(const kernel_args&, const void*, unsigned long long, double, void*);
using bytes_fn = unsigned long long (*)();

struct host_kernel : loaded {
  void* handle = nullptr;  // kept open for the process's life: its code may run on any thread
  range_fn range = nullptr;
  finish_fn finish = nullptr;
  std::size_t partial_bytes = 0;
};

// The flags every run-time kernel is compiled with: -ffp-contract=off keeps a * b + c two roundings,
// as the library's own normals need for the same bits as the GPU (src/random/normal.cpp);
// -fno-semantic-interposition lets the stages' functions inline into the loop (in a shared object
// they could otherwise be interposed, and the loop would call each one and not vectorize).
const std::vector<std::string> flags = {"-std=c++17", "-O3", "-fPIC", "-shared", "-ffp-contract=off",
                                        "-fno-math-errno", "-fno-semantic-interposition", "-w"};

std::string compiler() {
  if (const char* c = std::getenv("RESIDENT_JIT_CXX"); c && *c) return c;
  const std::string recorded = RESIDENT_JIT_HOST_CXX;  // the compiler CMake found for the library
  if (!recorded.empty() && ::access(recorded.c_str(), X_OK) == 0) return recorded;
  return "c++";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs argv with stdout and stderr into log_path; returns the exit status (-1 when it could not start).
int run_tool(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The compiler's first line of --version, once per process: part of every key.
const std::string& compiler_identity() {
  static const std::string id = [] {
    const std::string cxx = compiler();
    const std::string log = temporary_path("version", ".txt");
    const int rc = run_tool({cxx, "--version"}, log);
    std::string v = read_file(log);
    ::unlink(log.c_str());
    if (rc != 0)
      RESIDENT_FAIL("jit: the host compiler '" + cxx + "' cannot be run (" + v +
                        "); set RESIDENT_JIT_CXX to a C++ compiler", device_unavailable);
    return cxx + "\n" + v.substr(0, v.find('\n'));
  }();
  return id;
}

std::shared_ptr<host_kernel> open_kernel(const std::string& path, const std::string& key) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  auto* k = static_cast<const char*>(::dlsym(h, "rs_key"));
  auto range = reinterpret_cast<range_fn>(::dlsym(h, "rs_range"));
  if (!k || key != k || !range) {
    ::dlclose(h);
    return nullptr;
  }
  auto out = std::make_shared<host_kernel>();
  out->handle = h;
  out->range = range;
  out->finish = reinterpret_cast<finish_fn>(::dlsym(h, "rs_finish"));
  if (auto b = reinterpret_cast<bytes_fn>(::dlsym(h, "rs_partial_bytes"))) out->partial_bytes = std::size_t(b());
  return out;
}

std::shared_ptr<loaded> load_or_compile(const std::string& key, const std::string& source) {
  const std::string path = entry_path(key, ".so");
  if (!path.empty() && ::access(path.c_str(), R_OK) == 0) {
    if (auto k = open_kernel(path, key)) {
      count_disk_load();
      return k;
    }
    count_rejected();  // not a loadable object of this key: compiled again and replaced below
  }
  const std::string src = temporary_path(key, ".cpp"), obj = temporary_path(key, ".so"),
                    log = temporary_path(key, ".log");
  {
    std::ofstream f(src);
    f << source << "\nextern \"C\" const char rs_key[] = \"" << key << "\";\n";
    if (!f) RESIDENT_FAIL("jit: cannot write the kernel's source to '" + src + "'");
  }
  std::vector<std::string> argv{compiler()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {src, "-o", obj});
  const int rc = run_tool(argv, log);
  const std::string text = read_file(log);
  ::unlink(src.c_str());
  ::unlink(log.c_str());
  if (rc != 0) {
    ::unlink(obj.c_str());
    if (rc < 0) RESIDENT_FAIL("jit: the host compiler '" + argv[0] + "' cannot be run; set RESIDENT_JIT_CXX", device_unavailable);
    throw compile_error("jit: the chain did not compile (host compiler " + argv[0] + "; line numbers count each "
                        "stage's own lines):\n" + text, text);
  }
  count_compiled();
  std::string where = obj;
  if (!path.empty() && std::rename(obj.c_str(), path.c_str()) == 0) where = path;
  auto k = open_kernel(where, key);
  if (where == obj) ::unlink(obj.c_str());  // no cache folder: the mapping outlives the file
  if (!k) RESIDENT_FAIL(std::string("jit: the compiled kernel cannot be loaded: ") + (::dlerror() ? ::dlerror() : "?"));
  return k;
}

}  // namespace

void run_host(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n,
              std::shared_ptr<loaded>& kernel) {
  if (!kernel) {
    const std::string source = generate(parts, sig, flavor::host);
    std::string flag_text;
    for (const auto& f : flags) flag_text += f + " ";
    const std::string key = hash_hex("host\n" + compiler_identity() + "\n" + flag_text + "\n" + source);
    kernel = cached(key, [&] { return load_or_compile(key, source); });
  }
  auto* k = static_cast<host_kernel*>(kernel.get());
  const device d = device::cpu();
  if (!sig.reduces) {
    if (n == 0) return;
    resident::detail::cpu_loop(n, 1).run([&](resident::detail::cpu_piece p) { k->range(args, p.first, p.last, nullptr); });
    resident::detail::record_kernel(d);
    return;
  }
  const resident::detail::cpu_loop loop(n, 1);
  std::vector<unsigned char> partials(loop.pieces() * k->partial_bytes + 1);
  loop.run([&](resident::detail::cpu_piece p) { k->range(args, p.first, p.last, partials.data() + p.index * k->partial_bytes); });
  k->finish(args, partials.data(), loop.pieces(), args.a, args.out);
  resident::detail::record_kernel(d);
}

}  // namespace resident::jit::detail
