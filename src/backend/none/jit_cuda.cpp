// Run-time chains in a build without the CUDA backend: a CUDA array cannot exist, so say how to get one.
#include "jit/backend.hpp"

namespace resident::jit::detail {

void run_cuda(const std::vector<part>&, const signature&, kernel_args, std::size_t, stream_ref, void*,
              std::shared_ptr<loaded>&, result_memory) {
  RESIDENT_FAIL("jit: this build of resident has no CUDA backend; configure with -DRESIDENT_CUDA=ON to run "
                "chains on a GPU", device_unavailable);
}

std::string compile_cuda(const std::string&, int, int) {
  RESIDENT_FAIL("jit: this build of resident has no CUDA backend (no NVRTC); configure with -DRESIDENT_CUDA=ON",
                device_unavailable);
}

std::string link_cuda(const std::string&, const std::vector<part>&, int, int) { return compile_cuda({}, 0, 0); }
std::string ltoir_of(const std::string&, int, int) { return compile_cuda({}, 0, 0); }

}  // namespace resident::jit::detail
