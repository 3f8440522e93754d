// Asynchronous copies overlap with kernels: host data is processed in chunks, each on its own stream:
// upload chunk k, transform it, download it, while the copy engines move the other chunks. From
// page-locked (pinned) host memory the copies are asynchronous; the serial version does the three
// steps one after another for the whole array. Timed on the wall clock, host to host.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "guide.hpp"

namespace rs = resident;

// Enough arithmetic per element that the kernel takes a share of the time next to the copies.
RESIDENT_HD inline float work(float v) {
  for (int k = 0; k < 24; ++k) v = sqrtf(v * v + 1.f) * 0.5f;
  return v;
}

template <class F>
double wall_ms(F&& f, int reps) {
  std::vector<double> t;
  f();  // warm-up
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  try {
    const rs::device d = rs::default_device();
    const std::size_t n = guide::elements(d, std::size_t(1) << 26, std::size_t(1) << 20);
    const std::size_t chunks = 8, nstreams = 4, per = n / chunks;
    rs::pinned_buffer<float> in(n), out(n);
    {
      auto r = guide::random_array(n, d, guide::fresh_seed());
      r.to_host(in.span());
    }
    rs::array<float> buf(n, d);
    std::vector<rs::stream> streams;
    for (std::size_t k = 0; k < nstreams; ++k) {
      streams.emplace_back(d);
      streams.back().ref().wait_for(buf.stream());  // buf's allocation is ordered on its own stream
    }
    const auto f = rs::map([] RESIDENT_HD(float v) { return work(v); });
    const int reps = guide::quick() ? 1 : d.is_cuda() ? 9 : 3;

    auto serial = [&] {
      auto all = rs::array_ref<float>(buf.data(), n, streams[0].ref());
      rs::copy_async(in.span(), all);
      f(all);
      rs::copy_async(all, out.span());
      streams[0].synchronize();
    };
    auto overlapped = [&] {
      for (std::size_t c = 0; c < chunks; ++c) {
        auto part = rs::array_ref<float>(buf.data() + c * per, per, streams[c % nstreams].ref());
        rs::copy_async(std::span<const float>(in.data() + c * per, per), part);
        f(part);
        rs::copy_async(part, std::span<float>(out.data() + c * per, per));
      }
      for (auto& s : streams) s.synchronize();
    };
    auto check = [&](const char* what) {
      for (std::size_t i = 0; i < n; i += 997) {
        double v = in[i];
        for (int k = 0; k < 24; ++k) v = std::sqrt(v * v + 1.0) * 0.5;
        if (std::abs(out[i] - v) > 1e-5) {
          std::fprintf(stderr, "async_overlap: %s: element %zu is %g, FP64 says %g\n", what, i, double(out[i]), v);
          std::exit(1);
        }
      }
    };
    guide::report r("async_overlap", d);
    std::fill(out.begin(), out.end(), std::nanf(""));
    const double s_ms = wall_ms(serial, reps);
    check("serial");
    r.add("serial: upload, kernel, download", s_ms, "one stream, whole array");
    std::fill(out.begin(), out.end(), std::nanf(""));
    const double o_ms = wall_ms(overlapped, reps);
    check("overlapped");
    r.add("8 chunks on 4 streams", o_ms, "copies of one chunk overlap kernels and copies of others");
    r.print("Upload, transform and download " + std::to_string(n * sizeof(float) >> 20) + " MiB of pinned host memory",
            "one copy engine uploads while the other downloads and the SMs compute, so the chunked version "
            "takes about as long as its slowest part instead of the sum of all three.",
            "on the CPU backend copies are memcpy on the calling thread, so there is nothing to overlap.");
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "async_overlap: %s\n", e.what());
    return 1;
  }
}
