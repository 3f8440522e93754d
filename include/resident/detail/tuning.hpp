#pragma once
/// @file tuning.hpp
/// The one tuning policy: every constant that shapes how resident's executors run, one struct per
/// architecture, one line of reason each. The measurements behind the values are in
/// docs/tuning.md; the benchmarks that re-measure them are `resident bench pipeline`, `small`
/// and `rng`. Host and device code read the same structs.

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace resident::detail {

/// The CPU backend (OpenMP).
struct cpu_tuning {
  /// Loops over fewer items run on the calling thread: waking the team costs about what they take.
  static constexpr std::size_t serial_below = 1024;
  /// Pieces per thread, taken one at a time, so the others take over from a thread the OS put aside.
  static constexpr std::size_t pieces_per_thread = 2;
  /// The fewest items in a piece: taking a piece (an atomic on a shared line) stays negligible.
  static constexpr std::size_t min_piece = std::size_t(1) << 15;
  /// A team thread starting this late was waiting for a core held by another process ...
  static constexpr std::chrono::microseconds late_start{1000};
  /// ... and loops of up to twice such a loop's size then run on the calling thread this long.
  static constexpr std::chrono::milliseconds serial_after_late{1000};
  /// Values a fused loop evaluates together per stage, so each stage's calls vectorize.
  static constexpr int tile = 16;
  /// Pieces start at multiples of this many items, a whole number of every path's vectors (16 floats
  /// at most, times an unroll of 4): whether an element's math runs in a vector call or in the loop's
  /// scalar tail (an ulp or two apart) then follows its place in the array, not the thread count.
  static constexpr std::size_t piece_items = 64;
};

/// Hopper (sm_90): the H200 and H100.
struct sm90_tuning {
  /// Maps run a flat grid, one block per tile: blocks of 128 threads (128 beat 256 and 512) ...
  static constexpr int map_block = 128;
  /// ... each thread taking this many 16-byte vectors of its tile, map_block apart (1 and 4 were slower;
  /// 2 adjacent vectors per thread, 32 bytes, was 1.35x slower than 2 apart). Beat one striding wave
  /// and work taken from a counter at every size.
  static constexpr int map_tile = 2;
  /// Maps of fewer 16-byte vectors than this (of scalars, four per vector) take one per thread: twice
  /// the threads in flight, faster for short maps (one per thread led at 2^20 floats, two at 2^24 and
  /// above, alike at 2^22).
  static constexpr std::size_t map_tile_from = std::size_t(1) << 20;
  /// Vectors in flight per thread per iteration of a striding loop (reductions, configured launches).
  static constexpr int map_unroll = 4;
  /// Generators (Philox) are arithmetic-bound: full occupancy in blocks of 1024 beat 512 and 256.
  static constexpr int generator_block = 1024;
  /// Fused reductions: blocks of 256 folded by cub::BlockReduce, one wave.
  static constexpr int reduce_block = 256;
  /// Reductions of memory handing 4-byte partials over in slots, of at least reduce_wide_from
  /// elements and fewer vectors than 32-bit indices reach, where the kernel fits 32 registers a thread
  /// without spilling: blocks of 1024, two per SM, a quarter of the partials to fold (map + sum of 2^24
  /// floats 0.957 of the copy rate against 0.948 in blocks of 256; of 2^22, L2-resident, 0.665 against
  /// 0.683); their vector indices in 32 bits and one partial loaded per thread of the last block
  /// (2^24 0.975-0.978 against 0.969-0.974 with 64-bit indices and two loads).
  static constexpr int reduce_wide_block = 1024;
  static constexpr int reduce_wide_per_sm = 2;
  static constexpr std::size_t reduce_wide_from = std::size_t(1) << 23;
  /// ... and they let the next kernel be scheduled only after their dependent-launch wait, not
  /// before it as every other kernel does (2^24 0.955 of the copy rate against 0.940; blocks of 256
  /// at 2^22: 0.66 against 0.70 the other way).
  static constexpr bool reduce_wide_waits_first = true;
};

/// The policy of the architecture the kernels are built for (CMAKE_CUDA_ARCHITECTURES 90).
using cuda_tuning = sm90_tuning;

/// Out-of-core pipelines (out_of_core/): how host data is cut, and how pageable host memory is staged.
struct out_of_core_tuning {
  /// Chunks this big keep the copy engines at the bus rate (each copy has a fixed cost of microseconds).
  static constexpr std::size_t chunk_bytes = std::size_t(64) << 20;
  /// Chunks in flight: one going up, one computed, one coming down.
  static constexpr int depth = 3;
  /// With pageable host memory, one more, so the host copies of a chunk in and of another out overlap those three.
  static constexpr int staged_depth = 4;
  /// ... and chunks of this size: the host copies ran faster over 16 MiB chunks than over 64 MiB ones
  /// (docs/tuning.md).
  static constexpr std::size_t staged_chunk_bytes = std::size_t(16) << 20;
  /// Threads copying between pageable memory and the pinned staging (at most the cores less two: the
  /// caller and the driver): one core copies 10-20 GB/s, the staging needs twice the duplex upload rate.
  static constexpr int host_copy_threads = 12;
  /// The smallest piece of a copy one thread takes: the handing out stays negligible beside the copy.
  static constexpr std::size_t copy_piece = std::size_t(1) << 20;
  /// Pieces per thread of a large copy, so the others overtake a thread the OS put aside.
  static constexpr int copy_pieces_per_thread = 2;
  /// Staging pageable input with plain stores (the copy engine then may read the slot from the cache)
  /// rather than streaming stores; the output is drained with streaming stores either way. The mix
  /// streamed pageable data at 0.82 of the duplex upload against 0.66 with streaming stores both ways
  /// (docs/tuning.md).
  static constexpr bool staged_upload_plain_stores = true;
};

/// Explicit transfers of pageable host memory (memory/transfer.cpp).
struct transfer_tuning {
  /// Chunks staged through pinned memory: large enough for the bus rate, small enough that the host copy
  /// of one chunk overlaps the DMA of the other.
  static constexpr std::size_t stage_bytes = std::size_t(16) << 20;
  /// Copies below this go to the driver's own staging: one call costs less than two chunk hand-overs.
  static constexpr std::size_t direct_below = std::size_t(1) << 20;
  /// Staging slots (two chunk buffers each) per device: host threads transferring at once each take one,
  /// so up to this many staged transfers proceed in parallel; further callers wait for a slot.
  static constexpr int staging_slots = 4;
};

/// What a profile times on a GPU (insight/profile.cpp): an event pair per call costs the host
/// microseconds, so after a site's first calls one call in `timing_stride` is timed and counts for itself
/// and the untimed calls before it (the site's time and rates stay whole-run estimates). CPU calls are
/// timed on the host clock, every one.
struct profile_tuning {
  /// Every call of a site is timed until it has made this many.
  static constexpr std::uint64_t timed_first = 64;
  /// Then one call in this many.
  static constexpr std::uint64_t timing_stride = 16;
  /// The calls that the call made after `seen` calls of its site counts for: 0 when it is not timed.
  static constexpr std::uint64_t weight(std::uint64_t seen) noexcept {
    if (seen < timed_first) return 1;
    return (seen - timed_first + 1) % timing_stride == 0 ? timing_stride : 0;
  }
};

}  // namespace resident::detail
