// The CPU race, resident's side (bench/peers/cpu_race.py runs it next to NumPy, NumExpr and Numba):
// the seed pipeline (1.5 v + 0.5, sqrt(v^2 + 1), 0.5 sin v) as a map and as a map + sum over float
// arrays of 2^lo .. 2^hi, three ways (compile-time fused C++, run-time C++ text, op program), on 1
// thread and on all, against a copy of the same bytes by the same loop. Times are the fastest of
// the repetitions after a warm-up; JSON on stdout.
//
//   cpu_race [--lo 16] [--hi 26] [--threads 1,2]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "resident/fuse/program.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "resident/resident.hpp"

namespace rs = resident;

namespace {

float func1(float v) { return 1.5f * v + 0.5f; }
float func2(float v) { return sqrtf(v * v + 1.f); }
float func3(float v) { return 0.5f * sinf(v); }
float same(float v) { return v; }

// Seconds of the fastest of reps calls of f, after one untimed call.
double fastest(int reps, const std::function<void()>& f) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t j = s.find(',', i);
    v.push_back(std::atoi(s.substr(i, j - i).c_str()));
    i = j == std::string::npos ? s.size() : j + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int lo = 16, hi = 26;
  std::vector<int> threads = {1, omp_get_max_threads()};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--lo") lo = std::atoi(v.c_str());
    else if (k == "--hi") hi = std::atoi(v.c_str());
    else if (k == "--threads") threads = parse_list(v);
    else {
      std::fprintf(stderr, "cpu_race: unknown option %s\nusage: cpu_race [--lo 16] [--hi 26] [--threads 1,2]\n", k.c_str());
      return 2;
    }
  }
  if (threads.size() == 2 && threads[0] == threads[1]) threads.pop_back();
  try {
    const rs::device cpu = rs::device::cpu();
    auto fused = rs::map<func1>() | rs::map<func2>() | rs::map<func3>();
    auto fused_sum = fused | rs::reduce(rs::plus{}, 0.f);
    rs::jit::pipeline text;
    for (const char* s : {"float func1(float v) { return 1.5f * v + 0.5f; }",
                          "float func2(float v) { return sqrtf(v * v + 1.0f); }",
                          "float func3(float v) { return 0.5f * sinf(v); }"})
      text = text | rs::jit::map(s);
    const rs::jit::pipeline text_sum = text | rs::jit::sum();
    const rs::program ops = rs::program{} | rs::op::affine(1.5, 0.5) | rs::op::square() | rs::op::add(1) |
                            rs::op::sqrt() | rs::op::sin() | rs::op::mul(0.5);
    std::printf("{\"simd_path\": \"%s\", \"max_threads\": %d, \"rows\": [\n",
                rs::detail::cpu_simd_name(rs::detail::cpu_simd_path()), omp_get_max_threads());
    bool first = true;
    for (int t : threads) {
      omp_set_num_threads(t);
      for (int lg = lo; lg <= hi; lg += 2) {
        const std::size_t n = std::size_t(1) << lg;
        const int reps = int(std::clamp<std::size_t>((std::size_t(3) << 24) / n, 5, 100));
        std::vector<float> h(n);
        for (std::size_t i = 0; i < n; ++i) h[i] = float(i % 4093) * (1.f / 4093.f);
        rs::array<float> x = rs::to_device(std::span<const float>(h), cpu), y(n, cpu);
        volatile float sink = 0;
        const double copy = fastest(reps, [&] { rs::map<same>()(x, y); });
        auto row = [&](const char* way, const char* shape, double s) {
          const double bytes = std::string(shape) == "map" ? 8.0 * double(n) : 4.0 * double(n);
          std::printf("%s  {\"way\": \"%s\", \"shape\": \"%s\", \"log2_n\": %d, \"threads\": %d, \"seconds\": %.6e, "
                      "\"gb_per_s\": %.3f, \"copy_gb_per_s\": %.3f}",
                      first ? "" : ",\n", way, shape, lg, t, s, bytes / s * 1e-9, 8.0 * double(n) / copy * 1e-9);
          first = false;
        };
        row("copy (resident identity map)", "map", copy);
        row("resident C++ fused", "map", fastest(reps, [&] { fused(x, y); }));
        row("resident C++ text stage", "map", fastest(reps, [&] { text(x, y); }));
        row("resident op program", "map", fastest(reps, [&] { rs::run(ops, x, y); }));
        row("resident C++ fused", "map+sum", fastest(reps, [&] { sink = sink + fused_sum(x); }));
        row("resident C++ text stage", "map+sum", fastest(reps, [&] { sink = sink + text_sum.result<float>(x); }));
        row("resident op program", "map+sum", fastest(reps, [&] { sink = sink + rs::run_sum(ops, x); }));
      }
    }
    std::printf("\n]}\n");
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "cpu_race: %s\n", e.what());
    return 1;
  }
}
