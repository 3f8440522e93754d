// The seed document's question, in resident. Its user wrote
//
//   data = func1(data); data = func2(data); data = func3(data)
//
// and every call copied the data to the GPU and back. Here the three functions stay separate and
// readable, the data is uploaded once, the three fuse into ONE kernel, and the data comes back once.
// The ledger shows what crossed the bus.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

RESIDENT_HD float func1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD float func2(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD float func3(float v) { return 0.5f * sinf(v); }

int main() {
  try {
    const std::size_t n = std::size_t(1) << 22;
    std::vector<float> host(n);
    std::mt19937 g(std::random_device{}());
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (auto& v : host) v = u(g);
    const std::vector<float> input = host;

    rs::array<float> data = rs::to_device(host);                   // one explicit upload
    auto master = rs::map<func1>() | rs::map<func2>() | rs::map<func3>();
    {
      rs::scoped_transfer_policy nothing_moves(rs::transfer_policy::forbid);
      master(data);                                                // ONE kernel, in place
    }
    host = data.to_host();                                         // one explicit download

    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      double x = input[i], ref = 0.5 * std::sin(std::sqrt((1.5 * x + 0.5) * (1.5 * x + 0.5) + 1.0));
      worst = std::max(worst, std::abs(host[i] - ref));
    }
    std::cout << "n = " << n << " on " << data.device().name() << ", max |error| vs FP64 = " << worst << "\n"
              << rs::ledger();
    return worst < 1e-6 ? 0 : 1;
  } catch (const rs::error& e) {
    std::cerr << "seed_pipeline: " << e.what() << "\n";
    return 1;
  }
}
