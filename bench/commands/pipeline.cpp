// resident bench: pipeline, small, foundation. Compiled by nvcc in CUDA builds.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench.hpp"
#include "plot.hpp"
#include "memory_budget.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "common/seed.hpp"
#include "table.hpp"
#include "warm_up.hpp"

namespace resident::cli {
namespace {

device pick(const bench_options& o) {
  device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  return d;
}

void header(const char* what, device d) {
  out() << wrap(std::string(what) + " on " + d.name() + " (" + properties(d).name + ")") << "\n";
}

}  // namespace

namespace {
// One size in one repetition of the sweep: each time the median of --reps timed calls (ms).
struct pipeline_point {
  double memcpy, fused, three, sum, scan;
  double memcpy_one, fused_one;  // one call per event pair
  double zip, dot;               // the zipped forms: z = 1.5 x + y, and x . y into a device array
  double fused_ratio() const { return fused / memcpy; }
  double fused_one_ratio() const { return fused_one / memcpy_one; }
  // sum reads 4 bytes per element, memcpy reads and writes 8: the rates' ratio.
  double sum_rate_ratio() const { return memcpy / (2 * sum); }
  double scan_ratio() const { return scan / memcpy; }
  // zip reads 8 bytes per element and writes 4, dot reads 8.
  double zip_rate_ratio() const { return 1.5 * memcpy / zip; }
  double dot_rate_ratio() const { return memcpy / dot; }
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

table pipeline_table() {
  return table({{"n", "log2_n"}, {"bytes moved", "bytes", true}, {"memcpy (ms)", "memcpy_ms"},
                {"fused (ms)", "fused_ms"}, {"fused / memcpy", "fused_over_memcpy"},
                {"3 kernels (ms)", "three_kernels_ms"}, {"sum (ms)", "sum_ms"},
                {"sum GB/s / memcpy GB/s", "sum_rate_over_memcpy_rate"}, {"fused GB/s", "fused_gb_per_s"},
                {"scan (ms)", "scan_ms"}, {"scan / memcpy", "scan_over_memcpy"},
                {"fused / memcpy, one per pair", "fused_over_memcpy_one_per_pair"}, {"zip (ms)", "zip_ms"},
                {"zip GB/s / memcpy GB/s", "zip_rate_over_memcpy_rate"}, {"dot (ms)", "dot_ms"},
                {"dot GB/s / memcpy GB/s", "dot_rate_over_memcpy_rate"}});
}

// A row of pipeline_table(): the times and the three ratios given (over repetitions, the ratios' own
// medians, which need not equal the ratios of the medians).
std::vector<table::cell> pipeline_row(std::size_t log2_n, const pipeline_point& t, double fused_ratio,
                                      double sum_ratio, double scan_ratio, double fused_one_ratio, double zip_ratio,
                                      double dot_ratio) {
  const double bytes = 8.0 * std::ldexp(1.0, int(log2_n));
  return {table::cell::power_of_two(int(log2_n)), table::cell::bytes(std::uint64_t(bytes)), table::cell(t.memcpy, 4),
          table::cell(t.fused, 4), table::cell(fused_ratio, 3), table::cell(t.three, 4), table::cell(t.sum, 4),
          table::cell(sum_ratio, -1), table::cell(bytes / (t.fused * 1e-3) / 1e9, -1), table::cell(t.scan, 4),
          table::cell(scan_ratio, 3), table::cell(fused_one_ratio, 3), table::cell(t.zip, 4),
          table::cell(zip_ratio, 3), table::cell(t.dot, 4), table::cell(dot_ratio, 3)};
}

std::string spread(double lo, double hi, int decimals) {
  return format_number(lo, decimals) + " - " + format_number(hi, decimals);
}

const char* const sum_form =
    "map + sum into a device array, sum(x, total): the total stays in a one-element device array, "
    "nothing is downloaded; timed like the others, back-to-back calls between two events on its stream, no "
    "host synchronization inside";
const char* const zip_form =
    "zip: zip(x, y) | map(1.5 x + y) into z, 12 bytes per element; dot: zip(x, y) | map(x y) | reduce(+) into a "
    "one-element device array, 8 bytes per element; each rate over memcpy's, timed like the others";
}  // namespace

int run_bench_pipeline(const bench_options& o) {
  if (!o.from.empty()) return plot_pipeline_from(o);
  std::vector<plot_series> peer_series;  // read before measuring, so a bad file fails first
  add_peer_series(o.peers, peer_series);
  const device d = pick(o);
  std::vector<std::size_t> logs = o.sizes;
  if (logs.empty()) logs = d.is_cuda() ? std::vector<std::size_t>{20, 22, 24, 26, 28} : std::vector<std::size_t>{16, 18, 20, 22};
  for (auto l : logs)
    if (l < 4 || l > 32) throw invalid_argument("--sizes takes log2 element counts between 4 and 32, got " + std::to_string(l));
  const int repeat = o.repeat ? o.repeat : (d.is_cuda() ? 3 : 1);
  if (repeat < 1 || repeat > 100) throw invalid_argument("--repeat takes a count of sweeps from 1 to 100, got " + std::to_string(repeat));
  const std::size_t largest = *std::max_element(logs.begin(), logs.end());
  // Per element: x, y and z on the device; the input and a checked download on the host.
  require_memory(d, "bench pipeline at n = 2^" + std::to_string(largest), 12 * std::ldexp(1.0, int(largest)),
                 8 * std::ldexp(1.0, int(largest)), "Choose smaller --sizes (20 bytes per element in all)");
  const int reps = o.reps ? o.reps : (d.is_cuda() ? 30 : 10);
  const int batch = o.batch ? o.batch : (d.is_cuda() ? 20 : 1);
  header("Fused seed pipeline vs device-to-device memcpy of the same bytes", d);
  out() << wrap("(" + std::string(repeat > 1 ? "median over " + std::to_string(repeat) + " sweeps of each sweep's median of " +
                                                   std::to_string(reps)
                                             : "median of " + std::to_string(reps)) +
                (batch > 1 ? "; each time per call of " + std::to_string(batch) +
                                 " calls queued back-to-back between two events, the device's throughput, except the "
                                 "column \"one per pair\": one call per event pair, the host's dispatch included"
                           : std::string("; one call per event pair")) +
                "; fused / memcpy = time over the time of copying the same bytes, 1.00 = copy speed; sum is " +
                "map + sum into a device array, sum(x, total), nothing downloaded; sum GB/s counts the bytes it " +
                "reads, memcpy GB/s the bytes it reads and writes; zip is zip(x, y) | map(1.5 x + y) into z (reads 8 " +
                "bytes per element, writes 4), dot zip(x, y) | map(x y) | reduce(+) into a device array (reads 8))",
                100, " ")
        << "\n";

  auto master = map<func1>() | map<func2>() | map<func3>();
  auto sum = map([] RESIDENT_HD(float v) { return v; }) | reduce(plus{}, 0.f);
  auto scan = map<func1>() | inclusive_scan(plus{});  // running sums of the first stage, y = scan(f1(x))
  // points[r][i]: repetition r at size logs[i]. Each repetition is a whole sweep, so a slow spell of
  // the host or the GPU shows as one repetition's outlier rather than one size's.
  std::vector<std::vector<pipeline_point>> points(static_cast<std::size_t>(repeat));
  progress bar("bench pipeline", std::size_t(repeat) * logs.size());
  stream s(d);
  for (int r = 0; r < repeat; ++r) {
    for (auto l : logs) {
      bar.step((repeat > 1 ? "repetition " + std::to_string(r + 1) + "/" + std::to_string(repeat) + ", " : std::string()) +
               "2^" + std::to_string(l));
      const std::size_t n = std::size_t(1) << l;
      const std::string at = " at n = 2^" + std::to_string(l);
      auto hx = seed_input(n);
      array<float> x = to_device(hx, s.ref()), y(n, s.ref());
      array<float> total(1, s.ref());
      master(x, y);
      if (seed_error(hx, y.to_host()) > 1e-5) throw error("bench pipeline: fused result is wrong" + at);
      // Each variant is warmed up just before it is timed.
      auto timed = [&](auto&& f) {
        warm_up(s.ref(), f);
        return time_batched(s.ref(), reps, 0, batch, f).median();
      };
      auto timed_one = [&](auto&& f) {
        warm_up(s.ref(), f);
        return time_region(s.ref(), reps, 0, f).median();
      };
      pipeline_point p{};
      p.memcpy = timed([&] { copy(x, y); });
      p.fused = timed([&] { master(x, y); });
      p.memcpy_one = timed_one([&] { copy(x, y); });
      p.fused_one = timed_one([&] { master(x, y); });
      p.three = timed([&] {
        map<func1>()(x, y);
        map<func2>()(y);
        map<func3>()(y);
      });
      p.sum = timed([&] { sum(x, total); });
      {
        // The zipped forms over x and y (the seed's values), checked against FP64 first.
        array<float> z(n, s.ref());
        const auto hy = y.to_host();
        auto axpy = zip(x, y) | map([] RESIDENT_HD(float a, float b) { return 1.5f * a + b; });
        auto dot = zip(x, y) | map([] RESIDENT_HD(float a, float b) { return a * b; }) | reduce(plus{}, 0.f);
        axpy(z);
        dot(total);
        const auto hz = z.to_host();
        double ref_dot = 0, worst = 0;
        for (std::size_t i = 0; i < n; ++i) {
          ref_dot += double(hx[i]) * double(hy[i]);
          const double want = 1.5 * double(hx[i]) + double(hy[i]);
          worst = std::max(worst, std::abs(double(hz[i]) - want) / (std::abs(want) + 1e-30));
        }
        if (worst > 1e-6) throw error("bench pipeline: zip result is wrong" + at);
        // float sums of up to 2^28 products drift from FP64 by rounding; a lost or doubled piece by far more.
        if (std::abs(double(total.to_host()[0]) - ref_dot) > 1e-3 * ref_dot) throw error("bench pipeline: dot result is wrong" + at);
        p.zip = timed([&] { axpy(z); });
        p.dot = timed([&] { dot(total); });
      }
      scan(x, y);
      // Float running sums of 2^28 values drift from the FP64 sums by rounding (the tests check the scan
      // against FP64 in double); a wrong combination of pieces is off by far more than 5%.
      if (scan_error(hx, y.to_host()) > 0.05) throw error("bench pipeline: scan result is wrong" + at);
      p.scan = timed([&] { scan(x, y); });
      points[std::size_t(r)].push_back(p);
    }
  }
  bar.finish();

  // Each size: the median over repetitions of every figure, and the spread of the ratios.
  table t = pipeline_table();
  table spread_t({{"n", ""}, {"fused / memcpy", ""}, {"min - max", "", false}, {"sum rate / memcpy rate", ""},
                  {"min - max", "", false}, {"scan / memcpy", ""}, {"min - max", "", false},
                  {"zip rate / memcpy rate", ""}, {"min - max", "", false}, {"dot rate / memcpy rate", ""},
                  {"min - max", "", false}});
  nlohmann::json extremes = nlohmann::json::array();
  plot_series fused_s{"fused pipeline / memcpy", {}, {}}, three_s{"three kernels / memcpy", {}, {}};
  for (std::size_t i = 0; i < logs.size(); ++i) {
    auto across = [&](auto figure) {
      std::vector<double> v;
      for (auto& rep : points) v.push_back(figure(rep[i]));
      return v;
    };
    const auto fr = across([](const pipeline_point& p) { return p.fused_ratio(); });
    const auto sr = across([](const pipeline_point& p) { return p.sum_rate_ratio(); });
    const auto cr = across([](const pipeline_point& p) { return p.scan_ratio(); });
    const auto zr = across([](const pipeline_point& p) { return p.zip_rate_ratio(); });
    const auto dr = across([](const pipeline_point& p) { return p.dot_rate_ratio(); });
    const pipeline_point med{median_of(across([](const pipeline_point& p) { return p.memcpy; })),
                             median_of(across([](const pipeline_point& p) { return p.fused; })),
                             median_of(across([](const pipeline_point& p) { return p.three; })),
                             median_of(across([](const pipeline_point& p) { return p.sum; })),
                             median_of(across([](const pipeline_point& p) { return p.scan; })),
                             median_of(across([](const pipeline_point& p) { return p.memcpy_one; })),
                             median_of(across([](const pipeline_point& p) { return p.fused_one; })),
                             median_of(across([](const pipeline_point& p) { return p.zip; })),
                             median_of(across([](const pipeline_point& p) { return p.dot; }))};
    t.add(pipeline_row(logs[i], med, median_of(fr), median_of(sr), median_of(cr),
                       median_of(across([](const pipeline_point& p) { return p.fused_one_ratio(); })), median_of(zr),
                       median_of(dr)));
    auto [f_lo, f_hi] = std::minmax_element(fr.begin(), fr.end());
    auto [s_lo, s_hi] = std::minmax_element(sr.begin(), sr.end());
    auto [c_lo, c_hi] = std::minmax_element(cr.begin(), cr.end());
    auto [z_lo, z_hi] = std::minmax_element(zr.begin(), zr.end());
    auto [d_lo, d_hi] = std::minmax_element(dr.begin(), dr.end());
    spread_t.add({table::cell::power_of_two(int(logs[i])), table::cell(median_of(fr), 3), spread(*f_lo, *f_hi, 3),
                  table::cell(median_of(sr), 3), spread(*s_lo, *s_hi, 3), table::cell(median_of(cr), 3),
                  spread(*c_lo, *c_hi, 3), table::cell(median_of(zr), 3), spread(*z_lo, *z_hi, 3),
                  table::cell(median_of(dr), 3), spread(*d_lo, *d_hi, 3)});
    extremes.push_back({{"fused_over_memcpy_min", *f_lo}, {"fused_over_memcpy_max", *f_hi},
                        {"sum_rate_over_memcpy_rate_min", *s_lo}, {"sum_rate_over_memcpy_rate_max", *s_hi},
                        {"scan_over_memcpy_min", *c_lo}, {"scan_over_memcpy_max", *c_hi},
                        {"zip_rate_over_memcpy_rate_min", *z_lo}, {"zip_rate_over_memcpy_rate_max", *z_hi},
                        {"dot_rate_over_memcpy_rate_min", *d_lo}, {"dot_rate_over_memcpy_rate_max", *d_hi}});
    fused_s.x.push_back(std::ldexp(1.0, int(logs[i])));
    fused_s.y.push_back(median_of(fr));
    three_s.x.push_back(std::ldexp(1.0, int(logs[i])));
    three_s.y.push_back(med.three / med.memcpy);
  }
  t.print(out());
  if (repeat > 1) {
    out() << "\n"
          << wrap("Spread over the " + std::to_string(repeat) +
                      " sweeps (ratios, each sweep's own; median and the lowest and highest sweep):",
                  100, " ")
          << "\n";
    spread_t.print(out());
  }
  nlohmann::json cpu_loop;
  if (d.is_cpu()) {
    // The CPU target: the fused pipeline against the loop a person would write by hand with OpenMP.
    const std::size_t n = std::size_t(1) << logs.back();
    auto hx = seed_input(n);
    array<float> x = to_device(hx, s.ref()), y(n, s.ref());
    float* px = x.data();
    float* py = y.data();
    auto hand_loop = [&] {
      const long ln = long(n);
#pragma omp parallel for simd schedule(static)
      for (long i = 0; i < ln; ++i) py[i] = func3(func2(func1(px[i])));
    };
    warm_up(s.ref(), hand_loop);
    const double hand = time_region(s.ref(), reps, 0, hand_loop).median();
    auto fused_call = [&] { master(x, y); };
    warm_up(s.ref(), fused_call);
    const double fused = time_region(s.ref(), reps, 0, fused_call).median();
    out() << "\n"
          << wrap("CPU backend at n = 2^" + std::to_string(logs.back()) + ": hand-written OpenMP loop " +
                  format_number(hand, 3) + " ms, fused pipeline " + format_number(fused, 3) +
                  " ms: the pipeline runs at " + format_number(hand / fused, 2) + "x the hand-written loop's speed")
          << "\n";
    cpu_loop = {{"log2_n", logs.back()}, {"hand_ms", hand}, {"fused_ms", fused}, {"speed_ratio", hand / fused}};
  }
  if (!o.json.empty()) {
    // rows: each size's medians over the repetitions (the keys of a one-sweep run) with the ratios' min
    // and max beside them; repetitions: every sweep's own rows.
    nlohmann::json j = bench_json("pipeline", d.name(), properties(d).name, t);
    for (std::size_t i = 0; i < logs.size(); ++i) j["rows"][i].update(extremes[i]);
    nlohmann::json sweeps = nlohmann::json::array();
    for (int r = 0; r < repeat; ++r) {
      table rt = pipeline_table();
      for (std::size_t i = 0; i < logs.size(); ++i) {
        const pipeline_point& p = points[std::size_t(r)][i];
        rt.add(pipeline_row(logs[i], p, p.fused_ratio(), p.sum_rate_ratio(), p.scan_ratio(), p.fused_one_ratio(),
                            p.zip_rate_ratio(), p.dot_rate_ratio()));
      }
      sweeps.push_back({{"repetition", r + 1}, {"rows", rt.json()}});
    }
    j["repetitions"] = sweeps;
    j["repeat"] = repeat;
    j["reps"] = reps;
    j["batch"] = batch;
    j["sum_form"] = sum_form;
    j["zip_form"] = zip_form;
    if (!cpu_loop.is_null()) j["cpu_hand_loop"] = cpu_loop;
    write_json(j, o.json);
  }
  if (!o.plot.empty()) {
    std::vector<plot_series> series{fused_s, three_s};
    series.insert(series.end(), peer_series.begin(), peer_series.end());
    plot_png(o.plot, "seed pipeline, time / device-to-device memcpy (" + properties(d).name + ")",
             "elements (float32)", "time / memcpy time of the same bytes (lower is better)", series, true);
  }
  return 0;
}

// The insight hook every call opens (an NVTX range, the profile check, the call-site scope) alone,
// with no work inside: host nanoseconds per open + close, the median of 15 batches of 200000.
double hook_ns(stream_ref s) {
  const detail::call_facts facts{40000, 40000, 10000, 3, nullptr, nullptr};
  std::vector<double> ns;
  for (int b = 0; b < 15; ++b) {
    constexpr int calls = 200000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) detail::call_scope scope("pipeline", s, facts);
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  std::nth_element(ns.begin(), ns.begin() + 7, ns.end());
  return ns[7];
}

int run_bench_small(const bench_options& o) {
  const device d = pick(o);
  const std::size_t n = o.sizes.empty() ? 10000 : o.sizes.front();
  const int reps = o.reps ? o.reps : 30;
  const int batch = 200;
  require_memory(d, "bench small at n = " + std::to_string(n), 8 * double(n), 8 * double(n),
                 "Choose a smaller --sizes (16 bytes per element in all)");
  header("Small pipeline, launch-bound", d);
  out() << "(n = " << n << "; time per pipeline call = median over " << reps << " batches of " << batch
            << " back-to-back calls)\n";
  auto master = map<func1>() | map<func2>() | map<func3>();
  stream s(d);
  progress bar("bench small", 3);
  bar.step("fused");
  auto hx = seed_input(n);
  array<float> x = to_device(hx, s.ref()), y(n, s.ref());
  master(x, y);
  if (seed_error(hx, y.to_host()) > 1e-5) throw error("bench small: fused result is wrong");
  const double fused = time_batched(s.ref(), reps, 2, batch, [&] { master(x, y); }).median() * 1e3;
  bar.step("three kernels");
  const double three = time_batched(s.ref(), reps, 2, batch, [&] {
                         map<func1>()(x, y);
                         map<func2>()(y);
                         map<func3>()(y);
                       }).median() * 1e3;
  bar.step("graph replay");
  graph g = graph::capture(s.ref(), [&] {
    for (int i = 0; i < batch; ++i) master(x, y);
  });
  const double replay = time_region(s.ref(), reps, 2, [&] { g.replay(s.ref()); }).median() * 1e3 / batch;
  const double hook = profiling() ? 0.0 : hook_ns(s.ref());
  bar.finish();
  table t({{"variant", "variant", false}, {"time per call (us)", "us_per_call"}, {"kernels per call", "kernels"}});
  t.add({"fused, one launch per call", table::cell(fused, 2), table::cell(1, 0)});
  t.add({"three kernels per call", table::cell(three, 2), table::cell(3, 0)});
  t.add({"fused, graph replay (" + std::to_string(batch) + " calls per graph)", table::cell(replay, 2), table::cell(1, 0)});
  t.print(out());
  // The hook's own cost, on the host (a profile collecting would time every call: not measured then).
  const char* nvtx = detail::nvtx_state();
  if (hook > 0)
    out() << wrap("insight hook alone (NVTX range, profile check, call-site scope): " + format_number(hook, 1) +
                      " ns per call; NVTX " + nvtx)
          << "\n";
  if (!o.json.empty()) {
    nlohmann::json j = bench_json("small", d.name(), properties(d).name, t);
    j["n"] = n;
    j["nvtx"] = nvtx;
    if (hook > 0) j["hook_ns_per_call"] = hook;
    write_json(j, o.json);
  }
  return 0;
}

int run_bench_foundation(const bench_options& o) {
  const device d = pick(o);
  const int reps = o.reps ? o.reps : 20;
  // Uploads and downloads of 1 GiB (256 MiB on the CPU).
  const std::size_t bytes = d.is_cuda() ? std::size_t(1) << 30 : std::size_t(256) << 20;
  // Two arrays on the device; a pageable and a pinned buffer on the host. Checked before the heading,
  // so a refusal is the only output.
  require_memory(d, "bench foundation", 2 * double(bytes), 2 * double(bytes), "Free memory and run it again");
  header("Foundation: transfers, allocation, launch overhead", d);
  table t({{"measure", "measure", false}, {"median", "median", true}, {"unit", "unit", false}, {"note", "note", false}});
  progress bar("bench foundation", 3);
  bar.step("copy rates");
  for (auto& r : measure_bandwidth(d, bytes, reps / 2 + 1)) t.add({r.what, table::cell(r.gbs, -1), "GB/s", r.note});
  bar.step("allocation");
  // Pool allocate + free of 1 MiB vs the driver's allocator.
  stream s(d);
  const std::size_t mib = std::size_t(1) << 20;
  const int batch = 200;
  double pool_us = time_batched(s.ref(), reps, 2, batch, [&] {
                     void* p = detail::pool_allocate(mib, s.ref());
                     detail::pool_deallocate(p, mib, s.ref());
                   }).median() * 1e3;
  t.add({"pool allocate + free, 1 MiB", table::cell(pool_us, 2), "us", "stream-ordered pool"});
  if (d.is_cuda()) {
    double raw_us = time_batched(s.ref(), reps, 1, 20, [&] {
                      void* p = detail::cuda::raw_malloc(d.index(), mib);
                      detail::cuda::raw_free(p);
                    }).median() * 1e3;
    t.add({"cudaMalloc + cudaFree, 1 MiB", table::cell(raw_us, 2), "us", "the driver, synchronizing"});
    t.add({"pool / cudaMalloc", table::cell(pool_us / raw_us, 3), "ratio", "lower is better"});
  }
  // Empty launches back to back.
  bar.step("launch overhead");
  auto empty = [] RESIDENT_HD(thread_index) {};
  double launch_us = time_batched(s.ref(), reps, 2, batch, [&] { launch(s.ref(), {dims(1), dims(32)}, empty); }).median() * 1e3;
  t.add({"empty launch, checked", table::cell(launch_us, 2), "us", "validate + launch + error check + ledger"});
  bar.finish();
  t.print(out());
  if (!o.json.empty()) write_json(bench_json("foundation", d.name(), properties(d).name, t), o.json);
  return 0;
}

}  // namespace resident::cli
