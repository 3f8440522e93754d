#pragma once
// The run-time backend: everything the library's compiled host code asks of a kind of device, behind
// one interface, so that src/ asks backend_of(device) instead of branching on the device's kind.
// Implemented by src/backend/cpu/ (host memory, work done when issued) and src/backend/cuda/ (the
// CUDA runtime through detail/cuda_runtime.hpp, whose calls src/backend/none/ stands in for in a
// build without CUDA). The compile-time seam for templates is detail::dispatch (detail/backend.hpp).
#include <cstddef>
#include <optional>

#include "resident/device/device.hpp"
#include "resident/device/stream.hpp"
#include "resident/linalg/matmul.hpp"
#include "resident/memory/transfer.hpp"

namespace resident::detail {

/// What a pool allocation gave.
struct pool_block {
  void* p = nullptr;  ///< nullptr: the device had none to give, after its cache was returned once
  /// Whether the pool held the block already; unset where the backend tells only by its pool's growth
  /// (pool_reserved before and after), which the caller then measures.
  std::optional<bool> cached;
};

/// Free and total bytes of a device's memory.
struct memory_figures {
  std::size_t free = 0, total = 0;
};

class runtime {
 public:
  virtual ~runtime() = default;

  // --- what the device is --------------------------------------------------------------------------
  /// The device's memory is the host's: copies are memcpy, nothing crosses a bus or needs staging, and
  /// results may be left in host memory.
  virtual bool host_memory() const noexcept = 0;
  /// Work issued on a stream runs later, in issue order: events time it, several streams run at once,
  /// and a capture records it into a graph. False: the work is done when the call returns.
  virtual bool queued() const noexcept = 0;

  // --- the device ----------------------------------------------------------------------------------
  /// require()'s check for this kind: throws device_unavailable for a device that cannot be used.
  virtual void require(device d) const = 0;
  virtual device_properties properties(device d) = 0;
  virtual void synchronize(device d) = 0;
  /// Makes d current for the calling thread; returns the index to restore after, or -1 when nothing
  /// changed (already current, or a kind without a current device).
  virtual int make_current(device d) = 0;
  virtual memory_figures memory(device d) = 0;
  /// Bytes read + written per second of a large copy within the device's memory, outside the pool
  /// and the ledger (the profile's reference rate).
  virtual double measure_copy_rate(device d) = 0;

  // --- streams and events (null handles where the work is done when issued) -----------------------
  virtual cuda_stream_t stream_create(device d) = 0;
  virtual void stream_destroy(cuda_stream_t s) noexcept = 0;
  virtual void stream_synchronize(stream_ref s) = 0;
  /// Makes `after` wait for the work queued so far on `before` (a stream of any device of this kind).
  virtual void stream_after(stream_ref after, stream_ref before) = 0;
  /// Whether s is being captured into a graph.
  virtual bool capturing(stream_ref s) = 0;
  virtual cuda_event_t event_create(device d) = 0;
  virtual void event_destroy(cuda_event_t e) noexcept = 0;
  virtual void event_record(cuda_event_t e, stream_ref s) = 0;
  virtual void event_synchronize(cuda_event_t e) = 0;
  /// Makes s wait for e (an event of any device of this kind).
  virtual void event_wait(cuda_event_t e, stream_ref s) = 0;
  virtual double event_elapsed_ms(cuda_event_t a, cuda_event_t b) = 0;

  // --- the pool (stream-ordered) -------------------------------------------------------------------
  /// bytes from s's device's pool, ordered on s; the cache is returned first when trim_first, and once
  /// more before a retry when the first try finds nothing.
  virtual pool_block allocate(std::size_t bytes, stream_ref s, bool trim_first) = 0;
  /// Gives p back, ordered on s: cached, or returned at once when caching is off.
  virtual void deallocate(void* p, std::size_t bytes, stream_ref s, bool caching) = 0;
  virtual std::size_t pool_reserved(device d) = 0;
  /// The largest block the pool can hand out without asking for more; unset where it does not say.
  virtual std::optional<std::size_t> largest_cached(device d) = 0;
  /// Returns the pool's cache to the system (ordered on s where that matters).
  virtual void pool_trim(stream_ref s) = 0;

  // --- copies --------------------------------------------------------------------------------------
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s, staging how) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes, stream_ref s, sync mode, staging how) = 0;
  virtual void copy_on_device(void* dst, const void* src, std::size_t bytes, stream_ref s) = 0;
  /// Readies copies between two devices of this kind (once per pair).
  virtual void enable_peer_access(device a, device b) = 0;
  /// bytes from src (src_s's device) to dst (dst_s's device), ordered after src_s's queued work on
  /// dst_s, with src_s then waiting for the copy.
  virtual void copy_peer(void* dst, stream_ref dst_s, const void* src, stream_ref src_s, std::size_t bytes) = 0;
  /// Whether the device copies host memory p at full rate without staging.
  virtual bool copies_directly(const void* host) noexcept = 0;
  /// The device of this kind whose memory p points into (managed memory too where with_managed);
  /// unset for host memory, or where the backend cannot tell.
  virtual std::optional<device> owner(const void* p, bool with_managed) noexcept = 0;

  // --- matmul --------------------------------------------------------------------------------------
  /// Whether algorithm a (neither automatic nor vendor, which run everywhere) takes elements of es bytes.
  virtual bool matmul_supported(matmul_algo a, std::size_t es) const noexcept = 0;
  /// Whether algorithm a counts extents in int (so larger ones are refused).
  virtual bool matmul_int_extents(matmul_algo a) const noexcept = 0;
  virtual void matmul(const gemm_args& g, matmul_algo a) = 0;
};

/// The implementations (src/backend/cpu/backend.cpp, src/backend/cuda/backend.cpp).
runtime& cpu_runtime() noexcept;
runtime& cuda_runtime() noexcept;

/// The run-time backend of d's kind.
inline runtime& backend_of(device d) noexcept { return d.is_cpu() ? cpu_runtime() : cuda_runtime(); }

/// matmul's CPU algorithms (src/linalg/matmul.cpp), for the CPU backend.
void matmul_cpu(const gemm_args& g, matmul_algo algo);

}  // namespace resident::detail
