// resident bench dist: beyond one device. Peer copies between two GPUs, NCCL all-reduce, the seed map
// and a sum on one device against the same work sharded over two. Compiled by nvcc in CUDA builds.
#include <algorithm>
#include <iostream>

#include "bench.hpp"
#include "memory_budget.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/dist/dist.hpp"
#include "resident/resident.hpp"
#include "common/seed.hpp"
#include "wall_timing.hpp"
#include "table.hpp"

namespace resident::cli {
namespace {

double gbs(double bytes, double ms) { return bytes / (ms * 1e6); }

}  // namespace

int run_bench_dist(const bench_options& o) {
  const device kind = o.device.empty() ? default_device() : parse_device(o.device);
  const bool gpu = kind.is_cuda();
  const int gpus = cuda_device_count();
  if (gpu && gpus < 2)
    throw invalid_argument("bench dist shards over two GPUs, and " + std::to_string(gpus) +
                           " answers; run it on a host with two, or with --device cpu");
  // Two shards: cuda:0 and cuda:1, or two on the CPU (the same code, the host's cores shared).
  const std::vector<device> devs = gpu ? std::vector<device>{device::cuda(0), device::cuda(1)}
                                       : std::vector<device>{device::cpu(), device::cpu()};
  for (auto d : devs) require(d);
  const int reps = o.reps ? o.reps : (gpu ? 20 : 3);
  const int log2_n = o.sizes.empty() ? (gpu ? 28 : 22) : int(o.sizes.front());
  const std::size_t n = std::size_t(1) << log2_n;
  // Before any output or allocation: the seed map's array on the first device and its sharded copy
  // (half on each), plus on GPUs the 1 GiB peer-copy buffers, two per GPU. The CPU's shards share one pool.
  const double floats = 4.0 * double(n), peer = gpu ? 2.0 * double(std::size_t(1) << 30) : 0.0;
  const std::string what = "bench dist at n = 2^" + std::to_string(log2_n);
  const std::string advice = "Choose a smaller --sizes (8 bytes per element in all)";
  if (gpu) {
    require_memory(devs[0], what, 1.5 * floats + peer, 0, advice);
    require_memory(devs[1], what, 0.5 * floats + peer, 0, advice);
  } else {
    require_memory(devs[0], what, 2 * floats, 0, advice);
  }
  out() << wrap("Beyond one device: " + (gpu ? "cuda:0 and cuda:1 (" + properties(devs[0]).name + ")" : "two CPU shards") +
                ", median of " + std::to_string(reps))
        << "\n";
  table t({{"measure", "measure", false}, {"median", "median", true}, {"unit", "unit", false}, {"note", "note", false}});
  progress bar("bench dist", gpu ? 9 : 3);
  std::vector<stream> owned;
  for (auto d : devs) {
    dist::device_scope on(d);
    owned.emplace_back(d);
  }
  const std::vector<stream_ref> s = {owned[0].ref(), owned[1].ref()};

  if (gpu) {
    // Peer copies of 1 GiB: each way, both at once, and the raw runtime call for comparison. A copy
    // runs on its destination's stream after its source's; the two directions use four streams so
    // that neither waits for the other.
    const std::size_t bytes = std::size_t(1) << 30, count = bytes / sizeof(float);
    std::vector<stream> extra;
    for (auto d : devs) {
      dist::device_scope on(d);
      extra.emplace_back(d);
    }
    const stream_ref x0 = extra[0].ref(), x1 = extra[1].ref();
    array<float> a0(count, s[0]), b0(count, x0), a1(count, s[1]), b1(count, x1);
    random::fill_uniform(a0, 1);
    {
      dist::device_scope on(devs[1]);
      random::fill_uniform(a1, 2);
    }
    bar.step("peer copy cuda:0 -> cuda:1");
    const double to1 = events_ms({x1}, reps, [&] { copy(a0, b1); });
    bar.step("peer copy cuda:1 -> cuda:0");
    const double to0 = events_ms({x0}, reps, [&] { copy(a1, b0); });
    bar.step("peer copies both ways at once");
    const double both = events_ms({x1, x0}, reps, [&] {
      copy(a0, b1);
      copy(a1, b0);
    });
    bar.step("cudaMemcpyPeerAsync alone");
    const double raw = events_ms({x1}, reps, [&] {
      detail::cuda::memcpy_peer_async(b1.data(), 1, a0.data(), 0, bytes, x1.native());
    });
    const bool direct = detail::cuda::can_access_peer(0, 1);
    const std::string link = direct ? "direct peer access" : "no peer access: staged by the driver";
    t.add({"peer copy 1 GiB, cuda:0 -> cuda:1", table::cell(gbs(double(bytes), to1), 1), "GB/s", link});
    t.add({"peer copy 1 GiB, cuda:1 -> cuda:0", table::cell(gbs(double(bytes), to0), 1), "GB/s", ""});
    t.add({"peer copy 1 GiB, both ways at once", table::cell(gbs(double(bytes), both), 1), "GB/s each way", ""});
    t.add({"cudaMemcpyPeerAsync alone, cuda:0 -> cuda:1", table::cell(gbs(double(bytes), raw), 1), "GB/s",
           "the runtime call without resident's events"});
    t.add({"copy / cudaMemcpyPeerAsync", table::cell(raw / to1, 3), "ratio", "1.0: no cost over the call"});

    // NCCL all-reduce (sum, in place) of 1 GiB and of 1024 floats per GPU.
    dist::communicator c(devs);
    for (std::size_t k : {count, std::size_t(1024)}) {
      bar.step("all-reduce of " + std::to_string(k) + " floats");
      std::vector<array_ref<float>> refs{a0.slice(0, k), a1.slice(0, k)};
      const double ms = events_ms(s, reps, [&] { c.all_reduce<float>(refs, k, dist::combine::sum); });
      const double b = double(k * sizeof(float));
      t.add({"NCCL all-reduce " + (k == count ? std::string("1 GiB") : std::to_string(k) + " floats"),
             table::cell(k == count ? ms : ms * 1e3, 3), k == count ? "ms" : "us",
             format_number(gbs(b, ms), -1) + " GB/s bus bandwidth (2 ranks), " + c.transport()});
    }
  }

  // The seed map on n floats: one device, then sharded over two, all at once.
  const auto seed = map<func1>() | map<func2>() | map<func3>();
  array<float> one(n, s[0]);
  random::fill_uniform(one, 3);
  dist::sharded_array<float> two(n, s);
  dist::random::fill_uniform(two, 3);
  bar.step("seed map, one device");
  const double one_ms = events_ms({s[0]}, reps, [&] { seed(one); });
  bar.step("seed map, sharded over two");
  const double two_ms = events_ms(s, reps, [&] { dist::apply(seed, two); });
  const std::string size = "2^" + std::to_string(log2_n) + " floats";
  t.add({"seed map " + size + ", one device", table::cell(one_ms, 3), "ms",
         "at " + format_number(gbs(2.0 * double(n * sizeof(float)), one_ms), -1) + " GB/s read + written"});
  t.add({"seed map " + size + ", sharded over two", table::cell(two_ms, 3), "ms",
         (gpu ? "the slower GPU, 2^" : "both CPU shards, 2^") + std::to_string(log2_n - 1) + " each"});
  t.add({"one / sharded", table::cell(one_ms / two_ms, 3), "ratio", gpu ? "2.0: both GPUs at full rate" : "the CPU's cores are shared"});

  // A sum of the seed pipeline over the whole array: per shard, then combined.
  const auto sum = seed | reduce(plus{}, 0.0);
  bar.step("sharded sum");
  const double one_sum = wall_ms(reps, [&] { (void)sum(one); });
  const double two_sum = wall_ms(reps, [&] { (void)dist::reduce(sum, two); });
  const double a = sum(one), b = dist::reduce(sum, two);
  bar.finish();
  t.add({"seed map + sum " + size + ", one device", table::cell(one_sum, 3), "ms", "wall time, value returned"});
  t.add({"seed map + sum " + size + ", sharded over two", table::cell(two_sum, 3), "ms",
         "per-shard sums combined on the host"});
  t.add({"one / sharded (sum)", table::cell(one_sum / two_sum, 3), "ratio",
         "values differ by " + format_number(std::abs(a - b) / std::max(1.0, std::abs(a)), -1) + " (relative)"});
  t.print(out());
  if (!gpu) out() << "  (no peer-copy or NCCL rows: they join two GPUs)\n";
  if (!o.json.empty()) {
    // The figures the notes quote, as numbers.
    nlohmann::json j = bench_json("dist", gpu ? "cuda:0,cuda:1" : "cpu,cpu", properties(devs[0]).name, t);
    j["log2_n"] = log2_n;
    j["seed_map_one_device_gb_per_s"] = gbs(2.0 * double(n * sizeof(float)), one_ms);
    j["sum_relative_difference"] = std::abs(a - b) / std::max(1.0, std::abs(a));
    write_json(j, o.json);
  }
  return 0;
}

}  // namespace resident::cli
