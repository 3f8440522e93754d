// The CPU pool returns what it caches beyond its release threshold (host_pool_release_threshold) and on
// trim_pool: after a peak of many sizes, the bytes it holds fall back.
#include <vector>

#include "resident/resident.hpp"
#include "support.hpp"

namespace rs = resident;

namespace {

TEST(cpu_pool_release, held_bytes_fall_back_after_a_peak_of_many_sizes) {
  const rs::device d = rs::device::cpu();
  rs::trim_pool(d);
  const std::size_t base = rs::pool_stats(d).bytes_reserved;
  std::size_t largest = 0;
  for (int round = 0; round < 3; ++round) {
    // A soak: 160 arrays of distinct sizes (about 1 MiB each, 160 MiB together) alive at once, then freed.
    {
      std::vector<rs::array<float>> live;
      for (std::size_t i = 0; i < 160; ++i) {
        const std::size_t n = (std::size_t(1) << 18) + 1024 * (i + 160 * std::size_t(round));
        largest = std::max(largest, n * sizeof(float) + 4096);
        live.emplace_back(n, d);
      }
      EXPECT_GE(rs::pool_stats(d).bytes_reserved, base + 160 * (std::size_t(1) << 20));
    }
    const std::size_t held = rs::pool_stats(d).bytes_reserved;
    EXPECT_LE(held, base + rs::host_pool_release_threshold + largest)
        << "round " << round << ": the pool kept " << held << " bytes after the peak";
  }
  // The block freed last stays: a large array made and freed in a loop is still served from the cache
  // (where the pool caches at all: the debug preset runs with RESIDENT_POOL_CACHING=0).
  const auto hits = rs::pool_stats(d).pool_hits;
  for (int i = 0; i < 4; ++i) rs::array<float> big(std::size_t(100) << 20 >> 2, d);  // 100 MiB each time
  if (rs::pool_caching(d)) {
    EXPECT_GE(rs::pool_stats(d).pool_hits, hits + 3);
  }
  rs::trim_pool(d);
  EXPECT_EQ(rs::pool_stats(d).bytes_reserved, base);
}

}  // namespace
