// Shared by the guide's examples: time each variant the honest way (warm-up, events, median), print
// the comparison as an aligned table with the ratio to the first variant, and append the rows as JSON
// lines to the file named by RESIDENT_GUIDE_OUT, which `resident bench guide` reads.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "resident/resident.hpp"

namespace guide {

namespace rs = resident;

/// RESIDENT_GUIDE_QUICK=1: small sizes and one timed run (for the examples under compute-sanitizer).
inline bool quick() {
  const char* q = std::getenv("RESIDENT_GUIDE_QUICK");
  return q && std::string(q) == "1";
}

/// The element count for d: large enough on a GPU to measure the device rather than the launch.
inline std::size_t elements(rs::device d, std::size_t gpu, std::size_t cpu) { return d.is_cuda() && !quick() ? gpu : cpu; }

class report {
 public:
  report(std::string example, rs::device d) : example_(std::move(example)), d_(d) {}

  /// Median milliseconds of f() issued on s (events around each run after a warm-up).
  template <class F>
  double time(rs::stream_ref s, F&& f) const {
    if (quick()) return rs::time_region(s, 1, 0, f).median();
    return rs::time_region(s, d_.is_cuda() ? 20 : 3, 2, f).median();
  }
  /// Records a variant; the first one is the baseline of the ratios.
  void add(std::string variant, double ms, std::string note = "") { rows_.push_back({std::move(variant), ms, std::move(note)}); }

  /// Prints the table with each variant's time over the first one's, and the reason in one line (the
  /// GPU's or the CPU backend's, whichever ran).
  void print(const std::string& what, const std::string& why_gpu, const std::string& why_cpu) const {
    const std::string& why = d_.is_cuda() ? why_gpu : why_cpu;
    std::size_t w = 7;
    for (const auto& r : rows_) w = std::max(w, r.variant.size());
    std::printf("%s on %s\n  %-*s  %10s  %14s  %s\n", what.c_str(), d_.name().c_str(), int(w), "variant", "time (ms)",
                "vs first (x)", "note");
    for (const auto& r : rows_)
      std::printf("  %-*s  %10.4f  %14.2f  %s\n", int(w), r.variant.c_str(), r.ms, r.ms / rows_.front().ms,
                  r.note.c_str());
    std::printf("Why: %s\n", why.c_str());
    if (const char* out = std::getenv("RESIDENT_GUIDE_OUT"); out && *out) {
      // Appended to a regular file of this user's only: never through a link, never waiting on a FIFO.
      const int fd = ::open(out, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
      struct stat st {};
      const bool ours = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid();
      if (!ours) std::fprintf(stderr, "RESIDENT_GUIDE_OUT=%s is not a regular file of this user's; rows not written\n", out);
      if (fd >= 0 && !ours) ::close(fd);
      if (FILE* f = ours ? ::fdopen(fd, "a") : nullptr) {
        for (const auto& r : rows_)
          std::fprintf(f, "{\"example\":\"%s\",\"device\":\"%s\",\"variant\":\"%s\",\"ms\":%.6g,\"ratio\":%.6g}\n",
                       example_.c_str(), d_.name().c_str(), r.variant.c_str(), r.ms, r.ms / rows_.front().ms);
        std::fclose(f);
      }
    }
  }

 private:
  struct row {
    std::string variant;
    double ms;
    std::string note;
  };
  std::string example_;
  rs::device d_;
  std::vector<row> rows_;
};

/// Fresh random floats in [-1, 1) on d, generated in place (counter-based, a new seed each run).
inline rs::array<float> random_array(std::size_t n, rs::device d, std::uint64_t seed) {
  rs::array<float> a(n, d);
  rs::random::fill_uniform(a, seed, 0, -1.f, 1.f);
  return a;
}

/// A seed that differs between runs.
inline std::uint64_t fresh_seed() { return std::uint64_t(std::random_device{}()) << 32 | std::random_device{}(); }

}  // namespace guide
