#pragma once
/// @file stream.hpp
/// Streams: ordered queues of work on one device. On the CPU backend work runs as it is issued.

#include "resident/device/device.hpp"

namespace resident {

/// A non-owning, trivially copyable reference to a stream (like rmm::cuda_stream_view). The default
/// value is the default stream of the default device at the time of use.
class stream_ref {
 public:
  constexpr stream_ref() = default;
  constexpr stream_ref(resident::device d, cuda_stream_t handle) noexcept : device_(d), handle_(handle) {}
  constexpr resident::device device() const noexcept { return device_; }
  /// The cudaStream_t (nullptr = the legacy default stream; always nullptr on the CPU).
  constexpr cuda_stream_t native() const noexcept { return handle_; }
  /// Blocks until the work queued so far has finished.
  void synchronize() const;
  /// Makes this stream wait for the work queued on `before` so far (asynchronous; an event between
  /// them on CUDA, nothing on the CPU where work runs as it is issued).
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
  explicit stream(resident::device d = default_device());
  ~stream();
  stream(stream&& other) noexcept;
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  /// @throws invalid_argument on a moved-from stream.
  stream_ref ref() const {
    check_live();
    return {device_, handle_};
  }
  operator stream_ref() const { return ref(); }
  resident::device device() const noexcept { return device_; }
  void synchronize() const { ref().synchronize(); }
  /// Throws invalid_argument when the stream was moved from.
  void check_live() const;

 private:
  resident::device device_;
  cuda_stream_t handle_ = nullptr;
  bool moved_ = false;
};

}  // namespace resident
