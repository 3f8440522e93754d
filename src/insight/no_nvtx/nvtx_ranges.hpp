#pragma once
// The build without NVTX (RESIDENT_NVTX=OFF, or no NVTX3 header found): the same names as
// src/insight/nvtx3/nvtx_ranges.hpp, doing nothing.

#include <cstdint>

namespace resident::detail::nvtx {

/// Whether ranges are compiled in.
inline constexpr bool enabled = false;

inline void push(const char*, std::uint64_t = 0) {}
inline void pop() {}

/// A range for the lifetime of the object: nothing in this build.
class range {
 public:
  explicit range(const char*, std::uint64_t = 0) {}
  range(const range&) = delete;
  range& operator=(const range&) = delete;
};

}  // namespace resident::detail::nvtx
