#pragma once
/// @file cuda_runtime.hpp
/// The narrow interface between resident's host code and the CUDA runtime. Implemented by
/// src/backend/cuda/cuda_runtime.cpp when the build has the CUDA backend, by
/// src/backend/none/cuda_runtime.cpp otherwise (every call then throws device_unavailable). Keeps the
/// CUDA headers out of every public .hpp. The library's compiled code reaches it through the run-time
/// backend (src/backend/); public templates call it directly.
///
/// A null stream handle is the legacy default stream of the device that is current when CUDA is
/// called. Every call below that takes a stream handle and a device index (`dev`) runs with that
/// device current, restoring the caller's after, so a null handle names dev's default stream whichever
/// device the calling thread has current.

#include <cstddef>
#include "resident/detail/source_location.hpp"
#include <string>

#include "resident/config.hpp"
#include "resident/device/device.hpp"
#include "resident/device/stream.hpp"

namespace resident::detail::cuda {

int device_count(std::string* why) noexcept;
device_properties properties(int dev);
void synchronize_device(int dev);

cuda_stream_t stream_create(int dev);
void stream_destroy(cuda_stream_t s) noexcept;
/// Blocks until the work queued on s, a stream of dev, has finished.
void stream_synchronize(int dev, cuda_stream_t s);
/// Whether the work queued on s, a stream of dev, has finished (cudaStreamQuery; a fault throws).
bool stream_done(int dev, cuda_stream_t s);
bool stream_is_capturing(cuda_stream_t s);
/// Two counters in device memory that kernels on stream s of dev may count work in: the stream's own
/// slot, made zero on first use (a legacy or per-thread default stream has one per host thread), kept
/// until the stream is destroyed and never handed to another stream. Launches on one stream run in
/// order, so they share it; each leaves both counters zero when it ends. (A stream made outside
/// resident keeps its slot until exit: finish its work before destroying it and reusing the handle.)
unsigned long long* stream_counters(int dev, cuda_stream_t s);
/// Bytes of stream_scratch.
inline constexpr std::size_t stream_scratch_bytes = (std::size_t(64) << 10) - 256;
/// Device memory of the same slot (after its counters, 256-byte aligned), stream_scratch_bytes of it,
/// for what one kernel on s writes and reads itself (a reduction's per-block partials): kernels on one
/// stream run in order, so they share it. Not for work being captured (replays may run elsewhere).
void* stream_scratch(int dev, cuda_stream_t s);
/// Slots of stream_handover.
inline constexpr std::size_t stream_handover_slots = 4096;
/// 8-byte slots of the same slot, zero on first use, in which the blocks of one kernel on s hand a
/// reduction's partials to its last block; each kernel leaves them zero, like the counters. Not for
/// work being captured.
unsigned long long* stream_handover(int dev, cuda_stream_t s);
/// Makes `after` wait for the work queued on `before` so far, both streams of dev (an event between
/// them; nullptr is dev's legacy default stream, which non-blocking streams do not wait for by
/// themselves).
void stream_after(int dev, cuda_stream_t after, cuda_stream_t before);
/// The same across devices: `after`, a stream of after_dev, waits for the work queued so far on
/// `before`, a stream of before_dev (an event of before_dev recorded there; a stream of one device may
/// wait on another device's event; a null handle is that device's legacy default stream). Asynchronous.
void stream_after_peer(cuda_stream_t after, int after_dev, cuda_stream_t before, int before_dev);

cuda_event_t event_create(int dev);
void event_destroy(cuda_event_t e) noexcept;
/// Records e, an event of dev, on s, a stream of dev.
void event_record(int dev, cuda_event_t e, cuda_stream_t s);
void event_synchronize(cuda_event_t e);
/// Makes s, a stream of dev, wait for e, an event of any device (CUDA allows a stream to wait on
/// another device's event).
void stream_wait_event(int dev, cuda_stream_t s, cuda_event_t e);
float event_elapsed_ms(cuda_event_t a, cuda_event_t b);

/// Stream-ordered allocation from the device's pool, ordered on s, a stream of dev. Returns nullptr on
/// out-of-memory (no throw).
void* pool_allocate(int dev, std::size_t bytes, cuda_stream_t s);
void pool_deallocate(int dev, void* p, cuda_stream_t s);
std::size_t pool_reserved(int dev);
std::size_t pool_used(int dev);
/// Releases the pool's cached memory back to the device (synchronizes the device first unless a
/// capture is under way on s).
void pool_trim(int dev, cuda_stream_t s);
/// The driver's own allocator (cudaMalloc / cudaFree), for comparison in benchmarks.
void* raw_malloc(int dev, std::size_t bytes);
void raw_free(void* p);
void mem_info(int dev, std::size_t* free_bytes, std::size_t* total_bytes);

enum class copy_kind { host_to_device, device_to_host, device_to_device, host_to_host };
/// A copy on stream s of device dev, issued with dev current: a null s is dev's legacy default stream,
/// and dev's stream-ordered pool memory is addressed from its own device.
void memcpy_async(int dev, void* dst, const void* src, std::size_t bytes, copy_kind k, cuda_stream_t s);
/// bytes of dst set to value, ordered on s (a null s: the default stream of the device dst lives on).
void memset_async(void* dst, int value, std::size_t bytes, cuda_stream_t s);
/// Whether dev can address peer's memory directly (NVLink or PCIe peer-to-peer).
bool can_access_peer(int dev, int peer);
/// Once per pair, both ways: peer access between a and b enabled where the hardware allows it, and
/// each device's pool made readable and writable by the other (cudaMemPoolSetAccess). Returns whether
/// the two have direct access; without it, peer copies still work, staged by the driver.
bool enable_peer_access(int a, int b);
/// bytes from src on src_dev to dst on dst_dev (cudaMemcpyPeerAsync), ordered on s.
/// (Under stream capture: a memcpy node between the two devices, cudaMemcpyAsync with cudaMemcpyDefault.)
void memcpy_peer_async(void* dst, int dst_dev, const void* src, int src_dev, std::size_t bytes, cuda_stream_t s);

/// Page-locked host memory; nullptr when the system cannot give that much.
void* host_pinned_allocate(std::size_t bytes);
void host_pinned_free(void* p) noexcept;
/// True when p points into page-locked host memory that the device can copy at full rate.
bool is_pinned(const void* p) noexcept;
/// The index of the CUDA device whose memory p points into, or -1 for host or unknown memory.
int pointer_device(const void* p) noexcept;
/// Like pointer_device, but -1 for managed memory too (which the host may read and write as its own).
int device_only_memory(const void* p) noexcept;

/// Whether fused kernels on dev launch with programmatic dependent launch (see launch.hpp).
bool dependent_launch(int dev);

/// Checks the error state after a kernel launch (throws cuda_error / device_lost naming `at`, the
/// launching line).
void check_launch(const char* what, resident::source_location at = resident::source_location::current());

/// Makes dev current for the calling thread.
void set_device(int dev);
/// The calling thread's current device.
int current_device();

/// Starts capturing the work issued on s into a graph.
void* graph_begin(stream_ref s);
/// Ends the capture on s and returns the instantiated graph.
void* graph_end(stream_ref s);
/// Ends the capture on s and updates exec in place if the new graph has its shape; false if not.
bool graph_end_update(stream_ref s, void* exec);
/// Ends a failed capture on s, discarding what it held.
void graph_abort(stream_ref s) noexcept;
/// Launches an instantiated graph on s (with s's device current).
void graph_launch(void* exec, stream_ref s);
/// Destroys an instantiated graph.
void graph_destroy(void* exec) noexcept;

/// The CUDA driver's function `symbol` as of CUDA version cuda_version (e.g. 12000), found through the
/// runtime, so that nothing links the driver library itself. @throws device_unavailable when the driver
/// lacks it.
void* driver_entry_point(const char* symbol, int cuda_version);

}  // namespace resident::detail::cuda
