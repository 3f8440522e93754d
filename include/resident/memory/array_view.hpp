#pragma once
/// @file array_view.hpp
/// Trivially copyable views: what kernels and pipeline stages receive. Bounds-checked in debug builds.

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "resident/config.hpp"

namespace resident {
namespace detail {
/// Reports an out-of-bounds index and stops: a trap on the device, abort on the host (no exception
/// can cross a kernel boundary).
RESIDENT_HD inline void bounds_fail(std::size_t i, std::size_t n) {
  const auto a = static_cast<unsigned long long>(i), b = static_cast<unsigned long long>(n);
#if defined(__CUDA_ARCH__)
  std::printf("resident: index %llu out of bounds for extent %llu\n", a, b);
  __trap();
#else
  std::fprintf(stderr, "resident: index %llu out of bounds for extent %llu\n", a, b);
  std::abort();
#endif
}
}  // namespace detail

/// A 1-D view: pointer and size. Does not own; copy it freely into kernels.
template <class T>
class array_view {
 public:
  /// The element type.
  using value_type = T;
  constexpr array_view() = default;
  /// A view of size elements at data (device memory for a CUDA array).
  RESIDENT_HD constexpr array_view(T* data, std::size_t size) : data_(data), size_(size) {}
  /// A view of const elements from a view of mutable ones.
  template <class U>
  RESIDENT_HD constexpr array_view(array_view<U> v) : data_(v.data()), size_(v.size()) {}

  /// Pointer to the first element.
  RESIDENT_HD constexpr T* data() const { return data_; }
  /// Number of elements.
  RESIDENT_HD constexpr std::size_t size() const { return size_; }
  /// True when the view has no elements.
  RESIDENT_HD constexpr bool empty() const { return size_ == 0; }
  /// Element i. Checked in debug builds (a trap on the device, abort on the host).
  RESIDENT_HD T& operator[](std::size_t i) const {
    if constexpr (debug_checks) {
      if (i >= size_) detail::bounds_fail(i, size_);
    }
    return data_[i];
  }
  /// Elements [offset, offset + count). Checked in debug builds.
  RESIDENT_HD array_view subview(std::size_t offset, std::size_t count) const {
    if constexpr (debug_checks) {
      if (offset > size_ || count > size_ - offset) detail::bounds_fail(offset + count, size_);  // no wrap
    }
    return {data_ + offset, count};
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A 2-D row-major view: element (r, c) at data[r * ld + c], ld >= cols.
template <class T>
class array2d_view {
 public:
  /// The element type.
  using value_type = T;
  constexpr array2d_view() = default;
  /// A view of rows x cols elements at data, rows ld elements apart.
  RESIDENT_HD constexpr array2d_view(T* data, std::size_t rows, std::size_t cols, std::size_t ld)
      : data_(data), rows_(rows), cols_(cols), ld_(ld) {}
  /// A view of const elements from a view of mutable ones.
  template <class U>
  RESIDENT_HD constexpr array2d_view(array2d_view<U> v)
      : data_(v.data()), rows_(v.rows()), cols_(v.cols()), ld_(v.ld()) {}

  /// Pointer to element (0, 0).
  RESIDENT_HD constexpr T* data() const { return data_; }
  /// Number of rows.
  RESIDENT_HD constexpr std::size_t rows() const { return rows_; }
  /// Number of columns.
  RESIDENT_HD constexpr std::size_t cols() const { return cols_; }
  /// Leading dimension: elements between the starts of two rows.
  RESIDENT_HD constexpr std::size_t ld() const { return ld_; }
  /// Element (r, c). Checked in debug builds (a trap on the device, abort on the host).
  RESIDENT_HD T& operator()(std::size_t r, std::size_t c) const {
    if constexpr (debug_checks) {
      if (r >= rows_) detail::bounds_fail(r, rows_);
      if (c >= cols_) detail::bounds_fail(c, cols_);
    }
    return data_[r * ld_ + c];
  }

 private:
  T* data_ = nullptr;
  std::size_t rows_ = 0, cols_ = 0, ld_ = 0;
};

}  // namespace resident
