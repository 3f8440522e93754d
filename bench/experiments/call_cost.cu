// Where a small call's time goes: the host's cost of issuing each piece of a call (wall time of 200
// calls issued without waiting, median of 40 batches; the GPU waits between batches, untimed), and the
// device's time per call for the fused seed map, map + sum into a device array and a device copy at
// 2^20 / 2^22 / 2^24, issued eagerly back-to-back (20 calls between two events) against the same 20
// calls captured in one graph and replayed: where eager is slower than the replay, the host's issuing
// sets the pace, not the kernel.
//
// Also: what pinning pageable memory in place costs (cudaHostRegister + cudaHostUnregister of each
// chunk of 2 GiB already touched, by 1, 2 and 4 host threads at once), the alternative to copying it
// through pinned staging buffers.
//
// usage: call_cost [log2_n ...]   (default 20 22 24); bench/experiments/logs_to_json.py call_cost turns
// what it prints into JSON.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../common/seed.hpp"
#include "experiment.cuh"
#include "resident/resident.hpp"

namespace rs = resident;
using rs::cli::func1;
using rs::cli::func2;
using rs::cli::func3;

namespace {

__global__ void empty_kernel() {}

struct empty_functor {
  RESIDENT_HD void operator()(rs::thread_index) const {}
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Host nanoseconds per call of f, issued 200 at a time on s (fewer than the launch queue holds).
template <class F>
double host_ns(cudaStream_t s, F&& f) {
  constexpr int per_batch = 200, batches = 40;
  for (int i = 0; i < per_batch; ++i) f();
  CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per_batch; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / per_batch);
    CHECK(cudaStreamSynchronize(s));
  }
  return median(t);
}

// Device microseconds per call: `batch` calls of f between two events on s, median of 15.
template <class F>
double eager_us(cudaStream_t s, F&& f, int batch = 20) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int r = 0; r < 15; ++r) {
    CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < batch; ++i) f();
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3 / batch);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return median(t);
}

