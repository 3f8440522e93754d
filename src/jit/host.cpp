// The CPU backend of run-time chains: the generated C++ (host flavor) compiled by the host compiler
// into a shared object, loaded with dlopen, its range function run by the library's CPU loop.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "jit/backend.hpp"
#include "resident/detail/files.hpp"
#include "resident/flow/flow.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "resident/launch/launch.hpp"
#include "resident/memory/ledger.hpp"

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
// they could otherwise be interposed, and the loop would call each one and not vectorize);
// -fno-builtin-pow(f): GCC's vectorizer turns pow(x, 0.5) into a vector sqrt (nan at -inf, -0 at -0)
// while the loop's scalar tail calls pow (+inf, +0), so an element's value would depend on its place;
// pow is then called per element (the prelude sends std::pow's overloads there too: generate.cpp). Then the vectors of the CPU backend's SIMD path
// (launch/detail/cpu_simd.hpp), part of the kernel's key.
std::vector<std::string> compile_flags() {
  std::vector<std::string> f = {"-std=c++17", "-O3", "-fPIC", "-shared", "-ffp-contract=off",
                                "-fno-math-errno", "-fno-builtin-pow", "-fno-builtin-powf",
                                "-fno-semantic-interposition", "-w"};
  switch (resident::detail::cpu_simd_path()) {
    case resident::detail::cpu_simd::avx512:
      f.insert(f.end(), {"-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mavx2", "-mfma"});
      break;
    case resident::detail::cpu_simd::avx2: f.insert(f.end(), {"-mavx2", "-mfma"}); break;
    default: break;
  }
  return f;
}

// Ahead of the kernel's text: glibc's vector math functions declared as such, as the compiled loops
// see them, so that the stages' sinf, expf, ... vectorize.
#if RESIDENT_CPU_SIMD_COPIES && defined(__GLIBC__)
#define RESIDENT_SIMD_TEXT(name)                                                           \
  "extern \"C\" float " #name "f(float) noexcept __attribute__((__simd__(\"notinbranch\")));\n" \
  "extern \"C\" double " #name "(double) noexcept __attribute__((__simd__(\"notinbranch\")));\n"
#define RESIDENT_SIMD_TEXT2(name)                                                                 \
  "extern \"C\" float " #name "f(float, float) noexcept __attribute__((__simd__(\"notinbranch\")));\n" \
  "extern \"C\" double " #name "(double, double) noexcept __attribute__((__simd__(\"notinbranch\")));\n"
// pow (2.22's one function of two arguments) stays scalar: libmvec's pow in the vector body and libm's
// in the loop's scalar tail differ by an ulp on a quarter of the values, so an element's value would
// depend on its place (docs/cpu.md).
#define RESIDENT_SCALAR_POW(name)
#if __GLIBC_PREREQ(2, 35)
const char* const simd_declarations = "#include <math.h>\n" RESIDENT_LIBMVEC_2_22(RESIDENT_SIMD_TEXT, RESIDENT_SCALAR_POW)
    RESIDENT_LIBMVEC_2_35(RESIDENT_SIMD_TEXT, RESIDENT_SIMD_TEXT2);
#else
const char* const simd_declarations = "#include <math.h>\n" RESIDENT_LIBMVEC_2_22(RESIDENT_SIMD_TEXT, RESIDENT_SCALAR_POW);
#endif
#undef RESIDENT_SCALAR_POW
#undef RESIDENT_SIMD_TEXT
#undef RESIDENT_SIMD_TEXT2
#else
const char* const simd_declarations = "";
#endif

// The compiler and the first line of its --version, read once per process (every key holds the
// identity, so the compiler that builds a kernel must be the one its key names).
struct host_compiler {
  std::string cxx, identity;
};

std::string read_file(const std::string& path) {
  return resident::detail::read_regular_file(path, std::size_t(1) << 30).value_or("");
}

// A fresh private folder (0700, in $TMPDIR or /tmp) for one compile's files, removed on every return or
// exception (and by the CLI when a signal ends it).
// @throws device_unavailable when no temporary folder takes one.
struct scratch {
  std::unique_ptr<resident::detail::private_dir> dir;
  scratch() try : dir(std::make_unique<resident::detail::private_dir>("resident-jit")) {
  } catch (const error& e) {
    RESIDENT_FAIL(std::string("jit: no folder takes the compiler's files: ") + e.what(), device_unavailable);
  }
  std::string file(const char* name) const { return dir->file(name); }
};

// How long the host compiler may take, in seconds: RESIDENT_JIT_TIMEOUT, 600 by default. A stalled
// compiler (an #include of a FIFO, a locked NFS home) is killed there, never a hung call.
// @throws invalid_argument when the variable is not a positive number of seconds.
double compile_seconds() {
  const char* e = std::getenv("RESIDENT_JIT_TIMEOUT");
  if (!e || !*e) return 600;
  char* end = nullptr;
  const double s = std::strtod(e, &end);
  if (*end != 0 || !(s > 0) || s > 1e7)
    RESIDENT_FAIL(std::string("jit: RESIDENT_JIT_TIMEOUT='") + e + "' is not a number of seconds; set it to one "
                  "such as 600 (the host compiler's time limit), or unset it");
  return s;
}

