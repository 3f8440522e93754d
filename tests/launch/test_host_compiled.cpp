// Compiled by the host compiler even in CUDA builds (not listed in resident_one_source): launching on
// a GPU from such a file cannot work, and must say so instead of failing obscurely.
#include "resident/out_of_core/out_of_core.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using host_compiled = backend;

TEST_P(host_compiled, launching_on_a_gpu_says_to_compile_as_cuda) {
  rs::array<float> x(10, dev);
  auto fill = [](rs::thread_index) {};
  if (dev.is_cpu()) {
    rs::launch(rs::default_stream(dev), {rs::dims(1), rs::dims(10)}, fill);  // the CPU backend runs it
    rs::map([](float v) { return v + 1.f; })(x);
    return;
  }
  try {
    rs::launch(rs::default_stream(dev), {rs::dims(1), rs::dims(10)}, fill);
    FAIL() << "launch from a host-compiled file on " << dev.name() << " did not throw";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("compile it as CUDA"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rs::map([](float v) { return v + 1.f; })(x), rs::invalid_argument);
}

RESIDENT_BACKENDS(host_compiled);

// A GPU this process cannot use at all (no GPU, or a library built without CUDA): device_unavailable,
// not the advice to compile the caller with nvcc, which would not help.
TEST(host_compiled_without_a_gpu, a_gpu_no_build_could_reach_is_device_unavailable) {
  if (rs::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is usable here";
  std::vector<float> h(16, 1.f);
  rs::out_of_core_options o;
  o.target = rs::device::cuda(0);
  EXPECT_THROW(rs::out_of_core(rs::map([](float v) { return v + 1.f; }), h, h, o), rs::device_unavailable);
  EXPECT_THROW((void)rs::out_of_core(rs::reduce(rs::plus{}, 0.f), h, o), rs::device_unavailable);
}

}  // namespace
