// Explicit transfers from several host threads at once: each thread moves data of its own (a value
// that names the thread, the round and the element), so a chunk staged through another thread's
// buffer, or a buffer refilled while the copy engine still reads it, shows as a wrong element. And a
// staging slot handed from one call to the next while the first's last chunk is still queued (on a
// stream held back by work ahead of it): the next call must wait for that copy before it refills the
// chunk's buffer.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "resident/detail/tuning.hpp"
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

using rs::detail::transfer_tuning;
static_assert(transfer_tuning::stage_bytes / 3 >= transfer_tuning::direct_below,
              "a third of a staging chunk is staged, not left to the driver");

// Elements of 4 bytes in one staging chunk (transfer_tuning::stage_bytes: 16 MiB). The CPU stages
// nothing (its copies are memcpy): sizes a sixteenth as large keep its run, under sanitizers too, short.
std::size_t chunk_elements(const rs::device& d) {
  return transfer_tuning::stage_bytes / sizeof(std::uint32_t) / (d.is_cpu() ? 16 : 1);
}

// Sizes spanning one, two and several staging chunks and a ragged tail.
std::size_t size_of_round(const rs::device& d, int t, int r) {
  const std::size_t chunk = chunk_elements(d);
  const std::size_t sizes[] = {chunk / 3, chunk + 17, 2 * chunk + 5, 3 * chunk - 1, 5 * chunk / 2};
  return sizes[std::size_t(t + r) % 5];
}

std::vector<std::uint32_t> tagged_vector(std::size_t n, int t, int r) {
  std::vector<std::uint32_t> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = tagged(t, r, i);
  return h;
}

// Work of a length measured once, queued on a stream ahead of what a test orders after it: copies back
// and forth between two device arrays of 512 MiB (each a fraction of a millisecond on a GPU; many of
// them for one hold, so queueing them costs far less than running them). Nothing is held on the CPU,
// whose copies run as they are called.
class hold_back {
 public:
  hold_back(const rs::device& d, rs::stream_ref s)
      : held_(d.is_cuda()), x_(held_ ? std::size_t(128) << 20 : 1, s), y_(x_.size(), s) {
    // Written before it is read (compute-sanitizer's initcheck runs these cases): a chunk's worth
    // uploaded, copied over x, and x over y.
    const std::size_t piece = std::min(x_.size(), chunk_elements(d));
    const std::vector<std::uint32_t> values = tagged_vector(piece, 31, 127);
    const auto seed = rs::to_device(std::span<const std::uint32_t>(values), s);
    for (std::size_t off = 0; off < x_.size(); off += piece) rs::copy(seed, x_.slice(off, std::min(piece, x_.size() - off)));
    rs::copy(x_, y_);
    if (!held_) return;
    rs::event a(d), b(d);
    a.record(s);
    for (int i = 0; i < 4; ++i) copy_once();
    b.record(s);
    per_copy_ms_ = std::max(1e-3, elapsed_ms(a, b) / 4);
  }
  /// Queues copies that run for about ms milliseconds (none for 0, none on the CPU).
  void queue(double ms) {
    if (!held_ || ms <= 0) return;
    const int copies = int(std::clamp(std::ceil(ms / per_copy_ms_), 1.0, 20000.0));
    for (int i = 0; i < copies; ++i) copy_once();
  }

 private:
  void copy_once() {
    flip_ = !flip_;
    if (flip_)
      rs::copy(x_, y_);
    else
      rs::copy(y_, x_);
  }
  bool held_;
  rs::array<std::uint32_t> x_, y_;
  double per_copy_ms_ = 1;
  bool flip_ = false;
};

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

