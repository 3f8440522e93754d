#pragma once
// NVTX ranges in resident's own domain, through the toolkit's header-only NVTX3. Chosen by CMake
// (RESIDENT_NVTX and the header found); src/insight/no_nvtx/nvtx_ranges.hpp is its twin without NVTX.
//
// With no tool attached (Nsight Systems, an injection library) a range costs two loads and branches
// at its start and at its end: listening() tests NVTX's own entry point before anything is built.
// The domain, the registered names and the event attributes are made only while a tool listens.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <nvtx3/nvToolsExt.h>

namespace resident::detail::nvtx {

/// Whether ranges are compiled in.
inline constexpr bool enabled = true;

/// Whether a range would reach a tool: NVTX's push entry point, the attached tool's function or null
/// when none attached (NVTX's own wrappers test the same pointer). NVTX is initialized once first, under
/// the static's guard: its initialization writes that pointer, which other threads' first ranges read
/// (a data race when the first ranges of two threads met, NVTX initializing itself lazily). Two loads.
inline bool listening() noexcept {
  static const bool initialized = (nvtxInitialize(nullptr), true);
  (void)initialized;
  return NVTX_VERSIONED_IDENTIFIER(nvtxGlobals).nvtxDomainRangePushEx_impl_fnptr != nullptr;
}

/// Whether a tool is attached; initializes NVTX first (once per process: it looks for an injection
/// library through NVTX_INJECTION64_PATH).
inline bool tool_attached() noexcept { return listening(); }

/// The domain "resident", created on first use (while a tool listens).
inline nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("resident");
  return d;
}

/// A string literal as a template argument: a range name registered once in the domain.
template <std::size_t N>
struct literal {
  char chars[N]{};
  /// Copies the literal s.
  constexpr literal(const char (&s)[N]) { std::copy_n(s, N, chars); }
};

namespace detail {
inline nvtxEventAttributes_t attributes(std::uint64_t bytes) noexcept {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  if (bytes) {
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = bytes;
  }
  return a;
}
}  // namespace detail

/// Opens a range named `message` (terminated) on the calling thread; `bytes`, when not zero, is its
/// payload.
inline void push(const char* message, std::uint64_t bytes = 0) noexcept {
  if (!listening()) return;
  nvtxEventAttributes_t a = detail::attributes(bytes);
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  nvtxDomainRangePushEx(domain(), &a);
}

/// Opens a range named `message` (not necessarily terminated: a bounded copy is made, only while a
/// tool listens).
inline void push(std::string_view message, std::uint64_t bytes = 0) noexcept {
  if (!listening()) return;
  char text[96];
  const std::size_t n = std::min(message.size(), sizeof text - 1);
  std::memcpy(text, message.data(), n);
  text[n] = '\0';
  push(static_cast<const char*>(text), bytes);
}

/// Opens a range whose name is registered once in the domain (nvtxDomainRegisterStringA).
template <literal Name>
void push_registered(std::uint64_t bytes = 0) noexcept {
  if (!listening()) return;
  static const nvtxStringHandle_t name = nvtxDomainRegisterStringA(domain(), Name.chars);
  nvtxEventAttributes_t a = detail::attributes(bytes);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = name;
  nvtxDomainRangePushEx(domain(), &a);
}

/// Closes the calling thread's innermost range. (Listening is fixed once NVTX is initialized, before
/// the first push: a range that was pushed is popped, and a pop never goes unmatched to a tool.)
inline void pop() noexcept {
  if (!listening()) return;
  nvtxDomainRangePop(domain());
}

/// A range for the lifetime of the object, with a name made at run time (a flow stage's).
class range {
 public:
  /// Opens the range `message` with payload `bytes`.
  explicit range(const char* message, std::uint64_t bytes = 0) noexcept { push(message, bytes); }
  ~range() { pop(); }
  range(const range&) = delete;
  range& operator=(const range&) = delete;
};

/// A range for the lifetime of the object, named by a literal registered once.
template <literal Name>
class named_range {
 public:
  /// Opens the range with payload `bytes`.
  explicit named_range(std::uint64_t bytes = 0) noexcept { push_registered<Name>(bytes); }
  ~named_range() { pop(); }
  named_range(const named_range&) = delete;
  named_range& operator=(const named_range&) = delete;
};

}  // namespace resident::detail::nvtx
