// resident bench rng: filling existing arrays (uniform, normal) vs cuRAND; a large array filled, transformed and reduced
// without further allocation; Monte-Carlo pi fused vs fill-then-reduce. Compiled by nvcc in CUDA builds.
#include <algorithm>
#include <iostream>

#include "bench.hpp"
#include "memory_budget.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/resident.hpp"
#include "table.hpp"
#include "vendor.hpp"

namespace resident::cli {

int run_bench_rng(const bench_options& o) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  const int reps = o.reps ? o.reps : (d.is_cuda() ? 30 : 5);
  // The fill buffer, then the points for pi, then (on the CPU) the 256 MiB array, one after another;
  // checked before the heading, so a refusal is the only output.
  const std::size_t n = d.is_cuda() ? std::size_t(1) << 28 : std::size_t(1) << 24;
  const std::size_t points = d.is_cuda() ? std::size_t(1) << 28 : std::size_t(1) << 22;
  require_memory(d, "bench rng", std::max({4.0 * double(n), 8.0 * double(points), d.is_cpu() ? 256.0 * (1 << 20) : 0.0}),
                 0, "Free memory and run it again");
  out() << wrap("Random numbers into existing arrays on " + d.name() + " (" + properties(d).name + ")") << "\n";
  progress bar("bench rng", 3);
  stream s(d);
  table t({{"measure", "measure", false}, {"median", "median", true}, {"unit", "unit", false}, {"note", "note", false}});
  const std::uint64_t seed = 20261129;

