// Coalescing: the 32 threads of a warp should touch neighbouring addresses, so that one memory
// transaction serves them all. Every variant here reads the same n floats once and writes n floats;
// only the order of the reads changes. Thread i reads element (i % rows) * stride + i / rows, so
// neighbouring threads read `stride` elements apart (stride 1 is the plain, coalesced copy).
#include <cmath>
#include <cstdio>

#include "guide.hpp"

namespace rs = resident;

struct strided_read {
  rs::array_view<float> in, out;
  std::size_t stride, rows;  // rows = n / stride: a permutation of [0, n)
  RESIDENT_HD void operator()(std::size_t i) const { out[i] = 2.f * in[(i % rows) * stride + i / rows]; }
};

int main() {
  try {
    const rs::device d = rs::default_device();
    const rs::stream_ref s = rs::default_stream(d);
    const std::size_t n = guide::elements(d, std::size_t(1) << 26, std::size_t(1) << 22);
    auto in = guide::random_array(n, d, guide::fresh_seed());
    rs::array<float> out(n, d);
    const auto h = in.to_host();
    guide::report r("coalescing", d);
    for (std::size_t stride : {1, 2, 8, 32}) {
      const strided_read f{in.view(), out.view(), stride, n / stride};
      rs::map([] RESIDENT_HD(float) { return std::nanf(""); })(out);  // poisoned before the run
      const double ms = r.time(s, [&] { rs::for_each_index(s, n, f); });
      const auto got = out.to_host();
      for (std::size_t i = 0; i < n; i += 997)
        if (got[i] != 2.f * h[(i % (n / stride)) * stride + i / (n / stride)]) {
          std::fprintf(stderr, "coalescing: wrong value at %zu for stride %zu\n", i, stride);
          return 1;
        }
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f GB/s", 2.0 * double(n) * sizeof(float) / (ms * 1e-3) / 1e9);
      r.add("stride " + std::to_string(stride), ms, rate);
    }
    r.print("Reading the same " + std::to_string(n * sizeof(float) >> 20) + " MiB in different orders",
            "with stride 32 every thread of a warp needs its own 32-byte sector, so the memory system moves up "
            "to 8x the bytes the program uses; with stride 1 a warp's 128 bytes come in four sectors.",
            "a CPU core reads whole 64-byte cache lines too, but its caches and prefetchers keep "
            "several strided streams going, so the order matters less there.");
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "coalescing: %s\n", e.what());
    return 1;
  }
}
