#pragma once
// The benchmarks of `resident bench ...`: their options and entry points. Each returns the process exit
// code; the command line (tools/resident) parses the options and calls them.

#include <cstddef>
#include <string>
#include <vector>

#include "resident/device/device.hpp"

namespace resident::cli {

/// A measured copy rate.
struct bandwidth_row {
  std::string what;
  double gbs;
  std::string note;
};
/// Copy rates on d: device-to-device and each upload and download path, medians of reps copies.
std::vector<bandwidth_row> measure_bandwidth(device d, std::size_t bytes, int reps);

struct bench_options {
  std::string device;
  std::vector<std::size_t> sizes;
  std::string json;
  std::string plot;
  std::string from;   ///< draw the plot from this earlier --json output instead of measuring
  std::string peers;  ///< add the peers' series from bench/peers/peers.py's JSON to the plot
  int reps = 0;
  int repeat = 0;  ///< bench pipeline: sweeps measured in one call; 0 = 3 on a GPU, 1 on the CPU
  int batch = 0;   ///< bench pipeline: calls per event pair; 0 = 20 on a GPU, 1 on the CPU
};
int run_bench_pipeline(const bench_options& o);
int run_bench_small(const bench_options& o);
int run_bench_foundation(const bench_options& o);
int run_bench_rng(const bench_options& o);
int run_bench_flow(const bench_options& o);
/// Peer copies, NCCL all-reduce, the seed map and a sum on one device vs sharded over two.
int run_bench_dist(const bench_options& o);
/// The seed pipeline as run-time stages vs compiled ahead of time vs memcpy; compile and cache times.
int run_bench_jit(const bench_options& o);
int run_bench_matmul(const bench_options& o, const std::vector<std::string>& algos);
struct stream_bench_options {
  std::string device;
  std::string json;
  std::size_t size = 0;        ///< bytes of host input; 0 = 4x the pool's limit
  std::size_t chunk = 0;       ///< bytes of input per chunk; 0 = chosen by the call
  std::size_t pool_limit = 0;  ///< 0 = the limit in force, else 2 GiB on a GPU, 64 MiB on the CPU
  int depth = 0;               ///< chunks in flight; 0 = chosen by the call
  int reps = 0;
  bool pinned = false, pageable = false;  ///< neither: both
};
/// The seed pipeline streamed over host data larger than the pool's limit, against the seed's way and
/// pinned copies alone.
int run_bench_stream(const stream_bench_options& o);
/// Runs the guide's example programs found in examples_dir ("" = the build tree next to the CLI).
int run_bench_guide(const bench_options& o, const std::string& examples_dir);

}  // namespace resident::cli
