// Launch configuration: the same bandwidth-bound kernel (y = 2x + y over n floats, grid-stride loop)
// launched with every block size from 32 to 1024 threads, each with two grids: one thread per element
// ("cover"), and one full wave of blocks that loop over the data ("wave": as many blocks as fit on the
// device at once). The configuration the occupancy API chooses (for_each_config) is marked.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "guide.hpp"

namespace rs = resident;

struct axpy {
  rs::array_view<float> x, y;
  RESIDENT_HD void operator()(rs::thread_index t) const {
    for (std::size_t i = t.global_x(); i < y.size(); i += t.grid_stride()) y[i] = 2.f * x[i] + y[i];
  }
};
struct axpy_item {
  rs::array_view<float> x, y;
  RESIDENT_HD void operator()(std::size_t i) const { y[i] = 2.f * x[i] + y[i]; }
};

int main() {
  try {
    const rs::device d = rs::default_device();
    const rs::stream_ref s = rs::default_stream(d);
    const std::size_t n = guide::elements(d, std::size_t(1) << 26, std::size_t(1) << 20);
    auto x = guide::random_array(n, d, guide::fresh_seed());
    auto y = guide::random_array(n, d, guide::fresh_seed());
    const auto props = rs::properties(d);
    const unsigned sms = unsigned(props.multiprocessors);
    guide::report r("launch_config", d);
    auto rate = [&](double ms) {
      char b[32];
      std::snprintf(b, sizeof b, "%.1f GB/s", 3.0 * double(n) * sizeof(float) / (ms * 1e-3) / 1e9);
      return std::string(b);
    };
    const auto chosen = rs::for_each_config(s, n, axpy_item{x.view(), y.view()});
    const double auto_ms = r.time(s, [&] { rs::for_each_index(s, n, axpy_item{x.view(), y.view()}); });
    r.add("occupancy-chosen " + chosen.str(), auto_ms, rate(auto_ms) + "  <- for_each_index");
    for (unsigned block = 32; block <= 1024; block *= 2) {
      const unsigned cover = unsigned((n + block - 1) / block);
      // A wave: as many blocks as the device holds at once (a limit on threads and on blocks per SM).
      const unsigned wave = sms * std::max(1u, std::min(unsigned(props.max_threads_per_multiprocessor) / block,
                                                        unsigned(props.max_blocks_per_multiprocessor)));
      for (unsigned grid : {cover, std::min(wave, cover)}) {
        const double ms = r.time(s, [&] { rs::launch(s, {rs::dims(grid), rs::dims(block)}, axpy{x.view(), y.view()}); });
        r.add("block " + std::to_string(block) + (grid == cover ? ", cover" : ", wave") + " (grid " +
                  std::to_string(grid) + ")",
              ms, rate(ms));
      }
    }
    // y changed on every run: check the kernel's arithmetic once more against FP64 on fresh data.
    const auto hx = x.to_host(), hy = y.to_host();
    rs::for_each_index(s, n, axpy_item{x.view(), y.view()});
    const auto got = y.to_host();
    for (std::size_t i = 0; i < n; i += 131)
      if (std::abs(double(got[i]) - (2.0 * hx[i] + hy[i])) > 1e-5 * (1 + std::abs(double(hy[i])))) {
        std::fprintf(stderr, "launch_config: element %zu is wrong\n", i);
        return 1;
      }
    r.print("y = 2x + y over " + std::to_string(n) + " floats, block and grid sizes",
            "small blocks cap the threads an SM can hold (at most 32 blocks each on Hopper), so too few loads are in "
            "flight to cover memory latency; past that, any block size that fills the SMs runs at the "
            "memory's speed, and the occupancy API finds one without a sweep.",
            "on the CPU backend each block runs on one OpenMP thread and its threads one after another, so "
            "many tiny blocks cost scheduling and few large ones leave cores idle.");
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "launch_config: %s\n", e.what());
    return 1;
  }
}
