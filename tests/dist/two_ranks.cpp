// Two ranks in two processes, one shard each: an all-reduce, the seed pipeline on a sharded array
// and its sum against FP64, and a random fill against a one-device fill. Started by mpirun,
//   mpirun -n 2 dist_two_ranks
// or by the environment (a build without MPI; GPU ranks):
//   RESIDENT_WORLD_SIZE=2 RESIDENT_RENDEZVOUS=/tmp/id.$$ RESIDENT_RANK=0 dist_two_ranks &
//   RESIDENT_WORLD_SIZE=2 RESIDENT_RENDEZVOUS=/tmp/id.$$ RESIDENT_RANK=1 dist_two_ranks
// Prints "rank R of 2: ok ..." and exits 0, or says what failed and exits 1. With --expect-timeout
// (run alone as one rank of two) it passes when the communicator gives up with a clear error.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "resident/dist/dist.hpp"
#include "resident/resident.hpp"

namespace rs = resident;
namespace dist = resident::dist;

namespace {
RESIDENT_HD float f1(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD float f2(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD float f3(float v) { return 0.5f * sinf(v); }
double seed_ref(double v) { return 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)); }

int failures = 0;
void check(bool ok, int rank, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

// One value combined over the ranks, through a one-element array on this rank's device.
template <class T>
T all_reduce_value(const dist::communicator& c, T v, dist::combine op) {
  const rs::device d = c.devices()[0];
  dist::device_scope on(d);
  auto a = rs::to_device(std::vector<T>{v}, d);
  std::vector<rs::array_ref<T>> refs{a.slice(0, 1)};
  std::vector<rs::stream_ref> streams{a.stream()};
  c.all_reduce<T>(refs, 1, op);
  c.synchronize(streams);
  return a.to_host()[0];
}
}  // namespace

int main(int argc, char** argv) {
  bool expect_timeout = false;
  long timeout_ms = 60000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--expect-timeout"))
      expect_timeout = true;
    else if (!std::strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
      timeout_ms = std::stol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--timeout-ms N] [--expect-timeout]\n", argv[0]);
      return 2;
    }
  }
  try {
    auto c = dist::communicator::from_launcher(std::nullopt, std::chrono::milliseconds(timeout_ms));
    const int rank = c.first_rank();
    if (expect_timeout) {
      (void)all_reduce_value(c, 1, dist::combine::sum);
      std::fprintf(stderr, "rank %d: FAILED: the collective finished without the other rank\n", rank);
      return 1;
    }
    check(c.size() == 2, rank, "the world has " + std::to_string(c.size()) + " ranks, not 2");
    const rs::device dev = c.devices()[0];

    // The same fresh seed in every process: rank 0's, spread by a max all-reduce.
    std::uint64_t seed = rank == 0 ? std::random_device{}() | 1u : 0;
    seed = all_reduce_value<std::uint64_t>(c, seed, dist::combine::max);
    check(all_reduce_value(c, rank, dist::combine::sum) == 1, rank, "the ranks' numbers do not add up to 1");
    check(all_reduce_value(c, 2.5 * (rank + 1), dist::combine::min) == 2.5, rank, "min all-reduce");

    const std::size_t n = (std::size_t(1) << 20) + 3;
    std::vector<float> host(n);
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& v : host) v = u(g);
    double want = 0;
    for (float v : host) want += seed_ref(v);

    auto x = dist::to_device(host, c);
    check(x.local_count() == 1 && x.first_shard() == std::size_t(rank), rank, "this process holds the wrong shard");
    try {
      (void)x.to_host();
      check(false, rank, "to_host gathered shards of another process");
    } catch (const rs::invalid_argument& e) {
      check(std::string(e.what()).find("each process reads its own shards") != std::string::npos, rank, e.what());
    }
    try {
      (void)x.slice(x.extent(1 - std::size_t(rank)).offset, 1);
      check(false, rank, "a slice of another process's shard was made");
    } catch (const rs::invalid_argument& e) {
      check(std::string(e.what()).find("held by another process") != std::string::npos, rank, e.what());
    }
    rs::scoped_ledger l(dev);
    dist::apply(rs::map<f1>() | rs::map<f2>() | rs::map<f3>(), x);
    const double got = dist::reduce(rs::reduce(rs::plus{}, 0.0), x);
    check(std::abs(got - want) <= 1e-6 * double(n), rank,
          "sum " + std::to_string(got) + ", FP64 reference " + std::to_string(want));
    const auto d = l.delta();
    check(d.h2d_copies == 0 && d.d2h_copies == 1 && d.d2h_bytes == sizeof(double), rank,
          "the sharded map and sum moved " + d.summary());

    dist::random::fill_uniform(x, seed, 77, -1.f, 2.f);
    rs::array<float> one(n, rs::device::cpu());
    rs::random::fill_uniform(one, seed, 77, -1.f, 2.f);
    double fill_want = 0;
    for (float v : one.to_host()) fill_want += v;
    const double fill_got = dist::reduce(rs::reduce(rs::plus{}, 0.0), x);
    check(std::abs(fill_got - fill_want) <= 1e-9 * double(n), rank,
          "random fill sum " + std::to_string(fill_got) + ", one-device fill " + std::to_string(fill_want));
    if (failures) return 1;
    std::printf("rank %d of 2: ok (%s via %s on %s; sum %.6f, FP64 %.6f)\n", rank, dist::to_string(c.started_by()),
                c.transport().c_str(), dev.name().c_str(), got, want);
    return 0;
  } catch (const rs::error& e) {
    if (expect_timeout) {
      std::printf("ok: the lone rank gave up: %s\n", e.what());
      return 0;
    }
    std::fprintf(stderr, "FAILED: %s\n", e.what());
    return 1;
  }
}