// A staged upload returns once the host memory has been read, the copy of its last chunk perhaps still
// queued; its staging slot goes back to the device's set, and the next call, of any direction and on
// any stream, takes it (one thread here and nothing else staging: the set hands out the slot given back
// last). Before that call refills a buffer (an upload's host copy) or has the copy engine fill it (a
// download), it must wait for the copy that last read the buffer: the event the upload recorded for
// that buffer after the copy (src/backend/cuda/backend.cpp, staged_to_device's st->used(k, s)). Here the
// upload's stream is held back by copies queued ahead of it, so a one-chunk upload returns with its
// only copy still waiting for many milliseconds: a next call that waits on the wrong event writes the
// buffer first, and the upload's array receives the next call's bytes. Three-chunk uploads wait for
// their earlier chunks, and so for the work ahead; their last chunk's copy is queued as they return,
// with nothing held ahead of it. Every element of both calls is checked; each case checks, by the
// clocks, that the next call began while the upload's copies were still held back (retrying with a
// longer hold when it did not).
TEST_P(transfer_threads, a_slot_handed_over_waits_for_the_chunk_its_last_upload_still_sends) {
  const std::size_t chunk = chunk_elements(dev);
  rs::stream held(dev), next(dev);  // made first: they outlive the arrays ordered on them
  hold_back hold(dev, held.ref());
  struct handover {
    std::size_t first;  // elements of the upload whose last chunk is left queued
    bool held_back;     // its stream held back by work ahead (a one-chunk upload returns at once)
    bool downloads;     // the next call: a download of an array already on the device, else an upload
    std::size_t second; // elements of the next call (a first chunk at least as long as the upload's last)
  };
  const handover cases[] = {
      {chunk / 3, true, false, chunk},       // one chunk, a third full
      {chunk, true, false, 2 * chunk + 5},   // one full chunk
      {chunk / 2 + 3, true, true, chunk + 17},
      {3 * chunk - 1, false, false, chunk},  // three chunks, the last one element short of full
      {5 * chunk / 2, false, true, 2 * chunk},
  };
  for (std::size_t c = 0; c < std::size(cases); ++c) {
    const handover& h = cases[c];
    double hold_ms = h.held_back && dev.is_cuda() ? 25.0 : 0.0;
    for (int attempt = 0;; ++attempt) {
      const int r = int(c) * 4 + attempt;  // the values of this attempt's two calls: tags 1 and 2, round r
      SCOPED_TRACE("case " + std::to_string(c) + " (" + std::to_string(h.first) + " elements, then " +
                   (h.downloads ? "a download" : "an upload") + " of " + std::to_string(h.second) + "), attempt " +
                   std::to_string(attempt) + ", held back " + std::to_string(hold_ms) + " ms");
      std::vector<std::uint32_t> first = tagged_vector(h.first, 1, r), second = tagged_vector(h.second, 2, r);
      std::vector<std::uint32_t> second_back;
      rs::array<std::uint32_t> b;
      if (h.downloads) {
        b = rs::to_device(std::span<const std::uint32_t>(second), next.ref());
        second_back.assign(h.second, 0xFFFFFFFFu);
      }
      held.synchronize();
      next.synchronize();
      rs::event held_from(dev), held_to(dev);
      const auto t0 = std::chrono::steady_clock::now();
      held_from.record(held.ref());
      hold.queue(hold_ms);
      held_to.record(held.ref());
      rs::array<std::uint32_t> a = rs::to_device(std::span<const std::uint32_t>(first), held.ref());
      std::memset(first.data(), 0, first.size() * sizeof(std::uint32_t));  // the call returned: first may be rewritten
      const auto t_next = std::chrono::steady_clock::now();
      if (h.downloads)
        b.to_host(std::span<std::uint32_t>(second_back));
      else
        b = rs::to_device(std::span<const std::uint32_t>(second), next.ref());
      const double held_for = elapsed_ms(held_from, held_to);
      const double next_began = std::chrono::duration<double, std::milli>(t_next - t0).count();
      const mismatch ma = compare(a.to_host(), 1, r);
      EXPECT_EQ(ma.count, 0u) << "the upload's array holds " << ma.count << " wrong elements, the first at " << ma.first
                              << " (its last chunk's buffer refilled by the next call before the copy read it?)";
      const mismatch mb = compare(h.downloads ? second_back : b.to_host(), 2, r);
      EXPECT_EQ(mb.count, 0u) << "the next call's data has " << mb.count << " wrong elements, the first at " << mb.first;
      if (ma.count || mb.count || hold_ms == 0 || next_began < held_for / 2) break;
      // The upload's copy was not held back past the next call's start: the case proved nothing.
      ASSERT_LT(attempt, 3) << "the next call began " << next_began << " ms after the hold, which lasted " << held_for
                            << " ms: it never began while the upload's copy was held back";
      hold_ms *= 4;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(backends, transfer_threads, ::testing::Values("cpu", "cuda"), rs::test::backend_name);
