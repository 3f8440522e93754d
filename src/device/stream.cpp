#include "resident/device/stream.hpp"

#include <string>
#include <utility>

#include "backend/runtime.hpp"
#include "resident/device/event.hpp"
#include "resident/error.hpp"

namespace resident {

void stream_ref::synchronize() const {
  require(device_);  // an absent index is device_unavailable, not the driver's invalid ordinal
  detail::backend_of(device_).stream_synchronize(*this);
}

namespace {
void same_device(device mine, stream_ref s, const char* what) {
  if (!(s.device() == mine))
    RESIDENT_FAIL(std::string(what) + ": a stream of " + s.device().name() + " for an event of " + mine.name() +
                          "; record an event of the stream's own device", device_mismatch);
}
// A CUDA stream may wait for work of another GPU; the CPU's work and a GPU's are not ordered by events.
void same_backend(device mine, stream_ref s, const char* what) {
  if (s.device().kind() != mine.kind())
    RESIDENT_FAIL(std::string(what) + ": a stream of " + s.device().name() + " and work on " + mine.name() +
                          "; order work between the CPU and a GPU by synchronizing the GPU's stream", device_mismatch);
}
}  // namespace

void stream_ref::wait_for(stream_ref before) const {
  same_backend(device_, before, "stream_ref::wait_for");
  require(device_);
  require(before.device());
  detail::backend_of(device_).stream_after(*this, before);
}

stream_ref default_stream(device d) { return {d, nullptr}; }

stream::stream(resident::device d) : device_(d) {
  require(d);
  handle_ = detail::backend_of(d).stream_create(d);
}
stream::~stream() {
  if (handle_) detail::backend_of(device_).stream_destroy(handle_);
}
stream::stream(stream&& o) noexcept
    : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)), moved_(std::exchange(o.moved_, true)) {}
stream& stream::operator=(stream&& o) noexcept {
  if (this != &o) {
    if (handle_) detail::backend_of(device_).stream_destroy(handle_);
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
    moved_ = std::exchange(o.moved_, true);
  }
  return *this;
}
void stream::check_live() const {
  if (moved_) RESIDENT_FAIL("use of a moved-from stream: it no longer owns a stream on " + device_.name());
}

event::event(device d) : device_(d) {
  require(d);
  handle_ = detail::backend_of(d).event_create(d);
}
event::~event() {
  if (handle_) detail::backend_of(device_).event_destroy(handle_);
}
event::event(event&& o) noexcept
    : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)), cpu_time_(o.cpu_time_),
      moved_(std::exchange(o.moved_, true)) {}
event& event::operator=(event&& o) noexcept {
  if (this != &o) {
    if (handle_) detail::backend_of(device_).event_destroy(handle_);
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
    cpu_time_ = o.cpu_time_;
    moved_ = std::exchange(o.moved_, true);
  }
  return *this;
}
void event::check_live() const {
  if (moved_) RESIDENT_FAIL("use of a moved-from event: it no longer owns an event on " + device_.name());
}
void event::record(stream_ref s) {
  check_live();
  same_device(device_, s, "event::record");
  detail::backend_of(device_).event_record(handle_, s);
  // CPU work is done by the time it is issued; on CUDA the time only marks the event as recorded.
  cpu_time_ = std::chrono::steady_clock::now();
}
void event::synchronize() const {
  check_live();
  if (handle_) detail::backend_of(device_).event_synchronize(handle_);
}
void event::wait_on(stream_ref s) const {
  check_live();
  same_backend(device_, s, "event::wait_on");
  if (handle_) detail::backend_of(device_).event_wait(handle_, s);
}
double elapsed_ms(const event& a, const event& b) {
  a.check_live();
  b.check_live();
  // An event never recorded has no time: refused alike on both backends, before CUDA is asked.
  if (a.cpu_time_ == std::chrono::steady_clock::time_point{} || b.cpu_time_ == std::chrono::steady_clock::time_point{})
    RESIDENT_FAIL("elapsed_ms: an event that was never recorded; record both first");
  // Two devices' clocks (or a GPU's and the host's) do not compare: CUDA refuses, the CPU's would mix.
  if (!(a.device_ == b.device_))
    RESIDENT_FAIL("elapsed_ms: events of " + a.device_.name() + " and " + b.device_.name() +
                      "; time between two events of one device", device_mismatch);
  if (a.handle_ && b.handle_) return detail::backend_of(a.device_).event_elapsed_ms(a.handle_, b.handle_);
  return std::chrono::duration<double, std::milli>(b.cpu_time_ - a.cpu_time_).count();
}

}  // namespace resident
