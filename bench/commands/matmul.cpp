// resident bench matmul: the ladder, every algorithm per size, TFLOP/s and ratio to the vendor library.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>

#include "bench.hpp"
#include "plot.hpp"
#include "memory_budget.hpp"
#include "resident/resident.hpp"
#include "table.hpp"

namespace resident::cli {
namespace {

struct point {
  std::string algo;
  std::size_t n;
  double ms, tflops;
};

double time_matmul(device d, std::size_t n, matmul_algo algo, int reps) {
  stream s(d);
  std::vector<float> h(n * n);
  std::uint64_t x = 88172645463325252ull + n;
  for (auto& v : h) {  // xorshift: fresh values in [-1, 1), never zeros
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = float(double(x >> 11) * 0x1.0p-52 - 1.0);
  }
  auto A = to_device(std::span<const float>(h), n, n, d);
  auto B = to_device(std::span<const float>(h), n, n, d);
  array2d<float> C(n, n, d);
  A.set_stream(s.ref());
  B.set_stream(s.ref());
  C.set_stream(s.ref());
  s.synchronize();
  synchronize(d);
  return time_region(s.ref(), reps, 1, [&] { matmul(A, B, C, algo); }).median();
}

int plot_matmul_from(const bench_options& o) try {
  const nlohmann::json j = read_json(o.from);
  if (j.value("benchmark", "") != "matmul")
    throw invalid_argument("'" + o.from + "' is not the --json output of `resident bench matmul`");
  std::map<std::string, plot_series> by;
  std::vector<std::string> order;
  for (auto& r : j.at("rows")) {
    std::string a = r.at("algo");
    if (!by.count(a)) {
      by[a] = plot_series{a, {}, {}};
      order.push_back(a);
    }
    by[a].x.push_back(r.at("n").get<double>());
    by[a].y.push_back(r.at("tflops").get<double>());
  }
  std::vector<plot_series> series;
  for (auto& a : order) series.push_back(by[a]);
  plot_png(o.plot, "matmul ladder, float32 (" + j.value("device_name", std::string("?")) + ")", "n (n x n times n x n)",
           "TFLOP/s", series, true);
  return 0;
} catch (const nlohmann::json::exception& e) {
  throw invalid_argument("--from: '" + o.from + "' is not the --json output of `resident bench matmul` (" +
                         json_problem(e) + ")");
}

}  // namespace

int run_bench_matmul(const bench_options& o, const std::vector<std::string>& algo_names) {
  if (!o.from.empty()) return plot_matmul_from(o);
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  std::vector<std::size_t> sizes = o.sizes;
  if (sizes.empty()) sizes = d.is_cuda() ? std::vector<std::size_t>{512, 1024, 2048, 4096, 8192}
                                         : std::vector<std::size_t>{128, 256, 512, 1024};
  std::vector<matmul_algo> algos;
  for (auto& s : algo_names) algos.push_back(parse_matmul_algo(s));
  if (algos.empty())
    algos = d.is_cuda() ? std::vector<matmul_algo>{matmul_algo::naive, matmul_algo::shared, matmul_algo::tuned,
                                                   matmul_algo::vendor, matmul_algo::vendor_tf32}
                        : std::vector<matmul_algo>{matmul_algo::naive, matmul_algo::blocked, matmul_algo::vendor};
  for (auto a : algos)
    if (!matmul_supported(a, d, 4)) {
      std::string runs;
      for (auto b : {matmul_algo::naive, matmul_algo::blocked, matmul_algo::shared, matmul_algo::tuned,
                     matmul_algo::vendor, matmul_algo::vendor_tf32})
        if (matmul_supported(b, d, 4)) runs += (runs.empty() ? "" : ",") + to_string(b);
      throw invalid_argument("--algos: '" + to_string(a) + "' does not run on " + d.name() + "; these do: " + runs);
    }
  const double largest = double(*std::max_element(sizes.begin(), sizes.end()));
  // The CPU's naive triple loop takes minutes past n = 1024: asked for by name there, refused before any
  // work; among the defaults, left out at those sizes and said so under the table.
  const bool naive_cpu = d.is_cpu() && std::find(algos.begin(), algos.end(), matmul_algo::naive) != algos.end();
  if (naive_cpu && !algo_names.empty() && largest > 1024)
    throw invalid_argument("--algos naive on the CPU runs n up to 1024 (its triple loop would take minutes at n = " +
                           format_number(largest, 0) + "); give --sizes of at most 1024 or leave naive out");
  // A, B and C on the device; the input matrix on the host. Checked before the heading, so a refusal is
  // the only output.
  require_memory(d, "bench matmul at n = " + format_number(largest, 0), 12 * largest * largest,
                 4 * largest * largest, "Choose smaller --sizes (16 bytes per matrix element in all)");
  out() << wrap("Matrix multiply ladder, float32, C = A B with n x n matrices, on " + d.name() + " (" +
                properties(d).name + ")")
        << "\n";
  progress bar("bench matmul", sizes.size() * algos.size());
  std::vector<point> pts;
  std::map<std::size_t, double> vendor_tf;
  for (auto n : sizes)
    for (auto a : algos) {
      bar.step(to_string(a) + " n=" + std::to_string(n));
      const double flops = 2.0 * double(n) * double(n) * double(n);
      const bool slow = a == matmul_algo::naive && d.is_cpu();
      if (slow && n > 1024) continue;  // a default left out (said under the table)
      const int reps = o.reps ? o.reps : slow ? 1 : (flops > 1e12 ? 3 : flops > 1e10 ? 10 : 30);
      const double ms = time_matmul(d, n, a, reps);
      pts.push_back({to_string(a), n, ms, flops / (ms * 1e-3) / 1e12});
      if (a == matmul_algo::vendor) vendor_tf[n] = pts.back().tflops;
    }
  bar.finish();
  table t({{"algo", "algo", false}, {"n", "n"}, {"median (ms)", "ms"}, {"TFLOP/s", "tflops"}, {"/ vendor FP32", "over_vendor"}});
  for (auto& p : pts)
    t.add({p.algo, table::cell(double(p.n), 0), table::cell(p.ms, -1), table::cell(p.tflops, -1),
           vendor_tf.count(p.n) ? table::cell(p.tflops / vendor_tf[p.n], -1) : table::cell::none()});
  t.print(out());
  if (naive_cpu && largest > 1024)
    out() << "naive on the CPU: n above 1024 left out (minutes each); --algos naive --sizes 1024 times it\n";

  // The seed's claim: GPU kernels "3000x / 3500x" faster than the CPU. Measured here at one size.
  nlohmann::json claim;
  if (d.is_cuda()) {
    const std::size_t n = 1024;
    const double cpu = time_matmul(device::cpu(), n, matmul_algo::naive, 1);
    const double gn = time_matmul(d, n, matmul_algo::naive, 10), gs = time_matmul(d, n, matmul_algo::shared, 10);
    out() << "\nThe seed's claim (GPU kernels 3000x / 3500x faster than the CPU), measured at n = " << n
              << ": CPU naive triple loop (" << properties(device::cpu()).multiprocessors << " threads) "
              << format_number(cpu, 1) << " ms; GPU naive " << format_number(cpu / gn, 0) << "x, GPU shared "
              << format_number(cpu / gs, 0) << "x faster.\n";
    claim = {{"n", n}, {"cpu_naive_ms", cpu}, {"gpu_naive_speedup", cpu / gn}, {"gpu_shared_speedup", cpu / gs},
             {"cpu_threads", properties(device::cpu()).multiprocessors}};
  }
  if (!o.json.empty()) {
    nlohmann::json j = bench_json("matmul", d.name(), properties(d).name, t);
    if (!claim.is_null()) j["seed_claim"] = claim;
    write_json(j, o.json);
  }
  if (!o.plot.empty()) {
    std::map<std::string, plot_series> by;
    std::vector<std::string> order;
    for (auto& p : pts) {
      if (!by.count(p.algo)) {
        by[p.algo] = plot_series{p.algo, {}, {}};
        order.push_back(p.algo);
      }
      by[p.algo].x.push_back(double(p.n));
      by[p.algo].y.push_back(p.tflops);
    }
    std::vector<plot_series> series;
    for (auto& a : order) series.push_back(by[a]);
    plot_png(o.plot, "matmul ladder, float32 (" + properties(d).name + ")", "n", "TFLOP/s", series, true);
  }
  return 0;
}

}  // namespace resident::cli
