// Uses the installed library from nvcc-compiled code: a fused pipeline (a device function and an
// extended lambda) and a reduction on the default device (the GPU where one answers, else the CPU),
// checked against an FP64 reference.
#include <resident/resident.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace rs = resident;

RESIDENT_HD float scale(float v) { return 1.5f * v + 0.5f; }

int main() {
  try {
    const std::size_t n = 1 << 20;
    std::vector<float> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = float(i % 1000) / 1000.f;
    const rs::device d = rs::default_device();
    rs::array<float> x = rs::to_device(h, d);
    rs::array<double> y = rs::to_device(std::vector<double>(n, -7777.0), d);  // poisoned
    auto p = rs::map<scale>() | rs::map([] RESIDENT_HD(float v) { return sqrtf(v * v + 1.f); });
    p(x, y);
    const double sum = (p | rs::reduce(rs::plus{}, 0.0))(x);
    const std::vector<double> out = y.to_host();

    double worst = 0, ref_sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double s = 1.5 * double(h[i]) + 0.5, ref = std::sqrt(s * s + 1.0);
      worst = std::fmax(worst, std::fabs(out[i] - ref) / ref);
      ref_sum += ref;
    }
    const double sum_error = std::fabs(sum - ref_sum) / ref_sum;
    std::printf("resident %s on %s: max relative error %.2e, sum relative error %.2e\n", rs::version(),
                d.name().c_str(), worst, sum_error);
    return worst < 1e-6 && sum_error < 1e-6 ? 0 : 1;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "cuda_consumer: %s\n", e.what());
    return 1;
  }
}
