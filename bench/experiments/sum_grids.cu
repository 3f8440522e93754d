// Short reductions: where map + sum's time goes below 2^24 elements, and which grid serves it best.
// Per size, timed back-to-back (`batch` calls between two events: the device's throughput) against a
// device-to-device memcpy of the same array: the library's sum as shipped, the same sum given grids
// of 1..8 blocks of 256 per SM (with_config), the host's cost of issuing one call (no synchronization),
// the zipped forms (z = 1.5 x + y, and the dot product x . y into a device array). Every total is
// checked against an FP64 sum first. Rates: bytes read (and written) per second over memcpy's.
//
// usage: sum_grids [log2_n ...]   (default 18 20 21 22 23 24)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "experiment.cuh"
#include "sums.cuh"
#include "resident/resident.hpp"

namespace rs = resident;

namespace {

constexpr int batch = 20, reps = 15, repeat = 3;

using bench = experiment::batched;

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> logs;
  for (int i = 1; i < argc; ++i) logs.push_back(std::atoi(argv[i]));
  if (logs.empty()) logs = {18, 20, 21, 22, 23, 24};
  bench b{batch, reps};
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("# sum_grids: back-to-back, %d calls per event pair, median of %d, %d sweeps; %d SMs\n", batch, reps,
              repeat, sms);
  auto sum = rs::map([] RESIDENT_HD(float v) { return v; }) | rs::reduce(rs::plus{}, 0.f);
  auto dot = rs::reduce(rs::plus{}, 0.f);
  auto axpy = [] RESIDENT_HD(float a, float c) { return 1.5f * a + c; };
  auto times = [] RESIDENT_HD(float a, float c) { return a * c; };
  for (int rep = 0; rep < repeat; ++rep)
    for (int l : logs) {
      const std::size_t n = std::size_t(1) << l;
      std::vector<float> hx(n), hy(n);
      srand(unsigned(l) * 7919u + unsigned(rep) * 31u + unsigned(time(nullptr)));
      for (auto& v : hx) v = float(rand()) / float(RAND_MAX);
      for (auto& v : hy) v = float(rand()) / float(RAND_MAX);
      double ref = 0, ref_dot = 0;
      for (std::size_t i = 0; i < n; ++i) {
        ref += hx[i];
        ref_dot += double(hx[i]) * hy[i];
      }
      rs::array<float> x = rs::to_device(hx, b.s.ref()), y = rs::to_device(hy, b.s.ref()), z(n, b.s.ref()),
                       total(1, b.s.ref());
      const double mc = b.per_call_ms([&] { rs::copy(x, z); });
      std::printf("sweep %d n = 2^%d: memcpy %.4f ms, host %.0f ns a call\n", rep + 1, l, mc,
                  b.host_ns([&] { rs::copy(x, z); }));
      // A sum reads 4 bytes per element, memcpy reads and writes 8: rate ratio = mc / (2 * ms).
      auto report_sum = [&](const std::string& name, auto&& call, double want) {
        CHECK(cudaMemsetAsync(total.data(), 0xFF, sizeof(float), b.s.ref().native()));  // NaN
        call();
        const float got = total.to_host()[0];
        const bool ok = std::abs(double(got) - want) <= 1e-4 * std::abs(want);
        const double ms = b.per_call_ms(call);
        std::printf("  %-36s %.4f ms  rate %.3f of memcpy's  host %5.0f ns%s\n", name.c_str(), ms, mc / (2 * ms),
                    b.host_ns(call), ok ? "" : "  WRONG");
      };
      report_sum("sum, as shipped", [&] { sum(x, total); }, ref);
      for (int per_sm : {1, 2, 4, 8}) {
        auto configured = sum.with_config(rs::launch_config{rs::dims(unsigned(sms * per_sm)), rs::dims(256u), 0});
        report_sum("sum, " + std::to_string(per_sm) + " blocks of 256 per SM", [&] { configured(x, total); }, ref);
      }
      report_sum("sum, as shipped (again)", [&] { sum(x, total); }, ref);
      // dot reads 8 bytes per element: rate ratio = mc / ms.
      {
        auto d = rs::zip(x, y) | rs::map(times) | dot;
        CHECK(cudaMemsetAsync(total.data(), 0xFF, sizeof(float), b.s.ref().native()));  // NaN
        d(total);
        const float got = total.to_host()[0];
        const bool ok = std::abs(double(got) - ref_dot) <= 1e-4 * std::abs(ref_dot);
        const double ms = b.per_call_ms([&] { d(total); });
        std::printf("  %-36s %.4f ms  rate %.3f of memcpy's%s\n", "dot x . y into a device array", ms, mc / ms,
                    ok ? "" : "  WRONG");
      }
      // axpy reads 8 and writes 4 bytes per element: rate ratio = 1.5 * mc / ms.
      {
        auto f = rs::zip(x, y) | rs::map(axpy);
        f(z);
        const auto hz = z.to_host();
        bool ok = true;
        for (std::size_t i = 0; i < n; i += 997) ok = ok && std::abs(hz[i] - (1.5 * hx[i] + hy[i])) <= 1e-6 * (1 + std::abs(hz[i]));
        const double ms = b.per_call_ms([&] { f(z); });
        std::printf("  %-36s %.4f ms  rate %.3f of memcpy's%s\n", "zip z = 1.5 x + y", ms, 1.5 * mc / ms,
                    ok ? "" : "  WRONG");
      }
      std::printf("  memcpy again (drift) %.4f ms\n", b.per_call_ms([&] { rs::copy(x, z); }));
    }
  return 0;
}
