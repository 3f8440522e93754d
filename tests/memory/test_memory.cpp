// Arrays: round trips, 2-D and padded arrays, slices, pinned buffers, and the calls refused before any work.
#include <cstring>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>

#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using arrays = backend;

TEST_P(arrays, round_trip_sizes) {
  // The last two: host copies past 4 MiB go in MiB pieces over threads, the second with a short last piece.
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000003),
                        std::size_t(5) << 20, (std::size_t(5) << 20) + 3}) {
    std::uint64_t seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto host = rs::test::random_vector<float>(n, seed);
    rs::array<float> a = rs::to_device(host, dev);
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a.device(), dev);
    std::vector<float> back(n, rs::test::poison<float>());
    a.to_host(std::span<float>(back));
    EXPECT_EQ(back, host);
  }
}

TEST_P(arrays, other_types_and_copies) {
  auto seed = rs::test::fresh_seed();
  auto h = rs::test::random_vector<double>(4097, seed, -1e6, 1e6);
  auto a = rs::to_device(h, dev);
  rs::array<double> b(h.size(), dev);
  rs::copy(a, b);
  EXPECT_EQ(b.to_host(), h);
  auto c = rs::copy_to(a, rs::device::cpu());
  EXPECT_EQ(c.to_host(), h);
  auto d = rs::copy_to(c, dev);
  EXPECT_EQ(d.to_host(), h);

  std::vector<std::int32_t> ints(999);
  std::iota(ints.begin(), ints.end(), -500);
  EXPECT_EQ(rs::to_device(ints, dev).to_host(), ints);
}

TEST_P(arrays, pinned_async_download) {
  auto h = rs::test::random_vector<float>(3 << 20, rs::test::fresh_seed());
  rs::pinned_buffer<float> up(h.size());
  std::copy(h.begin(), h.end(), up.begin());
  rs::stream s(dev);
  {
    auto a = rs::to_device(up, s.ref());
    rs::pinned_buffer<float> down(h.size());
    std::fill(down.begin(), down.end(), rs::test::poison<float>());
    a.to_host_async(down);
    s.synchronize();
    EXPECT_TRUE(std::equal(h.begin(), h.end(), down.begin()));
    EXPECT_EQ(down.page_locked(), dev.is_cuda() || rs::cuda_device_count() > 0);
  }
  s.synchronize();
}

TEST_P(arrays, two_dimensional_with_leading_dimension) {
  const std::size_t rows = 37, cols = 53;
  auto h = rs::test::random_vector<float>(rows * cols, rs::test::fresh_seed());
  auto a = rs::to_device(std::span<const float>(h), rows, cols, dev);
  EXPECT_EQ(a.rows(), rows);
  EXPECT_EQ(a.cols(), cols);
  EXPECT_EQ(a.ld(), cols);
  EXPECT_EQ(a.to_host(), h);

  rs::array2d<float> p(rows, cols, dev, 64);
  EXPECT_EQ(p.ld(), 64u);
  EXPECT_EQ(p.storage().size(), rows * 64);
  auto view = p.view();
  EXPECT_EQ(view.rows(), rows);
  EXPECT_EQ(view.ld(), 64u);
  EXPECT_THROW(rs::array2d<float>(3, 10, dev, 9), rs::invalid_argument);
  EXPECT_THROW(rs::to_device(std::span<const float>(h), rows + 1, cols, dev), rs::shape_mismatch);
}

TEST_P(arrays, moved_from_and_bad_sizes_throw) {
  auto a = rs::to_device(std::vector<float>{1.f, 2.f, 3.f}, dev);
  rs::array<float> b = std::move(a);
  EXPECT_THROW(a.view(), rs::invalid_argument);
  EXPECT_THROW(a.to_host(), rs::invalid_argument);
  std::vector<float> small(2);
  EXPECT_THROW(b.to_host(std::span<float>(small)), rs::shape_mismatch);
  rs::array<float> c(4, dev);
  EXPECT_THROW(rs::copy(b, c), rs::shape_mismatch);
  EXPECT_THROW(rs::array<double>(rs::array<double>::max_size() + 1, dev), rs::invalid_argument);
  try {
    std::vector<float> wrong(5);
    b.to_host(std::span<float>(wrong));
  } catch (const rs::shape_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("holds 5 elements, array 3"), std::string::npos) << e.what();
  }
}

