// A program of the shape that once kept RESIDENT_PROFILE=1 busy at exit far longer than its work took:
// a zip through four maps into an array and into a reduction under a forbid scope and a scoped ledger,
// a shifted slice into doubles, repeated timed calls, thousands of small calls, matmul of several
// shapes and algorithms, and a normal fill on the CPU and on the device, compared. Arguments: the device
// (cpu or cuda) and the number of small calls. Prints "work done at <steady_clock ns>" last: the parent
// (test_profile_exit) measures from there to the process's exit, which writes the profile's report.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

int main(int argc, char** argv) {
  const rs::device d = rs::parse_device(argc > 1 ? argv[1] : "cpu");
  const std::size_t n = (std::size_t(1) << (d.is_cuda() ? 26 : 18)) + 3;
  const int small_calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  std::vector<float> hx(n);
  std::vector<std::int32_t> hk(n);
  for (std::size_t i = 0; i < n; ++i) hx[i] = float(i % 1000) * 1e-3f, hk[i] = std::int32_t(i % 7);
  auto x = rs::to_device(hx, d);
  auto k = rs::to_device(hk, d);
  rs::array<float> y(n, d);
  rs::array<double> z(n - 1, d);
  auto four = rs::map([] RESIDENT_HD(float v, std::int32_t m) { return v * float(m); }) | rs::map([] RESIDENT_HD(float v) { return v + 1.f; }) |
              rs::map([] RESIDENT_HD(float v) { return v * 0.5f; }) | rs::map([] RESIDENT_HD(float v) { return v - 0.25f; });
  double total = 0;
  rs::array<double> sum(1, d);  // the reduction's result stays on the device: the scope forbids transfers
  {
    rs::scoped_ledger ledger(d);
    rs::scoped_transfer_policy forbid(rs::transfer_policy::forbid);
    for (int rep = 0; rep < 30; ++rep) {
      (rs::zip(x, k) | four)(y);
      (rs::zip(x, k) | four | rs::map([] RESIDENT_HD(float v) { return double(v); }) | rs::reduce(rs::plus{}, 0.0))(sum);
      (rs::map([] RESIDENT_HD(float v) { return double(v); }))(x.slice(1, n - 1), z);
      rs::copy(x, y);
    }
  }
  total += sum.to_host()[0];
  const std::size_t m = 10000;
  auto sx = rs::to_device(std::vector<float>(m, 0.5f), d);
  auto sk = rs::to_device(std::vector<std::int32_t>(m, 3), d);
  rs::array<float> sy(m, d);
  for (int i = 0; i < small_calls; ++i) (rs::zip(sx, sk) | four)(sy);
  for (std::size_t s : {16, 32, 48, 64, 96}) {
    rs::array2d<float> a(s, s, d), b(s, s, d), c(s, s, d);
    rs::random::fill_uniform(a.storage(), 1);
    rs::random::fill_uniform(b.storage(), 2);
    for (auto algo : {rs::matmul_algo::naive, rs::matmul_algo::blocked, rs::matmul_algo::shared,
                      rs::matmul_algo::tuned, rs::matmul_algo::vendor, rs::matmul_algo::automatic}) {
      if (!rs::matmul_supported(algo, d, sizeof(float))) continue;
      rs::matmul(a, b, c, algo);
      total += double(c.storage().to_host()[0]);
    }
  }
  rs::array<float> g(1000003, d), g_cpu(1000003, rs::device::cpu());
  rs::random::fill_normal(g, 7);
  rs::random::fill_normal(g_cpu, 7);
  const auto on_d = g.to_host(), on_cpu = g_cpu.to_host();
  for (std::size_t i = 0; i < on_d.size(); ++i)
    if (on_d[i] != on_cpu[i]) {
      std::printf("normal fill differs at %zu\n", i);
      return 1;
    }
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
  std::printf("checksum %g\nwork done at %lld\n", total, static_cast<long long>(now.count()));
  std::fflush(stdout);
  return 0;
}
