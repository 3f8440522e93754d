// Sharded arrays, pipelines per shard, reductions and communicators. The CPU instance shards over
// several CPU "devices" (three shards on the cpu device, three CPU ranks in one process); the CUDA
// instance over two GPUs, and skips, saying why, where fewer answer.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>

#include "resident/dist/dist.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace rs = resident;
namespace dist = resident::dist;
using rs::test::backend;

namespace {

using rs::test::f1;
using rs::test::f2;
using rs::test::f3;
using rs::test::seed_ref;
RESIDENT_HD double twice(float v) { return 2.0 * double(v); }

class sharded : public backend {
 protected:
  void SetUp() override {
    backend::SetUp();
    if (IsSkipped()) return;
    if (dev.is_cpu()) {
      devices = {rs::device::cpu(), rs::device::cpu(), rs::device::cpu()};
    } else {
      if (rs::cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs, " << rs::cuda_device_count() << " answer";
      devices = {rs::device::cuda(0), rs::device::cuda(1)};
    }
  }
  void TearDown() override {
    if (IsSkipped()) return;
    for (auto d : devices) rs::synchronize(d);
    backend::TearDown();
  }
  std::vector<rs::device> devices;
};

TEST(shard_extents, are_nearly_equal_contiguous_and_cover_the_array) {
  for (std::size_t n : {0ul, 1ul, 2ul, 5ul, 7ul, 100ul, 1000003ul})
    for (std::size_t s : {1ul, 2ul, 3ul, 5ul, 8ul}) {
      std::size_t next = 0, lo = SIZE_MAX, hi = 0;
      for (std::size_t r = 0; r < s; ++r) {
        const auto e = dist::extent_of(n, s, r);
        EXPECT_EQ(e.offset, next) << n << " over " << s << ", shard " << r;
        next += e.count;
        lo = std::min(lo, e.count);
        hi = std::max(hi, e.count);
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(hi - lo, 1u) << n << " over " << s;
    }
  EXPECT_THROW(dist::extent_of(10, 2, 2), rs::invalid_argument);
}

TEST_P(sharded, scatter_and_gather_round_trip_with_exact_ledger_counts) {
  const std::size_t n = 100003;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  std::vector<rs::scoped_ledger> before;
  rs::scoped_ledger l(devices[0]);
  auto x = dist::to_device(h, devices);
  ASSERT_EQ(x.size(), n);
  ASSERT_EQ(x.shard_count(), devices.size());
  ASSERT_EQ(x.local_count(), devices.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < x.local_count(); ++i) {
    const auto e = x.extent(i);
    EXPECT_EQ(e.offset, total);
    EXPECT_EQ(x.local(i).size(), e.count);
    EXPECT_EQ(x.device(i), devices[i]);
    std::vector<float> part(e.count, rs::test::poison<float>());
    dist::device_scope on(x.device(i));  // the shard's default stream is its device's
    rs::copy_async(x.local(i), std::span<float>(part));
    x.stream(i).synchronize();
    EXPECT_TRUE(std::equal(part.begin(), part.end(), h.begin() + std::ptrdiff_t(e.offset))) << "shard " << i;
    total += e.count;
  }
  EXPECT_EQ(total, n);
  std::vector<float> back(n, rs::test::poison<float>());
  x.to_host(std::span<float>(back));
  EXPECT_EQ(back, h);
  if (dev.is_cpu()) {  // all three shards count on the one cpu device
    const auto d = l.delta();
    EXPECT_EQ(d.h2d_copies, 3u);
    EXPECT_EQ(d.h2d_bytes, n * sizeof(float));
    EXPECT_EQ(d.d2h_copies, 3u + 3u);  // the three copy_async above, the three of to_host
  } else {
    EXPECT_EQ(l.delta().h2d_bytes, x.extent(0).count * sizeof(float));
  }
  EXPECT_THROW(x.to_host(std::span<float>(back.data(), n - 1)), rs::shape_mismatch);
}

TEST_P(sharded, pipelines_run_per_shard_against_fp64) {
  const std::size_t n = (1 << 20) + 7;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = dist::to_device(h, devices);
  dist::sharded_array<double> y(n, devices);
  dist::copy(std::vector<double>(n, rs::test::poison<double>()), y);
  dist::apply(rs::map<f1>() | rs::map<f2>(), x);  // in place, one kernel per shard
  dist::apply(rs::map<f3>() | rs::map<twice>(), x, y);
  std::vector<double> ref(n), ref_y(n);
  for (std::size_t i = 0; i < n; ++i) {
    ref[i] = std::sqrt((1.5 * h[i] + 0.5) * (1.5 * h[i] + 0.5) + 1.0);
    ref_y[i] = 2.0 * seed_ref(h[i]);
  }
  EXPECT_LT(rs::test::rel_error(x.to_host(), ref), 1e-6);
  EXPECT_LT(rs::test::rel_error(y.to_host(), ref_y), 1e-6);
  dist::sharded_array<double> other(n, std::vector<rs::device>(devices.begin(), devices.end() - 1));
  EXPECT_THROW(dist::apply(rs::map<twice>(), x, other), rs::shape_mismatch);
}

// for_each_shard visits each shard once, in order, with its extent; local_array is the
// array holding shard i (writes through it land in the whole array).
TEST_P(sharded, for_each_shard_visits_each_shard_once_and_local_array_holds_it) {
  const std::size_t n = 100003;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = dist::to_device(h, devices);
  std::vector<int> seen(x.local_count(), 0);
  std::size_t next = 0, i = 0;
  dist::for_each_shard(x, [&](rs::array_ref<float> s, dist::shard_extent e) {
    EXPECT_EQ(e.offset, next) << "shard " << i;
    EXPECT_EQ(s.size(), e.count);
    EXPECT_EQ(s.data(), x.local_array(i).data()) << "shard " << i << " is its local array";
    ++seen[i++];
    next += e.count;
    rs::map([] RESIDENT_HD(float v) { return 2.f * v + 1.f; })(s);  // queued on the shard's stream
  });
  EXPECT_EQ(next, n);
  EXPECT_EQ(seen, std::vector<int>(x.local_count(), 1));
  rs::array<float>& last = x.local_array(x.local_count() - 1);
  EXPECT_EQ(last.size(), x.extent(x.local_count() - 1).count);
  const std::vector<float> got = x.to_host();
  for (std::size_t k = 0; k < n; ++k) ASSERT_EQ(got[k], 2.f * h[k] + 1.f) << "at " << k;
  EXPECT_THROW((void)x.local_array(x.local_count()), rs::invalid_argument);
}

TEST_P(sharded, reductions_combine_shards_against_fp64) {
  const std::size_t n = 3000017;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = dist::to_device(h, devices);
  double mn = INFINITY, mx = -INFINITY;
  for (float v : h) {
    mn = std::min(mn, double(v));
    mx = std::max(mx, double(v));
  }
  // The terms (0.79 to 1 each) as the device computes them, doubled exactly: the shards' folds in
  // double and their combination must add each once, a shard's border elements included.
  const auto terms = rs::test::seed_terms_on(dev, h, 2.0);
  const double tol = rs::test::sum_tolerance<double>(n + 1, terms.abs_sum + 10.0, terms.term_error());
  const auto seed = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
  const double s = dist::reduce(seed | rs::map<twice>() | rs::reduce(rs::plus{}, 0.0), x);
  EXPECT_TRUE(rs::test::sum_matches(s, terms.sum, tol, terms.smallest));
  // The check can fail: a shard's first or last term dropped or doubled is refused.
  for (std::size_t i = 0; i < x.local_count(); ++i)
    for (std::size_t k : {x.extent(i).offset, x.extent(i).offset + x.extent(i).count - 1})
      for (double times : {0.0, 2.0})
        EXPECT_FALSE(rs::test::sum_matches(s, terms.sum_with(k, times), tol, terms.smallest))
            << "term " << k << " times " << times << " passed";
  // init counts once, whatever the number of shards
  const double s10 = dist::reduce(seed | rs::map<twice>() | rs::reduce(rs::plus{}, 10.0), x);
  EXPECT_TRUE(rs::test::sum_matches(s10, terms.sum + 10.0, tol, terms.smallest));
  EXPECT_FALSE(rs::test::sum_matches(s10, terms.sum + 20.0, tol, terms.smallest)) << "init counted twice passed";
  EXPECT_EQ(dist::reduce(rs::reduce(rs::minimum{}, INFINITY), x), float(mn));
  EXPECT_EQ(dist::reduce(rs::reduce(rs::maximum{}, -INFINITY), x), float(mx));
  // The exact check can fail: without the element holding the least (greatest) value the reference
  // differs (uniform floats in [-1, 1) from 3 million draws hold each extreme once, barring a tie).
  const auto at_min = std::min_element(h.begin(), h.end()), at_max = std::max_element(h.begin(), h.end());
  if (std::count(h.begin(), h.end(), *at_min) == 1) {
    std::vector<float> planted = h;
    planted.erase(planted.begin() + (at_min - h.begin()));
    EXPECT_NE(*std::min_element(planted.begin(), planted.end()), float(mn)) << "a dropped least element passed";
  }
  if (std::count(h.begin(), h.end(), *at_max) == 1) {
    std::vector<float> planted = h;
    planted.erase(planted.begin() + (at_max - h.begin()));
    EXPECT_NE(*std::max_element(planted.begin(), planted.end()), float(mx)) << "a dropped greatest element passed";
  }
  const auto count = dist::reduce(rs::map([] RESIDENT_HD(float) { return std::uint64_t(1); }) |
                                      rs::reduce(rs::plus{}, std::uint64_t(0)), x);
  EXPECT_EQ(count, n);
}

TEST_P(sharded, random_fills_equal_one_device_fills) {
  const std::size_t n = 1000003;
  const std::uint64_t seed = rs::test::fresh_seed(), offset = 12345;
  SCOPED_TRACE(seed);
  rs::array<float> one(n, devices[0]);
  rs::array<std::uint32_t> bits_one(n, devices[0]);
  dist::sharded_array<float> x(n, devices);
  dist::sharded_array<std::uint32_t> bits(n, devices);
  dist::copy(std::vector<float>(n, rs::test::poison<float>()), x);

  rs::random::fill_uniform(one, seed, offset, -2.f, 3.f);
  dist::random::fill_uniform(x, seed, offset, -2.f, 3.f);
  EXPECT_EQ(x.to_host(), one.to_host());
  rs::random::fill_normal(one, seed, offset, 1.f, 2.f);
  dist::random::fill_normal(x, seed, offset, 1.f, 2.f);
  EXPECT_EQ(x.to_host(), one.to_host());
  rs::random::fill_bits(bits_one, seed, offset);
  dist::random::fill_bits(bits, seed, offset);
  EXPECT_EQ(bits.to_host(), bits_one.to_host());
  EXPECT_THROW(dist::random::fill_uniform(x, seed, 0, 1.f, 1.f), rs::invalid_argument);
}

TEST_P(sharded, slices_within_a_shard_work_and_across_a_border_fail) {
  const std::size_t n = 999;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = dist::to_device(h, devices);
  const auto e1 = x.extent(1);
  auto s = x.slice(e1.offset + 1, e1.count - 1);  // inside shard 1
  EXPECT_EQ(s.device(), devices[1]);
  {
    dist::device_scope on(s.device());
    rs::map<f1>()(s);
  }
  auto back = x.to_host();
  for (std::size_t i = 0; i < n; ++i) {
    const bool in = i >= e1.offset + 1 && i < e1.offset + e1.count;
    // f1(v) = 1.5 v + 0.5 against FP64: the device may contract it into an fma, so the error is a
    // rounding of the operands' size, not of the (possibly cancelled) result's.
    const double want = in ? 1.5 * double(h[i]) + 0.5 : double(h[i]);
    const double tol = in ? 2.4e-7 * (std::fabs(1.5 * double(h[i])) + 0.5) : 0.0;
    EXPECT_NEAR(double(back[i]), want, tol) << i;
  }
  try {
    (void)x.slice(e1.offset - 1, 2);
    ADD_FAILURE() << "a slice across the border between shards 0 and 1 was made";
  } catch (const rs::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("crosses the border at element " + std::to_string(e1.offset)),
              std::string::npos) << err.what();
  }
  EXPECT_THROW((void)x.slice(0, n), rs::invalid_argument);
  EXPECT_THROW((void)x.slice(n - 1, 2), rs::invalid_argument);
  EXPECT_EQ(x.slice(n, 0).size(), 0u);
  EXPECT_EQ(x.slice(e1.offset, 0).size(), 0u);
}

TEST_P(sharded, empty_arrays_and_more_shards_than_elements) {
  auto e = dist::to_device(std::vector<float>{}, devices);
  EXPECT_TRUE(e.empty());
  EXPECT_TRUE(e.to_host().empty());
  dist::apply(rs::map<f1>(), e);
  EXPECT_EQ(dist::reduce(rs::reduce(rs::plus{}, 5.f), e), 5.f);
  EXPECT_EQ(dist::reduce(rs::reduce(rs::minimum{}, INFINITY), e), INFINITY);
  dist::sharded_array<float> none;  // no shards at all: the value is init, as for no elements
  EXPECT_EQ(dist::reduce(rs::reduce(rs::plus{}, 5.f), none), 5.f);
  EXPECT_EQ(dist::reduce(rs::reduce(rs::maximum{}, -INFINITY), none), -INFINITY);

  std::vector<rs::device> many;
  for (int i = 0; i < 5; ++i) many.push_back(devices[std::size_t(i) % devices.size()]);
  const std::vector<float> two = {1.25f, -3.5f};
  auto x = dist::to_device(two, many);
  EXPECT_EQ(x.shard_count(), 5u);
  EXPECT_EQ(x.local(0).size(), 1u);
  EXPECT_EQ(x.local(4).size(), 0u);
  dist::apply(rs::map<f1>(), x);
  EXPECT_EQ(x.to_host(), (std::vector<float>{f1(1.25f), f1(-3.5f)}));
  EXPECT_EQ(dist::reduce(rs::reduce(rs::plus{}, 0.f), x), f1(1.25f) + f1(-3.5f));
  dist::random::fill_uniform(x, 7);
  rs::array<float> one(2, devices[0]);
  rs::random::fill_uniform(one, 7);
  EXPECT_EQ(x.to_host(), one.to_host());
}

TEST_P(sharded, moved_from_and_misuse_are_clear_errors) {
  auto x = dist::to_device(rs::test::random_vector<float>(100, rs::test::fresh_seed()), devices);
  auto y = std::move(x);
  EXPECT_EQ(y.size(), 100u);
  EXPECT_THROW(x.to_host(), rs::invalid_argument);
  EXPECT_THROW(dist::apply(rs::map<f1>(), x), rs::invalid_argument);
  EXPECT_THROW((void)x.local(0), rs::invalid_argument);
  EXPECT_THROW((void)y.local(devices.size()), rs::invalid_argument);
  EXPECT_THROW(dist::sharded_array<float>(10, std::vector<rs::device>{}), rs::invalid_argument);
  EXPECT_THROW(dist::sharded_array<float>(rs::array<float>::max_size() + 1, devices), rs::invalid_argument);
  EXPECT_THROW(dist::copy(std::vector<float>(99), y), rs::shape_mismatch);
}

TEST_P(sharded, null_host_memory_is_refused_before_any_work) {
  const std::size_t n = 100;
  const auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  auto x = dist::to_device(h, devices);
  const std::span<const float> no_input(static_cast<const float*>(nullptr), n);
  rs::scoped_ledger l(devices[0]);
  rs::test::expect_invalid([&] { dist::copy(no_input, x); }, "copy: the host memory is a null pointer with 100 elements");
  rs::test::expect_invalid([&] { x.to_host(std::span<float>(static_cast<float*>(nullptr), n)); },
                           "to_host: the host memory is a null pointer with 100 elements");
  rs::test::expect_invalid([&] { (void)dist::to_device(no_input, devices); }, "to_device: the host memory is a null pointer");
  const auto d = l.delta();
  EXPECT_EQ(d.h2d_bytes + d.d2h_bytes + d.allocations, 0u);
  EXPECT_EQ(x.to_host(), h);
  auto e = dist::to_device(std::span<const float>(), devices);  // no elements: nothing to read
  EXPECT_TRUE(e.to_host().empty());
}

TEST_P(sharded, communicator_all_reduces_in_one_process) {
  dist::communicator c(dev.is_cpu() ? devices : std::vector<rs::device>{devices[0], devices[1]});
  ASSERT_EQ(c.size(), int(devices.size()));
  EXPECT_EQ(c.first_rank(), 0);
  EXPECT_FALSE(c.spans_processes());
  EXPECT_EQ(c.started_by(), dist::launcher::in_process);
  EXPECT_FALSE(c.transport().empty());
  const std::size_t count = 1027;
  std::vector<std::vector<float>> h;
  std::vector<rs::array<float>> bufs;
  std::vector<rs::array_ref<float>> refs;
  std::vector<rs::stream_ref> streams;
  for (std::size_t r = 0; r < devices.size(); ++r) {
    h.push_back(rs::test::random_vector<float>(count, rs::test::fresh_seed()));
    dist::device_scope on(devices[r]);
    bufs.push_back(rs::to_device(h.back(), devices[r]));
  }
  for (auto& b : bufs) {
    refs.push_back(b.slice(0, count));
    streams.push_back(b.stream());
  }
  for (auto op : {dist::combine::sum, dist::combine::max}) {
    for (std::size_t r = 0; r < devices.size(); ++r) {
      dist::device_scope on(devices[r]);
      rs::copy(std::span<const float>(h[r]), bufs[r]);
    }
    c.all_reduce<float>(refs, count, op);
    c.synchronize(streams);
    for (std::size_t r = 0; r < devices.size(); ++r) {
      dist::device_scope on(devices[r]);
      auto got = bufs[r].to_host();
      for (std::size_t i = 0; i < count; ++i) {
        double want = op == dist::combine::sum ? 0.0 : -INFINITY;
        for (auto& v : h) want = op == dist::combine::sum ? want + v[i] : std::max(want, double(v[i]));
        ASSERT_NEAR(got[i], want, 1e-5) << "rank " << r << ", element " << i;
      }
    }
  }
  EXPECT_THROW(c.all_reduce<float>(std::span<const rs::array_ref<float>>(refs.data(), 1), count, dist::combine::sum),
               rs::invalid_argument);
  c.barrier();
  // A sharded array over the communicator reduces the same way.
  auto hx = rs::test::random_vector<float>(5001, rs::test::fresh_seed());
  auto x = dist::to_device(hx, c);
  EXPECT_EQ(x.comm(), &c);
  double want = 0;
  for (float v : hx) want += v;
  EXPECT_NEAR(dist::reduce(rs::reduce(rs::plus{}, 0.0), x), want, 1e-9 * 5001);
  for (std::size_t r = 0; r < devices.size(); ++r) {  // freed on each device's own default stream
    dist::device_scope on(devices[r]);
    bufs[r] = rs::array<float>();
  }
  auto moved = std::move(c);
  EXPECT_THROW((void)c.size(), rs::invalid_argument);
}

TEST_P(sharded, communicator_refuses_overlapping_buffers_and_streams_of_other_devices) {
  dist::communicator c(devices);
  const std::size_t count = 64;
  std::vector<rs::array<float>> bufs;
  std::vector<rs::array_ref<float>> refs;
  std::vector<rs::stream_ref> streams;
  for (auto d : devices) {
    dist::device_scope on(d);
    bufs.push_back(rs::to_device(rs::test::random_vector<float>(count + 1, rs::test::fresh_seed()), d));
  }
  for (auto& b : bufs) {
    refs.push_back(b.slice(0, count));
    streams.push_back(b.stream());
  }
  // Streams of another device than their ranks': the wait would watch the wrong streams.
  std::vector<rs::stream_ref> elsewhere;
  for (auto d : devices) elsewhere.push_back(rs::default_stream(d.is_cpu() ? rs::device::cuda(0) : rs::device::cpu()));
  EXPECT_THROW(c.synchronize(elsewhere), rs::device_mismatch);
  if (dev.is_cuda()) GTEST_SKIP() << "GPU ranks are distinct GPUs: their buffers cannot overlap";
  // Two ranks' buffers in one memory (the same, or shifted by one element): each rank's combined value
  // would be read back into the sum of the next.
  const auto before = bufs[0].to_host();
  auto same = refs;
  same[2] = refs[0];
  rs::test::expect_invalid([&] { c.all_reduce<float>(same, count, dist::combine::sum); },
                           "the buffers of ranks 0 and 2 overlap");
  auto shifted = refs;
  shifted[1] = bufs[0].slice(1, count);
  rs::test::expect_invalid([&] { c.all_reduce<float>(shifted, count, dist::combine::max); },
                           "the buffers of ranks 0 and 1 overlap");
  EXPECT_EQ(bufs[0].to_host(), before);  // refused before any work
  // A combine that is none of the three (an int cast) gave rank 0's values unsaid.
  rs::test::expect_invalid([&] { c.all_reduce<float>(refs, count, static_cast<dist::combine>(7)); },
                           "combine 7 is none of sum, min or max");
  EXPECT_EQ(bufs[0].to_host(), before);
  c.all_reduce<float>(refs, count, dist::combine::sum);  // still usable
  c.synchronize(streams);
}

TEST_P(sharded, a_sharded_array_follows_its_communicator_and_refuses_a_destroyed_one) {
  auto hx = rs::test::random_vector<float>(1001, rs::test::fresh_seed());
  double want = 0;
  for (float v : hx) want += v;
  std::optional<dist::communicator> c(std::in_place, devices);
  auto x = dist::to_device(hx, *c);
  // Moved: the ranks live on in the new communicator, and the array reduces through it.
  dist::communicator moved = std::move(*c);
  EXPECT_EQ(x.comm(), &moved);
  EXPECT_NEAR(dist::reduce(rs::reduce(rs::plus{}, 0.0), x), want, 1e-9 * 1001);
  // Destroyed (or replaced by another): a clear error, not a read of freed memory.
  moved = dist::communicator(devices);
  rs::test::expect_invalid([&] { (void)dist::reduce(rs::reduce(rs::plus{}, 0.0), x); },
                           "the communicator this sharded_array was made over no longer exists");
  auto y = dist::to_device(hx, moved);
  c.reset();
  { dist::communicator gone = std::move(moved); }
  rs::test::expect_invalid([&] { (void)y.comm(); }, "no longer exists");
  EXPECT_EQ(y.to_host(), hx);  // the shards themselves are still the array's
}

TEST(communicator, refuses_bad_device_sets) {
  EXPECT_THROW(dist::communicator(std::vector<rs::device>{}), rs::invalid_argument);
  if (rs::cuda_device_count() > 0) {
    EXPECT_THROW(dist::communicator({rs::device::cpu(), rs::device::cuda(0)}), rs::invalid_argument);
    EXPECT_THROW(dist::communicator({rs::device::cuda(0), rs::device::cuda(0)}), rs::invalid_argument);
  } else {
    EXPECT_THROW(dist::communicator({rs::device::cpu(), rs::device::cuda(0)}), rs::invalid_argument);
  }
}

// Sets environment variables for one test, restoring them afterwards.
struct scoped_env {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~scoped_env() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }
};

TEST(communicator, from_launcher_reads_the_environment) {
  scoped_env env;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                        "MV2_COMM_WORLD_SIZE", "RESIDENT_LOCAL_RANK", "RESIDENT_RENDEZVOUS"})
    env.set(v, nullptr);
  env.set("RESIDENT_WORLD_SIZE", nullptr);
  env.set("RESIDENT_RANK", nullptr);
  {
    auto one = dist::communicator::from_launcher(rs::device::cpu());  // nothing set: a world of one
    EXPECT_EQ(one.timeout(), std::chrono::seconds(120)) << "the documented default";
    EXPECT_EQ(dist::communicator::from_launcher(rs::device::cpu(), std::chrono::milliseconds(2500)).timeout(),
              std::chrono::milliseconds(2500));
    EXPECT_EQ(one.size(), 1);
    EXPECT_EQ(one.first_rank(), 0);
    EXPECT_EQ(one.transport(), "host");
    auto x = dist::to_device(std::vector<float>{1.f, 2.f, 3.f}, one);
    EXPECT_EQ(dist::reduce(rs::reduce(rs::plus{}, 0.f), x), 6.f);
  }
  env.set("RESIDENT_WORLD_SIZE", "2");
  env.set("RESIDENT_RANK", "2");
  try {
    (void)dist::communicator::from_launcher(rs::device::cpu());
    ADD_FAILURE() << "rank 2 of 2 was accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RESIDENT_RANK is 2 but RESIDENT_WORLD_SIZE is 2"), std::string::npos) << e.what();
  }
  env.set("RESIDENT_RANK", "x1");
  EXPECT_THROW((void)dist::communicator::from_launcher(rs::device::cpu()), rs::invalid_argument);
  env.set("RESIDENT_RANK", "1");
  try {
    (void)dist::communicator::from_launcher(rs::device::cpu());
    ADD_FAILURE() << "two CPU ranks in separate processes without MPI were accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("combine through MPI"), std::string::npos) << e.what();
  }
  env.set("RESIDENT_WORLD_SIZE", "0");
  EXPECT_THROW((void)dist::communicator::from_launcher(rs::device::cpu()), rs::invalid_argument);
  EXPECT_THROW((void)dist::communicator::from_launcher(rs::device::cpu(), std::chrono::milliseconds(0)),
               rs::invalid_argument);
}

