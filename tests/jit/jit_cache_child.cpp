// A second process for the disk-cache tests: runs one run-time stage (its constant from argv[1]) on the
// device argv[2] (cpu by default), checks every value, and prints what the cache did.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

int main(int argc, char** argv) {
  try {
    const std::string c = argc > 1 ? argv[1] : "1";
    const rs::device d = rs::parse_device(argc > 2 ? argv[2] : "cpu");
    const std::size_t n = 10000;
    rs::array<float> y = rs::to_device(std::vector<float>(n, 2.f), d);
    rs::jit::map("float k(float v) { return v * 3.0f + " + c + ".0f; }")(y);
    for (float v : y.to_host())
      if (v != 6.f + std::stof(c)) {
        std::printf("wrong value %g\n", double(v));
        return 1;
      }
    const auto s = rs::jit::stats();
    std::printf("ok compiled=%llu disk=%llu rejected=%llu\n", (unsigned long long)s.compiled,
                (unsigned long long)s.disk_loads, (unsigned long long)s.rejected);
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