// Runs argv (no shell) for at most compile_seconds(); returns the exit status (-1 when it could not
// start, program_result::timed_out past the limit) and its output in *log, and in *signal the signal
// that ended it (0 when it exited).
int run_tool(const std::vector<std::string>& argv, std::string* log, int* signal = nullptr) {
  resident::detail::program_result r = resident::detail::run_program(argv, {}, compile_seconds());
  *log = std::move(r.output);
  if (signal) *signal = r.signal;
  return r.status;
}

std::string timed_out_text(const std::string& cxx) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", compile_seconds());
  return "jit: the host compiler '" + cxx + "' did not finish in " + limit + " s and was stopped; "
         "RESIDENT_JIT_TIMEOUT sets the limit (seconds), RESIDENT_JIT_CXX the compiler";
}

host_compiler detect_compiler() {
  std::string cxx = "c++";
  // The compiler CMake found for the library, recorded where it was built: on this machine its path
  // may be one another user can make (a build folder under /tmp), so it runs only where no one else
  // could have put it or could change it.
  const std::string recorded = RESIDENT_JIT_HOST_CXX;
  if (const char* e = std::getenv("RESIDENT_JIT_CXX"); e && *e) {
    cxx = e;
  } else if (!recorded.empty() && ::access(recorded.c_str(), X_OK) == 0) {
    if (const std::string why = resident::detail::untrusted_program(recorded); why.empty())
      cxx = recorded;
    else
      std::fprintf(stderr, "resident: the compiler the library was built with, %s, is not run (%s); 'c++' "
                   "from PATH compiles instead (RESIDENT_JIT_CXX chooses one)\n", recorded.c_str(), why.c_str());
  }
  // Resolved once, to an absolute path: a relative one would be looked up again from whatever the
  // current folder is at each compile (another user's shared folder), under the same cache key.
  if (std::string found = resident::detail::program_path(cxx); !found.empty()) cxx = std::move(found);
  std::string v;
  const int rc = run_tool({cxx, "--version"}, &v);
  if (rc == resident::detail::program_result::timed_out) RESIDENT_FAIL(timed_out_text(cxx), device_unavailable);
  // Its status taken elsewhere (SIGCHLD ignored): the version it printed tells it ran.
  if (rc != 0 && !(rc == resident::detail::program_result::status_lost && !v.empty()))
    RESIDENT_FAIL("jit: the host compiler '" + cxx + "' cannot be run (" +
                      (rc < 0 ? "not found" : "`--version` exited " + std::to_string(rc) + ": " + v.substr(0, std::min(v.find('\n'), std::size_t(200)))) +
                      "); set RESIDENT_JIT_CXX to a C++ compiler", device_unavailable);
  return host_compiler{cxx, cxx + "\n" + v.substr(0, v.find('\n'))};
}

// Found once per process and never changed. No lock is held while `--version` runs (two first calls
// may both ask; one answer is kept): a fork() while another thread asks leaves the child nothing to
// wait for, where a function-local static's guard would stay taken in the child for good.
std::atomic<const host_compiler*> detected{nullptr};
const host_compiler& compiler() {
  if (const host_compiler* c = detected.load(std::memory_order_acquire)) return *c;
  auto mine = std::make_unique<host_compiler>(detect_compiler());
  const host_compiler* expected = nullptr;
  if (detected.compare_exchange_strong(expected, mine.get(), std::memory_order_acq_rel)) return *mine.release();
  return *expected;
}

// Loads the shared object at path if it is the kernel of key; nullptr (and dlerror's text in *why)
// otherwise.
std::shared_ptr<host_kernel> open_kernel(const std::string& path, const std::string& key, std::string* why) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    *why = e ? e : "dlopen failed";
    return nullptr;
  }
  auto* k = static_cast<const char*>(::dlsym(h, "rs_key"));
  auto range = reinterpret_cast<range_fn>(::dlsym(h, "rs_range"));
  if (!k || key != k || !range) {
    ::dlclose(h);
    *why = "not the kernel of this chain";
    return nullptr;
  }
  auto out = std::make_shared<host_kernel>();
  out->handle = h;
  out->range = range;
  out->finish = reinterpret_cast<finish_fn>(::dlsym(h, "rs_finish"));
  if (auto b = reinterpret_cast<bytes_fn>(::dlsym(h, "rs_partial_bytes"))) out->partial_bytes = std::size_t(b());
  return out;
}

bool write_file(const std::string& path, const std::string& bytes) {
  return resident::detail::try_write_file_atomically(path, bytes, resident::detail::file_access::secret).empty();
}

