#pragma once
/// @file device.hpp
/// Where code runs: the CPU or a CUDA device, chosen at run time.
///
/// Thread safety: every call here may run concurrently. The device count and the CPU's properties are
/// read once (function-local statics); GPU properties are cached under a lock. device_scope changes the
/// calling thread's current device only (CUDA's current device is per thread).

#include <cstddef>
#include <string>
#include <string_view>

#include "resident/config.hpp"

namespace resident {

/// Which backend a device belongs to.
enum class device_kind { cpu, cuda };

/// A place where arrays live and work runs: `cpu` or `cuda:N`. A plain value.
class device {
 public:
  constexpr device() = default;
  /// The CPU backend (OpenMP threads); always available.
  static constexpr device cpu() noexcept { return device{device_kind::cpu, 0}; }
  /// CUDA device `index` (not checked here: the first use of an absent one throws device_unavailable).
  static constexpr device cuda(int index = 0) noexcept { return device{device_kind::cuda, index}; }

  /// The backend, cpu or cuda.
  constexpr device_kind kind() const noexcept { return kind_; }
  /// The CUDA device index (0 for the CPU).
  constexpr int index() const noexcept { return index_; }
  /// True for the CPU.
  constexpr bool is_cpu() const noexcept { return kind_ == device_kind::cpu; }
  /// True for a CUDA device.
  constexpr bool is_cuda() const noexcept { return kind_ == device_kind::cuda; }
  /// "cpu" or "cuda:N".
  std::string name() const;

  /// Same backend and same index.
  friend constexpr bool operator==(device a, device b) noexcept {
    return a.kind_ == b.kind_ && a.index_ == b.index_;
  }

 private:
  constexpr device(device_kind k, int i) : kind_(k), index_(i) {}
  device_kind kind_ = device_kind::cpu;
  int index_ = 0;
};

/// What a device is and what it allows.
struct device_properties {
  std::string name;             ///< e.g. "NVIDIA H200" or the CPU model
  int multiprocessors = 0;      ///< SMs on a GPU, hardware threads on the CPU
  std::size_t memory_bytes = 0; ///< global memory (GPU) or physical memory (CPU)
  ///@{
  /// Compute capability (major, minor) of a GPU; 0 on the CPU.
  int cc_major = 0, cc_minor = 0;
  ///@}
  /// Threads per warp (32 on a GPU, 1 on the CPU).
  int warp_size = 1;
  /// Most threads in one block.
  int max_threads_per_block = 1024;
  int max_threads_per_multiprocessor = 1024;  ///< resident threads per SM (a CPU "SM" runs one block)
  int max_blocks_per_multiprocessor = 1;      ///< resident blocks per SM
  /// Most threads of a block along x, y and z.
  int max_block_dim[3] = {1024, 1024, 64};
  /// Most blocks of a grid along x, y and z.
  int max_grid_dim[3] = {2147483647, 65535, 65535};
  std::size_t shared_per_block = 48 * 1024;        ///< without opt-in
  std::size_t shared_per_block_optin = 48 * 1024;  ///< with cudaFuncAttributeMaxDynamicSharedMemorySize
  /// L2 cache size in bytes (0 where unknown).
  std::size_t l2_bytes = 0;
};

/// Parses "cpu", "cuda" (= cuda:0) or "cuda:N". @throws invalid_argument for anything else.
device parse_device(std::string_view text);

/// Number of CUDA devices that answer (0 when the build has no CUDA backend, no driver or no GPU).
int cuda_device_count() noexcept;

/// Why no CUDA device answers ("" when one does): no backend compiled, no driver, no device.
std::string cuda_unavailable_reason();

/// The device used when none is named: RESIDENT_DEVICE if set (cpu | cuda | cuda:N), else cuda:0 when a
/// GPU answers, else the CPU. @throws device_unavailable when RESIDENT_DEVICE names a device that
/// cannot be used; invalid_argument when it cannot be parsed.
device default_device();

/// Checks that d can be used. @throws device_unavailable saying why not.
void require(device d);

/// Properties of d. @throws device_unavailable.
device_properties properties(device d);

/// Blocks until all work on d has finished. @throws cuda_error / device_lost on a pending fault.
void synchronize(device d);

/// Makes d's GPU the calling thread's current device for the object's lifetime, then restores the
/// previous one (nothing to set when d is already current; nothing at all for the CPU). CUDA sends a
/// launch on a null stream handle to the current device, and refuses one on a stream of another
/// device. resident's own calls that take a stream (pipelines, launches, matmul, copies, events,
/// synchronization, allocations) make the stream's device current themselves, and a flow opens one
/// around each stage; open one around CUDA calls of your own (your kernels, a vendor library) on
/// another GPU's stream.
///
///   { rs::device_scope on(x.device()); my_kernel<<<grid, block, 0, x.stream().native()>>>(x.data()); }
class device_scope {
 public:
  /// Makes d current (a GPU), remembering the previous device. @throws device_unavailable, cuda_error.
  explicit device_scope(device d);
  ~device_scope();
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace resident
