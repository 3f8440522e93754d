#pragma once
/// @file transfer.hpp
/// The byte movers behind every explicit transfer. Each counts itself in the ledger and obeys the
/// transfer policy. Users call to_device / array::to_host / copy instead.
///
/// Thread safety: transfers may run concurrently from any number of threads, on any streams. Staged
/// pageable transfers take a staging slot of their own (two pinned chunk buffers and their events) from
/// their device's set, under that set's lock; a slot is held for one whole call and its events make
/// the next holder wait for the copies still reading or filling its buffers. At most
/// transfer_tuning::staging_slots slots exist per device: further callers wait for one to come back.

#include <cstddef>

#include "resident/device/stream.hpp"

namespace resident {

/// Whether a call waits for its copy to finish before returning.
enum class sync { blocking, async };

/// How pageable host memory crosses the bus: in chunks through pinned double buffers filled by
/// several threads (the default, near the pinned rate), or as one plain cudaMemcpy that the driver
/// stages itself (what frameworks that copy implicitly do; kept for comparison).
enum class staging { chunked, none };

namespace detail {

/// Refuses host memory given as a null pointer with n > 0 elements (a span at nullptr), which would be
/// read or written at address 0, before any work. call: the function named in the message.
/// @throws invalid_argument.
void check_host_memory(const void* p, std::size_t n, const char* call);

/// Host memory -> memory of s's device. Pageable host memory is staged through pinned double
/// buffers in chunks (the call returns once the host memory has been read); pinned memory is copied
/// directly and asynchronously (keep it alive until s is synchronized).
void copy_host_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s,
                         staging st = staging::chunked);

/// Memory of s's device -> host memory. Pageable destinations are staged and the call blocks;
/// pinned destinations are copied asynchronously unless mode is sync::blocking.
void copy_device_to_host(void* dst, const void* src, std::size_t bytes, stream_ref s, sync mode,
                         staging st = staging::chunked);

/// Within one device, ordered on s.
void copy_device_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s);

/// From src (memory of src_s's GPU) to dst (memory of dst_s's GPU, another one): cudaMemcpyPeerAsync
/// on dst_s after the work queued on src_s (an event between the two devices), then src_s waits for
/// the copy, so that src's later writes and its release come after it was read. Peer access and pool
/// access between the two are enabled on first use. Counted as a peer copy on dst's device; passes
/// every transfer policy (nothing crosses the host bus). Asynchronous: no host synchronization.
void copy_peer(void* dst, stream_ref dst_s, const void* src, stream_ref src_s, std::size_t bytes);

/// Parallel host memcpy (OpenMP threads over 1 MiB pieces).
void parallel_memcpy(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace detail
}  // namespace resident
