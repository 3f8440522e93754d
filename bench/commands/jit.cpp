// resident bench jit: the seed pipeline as a chain of run-time stages (C++ text compiled while the
// program runs) against the same pipeline compiled ahead of time and against memcpy; the first call's
// compile time, a second process's load from the disk cache, the in-memory cache's call. Compiled by
// nvcc in CUDA builds (the compile-time pipeline needs it).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "bench.hpp"
#include "memory_budget.hpp"
#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "common/seed.hpp"
#include "table.hpp"
#include "warm_up.hpp"

namespace resident::cli {
namespace {

// The seed's three functions as run-time stages: the same text seed.hpp compiles ahead of time.
jit::pipeline seed_chain() {
  return jit::map("float func1(float v) { return 1.5f * v + 0.5f; }") |
         jit::map("float func2(float v) { return sqrtf(v * v + 1.f); }") |
         jit::map("float func3(float v) { return 0.5f * sinf(v); }");
}

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// The second process: its device ready and its arrays made, one call of the chain timed (loading the
// kernel from the disk cache the first process filled). Prints "probe <ms> <compiled> <disk loads>".
int probe(device d) {
  array<float> x(1 << 16, d), y(1 << 16, d);
  random::fill_uniform(x, 1);
  synchronize(d);
  const auto t0 = clock_type::now();
  seed_chain()(x, y);
  synchronize(d);
  const double t = ms_since(t0);
  const auto s = jit::stats();
  std::printf("probe %.4f %llu %llu\n", t, (unsigned long long)s.compiled, (unsigned long long)s.disk_loads);
  return 0;
}

}  // namespace

int run_bench_jit(const bench_options& o) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  if (const char* p = std::getenv("RESIDENT_JIT_BENCH_PROBE"); p && *p == '1') return probe(d);
  std::vector<std::size_t> logs = o.sizes;
  if (logs.empty()) logs = d.is_cuda() ? std::vector<std::size_t>{24, 26, 28} : std::vector<std::size_t>{18, 20, 22};
  const std::size_t largest = *std::max_element(logs.begin(), logs.end());
  require_memory(d, "bench jit at n = 2^" + std::to_string(largest), 8 * std::ldexp(1.0, int(largest)),
                 8 * std::ldexp(1.0, int(largest)), "Choose smaller --sizes (16 bytes per element in all)");
  const int reps = o.reps ? o.reps : (d.is_cuda() ? 50 : 10);
  out() << wrap("Run-time stages (the seed pipeline as C++ text compiled at run time) on " + d.name() + " (" +
                properties(d).name + ")")
        << "\n";

  progress bar("bench jit", logs.size() + 3);
  // The compile cache: a fresh folder, so the first call compiles whatever ran before.
  const detail::private_dir cache_dir("resident-bench-jit");  // removed on return or exception
  const std::string cache = cache_dir.path();
  // Chosen through the library, not setenv (unsafe while the pool's threads run), and given back on
  // every way out of this scope.
  struct cache_in {
    std::optional<std::string> was;
    explicit cache_in(const std::string& dir) : was(jit::detail::set_cache_directory(dir)) {}
    ~cache_in() { jit::detail::set_cache_directory(was); }
    cache_in(const cache_in&) = delete;
    cache_in& operator=(const cache_in&) = delete;
  };
  std::optional<cache_in> fresh_cache(std::in_place, cache);
  jit::clear_memory_cache();
  stream s(d);
  array<float> x0(1 << 16, s.ref()), y0(1 << 16, s.ref());
  random::fill_uniform(x0, 2);
  s.synchronize();
  bar.step("first call (compiles)");
  auto t0 = clock_type::now();
  seed_chain()(x0, y0);
  s.synchronize();
  const double first_ms = ms_since(t0);
  bar.step("a second process (loads from the disk cache)");
  const std::vector<std::string> argv{"/proc/" + std::to_string(::getpid()) + "/exe", "bench", "jit", "--device", d.name()};
  double second_ms = NAN;
  unsigned long long probe_compiled = 1, probe_loads = 0;
  const detail::program_result probe_run =
      detail::run_program(argv, {{"RESIDENT_JIT_BENCH_PROBE", "1"}, {"RESIDENT_JIT_CACHE", cache}});
  std::istringstream lines(probe_run.output);
  for (std::string line; std::getline(lines, line);)
    if (std::sscanf(line.c_str(), "probe %lf %llu %llu", &second_ms, &probe_compiled, &probe_loads) == 3) break;
  if (std::isnan(second_ms) || probe_compiled != 0 || probe_loads != 1)
    throw error("bench jit: the second process did not load the kernel from the disk cache; it said:\n" +
                probe_run.output);
  bar.step("a call served by the in-memory cache");
  auto chain = seed_chain();
  const double hit_ms = time_batched(s.ref(), reps, 2, 20, [&] { chain(x0, y0); }).median();
  fresh_cache.reset();  // the user's cache for the rest

