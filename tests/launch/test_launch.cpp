// Compiled by nvcc when the CUDA backend is in the build (see tests/CMakeLists.txt).

#include <cstdlib>
#include <filesystem>

#include "resident/resident.hpp"
#include "resident/detail/files.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using launches = backend;

struct write_coordinates {
  RESIDENT_HD void operator()(rs::thread_index t, rs::array_view<int> block, rs::array_view<int> thread,
                              rs::array_view<int> global) const {
    std::size_t g = t.global_x();
    block[g] = int(t.block.x);
    thread[g] = int(t.thread.x);
    global[g] = int(g);
  }
};

TEST_P(launches, explicit_grid_covers_every_thread) {
  for (auto [blocks, threads] : {std::pair{1u, 2u}, std::pair{2u, 4u}, std::pair{7u, 96u}}) {
    std::size_t n = std::size_t(blocks) * threads;
    std::vector<int> p(n, rs::test::poison<int>());
    auto b = rs::to_device(p, dev), t = rs::to_device(p, dev), g = rs::to_device(p, dev);
    rs::scoped_ledger l(dev);
    rs::launch(rs::default_stream(dev), {blocks, threads}, write_coordinates{}, b.view(), t.view(), g.view());
    EXPECT_EQ(l.delta().kernels, 1u);
    auto hb = b.to_host(), ht = t.to_host(), hg = g.to_host();
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(hb[i], int(i / threads));
      EXPECT_EQ(ht[i], int(i % threads));
      EXPECT_EQ(hg[i], int(i));
    }
  }
}

TEST_P(launches, two_dimensional_grid) {
  const unsigned rows = 19, cols = 45;
  rs::array2d<float> m(rows, cols, dev);
  rs::launch(rs::default_stream(dev), {rs::dims(3, 5), rs::dims(16, 4)},
             [] RESIDENT_HD(rs::thread_index t, rs::array2d_view<float> v) {
               std::size_t c = t.global_x(), r = t.global_y();
               if (r < v.rows() && c < v.cols()) v(r, c) = float(r * 1000 + c);
             },
             m.view());
  auto h = m.to_host();
  for (unsigned r = 0; r < rows; ++r)
    for (unsigned c = 0; c < cols; ++c) ASSERT_EQ(h[r * cols + c], float(r * 1000 + c));
}

TEST_P(launches, for_each_index_matches_fp64_reference) {
  for (std::size_t n : {std::size_t(1), std::size_t(1023), std::size_t(3000001)}) {
    auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto h = rs::test::random_vector<float>(n, seed);
    auto x = rs::to_device(h, dev);
    rs::array<float> y(n, dev);
    auto xv = x.view();
    auto yv = y.view();
    rs::scoped_ledger l(dev);
    rs::for_each_index(rs::default_stream(dev), n, [=] RESIDENT_HD(std::size_t i) { yv[i] = 2.f * xv[i] + 1.f; });
    EXPECT_EQ(l.delta().kernels, 1u);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = 2.0 * double(h[i]) + 1.0;
    EXPECT_LT(rs::test::rel_error(y.to_host(), ref), 1e-6);
  }
}

// Phases for a block sum in shared memory: load, halve the live range log2(block) times, write.
struct load_block {
  rs::array_view<float> x;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    const std::size_t i = t.global_x();
    sh.as<double>()[t.thread.x] = i < x.size() ? double(x[i]) : 0.0;
  }
};
struct halve {
  unsigned half;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    if (t.thread.x < half) sh.as<double>()[t.thread.x] += sh.as<double>()[t.thread.x + half];
  }
};
struct write_block_sum {
  rs::array_view<double> sums;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    if (t.thread.x == 0) sums[t.block.x] = sh.as<double>()[0];
  }
};
// Thread i reads what thread (block - 1 - i) wrote before the barrier: wrong without it.
struct write_mine {
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    sh.as<unsigned>()[t.thread.x] = unsigned(t.global_x()) * 3u;
  }
};
struct read_mirror {
  rs::array_view<unsigned> out;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    out[t.global_x()] = sh.as<unsigned>()[t.block_dim.x - 1 - t.thread.x];
  }
};