// Host memory given as a null pointer with elements would be read or written at address 0: every
// transfer between a span and an array refuses it before any work (nothing allocated, nothing moved).
TEST_P(arrays, null_host_memory_is_refused_before_any_work) {
  const std::size_t n = 1000;
  auto x = rs::to_device(rs::test::random_vector<float>(n, rs::test::fresh_seed()), dev);
  const auto before = x.to_host();
  const std::span<float> none(static_cast<float*>(nullptr), n);
  const std::span<const float> none_in(static_cast<const float*>(nullptr), n);
  const char* says = "null pointer with 1000 elements";
  const auto pool = rs::pool_stats(dev);
  rs::test::expect_invalid([&] { rs::to_device(none_in, dev); }, says);
  rs::test::expect_invalid([&] { rs::to_device(none_in, 10, 100, dev); }, says);
  rs::test::expect_invalid([&] { x.to_host(none); }, says);
  rs::test::expect_invalid([&] { rs::copy(none_in, x); }, says);
  rs::test::expect_invalid([&] { rs::copy_async(none_in, x); }, says);
  rs::test::expect_invalid([&] { rs::copy_async(x, none); }, says);
  EXPECT_EQ(rs::pool_stats(dev).bytes_in_use, pool.bytes_in_use);
  EXPECT_EQ(x.to_host(), before);
  // No elements: nothing to read or write, at any address.
  rs::copy_async(std::span<const float>(), x.slice(0, 0));
  EXPECT_EQ(rs::to_device(std::span<const float>(), dev).size(), 0u);
}

// Sizes whose byte counts wrap or cannot exist are refused before anything is allocated: a wrapped
// count once reached the pool as a tiny block that the array then overran.
TEST_P(arrays, sizes_that_cannot_be_allocated_are_refused_before_allocating) {
  const auto before = rs::pool_stats(dev);
  auto expect_oom = [&](auto make, std::size_t bytes) {
    try {
      make();
      ADD_FAILURE() << "allocated " << bytes << " bytes";
    } catch (const rs::out_of_memory& e) {
      EXPECT_EQ(e.requested(), bytes);
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes) + " bytes"), std::string::npos) << e.what();
    }
  };
  const std::size_t all = std::size_t(-1);
  expect_oom([&] { rs::array<std::uint8_t> a(all, dev); }, all);
  expect_oom([&] { rs::array<float> a(all / 4, dev); }, all / 4 * 4);
  expect_oom([&] { rs::array<double> a(all / 8 - 1, dev); }, (all / 8 - 1) * 8);
  expect_oom([&] { rs::array2d<std::uint8_t> a(std::size_t(1) << 32, (std::size_t(1) << 32) - 1, dev); },
             (std::size_t(1) << 32) * ((std::size_t(1) << 32) - 1));
  rs::stream s(dev);
  expect_oom([&] { rs::array<char> a(all - 100, s.ref()); }, all - 100);
  EXPECT_THROW(rs::array<float>(all / 2, dev), rs::invalid_argument);
  EXPECT_THROW(rs::array2d<float>(std::size_t(1) << 40, std::size_t(1) << 40, dev), rs::invalid_argument);
  EXPECT_THROW(rs::array2d<float>(3, 4, dev, all), rs::invalid_argument);
  // rows * cols wraps to 0, which an empty host buffer would match.
  EXPECT_THROW(rs::to_device(std::span<const float>(), std::size_t(1) << 32, std::size_t(1) << 32, dev),
               rs::invalid_argument);
  const auto after = rs::pool_stats(dev);
  EXPECT_EQ(after.outstanding, before.outstanding);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  auto h = rs::test::random_vector<float>(1000, rs::test::fresh_seed());
  EXPECT_EQ(rs::to_device(h, dev).to_host(), h);
}

