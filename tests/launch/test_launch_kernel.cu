// launch_kernel with __global__ kernels (CUDA builds only): a caller's configuration checked against
// the kernel's own limits before the launch, not only the device's.
#include <functional>
#include <string>

#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

__global__ void __launch_bounds__(128) bounded_kernel(int* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1; }

// 32 KiB of static shared memory beside whatever dynamic shared memory the launch asks for.
__global__ void static_shared_kernel(int* out) {
  __shared__ int tile[8192];
  tile[threadIdx.x] = int(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

void expect_invalid_launch(const std::function<void()>& call, const char* says) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one saying " << says;
  } catch (const rs::invalid_launch& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

using kernels = backend;

TEST_P(kernels, a_kernel_s_own_limits_are_checked_before_the_launch) {
  rs::stream s(dev);
  rs::array<int> out(256, s.ref());
  rs::launch_kernel(bounded_kernel, s.ref(), {rs::dims(2), rs::dims(128)}, out.data());
  expect_invalid_launch([&] { rs::launch_kernel(bounded_kernel, s.ref(), {rs::dims(1), rs::dims(256)}, out.data()); },
                        "256 threads per block exceed this kernel's limit of 128");
  const std::size_t most = rs::properties(dev).shared_per_block_optin, own = 8192 * sizeof(int);
  rs::launch_kernel(static_shared_kernel, s.ref(), {rs::dims(1), rs::dims(256), most - own}, out.data());
  expect_invalid_launch(
      [&] { rs::launch_kernel(static_shared_kernel, s.ref(), {rs::dims(1), rs::dims(256), most - own + 16}, out.data()); },
      "beside the kernel's 32768 static bytes");
  // The refusals left the stream as it was: the accepted launches ran.
  const auto h = out.to_host();
  for (int i = 0; i < 256; ++i) ASSERT_EQ(h[std::size_t(i)], 255 - i) << i;
}

RESIDENT_CUDA_ONLY(kernels);  // launch_kernel launches __global__ kernels: CUDA only

}  // namespace
