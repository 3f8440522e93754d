// Uses the installed library: a fused pipeline and a reduction on the CPU, checked exactly.
#include <resident/resident.hpp>

#include <cstdio>
#include <vector>

namespace rs = resident;

int main() {
  std::vector<double> h(1000);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = double(i);
  auto x = rs::to_device(h, rs::device::cpu());
  (rs::map([](double v) { return 2 * v; }) | rs::map([](double v) { return v + 1; }))(x);
  double s = rs::reduce(rs::plus{}, 0.0)(x);
  std::printf("resident %s: sum = %.0f (expected 1000000)\n", rs::version(), s);
  return s == 1000000.0 ? 0 : 1;
}
