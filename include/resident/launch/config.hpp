#pragma once
/// @file config.hpp
/// Launch configurations: Numba's kernel[blocks, threads] as a value, validated against the device.
///
/// Thread safety: validate and the occupancy queries may run concurrently (kernel limits are cached
/// under a lock); set_programmatic_launch is one atomic switch for the whole process.

#include <cstddef>
#include <string>

#include "resident/config.hpp"
#include "resident/device/device.hpp"

namespace resident {

/// Up to three extents, like CUDA's dim3 (unset extents are 1).
struct dims {
  ///@{
  /// Extents along x, y and z.
  unsigned x = 1, y = 1, z = 1;
  ///@}
  RESIDENT_HD constexpr dims() {}
  /// Extents (x, y, z); the ones left out are 1.
  RESIDENT_HD constexpr dims(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  /// x * y * z.
  RESIDENT_HD constexpr std::size_t count() const { return std::size_t(x) * y * z; }
  /// "(x,y,z)".
  std::string str() const;
};

/// [grid, block] plus dynamic shared memory in bytes.
struct launch_config {
  /// Blocks in the grid.
  dims grid{1};
  /// Threads in a block.
  dims block{1};
  /// Dynamic shared memory per block, in bytes.
  std::size_t shared_bytes = 0;
  std::string str() const;  ///< "[grid (2,1,1), block (4,1,1), shared 0 B]"
};

/// Checks cfg against d's limits (threads per block, each block and grid extent, shared memory with
/// the opt-in maximum; no extent may be 0). @throws invalid_launch saying which limit and by how much.
void validate(const launch_config& cfg, device d);

/// Programmatic dependent launch (Hopper and later): resident's fused kernels let the stream's next
/// kernel be scheduled while they run, and each waits for its predecessor's results before touching
/// memory, so results are unchanged and only launch latency overlaps (chains of small kernels, in
/// graphs too). On by default on devices that support it; RESIDENT_PDL=0 turns it off at start.
bool programmatic_launch() noexcept;
/// Turns programmatic dependent launch on or off for later launches (process-wide).
void set_programmatic_launch(bool on) noexcept;

/// Where a thread is: its block and thread indices and the launch's extents. On the GPU it reads
/// blockIdx/threadIdx; the CPU backend fills it in for each emulated thread.
struct thread_index {
  ///@{
  /// This thread's block index, its thread index in the block, the block's extents and the grid's extents.
  dims block, thread, block_dim, grid_dim;
  ///@}
  /// x-index of this thread in the whole grid: block.x * block_dim.x + thread.x.
  RESIDENT_HD constexpr std::size_t global_x() const { return std::size_t(block.x) * block_dim.x + thread.x; }
  /// y-index of this thread in the whole grid: block.y * block_dim.y + thread.y.
  RESIDENT_HD constexpr std::size_t global_y() const { return std::size_t(block.y) * block_dim.y + thread.y; }
  /// Threads in the whole grid along x: the stride of a grid-stride loop.
  RESIDENT_HD constexpr std::size_t grid_stride() const { return std::size_t(grid_dim.x) * block_dim.x; }
};

/// A block's shared memory (cfg.shared_bytes of it, 16-byte aligned): on-chip on the GPU, a buffer per
/// block on the CPU backend.
struct block_shared {
  /// Start of the block's shared memory.
  void* data;
  /// Its size in bytes (cfg.shared_bytes).
  std::size_t bytes;
  /// The shared memory as an array of T.
  template <class T>
  RESIDENT_HD T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace resident
