// Plain CUDA, no resident: does compute-sanitizer memcheck --track-stream-ordered-races all flag a
// kernel on a forked branch of a captured graph that reads memory from the stream-ordered pool?
// The shape of a captured two-branch flow: fork with an event from s0 to s1, a kernel on each,
// join back to s0, replay three times.
//
// usage: compute-sanitizer --tool memcheck --track-stream-ordered-races all graph_memcheck_repro MODE
//   MODE legacy: x from cudaMallocAsync on the legacy default stream (as resident's default stream)
//        s0:     x from cudaMallocAsync on s0, the stream the graph is captured and launched on
//        malloc: x from cudaMalloc
#include <cuda_runtime.h>

#include "experiment.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>


__global__ void add(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + a;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "legacy";
  const int n = 4096;
  cudaStream_t s0, s1;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  float *x, *y, *z;
  if (mode == "malloc") {
    CHECK(cudaMalloc(&x, n * 4));
  } else {
    CHECK(cudaMallocAsync(&x, n * 4, mode == "s0" ? s0 : cudaStream_t(0)));
  }
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMalloc(&z, n * 4));
  CHECK(cudaMemsetAsync(x, 0, n * 4, mode == "s0" ? s0 : cudaStream_t(0)));
  CHECK(cudaDeviceSynchronize());

  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaEventRecord(fork, s0));
  CHECK(cudaStreamWaitEvent(s1, fork));
  add<<<n / 256, 256, 0, s0>>>(x, y, 1.f, n);
  add<<<n / 256, 256, 0, s1>>>(x, z, 3.f, n);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(join, s1));
  CHECK(cudaStreamWaitEvent(s0, join));
  CHECK(cudaStreamEndCapture(s0, &g));
  cudaGraphExec_t ge;
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int r = 0; r < 3; ++r) CHECK(cudaGraphLaunch(ge, s0));
  CHECK(cudaStreamSynchronize(s0));
  std::printf("graph_memcheck_repro %s: done\n", mode.c_str());
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  if (mode == "malloc") CHECK(cudaFree(x)); else CHECK(cudaFreeAsync(x, s0));
  CHECK(cudaStreamSynchronize(s0));
  CHECK(cudaFree(y));
  CHECK(cudaFree(z));
  return 0;
}
