#pragma once
// The build without NVTX (RESIDENT_NVTX=OFF, or no NVTX3 header found): the same names as
// src/insight/nvtx3/nvtx_ranges.hpp, doing nothing.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace resident::detail::nvtx {

/// Whether ranges are compiled in.
inline constexpr bool enabled = false;

inline bool listening() noexcept { return false; }
inline bool tool_attached() noexcept { return false; }

/// A string literal as a template argument (as in the NVTX build).
template <std::size_t N>
struct literal {
  char chars[N]{};
  constexpr literal(const char (&s)[N]) { std::copy_n(s, N, chars); }
};

inline void push(const char*, std::uint64_t = 0) noexcept {}
inline void push(std::string_view, std::uint64_t = 0) noexcept {}
template <literal Name>
void push_registered(std::uint64_t = 0) noexcept {}
inline void pop() noexcept {}

/// A range for the lifetime of the object: nothing in this build.
class range {
 public:
  explicit range(const char*, std::uint64_t = 0) noexcept {}
  range(const range&) = delete;
  range& operator=(const range&) = delete;
};

/// A range named by a literal: nothing in this build.
template <literal Name>
class named_range {
 public:
  explicit named_range(std::uint64_t = 0) noexcept {}
  named_range(const named_range&) = delete;
  named_range& operator=(const named_range&) = delete;
};

}  // namespace resident::detail::nvtx