  // Fill rate into one buffer: bytes written per second.
  bar.step("fill rate");
  double uniform_ratio = 0, normal_ratio = 0;  // of cuRAND's rate (GPU only)
  {
    array<float> a(n, s.ref());
    const auto allocs = pool_stats(d).allocations;
    const double ms = time_region(s.ref(), reps, 3, [&] { random::fill_uniform(a, seed); }).median();
    const double gbs = double(a.bytes()) / (ms * 1e-3) / 1e9;
    t.add({"fill_uniform float32, " + detail::format_bytes(double(a.bytes())), table::cell(gbs, -1), "GB/s",
           std::to_string(pool_stats(d).allocations - allocs) + " allocations during the fills"});
    if (d.is_cuda()) {
      const double cu = curand_uniform_fill_ms(a.data(), n, seed, s.ref(), reps);
      const double cgbs = double(a.bytes()) / (cu * 1e-3) / 1e9;
      t.add({"cuRAND Philox4x32-10 uniform, same buffer", table::cell(cgbs, -1), "GB/s", "curandGenerateUniform"});
      uniform_ratio = gbs / cgbs;
      t.add({"fill_uniform / cuRAND rate", table::cell(uniform_ratio, 3), "ratio", "higher is better"});
    }
    // Normals (mean 0, sd 1): Box-Muller through the library's own log, sine and cosine, both outputs
    // of each pair used; cuRAND's curandGenerateNormal (Philox) into the same buffer.
    const double nms = time_region(s.ref(), reps, 3, [&] { random::fill_normal(a, seed); }).median();
    const double ngbs = double(a.bytes()) / (nms * 1e-3) / 1e9;
    t.add({"fill_normal float32, " + detail::format_bytes(double(a.bytes())), table::cell(ngbs, -1), "GB/s",
           "the same bits on every backend"});
    if (d.is_cuda()) {
      const double cu = curand_normal_fill_ms(a.data(), n, seed, s.ref(), reps);
      const double cgbs = double(a.bytes()) / (cu * 1e-3) / 1e9;
      t.add({"cuRAND Philox4x32-10 normal, same buffer", table::cell(cgbs, -1), "GB/s", "curandGenerateNormal"});
      normal_ratio = ngbs / cgbs;
      t.add({"fill_normal / cuRAND rate", table::cell(normal_ratio, 3), "ratio", "higher is better (target >= 1)"});
    }
  }
  // Monte-Carlo pi: points generated, tested and counted in one pass, vs written to memory first.
  bar.step("Monte-Carlo pi");
  {
    auto inside = [] RESIDENT_HD(random::point2<float> p) { return std::uint64_t(p.x * p.x + p.y * p.y <= 1.f); };
    auto fused = random::uniform_points<float>(seed) | map(inside) | reduce(plus{}, std::uint64_t(0));
    array<std::uint64_t> count(1, s.ref());
    array<float> xy(2 * points, s.ref());
    const float* pxy = xy.data();
    auto from_memory = generate([=] RESIDENT_HD(std::size_t i) {
                         const float x = pxy[2 * i], y = pxy[2 * i + 1];
                         return std::uint64_t(x * x + y * y <= 1.f);
                       }) |
                       reduce(plus{}, std::uint64_t(0));
    // Both count into a device array (no synchronization or download per call), as a resident
    // pipeline would; the counts are compared once below.
    const double f_ms = time_region(s.ref(), reps, 2, [&] { fused(points, count); }).median();
    const double m_ms = time_region(s.ref(), reps, 2, [&] {
                          random::fill_uniform(xy, seed);
                          from_memory(points, count);
                        }).median();
    const std::uint64_t a = fused(points, s.ref());
    random::fill_uniform(xy, seed);
    const std::uint64_t b = from_memory(points, s.ref());
    if (a != b) throw error("bench rng: fused and fill-then-reduce counted different points");
    t.add({"pi, " + std::to_string(points) + " points, fused", table::cell(f_ms, 3), "ms",
           "pi ~ " + format_number(4.0 * double(a) / double(points), 5)});
    t.add({"pi, fill then reduce", table::cell(m_ms, 3), "ms", "same points, written to memory"});
    t.add({"fill-then-reduce / fused time", table::cell(m_ms / f_ms, 2), "ratio", "higher: fusing pays"});
  }
  // One array of about 60% of free memory (GPU; 256 MiB on the CPU): filled, squared in place, reduced.
  bar.step("large array");
  {
    std::size_t bytes = std::size_t(256) << 20;
    if (d.is_cuda()) {
      trim_pool(d);
      std::size_t free_b = 0, total = 0;
      detail::cuda::mem_info(d.index(), &free_b, &total);
      bytes = free_b / 10 * 6;
    }
    const std::size_t m = bytes / sizeof(float);
    array<float> big(m, s.ref());
    array<double> sum(1, s.ref());
    const auto allocs = pool_stats(d).allocations;
    event e0(d), e1(d);
    e0.record(s.ref());
    random::fill_uniform(big, seed, 0, -1.f, 1.f);
    map([] RESIDENT_HD(float v) { return v * v; })(big);
    (map([] RESIDENT_HD(float v) { return double(v); }) | reduce(plus{}, 0.0))(big, sum);
    e1.record(s.ref());
    const double ms = elapsed_ms(e0, e1);
    const double mean = sum.to_host()[0] / double(m);
    const auto extra = pool_stats(d).allocations - allocs;
    t.add({"large array " + detail::format_bytes(double(big.bytes())) + ": fill, square, sum", table::cell(ms, 1), "ms",
           "mean of v^2 " + format_number(mean, 4) + " (1/3 expected); " + std::to_string(extra) +
               " pool allocation(s), scratch"});
  }
  bar.finish();
  t.print(out());
  auto j = bench_json("rng", d.name(), properties(d).name, t);
  if (d.is_cuda()) {
    out() << "fill_normal_vs_curand: " << format_number(normal_ratio, 3)
          << " (fill_normal's rate over curandGenerateNormal's, same buffer; target >= 1.0)\n";
    j["fill_normal_vs_curand"] = normal_ratio;
    j["fill_uniform_vs_curand"] = uniform_ratio;
  }
  if (!o.json.empty()) write_json(j, o.json);
  return 0;
}

}  // namespace resident::cli
