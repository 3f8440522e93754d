// The two run-time compilers behind compiler_of: the host compiler + dlopen for the CPU, NVRTC + the
// driver API for CUDA devices (whose stand-in in a build without CUDA says how to get one).
#include <atomic>

#include "jit/backend.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/device/device.hpp"

namespace resident::jit::detail {
namespace {

class host_compiler final : public kernel_compiler {
 public:
  flavor text() const noexcept override { return flavor::host; }
  std::string target(device) const override { return {}; }
  void run(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n, stream_ref,
           void* result, std::shared_ptr<loaded>& kernel, result_memory) const override {
    if (sig.reduces) args.out = result;  // host memory: the host kernel writes the value itself
    run_host(parts, sig, args, n, kernel);
  }
};

class cuda_compiler final : public kernel_compiler {
 public:
  flavor text() const noexcept override { return flavor::cuda; }
  std::string target(device d) const override {
    // Asked by every call (its kernel's key): the compute capability read once per device, not the
    // whole properties record copied under their lock.
    static resident::detail::per_device<std::atomic<int>> cc;  // 0: not read yet
    std::atomic<int>& slot = cc[d];
    int v = slot.load(std::memory_order_relaxed);
    if (v == 0) {
      const auto p = resident::properties(d);
      v = p.cc_major * 10 + p.cc_minor;
      slot.store(v, std::memory_order_relaxed);
    }
    return std::to_string(v);
  }
  void run(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n, stream_ref s,
           void* result, std::shared_ptr<loaded>& kernel, result_memory where) const override {
    run_cuda(parts, sig, args, n, s, result, kernel, where);
  }
};

}  // namespace

const kernel_compiler& compiler_of(device d) noexcept {
  static const auto* host = new host_compiler;  // never destroyed, as the backends
  static const auto* cuda = new cuda_compiler;
  if (d.is_cpu()) return *host;
  return *cuda;
}

}  // namespace resident::jit::detail
