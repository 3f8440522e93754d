// The seed tutorial's "hello world", C = A x B, done the ways it shows: on the CPU with the plain triple
// loop and with a compiled, cache-blocked loop; on the GPU with global memory only and with shared-memory
// tiles; then what the tutorial stops short of: a tuned kernel and the vendor library. The host
// wrappers are resident's: upload once, multiply on the device, download once.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "resident/resident.hpp"

namespace rs = resident;

int main() {
  try {
    const std::size_t n = 384;
    std::mt19937 g(std::random_device{}());
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> ha(n * n), hb(n * n);
    for (auto& v : ha) v = u(g);
    for (auto& v : hb) v = u(g);
    std::vector<double> ref(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t p = 0; p < n; ++p)
        for (std::size_t j = 0; j < n; ++j) ref[i * n + j] += double(ha[i * n + p]) * double(hb[p * n + j]);

    std::vector<rs::device> devices{rs::device::cpu()};
    if (rs::cuda_device_count() > 0) devices.push_back(rs::device::cuda(0));
    else std::printf("(no GPU answers: %s; the GPU rungs are skipped)\n", rs::cuda_unavailable_reason().c_str());

    int bad = 0;
    std::printf("n = %zu, C = A x B in float32\n", n);
    for (rs::device d : devices) {
      auto A = rs::to_device(std::span<const float>(ha), n, n, d);
      auto B = rs::to_device(std::span<const float>(hb), n, n, d);
      rs::array2d<float> C(n, n, d);
      const auto algos = d.is_cpu() ? std::vector<rs::matmul_algo>{rs::matmul_algo::naive, rs::matmul_algo::blocked,
                                                                     rs::matmul_algo::vendor}
                                    : std::vector<rs::matmul_algo>{rs::matmul_algo::naive, rs::matmul_algo::shared,
                                                                   rs::matmul_algo::tuned, rs::matmul_algo::vendor};
      for (auto algo : algos) {
        rs::matmul(A, B, C, algo);  // warm-up (module load, library handles)
        rs::synchronize(d);
        auto t0 = std::chrono::steady_clock::now();
        rs::matmul(A, B, C, algo);
        rs::synchronize(d);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        auto hc = C.to_host();
        double num = 0, den = 0;
        for (std::size_t i = 0; i < n * n; ++i) {
          num += (hc[i] - ref[i]) * (hc[i] - ref[i]);
          den += ref[i] * ref[i];
        }
        const double err = std::sqrt(num / den);
        bad += !(err < 1e-5);
        std::printf("  %-6s %-8s %9.3f ms  %8.2f GFLOP/s  rel. error %.1e\n", d.name().c_str(),
                    rs::to_string(algo).c_str(), ms, 2.0 * double(n * n * n) / (ms * 1e6), err);
      }
    }
    std::printf("%s", (std::ostringstream() << rs::ledger()).str().c_str());
    return bad ? 1 : 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "matmul_ladder: %s\n", e.what());
    return 1;
  }
}
