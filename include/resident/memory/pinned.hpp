#pragma once
/// @file pinned.hpp
/// Page-locked host memory: what the GPU copies at full bus rate and asynchronously.

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace resident {

namespace detail {
/// Page-locked when a CUDA device answers, 256-byte-aligned ordinary memory otherwise.
void* pinned_allocate(std::size_t bytes, bool* page_locked);
void pinned_free(void* p, bool page_locked) noexcept;
}  // namespace detail

/// A host buffer of n elements in page-locked memory. Move-only; uninitialized.
template <class T>
class pinned_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "pinned_buffer<T> needs a trivially copyable T");

 public:
  /// An empty buffer.
  pinned_buffer() = default;
  /// n uninitialized elements, page-locked when a CUDA device answers (ordinary memory otherwise).
  explicit pinned_buffer(std::size_t n) : size_(n) {
    data_ = static_cast<T*>(detail::pinned_allocate(n * sizeof(T), &locked_));
  }
  ~pinned_buffer() { detail::pinned_free(data_, locked_); }
  /// Takes over o's memory; o is left empty.
  pinned_buffer(pinned_buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), locked_(o.locked_) {}
  /// Frees this buffer's memory and takes over o's.
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      detail::pinned_free(data_, locked_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      locked_ = o.locked_;
    }
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;

  /// Pointer to the first element.
  T* data() noexcept { return data_; }
  /// Pointer to the first element.
  const T* data() const noexcept { return data_; }
  /// Number of elements.
  std::size_t size() const noexcept { return size_; }
  /// Element i (unchecked).
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  /// Element i (unchecked).
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  /// Iterator to the first element.
  T* begin() noexcept { return data_; }
  /// Iterator past the last element.
  T* end() noexcept { return data_ + size_; }
  /// The elements as a span.
  std::span<T> span() noexcept { return {data_, size_}; }
  /// The elements as a span of const.
  std::span<const T> span() const noexcept { return {data_, size_}; }
  /// True when the memory is page-locked (a CUDA device answered when it was allocated).
  bool page_locked() const noexcept { return locked_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool locked_ = false;
};

}  // namespace resident
