// The seed pipeline and map + sum timed alike for resident and CUB, next to a device-to-device memcpy of
// the same bytes, all in one process on one stream. Every system is timed two ways:
//   back-to-back   `batch` calls queued between two events, time per call (device throughput)
//   one per pair   one call between two events (latency, the host's dispatch included)
// Each figure is the median over `reps` repetitions, after warm-up; inputs are fresh random numbers,
// outputs are poisoned before the first call and every result is checked against FP64.
//
// usage: device_peers [--sizes 20,22,24,26,28] [--reps 30] [--batch 20] [--json FILE|-]
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_transform.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/seed.hpp"
#include "resident/detail/files.hpp"
#include "resident/resident.hpp"

namespace rs = resident;
using rs::cli::func1;
using rs::cli::func2;
using rs::cli::func3;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct seed_op {
  __host__ __device__ float operator()(float v) const { return func3(func2(func1(v))); }
};
struct identity_op {
  __host__ __device__ float operator()(float v) const { return v; }
};

struct both {
  double back_to_back_ms, one_per_pair_ms;
};

// Times f both ways on stream s.
template <class F>
both time_both(cudaStream_t s, int reps, int batch, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  check(cudaStreamSynchronize(s), "warm-up");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  auto median_of = [&](int calls) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      check(cudaEventRecord(a, s), "record");
      for (int c = 0; c < calls; ++c) f();
      check(cudaEventRecord(b, s), "record");
      check(cudaEventSynchronize(b), "sync");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, a, b), "elapsed");
      t.push_back(double(ms) / calls);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  both r{median_of(batch), median_of(1)};
  check(cudaEventDestroy(a), "event");
  check(cudaEventDestroy(b), "event");
  return r;
}

