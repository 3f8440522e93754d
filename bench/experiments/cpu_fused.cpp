// The CPU backend's fused seed pipeline against three separate maps and hand-written loops (OpenMP and
// serial), alternating within each round (in an order shuffled from round to round, since a parallel
// region after a serial stretch finds the team asleep) so load and drift hit all alike; each timing
// follows one untimed call of the same variant, as in `bench pipeline`. Medians
// of wall time and of the process's CPU time (CPU time above wall time: threads spinning or working in
// parallel; below: waiting for a core).
// usage: cpu_fused [ROUNDS=15] [LOG2 sizes...]   (default 10 12 14 16 18 20 22)
// WORK=cheap in the environment: a chain of three multiply-adds instead (vectorizes when fused by
// hand); WORK=sum: map + plus reduction against an OpenMP simd reduction (the last two columns then
// hold the same loop serial and nothing).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#include "resident/resident.hpp"
#include "../common/seed.hpp"

namespace rs = resident;
using rs::cli::func1;
using rs::cli::func2;
using rs::cli::func3;

namespace {
double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
// STAT=min in the environment reports minima instead of medians (what a quiet machine would show).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  static const bool min = std::getenv("STAT") && std::string(std::getenv("STAT")) == "min";
  return min ? v.front() : v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  std::vector<int> logs;
  for (int i = 2; i < argc; ++i) logs.push_back(std::atoi(argv[i]));
  if (logs.empty()) logs = {10, 12, 14, 16, 18, 20, 22};
  const char* stat = std::getenv("STAT") && std::string(std::getenv("STAT")) == "min" ? "min" : "median";
  std::printf("threads %d; rounds %d; per size: %s wall ms (%s CPU ms)\n", omp_get_max_threads(), rounds, stat, stat);
  std::printf("%6s %18s %18s %18s %18s %10s %10s\n", "n", "fused", "three maps", "hand omp", "hand serial",
              "hand/fused", "three/fused");
  auto master = rs::map<func1>() | rs::map<func2>() | rs::map<func3>();
  const std::string work = std::getenv("WORK") ? std::getenv("WORK") : "seed";
  auto c1 = [](float v) { return 1.5f * v + 0.5f; };
  auto c2 = [](float v) { return v * v - 1.f; };
  auto c3 = [](float v) { return 0.5f * v + 2.f; };
  auto cheap = rs::map(c1) | rs::map(c2) | rs::map(c3);
  auto sum = rs::map([](float v) { return v; }) | rs::reduce(rs::plus{}, 0.f);
  volatile float sink = 0;
  std::printf("work: %s\n", work.c_str());
  for (int l : logs) {
    const std::size_t n = std::size_t(1) << l;
    auto hx = rs::cli::seed_input(n);
    rs::array<float> x = rs::to_device(hx, rs::default_stream(rs::device::cpu())), y(n, rs::device::cpu());
    float* px = x.data();
    float* py = y.data();
    const long ln = long(n);
    std::vector<std::function<void()>> variants{
        [&] { master(x, y); },
        [&] {
          rs::map<func1>()(x, y);
          rs::map<func2>()(y);
          rs::map<func3>()(y);
        },
        [&] {
#pragma omp parallel for simd schedule(static)
          for (long i = 0; i < ln; ++i) py[i] = func3(func2(func1(px[i])));
        },
        [&] {
          for (long i = 0; i < ln; ++i) py[i] = func3(func2(func1(px[i])));
        }};
    if (work == "cheap")
      variants = {[&] { cheap(x, y); },
                  [&] {
                    rs::map(c1)(x, y);
                    rs::map(c2)(y);
                    rs::map(c3)(y);
                  },
                  [&] {
#pragma omp parallel for simd schedule(static)
                    for (long i = 0; i < ln; ++i) py[i] = c3(c2(c1(px[i])));
                  },
                  [&] {
                    for (long i = 0; i < ln; ++i) py[i] = c3(c2(c1(px[i])));
                  }};
    if (work == "sum")
      variants = {[&] { sink = sum(x); },
                  [&] { sink = sum(x); },
                  [&] {
                    float t = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : t)
                    for (long i = 0; i < ln; ++i) t += px[i];
                    sink = t;
                  },
                  [&] {
                    float t = 0;
#pragma omp simd reduction(+ : t)
                    for (long i = 0; i < ln; ++i) t += px[i];
                    sink = t;
                  }};
    // Repeat small calls so one timing covers at least 2^16 elements.
    const int inner = int(std::max<std::size_t>(1, (std::size_t(1) << 16) / n));
    std::vector<std::vector<double>> wall(variants.size()), cpu(variants.size());
    for (auto& v : variants) v();  // warm-up
    std::mt19937 shuffler{std::uint32_t(l)};
    std::vector<std::size_t> order(variants.size());
    for (int r = 0; r < rounds; ++r) {
      std::iota(order.begin(), order.end(), std::size_t(0));
      std::shuffle(order.begin(), order.end(), shuffler);
      for (std::size_t k : order) {
        variants[k]();
        const double c0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < inner; ++i) variants[k]();
        const double w = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        wall[k].push_back(w / inner);
        cpu[k].push_back((cpu_seconds() - c0) * 1e3 / inner);
      }
    }
    std::printf("%6s", ("2^" + std::to_string(l)).c_str());
    for (std::size_t k = 0; k < variants.size(); ++k) std::printf(" %9.4f (%6.4f)", median(wall[k]), median(cpu[k]));
    std::printf(" %10.3f %10.3f\n", median(wall[2]) / median(wall[0]), median(wall[1]) / median(wall[0]));
    if (work == "seed" && rs::cli::seed_error(hx, y.to_host()) > 1e-5) return 1;
  }
  return 0;
}
