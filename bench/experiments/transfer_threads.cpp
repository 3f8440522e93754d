// Staged pageable transfers from several host threads at once: aggregate GB/s of uploads and of
// downloads (to_device / to_host through the pinned staging slots) for 1, 2, 4, 8 threads, each thread
// with its own stream and its own tagged data, every element checked after each round trip.
// usage: transfer_threads [MiB per thread, default 256] [rounds, default 10] [device: cpu|cuda]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <barrier>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  const rs::device dev = (argc > 3 && std::string(argv[3]) == "cpu") || rs::cuda_device_count() == 0
                             ? rs::device::cpu()
                             : rs::device::cuda(0);
  const std::size_t n = mib << 20 >> 2;
  std::printf("device %s, %zu MiB per thread, %d rounds\n", dev.name().c_str(), mib, rounds);
  std::printf("%8s %14s %14s %10s\n", "threads", "upload GB/s", "download GB/s", "wrong");
  long total_wrong = 0;
  for (int threads : {1, 2, 4, 8}) {
    std::vector<std::vector<std::uint32_t>> host(threads, std::vector<std::uint32_t>(n));
    std::vector<std::vector<std::uint32_t>> back(threads, std::vector<std::uint32_t>(n));
    std::vector<rs::stream> streams;
    std::vector<long> wrong_of(threads, 0);
    std::vector<rs::array<std::uint32_t>> arrays;
    for (int t = 0; t < threads; ++t) {
      streams.emplace_back(dev);
      arrays.emplace_back(n, streams.back().ref());
    }
    // Threads live across the rounds (as a program's own threads do), so each keeps its OpenMP team;
    // the main thread times each phase between two barriers.
    double up_s = 0, down_s = 0;
    long wrong = 0;
    std::barrier sync_point(threads + 1);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (int r = 0; r <= rounds; ++r) {
          for (std::size_t i = 0; i < n; ++i) host[t][i] = std::uint32_t(t * 0x10000001u + r * 0x9E3779B9u + i);
          sync_point.arrive_and_wait();  // upload starts
          rs::copy(std::span<const std::uint32_t>(host[t]), arrays[t]);
          streams[t].synchronize();
          sync_point.arrive_and_wait();  // upload done; download starts
          arrays[t].to_host(std::span<std::uint32_t>(back[t]));
          sync_point.arrive_and_wait();  // download done
          long w = 0;
          for (std::size_t i = 0; i < n; ++i) w += back[t][i] != host[t][i];
          wrong_of[t] += w;
        }
      });
    using clock = std::chrono::steady_clock;
    for (int r = 0; r <= rounds; ++r) {  // round 0 warms up, untimed
      sync_point.arrive_and_wait();
      const auto t0 = clock::now();
      sync_point.arrive_and_wait();
      const auto t1 = clock::now();
      sync_point.arrive_and_wait();
      const auto t2 = clock::now();
      if (r > 0) {
        up_s += std::chrono::duration<double>(t1 - t0).count();
        down_s += std::chrono::duration<double>(t2 - t1).count();
      }
    }
    for (auto& th : pool) th.join();
    for (long w : wrong_of) wrong += w;
    const double bytes = double(threads) * double(n) * 4 * rounds;
    std::printf("%8d %14.2f %14.2f %10ld\n", threads, bytes / up_s / 1e9, bytes / down_s / 1e9, wrong);
    total_wrong += wrong;
  }
  return total_wrong == 0 ? 0 : 1;
}
