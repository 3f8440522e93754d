#pragma once
/// @file stream.hpp
/// Streams: ordered queues of work on one device. On the CPU backend work runs as it is issued.
///
/// Thread safety: several threads may issue work on one stream (it runs in the order issued, an order
/// between threads being theirs to make) and on different streams at once. On the CPU work runs on the
/// issuing thread as it is issued. A stream object's destruction or move needs it to itself.

#include "resident/device/device.hpp"

namespace resident {

/// A non-owning, trivially copyable reference to a stream (like rmm::cuda_stream_view). The default
/// value is the default stream of the default device at the time of use.
class stream_ref {
 public:
  constexpr stream_ref() = default;
  /// Refers to an existing stream `handle` of device d (nullptr: d's legacy default stream).
  constexpr stream_ref(resident::device d, cuda_stream_t handle) noexcept : device_(d), handle_(handle) {}
  /// The device the stream belongs to.
  constexpr resident::device device() const noexcept { return device_; }
  /// The cudaStream_t (nullptr = the legacy default stream; always nullptr on the CPU).
  constexpr cuda_stream_t native() const noexcept { return handle_; }
  /// Blocks until the work queued so far has finished (a null handle: the default stream of this
  /// stream's device, whichever device the calling thread has current).
  void synchronize() const;
  /// Makes this stream wait for the work queued on `before` so far (asynchronous; an event of
  /// before's device between them on CUDA, also when `before` is a stream of another GPU; nothing on
  /// the CPU where work runs as it is issued). Synchronizes nothing. @throws device_mismatch when one
  /// stream is the CPU's and the other a GPU's.
  void wait_for(stream_ref before) const;

 private:
  resident::device device_{};
  cuda_stream_t handle_ = nullptr;
};

/// The default stream of d (the legacy default stream on CUDA devices).
stream_ref default_stream(device d);

/// The owner of a stream: created non-blocking on its device, destroyed with the object. Move-only;
/// a moved-from stream throws invalid_argument on use (it does not fall back to the default stream).
class stream {
 public:
  /// Creates a non-blocking stream on d. @throws device_unavailable, cuda_error.
  explicit stream(resident::device d = default_device());
  ~stream();
  /// Takes over other's stream; other is left empty.
  stream(stream&& other) noexcept;
  /// Destroys this stream (after its queued work) and takes over other's.
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  /// @throws invalid_argument on a moved-from stream.
  stream_ref ref() const {
    check_live();
    return {device_, handle_};
  }
  /// Converts to a non-owning reference. @throws invalid_argument on a moved-from stream.
  operator stream_ref() const { return ref(); }
  /// The device the stream belongs to.
  resident::device device() const noexcept { return device_; }
  /// Blocks until the work queued on this stream so far has finished. @throws cuda_error, device_lost.
  void synchronize() const { ref().synchronize(); }
  /// Throws invalid_argument when the stream was moved from.
  void check_live() const;

 private:
  resident::device device_;
  cuda_stream_t handle_ = nullptr;
  bool moved_ = false;
};

}  // namespace resident