TEST_P(launches, phases_share_block_memory_across_barriers) {
  const unsigned block = 256, grid = 5;
  const std::size_t n = std::size_t(block) * grid - 37;
  auto seed = rs::test::fresh_seed();
  auto h = rs::test::random_vector<float>(n, seed);
  auto x = rs::to_device(h, dev);
  std::vector<double> poison(grid, rs::test::poison<double>());
  auto sums = rs::to_device(poison, dev);
  const auto xv = x.view();
  rs::scoped_ledger l(dev);
  rs::launch_phases(rs::default_stream(dev), {rs::dims(grid), rs::dims(block), block * sizeof(double)},
                    load_block{xv}, halve{128}, halve{64}, halve{32}, halve{16}, halve{8}, halve{4}, halve{2},
                    halve{1}, write_block_sum{sums.view()});
  EXPECT_EQ(l.delta().kernels, 1u);
  auto got = sums.to_host();
  for (unsigned b = 0; b < grid; ++b) {
    double ref = 0;
    for (std::size_t i = std::size_t(b) * block; i < std::min(n, std::size_t(b + 1) * block); ++i) ref += h[i];
    EXPECT_NEAR(got[b], ref, 1e-9 * (1 + std::abs(ref))) << "block " << b << ", seed " << seed;
  }

  std::vector<unsigned> p(std::size_t(block) * grid, rs::test::poison<unsigned>());
  auto out = rs::to_device(p, dev);
  rs::launch_phases(rs::default_stream(dev), {rs::dims(grid), rs::dims(block), block * sizeof(unsigned)}, write_mine{},
                    read_mirror{out.view()});
  auto mirrored = out.to_host();
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned i = 0; i < block; ++i) ASSERT_EQ(mirrored[b * block + i], (b * block + block - 1 - i) * 3u);

  // Shared memory beyond the device's limit is refused before launch.
  EXPECT_THROW(rs::launch_phases(rs::default_stream(dev), {rs::dims(1), rs::dims(32), std::size_t(1) << 30},
                                 write_mine{}),
               rs::invalid_launch);
}

TEST_P(launches, chunked_async_copies_round_trip_through_pinned_memory) {
  const std::size_t n = 100003, chunks = 4, per = (n + chunks - 1) / chunks;
  auto h = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::pinned_buffer<float> in(n), back(n);
  std::copy(h.begin(), h.end(), in.begin());
  std::fill(back.begin(), back.end(), rs::test::poison<float>());
  rs::array<float> d(n, dev);
  std::vector<rs::stream> streams;
  for (std::size_t c = 0; c < chunks; ++c) {
    streams.emplace_back(dev);
    streams.back().ref().wait_for(d.stream());  // after the allocation, which is ordered on d's stream
  }
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t lo = c * per, cnt = std::min(per, n - lo);
    auto part = rs::array_ref<float>(d.data() + lo, cnt, streams[c].ref());
    rs::copy_async(std::span<const float>(in.data() + lo, cnt), part);
    rs::map([] RESIDENT_HD(float v) { return 2.f * v; })(part);
    rs::copy_async(part, std::span<float>(back.data() + lo, cnt));
  }
  for (auto& s : streams) s.synchronize();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 2.f * h[i]) << i;
  EXPECT_THROW(rs::copy_async(std::span<const float>(in.data(), 10), d), rs::shape_mismatch);
}

TEST_P(launches, for_each_config_is_what_for_each_index_launches) {
  const std::size_t n = 1000003;
  rs::array<float> y(n, dev);
  auto yv = y.view();
  auto f = [=] RESIDENT_HD(std::size_t i) { yv[i] = float(i % 7); };
  const rs::launch_config c = rs::for_each_config(rs::default_stream(dev), n, f);
  EXPECT_NO_THROW(rs::validate(c, dev)) << c.str();
  EXPECT_GE(c.grid.count() * c.block.count(), 1u);
  if (dev.is_cuda()) {
    EXPECT_LT(c.grid.count() * c.block.count(), n + c.block.count()) << "no block without an item";
  }
  rs::generate([] RESIDENT_HD(std::size_t) { return -1.f; })(y);  // poisoned: a skipped index shows
  rs::scoped_ledger l(dev);
  rs::for_each_index(rs::default_stream(dev), n, f);
  auto h = y.to_host();
  EXPECT_EQ(l.delta().kernels, 1u);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], float(i % 7)) << i;
  // The configuration for_each_config gave, launched explicitly with a grid-stride loop, covers every
  // index too.
  rs::generate([] RESIDENT_HD(std::size_t) { return -1.f; })(y);
  rs::launch(rs::default_stream(dev), c, [=] RESIDENT_HD(rs::thread_index t) {
    for (std::size_t i = t.global_x(); i < n; i += t.grid_stride()) yv[i] = float(i % 7);
  });
  h = y.to_host();
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], float(i % 7)) << i;
}