// A moved-from owner of any kind throws on use; its figures read 0; destroying it and assigning onto
// it stay safe.
TEST_P(arrays, moved_from_two_dimensional_arrays_and_pinned_buffers_throw) {
  rs::array2d<float> m(3, 4, dev, 6);
  rs::array2d<float> n = std::move(m);
  EXPECT_EQ(n.rows(), 3u);
  EXPECT_EQ(n.ld(), 6u);
  EXPECT_EQ(m.rows(), 0u);
  EXPECT_EQ(m.cols(), 0u);
  EXPECT_EQ(m.ld(), 0u);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_THROW(m.view(), rs::invalid_argument);
  EXPECT_THROW(m.to_host(), rs::invalid_argument);
  rs::array2d<float> o;
  o = std::move(n);
  EXPECT_EQ(n.rows(), 0u);
  EXPECT_THROW(n.view(), rs::invalid_argument);
  m = std::move(o);  // assigning onto a moved-from array makes it usable again
  EXPECT_EQ(m.rows(), 3u);
  EXPECT_NO_THROW(m.view());

  rs::pinned_buffer<float> p(8);
  rs::pinned_buffer<float> q = std::move(p);
  EXPECT_EQ(p.size(), 0u);
  EXPECT_EQ(p.data(), nullptr);
  try {
    (void)p.span();
    ADD_FAILURE() << "span() of a moved-from pinned buffer";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moved-from pinned_buffer"), std::string::npos) << e.what();
  }
  rs::stream s(dev);
  EXPECT_THROW(rs::to_device(p, s.ref()), rs::invalid_argument);
  rs::array<float> empty(0, dev);
  EXPECT_THROW(empty.to_host_async(p), rs::invalid_argument);
  p = std::move(q);
  EXPECT_EQ(p.size(), 8u);
  EXPECT_NO_THROW(p.span());
}

TEST_P(arrays, two_dimensional_upload_from_a_vector) {
  const std::size_t rows = 5, cols = 7;
  auto h = rs::test::random_vector<float>(rows * cols, rs::test::fresh_seed());
  auto a = rs::to_device(h, rows, cols, dev);
  EXPECT_EQ(a.rows(), rows);
  EXPECT_EQ(a.cols(), cols);
  EXPECT_EQ(a.device(), dev);
  EXPECT_EQ(a.to_host(), h);
  rs::stream s(dev);
  {
    auto b = rs::to_device(h, rows, cols, s.ref());
    EXPECT_EQ(b.stream().native(), s.ref().native());
    EXPECT_EQ(b.to_host(), h);
  }
  s.synchronize();
  EXPECT_THROW(rs::to_device(h, rows, cols + 1, dev), rs::shape_mismatch);
}

TEST(pinned, sizes_whose_bytes_wrap_are_refused) {
  // n * 8 wraps to 8 bytes; n * 4 wraps to 0 (which gave a null buffer of 2^62 elements).
  try {
    rs::pinned_buffer<double> p((std::size_t(1) << 61) + 1);
    FAIL() << "a pinned buffer of 2^61 + 1 doubles";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("overflows the byte count"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rs::pinned_buffer<float>(std::size_t(1) << 62), rs::invalid_argument);
  // Representable, but rounding it up to the alignment wraps.
  try {
    rs::pinned_buffer<char> p(std::size_t(-1));
    FAIL() << "a pinned buffer of 2^64 - 1 bytes";
  } catch (const rs::out_of_memory& e) {
    EXPECT_EQ(e.requested(), std::size_t(-1));
  }
  rs::pinned_buffer<double> ok(100);
  ASSERT_NE(ok.data(), nullptr);
  for (std::size_t i = 0; i < ok.size(); ++i) ok[i] = double(i);
  EXPECT_EQ(ok[99], 99.0);
}

TEST_P(arrays, zero_size_does_no_device_work) {
  rs::scoped_ledger l(dev);
  rs::array<float> a(0, dev);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_TRUE(a.to_host().empty());
  auto d = l.delta();
  EXPECT_EQ(d.allocations, 0u);
  EXPECT_EQ(d.kernels, 0u);
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes, 0u);
}

TEST(array_view, out_of_bounds_stops_in_debug_builds) {
  if constexpr (!rs::debug_checks) {
    GTEST_SKIP() << "bounds checks are on in builds with RESIDENT_DEBUG (the debug preset)";
  } else {
    std::vector<int> v(4, 1);
    rs::array_view<int> view(v.data(), v.size());
    EXPECT_EQ(view[3], 1);
    EXPECT_DEATH(view[4], "index 4 out of bounds for extent 4");
    EXPECT_EQ(view.subview(4, 0).size(), 0u);
    // offset + count wraps to 1: still refused.
    EXPECT_DEATH((void)view.subview(2, std::size_t(-1)), "out of bounds for extent 4");
    rs::array2d_view<int> m(v.data(), 2, 2, 2);
    EXPECT_DEATH(m(0, 2), "index 2 out of bounds for extent 2");
  }
}