// The disk entry holds the object's bytes behind a header with their MAC (read_entry checks it before
// anything here sees them), and is loaded from a private copy in a 0700 folder of this process: what
// was checked is what dlopen maps (nothing can swap the entry between the check and the load), a
// truncated or damaged entry is never mapped, and the cache folder need not take files.
std::shared_ptr<loaded> load_or_compile(const std::string& key, const std::string& source) {
  const scratch tmp;
  const std::string src = tmp.file("k.cpp"), obj = tmp.file("k.so");
  std::string why;
  if (std::string image; read_entry(key, ".so", &image)) {
    if (write_file(obj, image))
      if (auto k = open_kernel(obj, key, &why)) {
        count_disk_load();
        return k;
      }
    count_rejected();  // whole, but not a loadable object of this key: compiled again and replaced below
  }
  if (!write_file(src, source + "\nextern \"C\" const char rs_key[] = \"" + key + "\";\n"))
    RESIDENT_FAIL("jit: cannot write the kernel's source to '" + src + "'; set TMPDIR to a folder with room",
                  device_unavailable);
  const host_compiler& cc = compiler();
  std::vector<std::string> argv{cc.cxx};
  const std::vector<std::string> flags = compile_flags();
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {src, "-o", obj});
  std::string text;
  int signal = 0;
  int rc = run_tool(argv, &text, &signal);
  // Its status taken elsewhere (SIGCHLD ignored): g++ leaves an object only when it succeeded.
  if (rc == resident::detail::program_result::status_lost) rc = ::access(obj.c_str(), F_OK) == 0 ? 0 : 1;
  if (rc == resident::detail::program_result::timed_out) RESIDENT_FAIL(timed_out_text(cc.cxx), device_unavailable);
  if (rc < 0) RESIDENT_FAIL("jit: the host compiler '" + cc.cxx + "' cannot be run; set RESIDENT_JIT_CXX", device_unavailable);
  if (signal)  // a Ctrl-C meant for the process group, the kernel's OOM killer: not the chain's fault
    RESIDENT_FAIL("jit: the host compiler '" + cc.cxx + "' was ended by signal " + std::to_string(signal) + " (" +
                      ::strsignal(signal) + ") before it finished; nothing is wrong with the chain: call again",
                  device_unavailable);
  if (rc != 0)
    throw compile_error("jit: the chain did not compile (host compiler " + cc.cxx + "; line numbers count each "
                        "stage's own lines):\n" + text, text);
  auto k = open_kernel(obj, key, &why);
  if (!k)  // it exited 0 yet made no kernel: not a C++ compiler, or one writing something else
    RESIDENT_FAIL("jit: the host compiler '" + cc.cxx + "' made no loadable kernel (" + why + ")" +
                      (text.empty() ? "" : ": " + text) + "; set RESIDENT_JIT_CXX to a C++ compiler",
                  device_unavailable);
  count_compiled();
  write_entry(key, ".so", read_file(obj));  // the mapping outlives the scratch file
  return k;
}

}  // namespace

void run_host(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n,
              std::shared_ptr<loaded>& kernel) {
  if (!kernel) {
    const std::string source = simd_declarations + generate(parts, sig, flavor::host);
    std::string flag_text;
    for (const auto& f : compile_flags()) flag_text += f + " ";
    const std::string key = hash_hex("host\n" + compiler().identity + "\n" + flag_text + "\n" + source);
    kernel = cached(key, [&] { return load_or_compile(key, source); });
  }
  auto* k = static_cast<host_kernel*>(kernel.get());
  const device d = device::cpu();
  // A C++ stage may throw (its text is the user's): caught where it runs, the first one kept, and
  // raised as a stage_error once every piece has ended (the loop's threads never see it).
  std::mutex m;
  std::string thrown;
  auto guarded = [&](auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> l(m);
      if (thrown.empty()) thrown = std::string("threw ") + e.what();
    } catch (...) {
      const std::lock_guard<std::mutex> l(m);
      if (thrown.empty()) thrown = "threw an exception of a type other than std::exception";
    }
  };
  auto raise_thrown = [&] {
    if (thrown.empty()) return;
    std::string chain;
    for (const part& q : parts) chain += (chain.empty() ? "" : " | ") + q.name;
    throw stage_error(chain, "jit: a stage of " + chain + " " + thrown + " on the CPU, so some values were not computed; a stage must "
                        "not throw (a GPU kernel cannot): check the values before the call, or return a marker "
                        "value such as NAN");
  };
  if (!sig.reduces) {
    if (n == 0) return;
    resident::detail::cpu_loop(n, 1).run([&](resident::detail::cpu_piece p) {
      guarded([&] { k->range(args, p.first, p.last, nullptr); });
    });
    resident::detail::record_kernel(d);
    raise_thrown();
    return;
  }
  const resident::detail::cpu_loop loop(n, 1);
  std::vector<unsigned char> partials(loop.pieces() * k->partial_bytes + 1);
  loop.run([&](resident::detail::cpu_piece p) {
    guarded([&] { k->range(args, p.first, p.last, partials.data() + p.index * k->partial_bytes); });
  });
  raise_thrown();
  guarded([&] { k->finish(args, partials.data(), loop.pieces(), args.a, args.out); });
  resident::detail::record_kernel(d);
  raise_thrown();
}

}  // namespace resident::jit::detail
