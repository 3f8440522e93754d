#pragma once
// What the edge-case tests of the fused pipelines share (test_pipeline_edges*.cpp): the lengths they
// try, exactly representable data, poisoned arrays and the check that nothing outside a window changed.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "resident/fuse/pipeline.hpp"
#include "support.hpp"

namespace resident::test::edges {

// Lengths around vector and tile boundaries, and around the CPU's serial / piece thresholds.
inline std::vector<std::size_t> edge_lengths() {
  std::vector<std::size_t> n{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33};
  for (int k : {6, 10, 15, 16, 17})
    for (std::size_t d : {std::size_t(0), std::size_t(1), std::size_t(2)}) {
      n.push_back((std::size_t(1) << k) - d);
      n.push_back((std::size_t(1) << k) + d);
    }
  return n;
}

// Exactly representable values (multiples of 1/4 in [-64, 64)): sums and small products are exact.
template <class T>
std::vector<T> quarters(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(double(std::int64_t(g() % 512) - 256) / 4.0);
  return v;
}

// An array of n + 8 poisoned elements: slices of it at offsets 0..3 are misaligned in turn.
template <class T>
resident::array<T> poisoned(std::size_t n, resident::device dev) {
  return resident::to_device(std::vector<T>(n + 8, resident::test::poison<T>()), dev);
}

// Checks got[off, off + n) against want and that nothing else of got changed from the poison.
template <class T, class F>
void expect_window(const std::vector<T>& got, std::size_t off, std::size_t n, F want, const std::string& what) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i < off || i >= off + n) {
      ASSERT_EQ(got[i], resident::test::poison<T>()) << what << ": written outside the window at " << i;
    } else {
      ASSERT_TRUE(want(i - off, got[i])) << what << ": element " << i - off << " is " << double(got[i]);
    }
  }
}

}  // namespace resident::test::edges
