#pragma once
/// @file per_device.hpp
/// The one per-device table: a T for the CPU and for each CUDA device index resident can address.
///
/// Thread safety: the table itself has no lock; its slots exist from construction (no lazy growth), so
/// looking one up is safe from any thread, and each user makes its T safe: atomics (ledger, pool
/// figures), a lock around the table (staging slots, properties), or a thread_local table.

#include <array>
#include <cstddef>
#include <string>

#include "resident/device/device.hpp"
#include "resident/error.hpp"

namespace resident::detail {

/// The CUDA device indices resident addresses: 0 .. max_cuda_devices - 1.
inline constexpr int max_cuda_devices = 64;

/// One T per device, value-initialized: slot 0 is the CPU, slot 1 + i is cuda:i. Every access checks
/// the index (an index beyond the table is invalid_argument, never a write past it).
template <class T>
class per_device {
 public:
  /// The slot of device d.
  T& operator[](device d) { return d.is_cpu() ? slots_[0] : slots_[slot(d.index())]; }
  /// The slot of cuda:index.
  T& cuda(int index) { return slots_[slot(index)]; }
  /// Every slot, the CPU's first.
  std::array<T, max_cuda_devices + 1>& all() noexcept { return slots_; }

 private:
  static std::size_t slot(int cuda_index) {
    // A negative index would otherwise be the CPU's slot (or before the table).
    RESIDENT_EXPECTS(cuda_index >= 0, "CUDA device index " + std::to_string(cuda_index) +
                                          " is negative; CUDA devices are cuda:0 and up");
    RESIDENT_EXPECTS(cuda_index < max_cuda_devices,
                     "CUDA device index " + std::to_string(cuda_index) + " is beyond the " +
                         std::to_string(max_cuda_devices) + " devices resident addresses");
    return std::size_t(cuda_index + 1);
  }
  std::array<T, max_cuda_devices + 1> slots_{};
};

}  // namespace resident::detail
