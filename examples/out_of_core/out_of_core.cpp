// Out of core: host data four times larger than the device pool may hold, streamed through the seed
// pipeline in chunks. Each chunk goes up on one stream, through the fused kernel on a second and down
// on a third, so while chunk k is computed, chunk k + 1 is uploaded and chunk k - 1 downloaded. The
// per-chunk times on each stream show the overlap; a text timeline draws it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

RESIDENT_HD float f1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD float f2(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD float f3(float v) { return 0.5f * sinf(v); }
double reference(double v) { return 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)); }

// One lane of the timeline: '#' where the stream was busy with a chunk, the chunk's last digit at its start.
std::string lane(const std::vector<rs::chunk_timing>& t, double end_ms, int width, double rs::chunk_timing::*begin,
                 double rs::chunk_timing::*end) {
  std::string s(std::size_t(width), '.');
  for (const auto& c : t) {
    const int a = std::clamp(int(c.*begin / end_ms * width), 0, width - 1);
    const int b = std::clamp(int(c.*end / end_ms * width), a, width - 1);
    for (int i = a; i <= b; ++i) s[std::size_t(i)] = '#';
    s[std::size_t(a)] = char('0' + c.index % 10);
  }
  return s;
}

int main() {
  try {
    const rs::device d = rs::default_device();
    const bool quick = std::getenv("RESIDENT_GUIDE_QUICK") && std::string(std::getenv("RESIDENT_GUIDE_QUICK")) == "1";
    // The pool may hold a quarter of the data: 256 MiB of 1 GiB on a GPU, 4 MiB of 16 MiB on the CPU.
    const std::size_t limit = d.is_cuda() && !quick ? std::size_t(256) << 20 : std::size_t(4) << 20;
    const std::size_t n = 4 * limit / sizeof(float);
    rs::synchronize(d);
    rs::trim_pool(d);
    if (rs::pool_stats(d).bytes_in_use > limit / 2) {
      std::printf("the pool already holds more than this example would allow itself; nothing to show\n");
      return 0;
    }
    const std::size_t cap = rs::pool_stats(d).bytes_in_use + limit;
    rs::set_pool_limit(d, cap);

    // Page-locked host memory: the copies run at the bus rate and need no staging.
    rs::pinned_buffer<float> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = float(i % 4093) / 4093.f;
    std::fill(out.begin(), out.end(), -1234.5f);

    const auto seed = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
    std::vector<rs::chunk_timing> t;
    // The chunk is left to the call: it sizes it so that three in flight fit under the pool's limit.
    rs::out_of_core_options o{.chunk_elements = 0, .depth = 3, .target = d, .timeline = &t};
    rs::out_of_core(seed, in, out, o);  // warm-up: staging, streams
    rs::reset_pool_peak(d);
    rs::scoped_ledger l(d);
    const rs::out_of_core_summary s = rs::out_of_core(seed, in, out, o);
    const rs::ledger_counts c = l.delta();

    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(out[i]) - reference(in[i])));
    // No more chunks are in flight than there are (the CPU reads the host data in place: one chunk).
    std::printf("%s: %s of host data through a pool capped at %s, in %zu chunk%s of %s, %zu in flight%s\n",
                d.name().c_str(), rs::detail::format_bytes(double(n * sizeof(float))).c_str(),
                rs::detail::format_bytes(double(limit)).c_str(), s.chunks, s.chunks == 1 ? "" : "s",
                rs::detail::format_bytes(double(s.chunk_elements * sizeof(float))).c_str(),
                std::min(std::size_t(s.depth), s.chunks), d.is_cpu() ? " (the CPU stages nothing)" : "");
    std::printf("\n  chunk   upload (ms)        kernel (ms)        download (ms)\n");
    for (const auto& k : t)
      std::printf("  %5zu   %7.3f-%7.3f    %7.3f-%7.3f    %7.3f-%7.3f\n", k.index, k.upload_begin_ms, k.upload_end_ms,
                  k.kernel_begin_ms, k.kernel_end_ms, k.download_begin_ms, k.download_end_ms);
    const double end = std::max(t.back().download_end_ms, 1e-9);
    double busy = 0;
    for (const auto& k : t)
      busy += (k.upload_end_ms - k.upload_begin_ms) + (k.kernel_end_ms - k.kernel_begin_ms) +
              (k.download_end_ms - k.download_begin_ms);
    std::printf("\n  timeline, %.3f ms across (a digit marks where a chunk starts on that stream):\n", end);
    std::printf("  upload   %s\n", lane(t, end, 72, &rs::chunk_timing::upload_begin_ms, &rs::chunk_timing::upload_end_ms).c_str());
    std::printf("  kernel   %s\n", lane(t, end, 72, &rs::chunk_timing::kernel_begin_ms, &rs::chunk_timing::kernel_end_ms).c_str());
    std::printf("  download %s\n", lane(t, end, 72, &rs::chunk_timing::download_begin_ms, &rs::chunk_timing::download_end_ms).c_str());
    std::printf("\n  the streams were busy %.2fx the wall time (1 = no overlap, up to 3)%s\n", busy / end,
                d.is_cpu() ? "; the CPU runs the stages one after another" : "");
    std::printf("  peak pool bytes %s (limit %s); ledger: %s\n", rs::detail::format_bytes(double(c.peak_bytes)).c_str(),
                rs::detail::format_bytes(double(cap)).c_str(), c.summary().c_str());
    rs::clear_pool_limit(d);
    const bool ok = worst <= 1e-5 && c.stream_chunks == s.chunks && c.streamed_h2d_bytes == n * sizeof(float) &&
                    c.peak_bytes <= cap;
    std::printf("  largest difference from the FP64 reference: %.2e%s\n", worst, ok ? "" : "  FAILED");
    return ok ? 0 : 1;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "out_of_core: %s\n", e.what());
    return 1;
  }
}
