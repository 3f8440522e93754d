#pragma once
// NVTX ranges in resident's own domain, through the toolkit's header-only NVTX3. Chosen by CMake
// (RESIDENT_NVTX and the header found); src/insight/no_nvtx/nvtx_ranges.hpp is its empty twin. With no
// tool attached (Nsight Systems, an injection library) each call is a check of a function pointer.

#include <cstdint>

#include <nvtx3/nvToolsExt.h>

namespace resident::detail::nvtx {

/// Whether ranges are compiled in.
inline constexpr bool enabled = true;

/// The domain "resident", created on first use.
inline nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("resident");
  return d;
}

/// Opens a range named `message` on the calling thread; `bytes`, when not zero, is its payload.
inline void push(const char* message, std::uint64_t bytes = 0) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  if (bytes) {
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = bytes;
  }
  nvtxDomainRangePushEx(domain(), &a);
}

/// Closes the calling thread's innermost range.
inline void pop() { nvtxDomainRangePop(domain()); }

/// A range for the lifetime of the object.
class range {
 public:
  explicit range(const char* message, std::uint64_t bytes = 0) { push(message, bytes); }
  ~range() { pop(); }
  range(const range&) = delete;
  range& operator=(const range&) = delete;
};

}  // namespace resident::detail::nvtx
