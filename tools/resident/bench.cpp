// resident bench: pipeline, small, foundation. Compiled by nvcc in CUDA builds.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "memory_budget.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/resident.hpp"
#include "seed.hpp"
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
  out() << what << " on " << d.name() << " (" << properties(d).name << ")\n";
}

}  // namespace

void plot_png(const std::string& path, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::vector<plot_series>& series, bool logx) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw invalid_argument("--plot needs gnuplot, which is not installed: install gnuplot-nox "
                           "(scripts/setup.sh does), or write --json and plot that elsewhere");
  // The data, the script and gnuplot's messages go to a private folder: gnuplot's complaints belong in
  // the error, not in the report, and the output's folder needs room for the PNG alone.
  std::string tmpl = (std::filesystem::temp_directory_path() / "resident-plot-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw invalid_argument("--plot: cannot create a temporary folder in " + tmpl);
  const std::filesystem::path work(tmpl);
  const std::string data = (work / "plot.dat").string(), script = (work / "plot.gp").string(),
                    log = (work / "gnuplot.log").string();
  auto quoted = [](const std::string& s) {  // a gnuplot single-quoted string: '' stands for '
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
    return q + "'";
  };
  {
    std::ofstream f(data);
    for (auto& s : series) {
      f << "# " << s.name << "\n";
      for (std::size_t i = 0; i < s.x.size(); ++i) f << s.x[i] << " " << s.y[i] << "\n";
      f << "\n\n";
    }
    std::ofstream g(script);
    g << "set terminal pngcairo size 900,540 font ',11' noenhanced\nset output " << quoted(path) << "\n"
      << "set title " << quoted(title) << "\nset xlabel " << quoted(xlabel) << "\nset ylabel " << quoted(ylabel)
      << "\nset grid\nset key outside right\nset logscale y\n"
      << (logx ? "set logscale x 2\nset format x '2^%L'\n" : "") << "plot ";
    for (std::size_t i = 0; i < series.size(); ++i)
      g << (i ? ", " : "") << quoted(data) << " index " << i << " with linespoints lw 2 title " << quoted(series[i].name);
    g << "\n";
  }
  const int rc = std::system(("gnuplot '" + script + "' > '" + log + "' 2>&1").c_str());
  std::stringstream messages;
  messages << std::ifstream(log).rdbuf();
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  if (rc != 0)
    throw invalid_argument("--plot: gnuplot failed to draw '" + path + "'; it said:\n" + messages.str());
  out() << "plot written to " << path << "\n";
}

namespace {
nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    throw invalid_argument("cannot read JSON from '" + path + "': " + e.what());
  }
}

