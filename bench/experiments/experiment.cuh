// What the experiments share: a checked CUDA call, and the median time of a region between two events
// after warm-up runs, the last error checked after each run.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t e = (call);                                                             \
    if (e != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e));            \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

struct timer {
  cudaEvent_t a, b;
  timer() {
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
  }
  ~timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  /// Median milliseconds of f() issued on the legacy default stream.
  template <class F>
  double median_ms(F&& f, int reps = 40, int warmup = 3) {
    for (int i = 0; i < warmup; ++i) f();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> t(std::size_t(reps > 0 ? reps : 1));
    for (auto& v : t) {
      CHECK(cudaEventRecord(a));
      f();
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaEventElapsedTime(&v, a, b));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};
