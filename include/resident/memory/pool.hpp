#pragma once
/// @file pool.hpp
/// Stream-ordered memory pools, one per device: cudaMallocAsync on a device mempool that keeps freed
/// memory for reuse (no cudaMalloc on the hot path); a caching, 256-byte-aligned host pool on the CPU.

#include <cstddef>
#include <cstdint>

#include "resident/device/stream.hpp"

namespace resident {

/// A device pool's figures.
struct pool_statistics {
  std::size_t bytes_in_use = 0;    ///< held by live allocations
  std::size_t bytes_reserved = 0;  ///< held by the pool from the system (in use + cached)
  std::size_t peak_bytes = 0;      ///< the most bytes in use at once
  std::uint64_t allocations = 0;   ///< allocations served since start
  std::uint64_t pool_hits = 0;     ///< of which the pool served without growing
  std::uint64_t outstanding = 0;   ///< live allocations now
};

/// Figures of d's pool.
pool_statistics pool_stats(device d);

/// Returns the memory d's pool caches to the system. Synchronizes d (unless a capture is under way).
void trim_pool(device d);

/// Turns caching on or off for d's pool (off: every free returns memory; for debugging leaks and
/// out-of-bounds accesses that reuse would hide).
void set_pool_caching(device d, bool enabled);
/// Whether d's pool caches freed memory (on by default; RESIDENT_POOL_CACHING=0 starts it off).
bool pool_caching(device d);

/// Alignment of every pool allocation, in bytes.
inline constexpr std::size_t pool_alignment = 256;

namespace detail {
/// Allocates bytes on s's device, ordered on s. bytes == 0 returns nullptr and does no device work.
/// @throws out_of_memory after trimming the pool and retrying once.
void* pool_allocate(std::size_t bytes, stream_ref s);
/// Frees p (allocated with the same size) ordered on s. Never throws.
void pool_deallocate(void* p, std::size_t bytes, stream_ref s) noexcept;
/// Builds the pools' static state now, so that it is destroyed after any object that calls this in
/// its constructor: an array in static storage can still free itself at exit.
void pool_keepalive() noexcept;
}  // namespace detail

}  // namespace resident
