// The run-time seed program's map kernel, as src/jit generated it (4e167bb), built four ways: tiles of
// 2 or 4 vectors a thread (k_t2*, k_t4*), vector indices in 64 or 32 bits (*_32). Each is launched as
// the library launches it (blocks of 128, a block per tile, programmatic serialization) at 2^N floats
// after about a second of load (the GPU at its power cap, as in a long race), then 12 rounds of 40
// calls between events, interleaved with cudaMemcpyAsync of the same bytes. Usage: map_index_width N
// (runs 99-100, docs/measurements.md).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
struct rs_args { const void* in[8]; void* out; unsigned long long n, seed, offset; double a, b; void* partials; unsigned long long* counters; const void* fns[16]; int vec; };
extern "C" __global__ void k_t2(rs_args); extern "C" __global__ void k_t4(rs_args);
extern "C" __global__ void k_t2_32(rs_args); extern "C" __global__ void k_t4_32(rs_args);
__global__ void init(float* x, unsigned long long n) { for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < n; i += 256ull * gridDim.x) x[i] = (i * 2654435761ull % 1000003) / 1000003.0f; }
int main(int argc, char** argv) {
  const unsigned long long n = 1ull << atoi(argv[1]); float *x, *y; cudaMalloc(&x, n * 4); cudaMalloc(&y, n * 4);
  init<<<4096, 256>>>(x, n); cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  rs_args a{}; a.in[0] = x; a.out = y; a.n = n; a.vec = 1;
  struct V { const char* name; void (*k)(rs_args); int tile; };
  std::vector<V> vs = {{"tile2 (now)", k_t2, 2}, {"tile4", k_t4, 4}, {"tile2 32-bit", k_t2_32, 2}, {"tile4 32-bit", k_t4_32, 4}, {"memcpy", nullptr, 0}};
  auto launch = [&](const V& v) {
    if (!v.k) { cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice, s); return; }
    cudaLaunchConfig_t c{}; c.gridDim = dim3(unsigned((n / 4 + 128 * v.tile - 1) / (128 * v.tile))); c.blockDim = dim3(128); c.stream = s;
    cudaLaunchAttribute at{}; at.id = cudaLaunchAttributeProgrammaticStreamSerialization; at.val.programmaticStreamSerializationAllowed = 1;
    c.attrs = &at; c.numAttrs = 1; cudaLaunchKernelEx(&c, v.k, a);
  };
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<std::vector<float>> t(vs.size());
  for (int heat = 0; heat < int((1ull << 37) / n); ++heat) launch(vs[0]);  // about a second of load: the power cap's state
  cudaStreamSynchronize(s);
  for (int round = 0; round < 12; ++round)
    for (size_t i = 0; i < vs.size(); ++i) {
      launch(vs[i]); cudaEventRecord(e0, s);
      for (int c = 0; c < 40; ++c) launch(vs[i]);
      cudaEventRecord(e1, s); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t[i].push_back(ms / 40);
    }
  for (size_t i = 0; i < vs.size(); ++i) {
    auto v = t[i]; std::sort(v.begin(), v.end()); auto m = t.back(); std::sort(m.begin(), m.end());
    std::printf("2^%s %-14s median %.4f ms  min %.4f max %.4f  over memcpy %.4f\n", argv[1], vs[i].name, v[v.size() / 2], v.front(), v.back(), v[v.size() / 2] / m[m.size() / 2]);
  }
  std::printf("check %s\n", cudaGetErrorString(cudaGetLastError()));
}
