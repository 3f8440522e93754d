#pragma once
/// @file pinned.hpp
/// Page-locked host memory: what the GPU copies at full bus rate and asynchronously.
///
/// Thread safety: allocating and freeing buffers may run concurrently (the driver's and the C
/// library's allocators are thread-safe); a pinned_buffer is one object like a std::vector: const
/// calls may run concurrently, anything that writes it (its elements, moves) needs it to itself.

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "resident/error.hpp"
#include "resident/memory/array_view.hpp"

namespace resident {

namespace detail {
/// Page-locked when a CUDA device answers, 256-byte-aligned ordinary memory otherwise.
void* pinned_allocate(std::size_t bytes, bool* page_locked);
void pinned_free(void* p, bool page_locked) noexcept;
}  // namespace detail

/// A host buffer of n elements in page-locked memory. Move-only; uninitialized. A moved-from buffer
/// is empty and its use (span(), uploads from it, downloads into it) throws.
template <class T>
class pinned_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "pinned_buffer<T> needs a trivially copyable T");

 public:
  /// The element type.
  using value_type = T;

  /// An empty buffer.
  pinned_buffer() = default;
  /// n uninitialized elements, page-locked when a CUDA device answers (ordinary memory otherwise).
  /// @throws invalid_argument when n * sizeof(T) overflows; out_of_memory when it cannot be allocated.
  explicit pinned_buffer(std::size_t n) : size_(n) {
    RESIDENT_EXPECTS(n <= max_size(), "pinned_buffer size " + std::to_string(n) + " of " +
                                          std::to_string(sizeof(T)) + "-byte elements overflows the byte count");
    data_ = static_cast<T*>(detail::pinned_allocate(n * sizeof(T), &locked_));
  }
  ~pinned_buffer() { detail::pinned_free(data_, locked_); }
  /// Takes over o's memory; o is left empty.
  pinned_buffer(pinned_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), locked_(o.locked_),
        moved_(std::exchange(o.moved_, true)) {}
  /// Frees this buffer's memory and takes over o's.
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      detail::pinned_free(data_, locked_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      locked_ = o.locked_;
      moved_ = std::exchange(o.moved_, true);
    }
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;

  /// The most elements whose byte count fits in a size_t.
  static constexpr std::size_t max_size() noexcept { return std::size_t(-1) / sizeof(T); }

  /// Pointer to the first element.
  T* data() noexcept { return data_; }
  /// Pointer to the first element.
  const T* data() const noexcept { return data_; }
  /// Number of elements.
  std::size_t size() const noexcept { return size_; }
  /// Element i (bounds-checked in builds with RESIDENT_DEBUG).
  T& operator[](std::size_t i) noexcept {
    if constexpr (debug_checks) {
      if (i >= size_) detail::bounds_fail(i, size_);
    }
    return data_[i];
  }
  /// Element i, read-only (bounds-checked in builds with RESIDENT_DEBUG).
  const T& operator[](std::size_t i) const noexcept { return const_cast<pinned_buffer&>(*this)[i]; }
  /// Iterator to the first element.
  T* begin() noexcept { return data_; }
  /// Iterator past the last element.
  T* end() noexcept { return data_ + size_; }
  /// The elements. @throws invalid_argument on a moved-from buffer.
  std::span<T> span() {
    check_live();
    return {data_, size_};
  }
  /// The elements, read-only. @throws invalid_argument on a moved-from buffer.
  std::span<const T> span() const {
    check_live();
    return {data_, size_};
  }
  /// True when the memory is page-locked (a CUDA device answered when it was allocated).
  bool page_locked() const noexcept { return locked_; }

  /// Throws invalid_argument when the buffer was moved from.
  void check_live() const {
    if (moved_) RESIDENT_FAIL("use of a moved-from pinned_buffer: it no longer owns memory");
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool locked_ = false;
  bool moved_ = false;
};

}  // namespace resident