  auto master = map<func1>() | map<func2>() | map<func3>();
  auto master_sum = master | reduce(plus{}, 0.f);
  const jit::pipeline chain_sum = seed_chain() | jit::sum();
  table t({{"n", "log2_n"}, {"memcpy (ms)", "memcpy_ms"}, {"compiled (ms)", "compiled_ms"},
           {"run-time (ms)", "jit_ms"}, {"run-time / compiled", "jit_over_compiled"},
           {"run-time / memcpy", "jit_over_memcpy"}, {"sum, compiled (ms)", "sum_compiled_ms"},
           {"sum, run-time (ms)", "sum_jit_ms"}, {"sum: run-time / compiled", "sum_jit_over_compiled"}});
  for (auto l : logs) {
    bar.step("2^" + std::to_string(l));
    const std::size_t n = std::size_t(1) << l;
    auto hx = seed_input(n);
    array<float> x = to_device(hx, s.ref()), y(n, s.ref());
    chain(x, y);
    if (seed_error(hx, y.to_host()) > 1e-5) throw error("bench jit: the run-time chain is wrong at n = 2^" + std::to_string(l));
    auto timed = [&](auto&& f) {
      warm_up(s.ref(), f);
      return time_region(s.ref(), reps, 0, f).median();
    };
    const double mc = timed([&] { copy(x, y); });
    const double co = timed([&] { master(x, y); });
    const double ji = timed([&] { chain(x, y); });
    // The sums return their value to the host: each timed call includes its download.
    const float want = master_sum(x), got = chain_sum.result<float>(x);
    if (!(std::fabs(got - want) <= 1e-3f * std::fabs(want)))
      throw error("bench jit: the run-time sum " + std::to_string(got) + " differs from the compiled " +
                  std::to_string(want) + " at n = 2^" + std::to_string(l));
    const double so = timed([&] { (void)master_sum(x); });
    const double sj = timed([&] { (void)chain_sum.result<float>(x); });
    t.add({table::cell::power_of_two(int(l)), table::cell(mc, 4), table::cell(co, 4), table::cell(ji, 4),
           table::cell(ji / co, 3), table::cell(ji / mc, 3), table::cell(so, 4), table::cell(sj, 4),
           table::cell(sj / so, 3)});
  }
  bar.finish();
  t.print(out());
  out() << "\n"
        << wrap("first call, compiling: " + format_number(first_ms, 1) + " ms; a second process's first call, " +
                "from the disk cache: " + format_number(second_ms, 2) + " ms; a call from the in-memory cache (n = " +
                "2^16): " + format_number(hit_ms * 1e3, 1) + " us")
        << "\n";
  if (!o.json.empty()) {
    auto j = bench_json("jit", d.name(), properties(d).name, t);
    j["first_call_ms"] = first_ms;
    j["second_process_first_call_ms"] = second_ms;
    j["memory_cache_call_us"] = hit_ms * 1e3;
    write_json(j, o.json);
  }
  return 0;
}

}  // namespace resident::cli