// Adds the peers' time-over-memcpy series per system.
void add_peer_series(const std::string& path, std::vector<plot_series>& series) try {
  if (path.empty()) return;
  nlohmann::json p = read_json(path);
  std::vector<std::string> order;
  for (auto& r : p.at("rows")) {
    std::string name = r.at("system");
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  for (auto& name : order) {
    plot_series s{name, {}, {}};
    for (auto& r : p.at("rows"))
      if (r.at("system") == name) {
        s.x.push_back(std::ldexp(1.0, r.at("log2_n").get<int>()));
        s.y.push_back(r.at("over_memcpy").get<double>());
      }
    series.push_back(s);
  }
} catch (const nlohmann::json::exception& e) {
  throw invalid_argument("--peers: '" + path + "' is not the --json output of bench/peers/peers.py (" + e.what() + ")");
}

int plot_pipeline_from(const bench_options& o) try {
  nlohmann::json j = read_json(o.from);
  if (j.value("benchmark", "") != "pipeline")
    throw invalid_argument("'" + o.from + "' is not the --json output of `resident bench pipeline`");
  plot_series fused_s{"resident fused", {}, {}}, three_s{"resident, three kernels", {}, {}};
  for (auto& r : j.at("rows")) {
    const std::string l = r.at("log2_n");
    const double n = std::ldexp(1.0, std::stoi(l.substr(2)));
    fused_s.x.push_back(n);
    fused_s.y.push_back(r.at("fused_over_memcpy").get<double>());
    three_s.x.push_back(n);
    three_s.y.push_back(r.at("three_kernels_ms").get<double>() / r.at("memcpy_ms").get<double>());
  }
  std::vector<plot_series> series{fused_s, three_s};
  add_peer_series(o.peers, series);
  plot_png(o.plot, "seed pipeline, time / device-to-device memcpy (" + j.value("device_name", std::string("?")) + ")",
           "elements (float32)", "time / memcpy time of the same bytes (lower is better)", series, true);
  return 0;
} catch (const nlohmann::json::exception& e) {
  throw invalid_argument("--from: '" + o.from + "' is not the --json output of `resident bench pipeline` (" + e.what() + ")");
}
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
  const std::size_t largest = *std::max_element(logs.begin(), logs.end());
  // Per element: x and y on the device; the input and a checked download on the host.
  require_memory(d, "bench pipeline at n = 2^" + std::to_string(largest), 8 * std::ldexp(1.0, int(largest)),
                 8 * std::ldexp(1.0, int(largest)), "Choose smaller --sizes (16 bytes per element in all)");
  const int reps = o.reps ? o.reps : (d.is_cuda() ? 50 : 10);
  header("Fused seed pipeline vs device-to-device memcpy of the same bytes", d);
  out() << "(median of " << reps << "; fused / memcpy = time over the time of copying the same bytes, 1.00 = copy\n"
            << " speed; sum GB/s counts the bytes it reads, memcpy GB/s the bytes it reads and writes)\n";

  auto master = map<func1>() | map<func2>() | map<func3>();
  auto sum = map([] RESIDENT_HD(float v) { return v; }) | reduce(plus{}, 0.f);
  auto scan = map<func1>() | inclusive_scan(plus{});  // running sums of the first stage, y = scan(f1(x))
  table t({{"n", "log2_n"}, {"bytes moved", "bytes", true}, {"memcpy (ms)", "memcpy_ms"},
           {"fused (ms)", "fused_ms"}, {"fused / memcpy", "fused_over_memcpy"}, {"3 kernels (ms)", "three_kernels_ms"},
           {"sum (ms)", "sum_ms"}, {"sum GB/s / memcpy GB/s", "sum_rate_over_memcpy_rate"},
           {"fused GB/s", "fused_gb_per_s"}, {"scan (ms)", "scan_ms"}, {"scan / memcpy", "scan_over_memcpy"}});
  plot_series fused_s{"fused pipeline / memcpy", {}, {}}, three_s{"three kernels / memcpy", {}, {}};
  progress bar("bench pipeline", logs.size());
  stream s(d);
  for (auto l : logs) {
    bar.step("2^" + std::to_string(l));
    const std::size_t n = std::size_t(1) << l;
    auto hx = seed_input(n);
    array<float> x = to_device(hx, s.ref()), y(n, s.ref());
    array<float> total(1, s.ref());
    master(x, y);
    if (seed_error(hx, y.to_host()) > 1e-5) throw error("bench pipeline: fused result is wrong at n = 2^" + std::to_string(l));
    // Each variant is warmed up just before it is timed.
    auto timed = [&](auto&& f) {
      warm_up(s.ref(), f);
      return time_region(s.ref(), reps, 0, f).median();
    };
    const double mc = timed([&] { copy(x, y); });
    const double fu = timed([&] { master(x, y); });
    const double k3 = timed([&] {
      map<func1>()(x, y);
      map<func2>()(y);
      map<func3>()(y);
    });
    const double su = timed([&] { sum(x, total); });
    scan(x, y);
    // Float running sums of 2^28 values drift from the FP64 sums by rounding (the tests check the scan
    // against FP64 in double); a wrong combination of pieces is off by far more than 5%.
    if (scan_error(hx, y.to_host()) > 0.05) throw error("bench pipeline: scan result is wrong at n = 2^" + std::to_string(l));
    const double sc = timed([&] { scan(x, y); });
    const double bytes = 8.0 * double(n);
    t.add({"2^" + std::to_string(l), detail::format_bytes(bytes), table::cell(mc, 4), table::cell(fu, 4),
           table::cell(fu / mc, 3), table::cell(k3, 4), table::cell(su, 4), table::cell(mc / (2 * su), -1),
           table::cell(bytes / (fu * 1e-3) / 1e9, -1), table::cell(sc, 4), table::cell(sc / mc, 3)});
    fused_s.x.push_back(double(n));
    fused_s.y.push_back(fu / mc);
    three_s.x.push_back(double(n));
    three_s.y.push_back(k3 / mc);
  }
  bar.finish();
  t.print(out());
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
    nlohmann::json j = bench_json("pipeline", d.name(), properties(d).name, t);
    if (!cpu_loop.is_null()) j["cpu_hand_loop"] = cpu_loop;
    j["reps"] = reps;
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
  bar.finish();
  table t({{"variant", "variant", false}, {"time per call (us)", "us_per_call"}, {"kernels per call", "kernels"}});
  t.add({"fused, one launch per call", table::cell(fused, 2), table::cell(1, 0)});
  t.add({"three kernels per call", table::cell(three, 2), table::cell(3, 0)});
  t.add({"fused, graph replay (" + std::to_string(batch) + " calls per graph)", table::cell(replay, 2), table::cell(1, 0)});
  t.print(out());
  if (!o.json.empty()) {
    nlohmann::json j = bench_json("small", d.name(), properties(d).name, t);
    j["n"] = n;
    write_json(j, o.json);
  }
  return 0;
}

int run_bench_foundation(const bench_options& o) {
  const device d = pick(o);
  const int reps = o.reps ? o.reps : 20;
  header("Foundation: transfers, allocation, launch overhead", d);
  table t({{"measure", "measure", false}, {"median", "median", true}, {"unit", "unit", false}, {"note", "note", false}});
  // Uploads and downloads of 1 GiB (256 MiB on the CPU).
  const std::size_t bytes = d.is_cuda() ? std::size_t(1) << 30 : std::size_t(256) << 20;
  // Two arrays on the device; a pageable and a pinned buffer on the host.
  require_memory(d, "bench foundation", 2 * double(bytes), 2 * double(bytes), "Free memory and run it again");
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
