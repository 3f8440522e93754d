// Stages chosen at run time: the seed's three functions as C++ text (read from the command line, a
// configuration file, ...), fused into ONE kernel compiled while the program runs. This file is built by
// the host compiler alone, also in CUDA builds: nvcc compiles nothing of it.
//
//   example_runtime_stages ["float f(float v) { return ...; }" ...]
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

int main(int argc, char** argv) {
  std::vector<std::string> stages = {"float func1(float v) { return 1.5f * v + 0.5f; }",
                                     "float func2(float v) { return sqrtf(v * v + 1.0f); }",
                                     "float func3(float v) { return 0.5f * sinf(v); }"};
  if (argc > 1) stages.assign(argv + 1, argv + argc);
  rs::jit::pipeline chain;
  for (const auto& s : stages) chain = chain | rs::jit::map(s);

  const rs::device d = rs::default_device();
  const std::size_t n = std::size_t(1) << 22;
  rs::array<float> x(n, d), y(n, d);
  rs::random::fill_uniform(x, 42);
  rs::scoped_ledger ledger(d);
  chain(x, y);  // compiled on first use (or loaded from the cache), then one kernel
  const float total = (chain | rs::jit::sum()).result<float>(x);
  const auto counts = ledger.delta();

  const auto hx = x.to_host(), hy = y.to_host();
  double worst = 0, ref_total = 0;
  for (std::size_t i = 0; i < n && argc == 1; ++i) {
    const double v = 1.5 * hx[i] + 0.5, r = 0.5 * std::sin(std::sqrt(v * v + 1.0));
    worst = std::fmax(worst, std::fabs(hy[i] - r));
    ref_total += r;
  }
  std::printf("%s\n%zu floats on %s: %llu kernels (map, sum), sum %.6g, max error against FP64 %.2e\n",
              chain.name().c_str(), n, d.name().c_str(), (unsigned long long)counts.kernels, double(total), worst);
  const bool ok = counts.kernels == 2 && worst < 1e-5 && std::fabs(total - ref_total) < 1e-4 * ref_total;
  return argc > 1 || ok ? 0 : 1;
}
