#pragma once
/// @file pool.hpp
/// Stream-ordered memory pools, one per device: cudaMallocAsync on a device mempool that keeps freed
/// memory for reuse (no cudaMalloc on the hot path); a caching, 256-byte-aligned host pool on the CPU.
///
/// Thread safety: every call may run concurrently from any number of threads. Each device's figures
/// (bytes in use, peak, counts, limit, caching switch) are atomics; bytes are claimed against the limit
/// with a compare-and-swap before allocating, so two threads cannot both pass it. The CPU pool's cache
/// of freed blocks is under one lock; a GPU's pool is the driver's mempool (thread-safe). Environment
/// variables are read once (RESIDENT_POOL_LIMIT) or at first use of a device's pool.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

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
  std::optional<std::size_t> limit;  ///< the cap on bytes in use (set_pool_limit); empty: none
};

/// Figures of d's pool.
pool_statistics pool_stats(device d);

/// Returns the memory d's pool caches to the system. Synchronizes d (unless a capture is under way).
void trim_pool(device d);

/// The most freed bytes the CPU pool keeps cached for reuse: 64 MiB. Past it, the blocks freed longest
/// ago return to the system (the block just freed stays, so a large array made and freed in a loop is
/// still served from the cache). The CUDA pool keeps what it holds until trim_pool or a limit.
inline constexpr std::size_t host_pool_release_threshold = std::size_t(64) << 20;

/// Turns caching on or off for d's pool (off: every free returns memory; for debugging leaks and
/// out-of-bounds accesses that reuse would hide).
void set_pool_caching(device d, bool enabled);
/// Whether d's pool caches freed memory (on by default; RESIDENT_POOL_CACHING=0 starts it off).
bool pool_caching(device d);

/// Caps the bytes d's pool may have in use at once (the ledger's and pool_stats' peak_bytes stay at
/// or below it). An allocation that would cross the limit first returns the pool's cached memory to
/// the system and checks again (frees made meanwhile count), then throws out_of_memory with the
/// requested, in-use and reserved bytes and the limit. Before the pool grows past the limit it returns
/// its cached memory, so the memory it reserves stays near the limit too (within the driver's
/// granularity on CUDA). Synchronizes d when it trims. Each device has its own limit; the
/// environment variable RESIDENT_POOL_LIMIT (e.g. `2GiB`, `512MiB`, `1000000`; read once) gives
/// every device's starting limit.
/// @throws invalid_argument when bytes is 0 (use clear_pool_limit to lift a limit) or below the bytes
/// d's pool has in use now (free arrays first).
void set_pool_limit(device d, std::size_t bytes);
/// Lifts d's pool limit (also one RESIDENT_POOL_LIMIT set).
void clear_pool_limit(device d);
/// d's pool limit in bytes; empty when there is none.
/// @throws invalid_argument when RESIDENT_POOL_LIMIT holds something that is not a byte count.
std::optional<std::size_t> pool_limit(device d);

/// Starts the peak figures of d (pool_stats().peak_bytes and the ledger's peak_bytes) again from
/// the bytes in use now, so that a region's peak can be measured.
void reset_pool_peak(device d);

/// Alignment of every pool allocation, in bytes.
inline constexpr std::size_t pool_alignment = 256;

namespace detail {
/// Reads a byte count: digits with an optional unit B, KiB, MiB, GiB, TiB (powers of 1024) or kB,
/// MB, GB, TB (powers of 1000), a space allowed between them; empty when text is not one or it
/// overflows.
std::optional<std::size_t> parse_bytes(std::string_view text);
/// Allocates bytes on s's device, ordered on s. bytes == 0 returns nullptr and does no device work.
/// @throws out_of_memory after trimming the pool and retrying once, or when the pool's limit would be
/// crossed after a trim.
void* pool_allocate(std::size_t bytes, stream_ref s);
/// Frees p (allocated with the same size) ordered on s. Never throws.
void pool_deallocate(void* p, std::size_t bytes, stream_ref s) noexcept;
/// Builds the pools' static state now, so that it is destroyed after any object that calls this in
/// its constructor: an array in static storage can still free itself at exit.
void pool_keepalive() noexcept;
}  // namespace detail

}  // namespace resident