// The same `batch` calls captured into one graph, replayed: device microseconds per call.
template <class F>
double replay_us(cudaStream_t s, F&& f, int batch = 20) {
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < batch; ++i) f();
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  const double us = eager_us(s, [&] { CHECK(cudaGraphLaunch(exec, s)); }, 1) / batch;
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> logs;
  for (int i = 1; i < argc; ++i) logs.push_back(std::atoi(argv[i]));
  if (logs.empty()) logs = {20, 22, 24};
  rs::stream st(rs::device::cuda(0));
  const cudaStream_t s = st.ref().native();
  auto master = rs::map<func1>() | rs::map<func2>() | rs::map<func3>();
  auto sum = rs::map([] RESIDENT_HD(float v) { return v; }) | rs::reduce(rs::plus{}, 0.f);

  {
    const std::size_t n = 10000;
    rs::array<float> x = rs::to_device(rs::cli::seed_input(n), st.ref()), y(n, st.ref()), total(1, st.ref());
    cudaLaunchConfig_t lc{};
    lc.gridDim = 1;
    lc.blockDim = 32;
    lc.stream = s;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &attr;
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    int dev = 0;
    cudaStreamCaptureStatus cap{};
    std::printf("# host cost of issuing, ns per call (n = %zu for the library's calls)\n", n);
    auto row = [](const char* what, double ns) { std::printf("  %-52s %8.0f ns\n", what, ns); };
    row("empty<<<1, 32>>>", host_ns(s, [&] { empty_kernel<<<1, 32, 0, s>>>(); }));
    lc.numAttrs = 0;
    row("cudaLaunchKernelEx, no attribute", host_ns(s, [&] { CHECK(cudaLaunchKernelEx(&lc, empty_kernel)); }));
    lc.numAttrs = 1;
    row("cudaLaunchKernelEx, programmatic serialization", host_ns(s, [&] { CHECK(cudaLaunchKernelEx(&lc, empty_kernel)); }));
    row("cudaGetLastError", host_ns(s, [&] { (void)cudaGetLastError(); }));
    row("cudaGetDevice", host_ns(s, [&] { CHECK(cudaGetDevice(&dev)); }));
    row("cudaSetDevice (the current one)", host_ns(s, [&] { CHECK(cudaSetDevice(0)); }));
    row("cudaStreamIsCapturing", host_ns(s, [&] { CHECK(cudaStreamIsCapturing(s, &cap)); }));
    row("cudaEventRecord", host_ns(s, [&] { CHECK(cudaEventRecord(ev, s)); }));
    row("cudaMemcpyAsync device to device, 40 kB", host_ns(s, [&] {
          CHECK(cudaMemcpyAsync(y.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, s));
        }));
    row("rs::launch(s, {1, 32}, empty)", host_ns(s, [&] { rs::launch(st.ref(), {rs::dims(1), rs::dims(32)}, empty_functor{}); }));
    row("rs::copy(x, y)", host_ns(s, [&] { rs::copy(x, y); }));
    row("fused seed map master(x, y)", host_ns(s, [&] { master(x, y); }));
    row("map + sum into a device array sum(x, total)", host_ns(s, [&] { sum(x, total); }));
    // The same seed map as a run-time chain (resident::jit), in place, as Python's calls run it.
    const auto chain = rs::jit::map("float func1(float v) { return 1.5f * v + 0.5f; }") |
                       rs::jit::map("float func2(float v) { return sqrtf(v * v + 1.f); }") |
                       rs::jit::map("float func3(float v) { return 0.5f * sinf(v); }");
    chain(y);
    row("run-time chain, seed map in place chain(y)", host_ns(s, [&] { chain(y); }));
    rs::array<float> small = rs::to_device(rs::cli::seed_input(1024), st.ref());
    chain(small);
    row("run-time chain, n = 1024 chain(small)", host_ns(s, [&] { chain(small); }));
    if (std::getenv("CALL_COST_SPIN")) {  // a long loop of the run-time call alone, for a sampling profiler
      const double seconds = std::atof(std::getenv("CALL_COST_SPIN"));
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
        for (int i = 0; i < 200; ++i) chain(small);
        CHECK(cudaStreamSynchronize(s));
      }
      return 0;
    }
    CHECK(cudaEventDestroy(ev));
  }

  std::printf("# device time per call, us: 20 calls back-to-back between two events (eager) against the same\n"
              "# 20 calls captured in one graph and replayed; median of 15\n");
  std::printf("  %-6s %-10s %10s %10s %12s\n", "n", "call", "eager", "replay", "eager/replay");
  for (int l : logs) {
    const std::size_t n = std::size_t(1) << l;
    rs::array<float> x = rs::to_device(rs::cli::seed_input(n), st.ref()), y(n, st.ref()), total(1, st.ref());
    auto row = [&](const char* what, auto&& f) {
      const double ea = eager_us(s, f), re = replay_us(s, f);
      std::printf("  2^%-4d %-10s %10.2f %10.2f %12.3f\n", l, what, ea, re, ea / re);
    };
    row("memcpy", [&] { CHECK(cudaMemcpyAsync(y.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, s)); });
    row("fused", [&] { master(x, y); });
    row("sum", [&] { sum(x, total); });
  }
  {
    const std::size_t total = std::size_t(2) << 30;
    // Page-aligned chunks: neighbouring registrations share no page.
    char* const base = static_cast<char*>(std::aligned_alloc(std::size_t(2) << 20, total));
    if (!base) return 1;
    std::memset(base, 1, total);
    std::printf("# cudaHostRegister + cudaHostUnregister of %zu GiB pageable memory in chunks, GB/s (median of 3)\n",
                total >> 30);
    std::printf("  %-10s %8s %8s %8s\n", "chunk", "1 thr", "2 thr", "4 thr");
    for (std::size_t mib : {4, 16, 64, 256}) {
      const std::size_t chunk = mib << 20, chunks = total / chunk;
      std::printf("  %4zu MiB  ", mib);
      for (int threads : {1, 2, 4}) {
        std::vector<double> t;
        for (int r = 0; r < 3; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          std::vector<std::thread> pool;
          for (int k = 0; k < threads; ++k)
            pool.emplace_back([&, k] {
              for (std::size_t c = std::size_t(k); c < chunks; c += std::size_t(threads)) {
                CHECK(cudaHostRegister(base + c * chunk, chunk, cudaHostRegisterDefault));
                CHECK(cudaHostUnregister(base + c * chunk));
              }
            });
          for (auto& th : pool) th.join();
          t.push_back(double(total) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
        }
        std::printf(" %8.1f", median(t));
      }
      std::printf("\n");
    }
    std::free(base);
  }
  CHECK(cudaDeviceSynchronize());
  return 0;
}