using sharded_cuda = sharded;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(sharded_cuda, gpu_ranks_from_the_environment_time_out_when_a_rank_is_missing) {
  scoped_env env;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"}) env.set(v, nullptr);
  const std::string path = "/tmp/resident-test-rendezvous-" + std::to_string(rs::test::fresh_seed());
  env.set("RESIDENT_WORLD_SIZE", "2");
  env.set("RESIDENT_RANK", "1");  // rank 0 never comes: no id is published
  env.set("RESIDENT_RENDEZVOUS", path.c_str());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW((void)dist::communicator::from_launcher(devices[0], std::chrono::milliseconds(1500)), rs::invalid_argument);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  env.set("RESIDENT_RANK", "0");  // rank 1 never joins: NCCL's init is aborted after the timeout
  try {
    (void)dist::communicator::from_launcher(devices[0], std::chrono::milliseconds(3000));
    ADD_FAILURE() << "a world of two with one rank was made";
  } catch (const rs::library_error& e) {
    EXPECT_EQ(e.library(), "NCCL");
    EXPECT_EQ(e.name(), "timeout") << e.what();
  }
  std::remove(path.c_str());
}

// A slice that starts exactly where shard 1 starts lies in shard 1, not refused as crossing a border.
TEST_P(sharded, a_slice_starting_at_a_border_lies_in_the_later_shard) {
  const std::size_t n = 999;
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = float(i);
  auto x = dist::to_device(h, devices);
  const auto e1 = x.extent(1);
  rs::array_ref<float> s = x.slice(e1.offset, 3);  // elements e1.offset .. e1.offset + 2, all in shard 1
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.data(), x.local(1).data());
  EXPECT_EQ(s.device(), devices[1]);
}

RESIDENT_BACKENDS(sharded);
RESIDENT_CUDA_ONLY(sharded_cuda);  // GPU ranks: the CPU case is communicator.from_launcher_reads_the_environment

}  // namespace
