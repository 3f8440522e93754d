// Explicit transfers from several host threads at once: each thread moves data of its own (a value
// that names the thread, the round and the element), so a chunk staged through another thread's
// buffer, or a buffer refilled while the copy engine still reads it, shows as a wrong element.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace rs = resident;

namespace {

class transfer_threads : public rs::test::backend {};

// The value of element i of thread t's round r: distinct across threads, rounds and elements, exact in
// float up to 2^24 per field product, so any mix-up is visible.
std::uint32_t tagged(int t, int r, std::size_t i) {
  return (std::uint32_t(t) << 27) ^ (std::uint32_t(r) << 20) ^ std::uint32_t(i * 2654435761u);
}

struct mismatch {
  std::size_t first = 0, count = 0;
};

mismatch compare(const std::vector<std::uint32_t>& got, int t, int r) {
  mismatch m;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != tagged(t, r, i)) {
      if (m.count++ == 0) m.first = i;
    }
  return m;
}

// Sizes spanning one, two and several staging chunks (16 MiB of bytes each) and a ragged tail. The CPU
// stages nothing (its copies are memcpy): sizes a sixteenth as large keep its run, under sanitizers too, short.
std::size_t size_of_round(const rs::device& d, int t, int r) {
  const std::size_t chunk = (std::size_t(16) << 20 >> 2) / (d.is_cpu() ? 16 : 1);  // elements of 4 bytes
  const std::size_t sizes[] = {chunk / 3, chunk + 17, 2 * chunk + 5, 3 * chunk - 1, 5 * chunk / 2};
  return sizes[std::size_t(t + r) % 5];
}

}  // namespace

// Every thread uploads its own pageable data and downloads it on its own stream, again and again, with
// uploads of other threads left in flight between: every element must come back as it was sent.
TEST_P(transfer_threads, staged_round_trips_return_each_threads_own_data) {
  const int threads = 8, rounds = 6;
  std::atomic<std::size_t> wrong_rounds{0}, wrong_elements{0};
  std::atomic<std::uint64_t> h2d{0}, d2h{0};
  std::vector<std::string> first_error(threads);
  rs::scoped_ledger l(dev);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        rs::stream s(dev);
        for (int r = 0; r < rounds; ++r) {
          const std::size_t n = size_of_round(dev, t, r);
          std::vector<std::uint32_t> h(n);
          for (std::size_t i = 0; i < n; ++i) h[i] = tagged(t, r, i);
          rs::array<std::uint32_t> a = rs::to_device(std::span<const std::uint32_t>(h), s.ref());
          h2d += n * sizeof(std::uint32_t);
          std::vector<std::uint32_t> back(n, 0xFFFFFFFFu);
          a.to_host(std::span<std::uint32_t>(back));
          d2h += n * sizeof(std::uint32_t);
          const mismatch m = compare(back, t, r);
          if (m.count) {
            ++wrong_rounds;
            wrong_elements += m.count;
          }
        }
      } catch (const std::exception& e) {
        first_error[std::size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(first_error[std::size_t(t)], "") << "thread " << t;
  EXPECT_EQ(wrong_rounds.load(), 0u) << wrong_elements.load() << " elements came back as other bytes";
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes, h2d.load());
  EXPECT_EQ(d.d2h_bytes, d2h.load());
}

// Uploads alone from several threads, each checked afterwards on the device's own copy of the data:
// an upload whose staging buffer another thread refilled before the copy engine read it is caught.
TEST_P(transfer_threads, staged_uploads_then_downloads_in_separate_phases) {
  const int threads = 6;
  std::vector<rs::stream> streams;
  for (int t = 0; t < threads; ++t) streams.emplace_back(dev);  // they outlive the arrays ordered on them
  std::vector<rs::array<std::uint32_t>> arrays(threads);
  std::vector<std::thread> pool;
  std::vector<std::string> first_error(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        rs::stream& s = streams[std::size_t(t)];
        const std::size_t n = size_of_round(dev, t, 1);
        std::vector<std::uint32_t> h(n);
        for (std::size_t i = 0; i < n; ++i) h[i] = tagged(t, 1, i);
        arrays[std::size_t(t)] = rs::to_device(std::span<const std::uint32_t>(h), s.ref());
        std::memset(h.data(), 0, n * sizeof(std::uint32_t));  // the call returned: h may be rewritten
        s.synchronize();
      } catch (const std::exception& e) {
        first_error[std::size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  pool.clear();
  for (int t = 0; t < threads; ++t) ASSERT_EQ(first_error[std::size_t(t)], "") << "thread " << t;
  std::atomic<int> wrong{0};
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<std::uint32_t> back = arrays[std::size_t(t)].to_host();
      if (compare(back, t, 1).count) ++wrong;
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong.load(), 0);
  arrays.clear();
}

INSTANTIATE_TEST_SUITE_P(backends, transfer_threads, ::testing::Values("cpu", "cuda"), rs::test::backend_name);