std::vector<int> parse_sizes(const std::string& s) {
  std::vector<int> v;
  std::stringstream in(s);
  for (std::string t; std::getline(in, t, ',');) {
    int l = std::stoi(t);
    if (l < 10 || l > 30) throw std::invalid_argument("--sizes takes log2 element counts between 10 and 30");
    v.push_back(l);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<int> sizes{20, 22, 24, 26, 28};
  int reps = 30, batch = 20;
  std::string json = "-";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") sizes = parse_sizes(next());
    else if (a == "--reps") reps = std::max(3, std::stoi(next()));
    else if (a == "--batch") batch = std::max(1, std::stoi(next()));
    else if (a == "--json") json = next();
    else throw std::invalid_argument("unknown option " + a + " (use --sizes, --reps, --batch, --json)");
  }
  const rs::device d = rs::device::cuda(0);
  rs::require(d);
  rs::stream st(d);
  cudaStream_t s = st.ref().native();
  auto master = rs::map<func1>() | rs::map<func2>() | rs::map<func3>();
  auto sum = rs::map([] RESIDENT_HD(float v) { return v; }) | rs::reduce(rs::plus{}, 0.f);

  std::ostringstream rows;
  const char* sep = "";
  for (int l : sizes) {
    const std::size_t n = std::size_t(1) << l;
    auto hx = rs::cli::seed_input(n);
    rs::array<float> x = rs::to_device(hx, st.ref()), y(n, st.ref()), total(1, st.ref());
    void* temp = nullptr;
    std::size_t temp_bytes = 0;
    float* cub_total = total.data();
    check(cub::DeviceReduce::TransformReduce(nullptr, temp_bytes, x.data(), cub_total, n, ::cuda::std::plus<>{},
                                             identity_op{}, 0.f, s),
          "TransformReduce size");
    check(cudaMallocAsync(&temp, temp_bytes, s), "temp");

    // Correctness first: every system's output poisoned, then checked against FP64.
    double ref_sum = 0;
    for (float v : hx) ref_sum += v;
    auto poison = [&] { check(cudaMemsetAsync(y.data(), 0xff, n * sizeof(float), s), "poison"); };
    poison();
    master(x, y);
    if (rs::cli::seed_error(hx, y.to_host()) > 1e-5) throw std::runtime_error("resident fused: wrong result");
    poison();
    check(cub::DeviceTransform::Transform(x.data(), y.data(), n, seed_op{}, s), "Transform");
    if (rs::cli::seed_error(hx, y.to_host()) > 1e-5) throw std::runtime_error("cub Transform: wrong result");
    for (int k = 0; k < 2; ++k) {
      check(cudaMemsetAsync(cub_total, 0xff, sizeof(float), s), "poison");
      if (k == 0) sum(x, total);
      else
        check(cub::DeviceReduce::TransformReduce(temp, temp_bytes, x.data(), cub_total, n, ::cuda::std::plus<>{},
                                                 identity_op{}, 0.f, s),
              "TransformReduce");
      const double got = total.to_host()[0];
      if (!(std::fabs(got - ref_sum) <= 1e-4 * ref_sum))
        throw std::runtime_error(std::string(k ? "cub TransformReduce" : "resident map + sum") + ": sum " +
                                 std::to_string(got) + ", FP64 " + std::to_string(ref_sum));
    }

    struct sys {
      const char* name;
      const char* kind;
      both t;
    };
    std::vector<sys> r;
    r.push_back({"memcpy", "copy", time_both(s, reps, batch, [&] {
                   check(cudaMemcpyAsync(y.data(), x.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, s), "copy");
                 })});
    r.push_back({"resident fused", "map", time_both(s, reps, batch, [&] { master(x, y); })});
    r.push_back({"cub DeviceTransform", "map", time_both(s, reps, batch, [&] {
                   check(cub::DeviceTransform::Transform(x.data(), y.data(), n, seed_op{}, s), "Transform");
                 })});
    r.push_back({"resident map + sum into a device array", "reduce", time_both(s, reps, batch, [&] { sum(x, total); })});
    r.push_back({"cub TransformReduce", "reduce", time_both(s, reps, batch, [&] {
                   check(cub::DeviceReduce::TransformReduce(temp, temp_bytes, x.data(), cub_total, n,
                                                            ::cuda::std::plus<>{}, identity_op{}, 0.f, s),
                         "TransformReduce");
                 })});
    check(cudaFreeAsync(temp, s), "free");
    const both mc = r[0].t;
    for (auto& e : r) {
      // A map moves 8 bytes per element like the copy: time over copy time. A reduction reads 4: its
      // rate over the copy's rate (read + write bytes) is copy time / (2 x its time).
      const bool red = std::string(e.kind) == "reduce";
      auto ratio = [&](double t, double c) { return red ? c / (2 * t) : t / c; };
      rows << sep << "\n    {\"system\": \"" << e.name << "\", \"kind\": \"" << e.kind << "\", \"log2_n\": " << l
           << ", \"back_to_back_ms\": " << e.t.back_to_back_ms << ", \"one_per_pair_ms\": " << e.t.one_per_pair_ms
           << ", \"" << (red ? "rate_over_memcpy_rate" : "over_memcpy") << "_back_to_back\": "
           << ratio(e.t.back_to_back_ms, mc.back_to_back_ms) << ", \""
           << (red ? "rate_over_memcpy_rate" : "over_memcpy") << "_one_per_pair\": "
           << ratio(e.t.one_per_pair_ms, mc.one_per_pair_ms) << "}";
      sep = ",";
      std::fprintf(stderr, "2^%-3d %-40s back-to-back %9.4f ms  one per pair %9.4f ms  %s %.3f / %.3f\n", l, e.name,
                   e.t.back_to_back_ms, e.t.one_per_pair_ms, red ? "rate / copy rate" : "time / copy",
                   ratio(e.t.back_to_back_ms, mc.back_to_back_ms), ratio(e.t.one_per_pair_ms, mc.one_per_pair_ms));
    }
  }
  std::ostringstream out;
  out << "{\n  \"benchmark\": \"device_peers\", \"device_name\": \"" << rs::properties(d).name
      << "\", \"reps\": " << reps << ", \"batch\": " << batch << ",\n  \"rows\": [" << rows.str() << "\n  ]\n}\n";
  if (json == "-") std::cout << out.str();
  else
    resident::detail::write_file_atomically(json, out.str());  // the one file writer: no link followed
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "device_peers: error: %s\n", e.what());
  return 1;
}
