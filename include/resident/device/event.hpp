#pragma once
/// @file event.hpp
/// Events: points in a stream to wait on and to time between.
///
/// Thread safety: an event is one object: synchronize(), wait_on() and elapsed_ms() may run
/// concurrently with each other, record() and moves need the event to themselves.

#include <chrono>

#include "resident/device/stream.hpp"

namespace resident {

/// The owner of an event (timing enabled). On the CPU it records the host clock. Move-only; a
/// moved-from event throws invalid_argument on use.
class event {
 public:
  /// Creates an event on d (timing enabled). @throws device_unavailable, cuda_error.
  explicit event(device d = default_device());
  ~event();
  /// Takes over other's event; other is left empty.
  event(event&& other) noexcept;
  /// Destroys this event and takes over other's.
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// Records the event at the current end of s (asynchronous). @throws device_mismatch for a stream of
  /// another device.
  void record(stream_ref s);
  /// Blocks until the recorded work has finished.
  void synchronize() const;
  /// Makes s wait for this event before running later work (asynchronous; s may be a stream of another
  /// GPU: CUDA orders devices with events). @throws device_mismatch when one of the two is the CPU's
  /// and the other a GPU's.
  void wait_on(stream_ref s) const;
  /// The cudaEvent_t (nullptr on the CPU).
  cuda_event_t native() const noexcept { return handle_; }

  /// Milliseconds between two recorded events of one device; synchronizes on `end`. @throws
  /// invalid_argument when one was never recorded; device_mismatch for events of two devices.
  friend double elapsed_ms(const event& start, const event& end);

  /// Throws invalid_argument when the event was moved from.
  void check_live() const;

 private:
  device device_;
  cuda_event_t handle_ = nullptr;
  std::chrono::steady_clock::time_point cpu_time_{};
  bool moved_ = false;
};

}  // namespace resident
