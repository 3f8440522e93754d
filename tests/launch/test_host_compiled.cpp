// Compiled by the host compiler even in CUDA builds (not listed in resident_one_source): launching on
// a GPU from such a file cannot work, and must say so instead of failing obscurely.
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

}  // namespace