TEST_P(launches, invalid_configurations_are_typed_errors) {
  auto s = rs::default_stream(dev);
  auto noop = [] RESIDENT_HD(rs::thread_index) {};
  auto p = rs::properties(dev);
  const rs::launch_config bad[] = {
      {rs::dims(0), rs::dims(32)},                             // empty grid
      {rs::dims(1), rs::dims(0)},                              // empty block
      {rs::dims(1), rs::dims(1025)},                           // too many threads per block
      {rs::dims(1), rs::dims(32, 32, 2)},                      // 2048 threads in 3-D
      {rs::dims(1), rs::dims(1, 1, 65)},                       // block.z over 64
      {rs::dims(1, 65536), rs::dims(32)},                      // grid.y over 65535
      {rs::dims(1), rs::dims(32), p.shared_per_block_optin + 1},  // shared memory over the opt-in max
  };
  rs::scoped_ledger l(dev);
  for (const auto& cfg : bad) {
    try {
      rs::launch(s, cfg, noop);
      ADD_FAILURE() << "accepted " << cfg.str();
    } catch (const rs::invalid_launch& e) {
      EXPECT_NE(std::string(e.what()).find(cfg.str()), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(l.delta().kernels, 0u) << "an invalid configuration reached the device";
  try {
    rs::launch(s, {rs::dims(1), rs::dims(64, 32)}, noop);
    ADD_FAILURE() << "accepted 2048 threads per block";
  } catch (const rs::invalid_launch& e) {
    EXPECT_NE(std::string(e.what()).find("2048 threads per block exceed the limit 1024"), std::string::npos)
        << e.what();
  }
}

// Functors, not lambdas: nvcc takes no extended lambda inside a TEST's (private) body.
struct index_noop {
  RESIDENT_HD void operator()(std::size_t) const {}
};
struct thread_noop {
  RESIDENT_HD void operator()(rs::thread_index) const {}
};

// Every launch call refuses a stream of a device that cannot be used, with the reason, before any
// work; for_each_index of nothing too (it would otherwise pass silently where a longer one fails).
TEST(launch_devices, a_stream_of_an_unusable_device_is_refused_at_every_length) {
  const int present = rs::cuda_device_count();
  const auto absent = rs::default_stream(rs::device::cuda(present + 3));
  const index_noop f;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(1000)}) {
    SCOPED_TRACE(n);
    EXPECT_THROW(rs::for_each_index(absent, n, f), rs::device_unavailable);
    EXPECT_THROW((void)rs::for_each_config(absent, n, f), rs::device_unavailable);
  }
  EXPECT_THROW(rs::launch(absent, {rs::dims(1), rs::dims(1)}, thread_noop{}), rs::device_unavailable);
  EXPECT_THROW(absent.synchronize(), rs::device_unavailable);
}

struct write_one {
  RESIDENT_HD void operator()(rs::thread_index, rs::array_view<int> v) const { v[0] = 1; }
};

// A kernel that writes through an illegal address poisons the context. The fault is provoked in a child
// process (this binary again, running only the child test below) so the suite's own context survives.
using device_fault_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(device_fault_cuda, becomes_device_lost_in_a_child_process) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const auto r = rs::detail::run_program(
      {"timeout", "60", self, "--gtest_filter=device_fault.child_provokes_an_illegal_address"}, {{"RESIDENT_FAULT_CHILD", "1"}});
  ASSERT_GE(r.status, 0) << "the child did not start";
  ASSERT_LT(r.status, 128) << "a signal ended the child: " << r.output;
  EXPECT_EQ(r.status, 0) << "the child did not see device_lost (124: it hung): " << r.output;
}

TEST(device_fault, child_provokes_an_illegal_address) {
  if (!std::getenv("RESIDENT_FAULT_CHILD")) GTEST_SKIP() << "runs only as the child of becomes_device_lost_...";
  auto s = rs::default_stream(rs::device::cuda(0));
  rs::array_view<int> bad(reinterpret_cast<int*>(std::uintptr_t(16)), 1);  // not device memory
  try {
    rs::launch(s, {rs::dims(1), rs::dims(1)}, write_one{}, bad);
    rs::synchronize(rs::device::cuda(0));
    FAIL() << "the fault went unnoticed";
  } catch (const rs::device_lost& e) {
    EXPECT_NE(std::string(e.what()).find("restart the process"), std::string::npos) << e.what();
    std::_Exit(::testing::Test::HasFailure() ? 1 : 0);  // leave at once: the context is gone
  }
}

RESIDENT_BACKENDS(launches);
RESIDENT_CUDA_ONLY(device_fault_cuda);

}  // namespace