// A slice of a slice is checked against the slice (not the array) and lands on the array's elements.
TEST_P(arrays, slices_of_slices_are_checked_against_their_parent) {
  std::vector<int> h(100);
  std::iota(h.begin(), h.end(), 0);
  auto a = rs::to_device(h, dev);
  auto outer = a.slice(10, 50);
  auto inner = outer.slice(5, 20);
  EXPECT_EQ(inner.data(), a.data() + 15);
  EXPECT_EQ(inner.size(), 20u);
  EXPECT_EQ(inner.stream().native(), a.stream().native());
  auto innermost = inner.slice(19, 1);
  std::vector<int> one(1);
  rs::copy_async(innermost, std::span<int>(one));
  rs::synchronize(dev);
  EXPECT_EQ(one[0], 34);
  EXPECT_EQ(outer.slice(50, 0).size(), 0u);  // empty at the end
  // Inside the array but outside the slice.
  rs::test::expect_invalid([&] { (void)outer.slice(45, 10); }, "is outside a slice of 50 elements");
  rs::test::expect_invalid([&] { (void)outer.slice(51, 0); }, "outside a slice of 50");
  rs::test::expect_invalid([&] { (void)outer.slice(std::size_t(-1), 2); }, "outside a slice of 50");
  rs::test::expect_invalid([&] { (void)a.slice(101, 0); }, "outside an array of 100");
  rs::test::expect_invalid([&] { (void)a.slice(2, std::size_t(-1)); }, "outside an array of 100");
}

// Host memory that partly overlaps the array it is copied to or from (on the CPU, where host memory
// can be an array's own) is refused before anything moves; the same memory is no copy at all.
TEST(arrays_cpu, host_memory_overlapping_the_array_is_refused) {
  const rs::device cpu = rs::device::cpu();
  std::vector<float> h(64);
  std::iota(h.begin(), h.end(), 0.f);
  auto a = rs::to_device(h, cpu);
  rs::scoped_ledger l(cpu);
  std::span<float> shifted(a.data() + 1, 63);
  EXPECT_THROW(rs::copy_async(std::span<const float>(shifted), a.slice(0, 63)), rs::invalid_argument);
  EXPECT_THROW(rs::copy_async(a.slice(0, 63), shifted), rs::invalid_argument);
  EXPECT_THROW(rs::copy_async(a.slice(3, 61), std::span<float>(a.data(), 61)), rs::invalid_argument);
  try {
    rs::copy_async(std::span<const float>(a.data() + 2, 62), a.slice(0, 62));
    ADD_FAILURE() << "an overlapping upload ran";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  EXPECT_EQ(l.delta().h2d_copies + l.delta().d2h_copies, 0u);  // refused before it was counted
  std::vector<float> back(64);
  std::copy_n(a.data(), 64, back.begin());
  EXPECT_EQ(back, h);
  rs::copy(std::span<const float>(a.data(), 64), a);  // the same memory: nothing moves
  EXPECT_EQ(a.to_host(), h);
}

// Zero rows or columns, with or without padding: nothing allocated that is not needed, every call
// works and gives nothing; a padded array's elements come back without the padding.
TEST_P(arrays, two_dimensional_arrays_of_nothing_and_padded_ones) {
  for (auto [rows, cols, ld] : {std::tuple<std::size_t, std::size_t, std::size_t>{0, 5, 0}, {0, 5, 8}, {4, 0, 0},
                                {4, 0, 3}, {0, 0, 0}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + " ld " + std::to_string(ld));
    rs::array2d<float> m(rows, cols, dev, ld);
    EXPECT_EQ(m.size(), 0u);
    EXPECT_EQ(m.rows(), rows);
    EXPECT_EQ(m.cols(), cols);
    EXPECT_EQ(m.storage().size(), rows * (ld ? ld : cols));
    EXPECT_TRUE(m.to_host().empty());
    EXPECT_EQ(m.view().rows(), rows);
  }
  EXPECT_EQ(rs::to_device(std::span<const float>(), 0, 7, dev).rows(), 0u);
  EXPECT_EQ(rs::to_device(std::span<const float>(), 7, 0, dev).cols(), 0u);
  EXPECT_THROW(rs::to_device(std::span<const float>(), 1, 1, dev), rs::shape_mismatch);
  // A padded array: to_host drops the padding.
  rs::array2d<int> p(3, 2, dev, 5);
  std::vector<int> all(15);
  std::iota(all.begin(), all.end(), 0);
  rs::copy(std::span<const int>(all), p.storage());
  EXPECT_EQ(p.to_host(), (std::vector<int>{0, 1, 5, 6, 10, 11}));
}

RESIDENT_BACKENDS(arrays);

}  // namespace
