#pragma once
/// @file array.hpp
/// Device-resident arrays (1-D and 2-D) and the explicit transfers that fill and read them.
/// Nothing moves between host and device unless one of these calls is made; each is counted in the
/// ledger.
///
/// Thread safety: arrays are objects like std::vector. Different arrays may be used from different
/// threads at once, each on its own stream. One array may be read (to_host, as a pipeline input) from
/// several threads at once; writing it (a transfer into it, a pipeline output, a move) while another
/// thread reads or writes it is a data race the library does not order, as on the device.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include "resident/detail/source_location.hpp"
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/error.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/memory/array_view.hpp"
#include "resident/memory/pinned.hpp"
#include "resident/memory/pool.hpp"
#include "resident/memory/transfer.hpp"

namespace resident {

template <class T>
class array_ref;

namespace detail {
/// Refuses [offset, offset + count) outside `size` elements of `what` ("an array", "a slice"); written
/// so that no sum can wrap.
inline void check_slice(std::size_t offset, std::size_t count, std::size_t size, const char* what) {
  if (offset > size || count > size - offset)
    RESIDENT_FAIL("slice [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " + std::to_string(count) +
                  ") is outside " + what + " of " + std::to_string(size) + " elements");
}
}  // namespace detail

/// A 1-D array of n elements of T on one device, allocated from that device's pool on a stream.
/// Move-only; uninitialized until filled. Operations are ordered on the array's stream and are
/// asynchronous unless documented otherwise. A moved-from array is empty and its use throws.
template <class T>
class array {
  static_assert(std::is_trivially_copyable_v<T>, "array<T> needs a trivially copyable T");

 public:
  /// The element type.
  using value_type = T;

  /// An empty array on the CPU.
  array() noexcept { detail::pool_keepalive(); }
  /// n uninitialized elements on s's device, ordered on s.
  /// @throws invalid_argument when n * sizeof(T) overflows; out_of_memory when the device cannot hold it.
  explicit array(std::size_t n, stream_ref s) : stream_(s), size_(n) {
    require(s.device());
    RESIDENT_EXPECTS(n <= max_size(), "array size " + std::to_string(n) + " overflows the byte count");
    data_ = static_cast<T*>(detail::pool_allocate(n * sizeof(T), s));
  }
  /// n uninitialized elements on d (default: the default device), on d's default stream.
  explicit array(std::size_t n, device d = default_device()) : array(n, default_stream(d)) {}

  ~array() { release(); }
  /// Takes over o's memory and stream; o is left moved-from (its use throws).
  array(array&& o) noexcept
      : stream_(o.stream_), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
        moved_(std::exchange(o.moved_, true)) {}
  /// Frees this array's memory (stream-ordered) and takes over o's; o is left moved-from.
  array& operator=(array&& o) noexcept {
    if (this != &o) {
      release();
      stream_ = o.stream_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      moved_ = std::exchange(o.moved_, true);
    }
    return *this;
  }
  array(const array&) = delete;
  array& operator=(const array&) = delete;

  /// The most elements whose byte count fits in a size_t.
  static constexpr std::size_t max_size() noexcept { return std::size_t(-1) / sizeof(T); }

  /// Device pointer to the first element (host memory on the CPU backend); null when empty.
  T* data() const noexcept { return data_; }
  /// Number of elements.
  std::size_t size() const noexcept { return size_; }
  /// Size in bytes.
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  /// True when the array has no elements.
  bool empty() const noexcept { return size_ == 0; }
  /// The device the array lives on.
  resident::device device() const noexcept { return stream_.device(); }
  /// The stream its operations are ordered on.
  stream_ref stream() const noexcept { return stream_; }
  /// Orders later operations on s (same device), after the work already queued on the old stream.
  /// The stream must outlive the array's use of it (and its release: move the array back first).
  /// @throws device_mismatch; invalid_argument on a moved-from array.
  void set_stream(stream_ref s) {
    check_live();
    if (!(s.device() == device()))
      RESIDENT_FAIL("set_stream: stream on " + s.device().name() + ", array on " + device().name(), device_mismatch);
    if (s.native() != stream_.native()) s.wait_for(stream_);
    stream_ = s;
  }

  /// What kernels receive. @throws invalid_argument on a moved-from array.
  array_view<T> view() const {
    check_live();
    return {data_, size_};
  }

  /// Copies the array into a new host vector. Synchronizes. `where` (the caller's line) names the
  /// call in the profile and in transfer_policy::log lines.
  std::vector<T> to_host(resident::source_location where = resident::source_location::current()) const {
    std::vector<T> h(size_);
    to_host(std::span<T>(h), staging::chunked, where);
    return h;
  }
  /// Copies the array into host memory of the same size. Synchronizes.
  /// @throws shape_mismatch when the sizes differ.
  void to_host(std::span<T> out, staging st = staging::chunked, resident::source_location where = resident::source_location::current()) const {
    check_live();
    detail::check_host_memory(out.data(), out.size(), "to_host");
    if (out.size() != size_)
      RESIDENT_FAIL("to_host: host buffer holds " + std::to_string(out.size()) + " elements, array " +
                           std::to_string(size_), shape_mismatch);
    detail::call_scope scope("to_host", stream_, detail::transfer_facts(bytes()), detail::call_kind::transfer, where);
    detail::copy_device_to_host(out.data(), data_, bytes(), stream_, sync::blocking, st);
  }
  /// Starts copying the array into a pinned buffer and returns; synchronize the array's stream before
  /// reading the buffer. @throws shape_mismatch when the sizes differ.
  void to_host_async(pinned_buffer<T>& out, resident::source_location where = resident::source_location::current()) const {
    check_live();
    out.check_live();
    if (out.size() != size_)
      RESIDENT_FAIL("to_host_async: pinned buffer holds " + std::to_string(out.size()) +
                           " elements, array " + std::to_string(size_), shape_mismatch);
    detail::call_scope scope("to_host_async", stream_, detail::transfer_facts(bytes()), detail::call_kind::transfer,
                             where);
    detail::copy_device_to_host(out.data(), data_, bytes(), stream_, sync::async);
  }

  /// Elements [offset, offset + count) as a non-owning array_ref on the same stream.
  /// @throws invalid_argument when the range is outside the array.
  array_ref<T> slice(std::size_t offset, std::size_t count) const;

  /// Throws invalid_argument when the array was moved from.
  void check_live() const {
    if (moved_) RESIDENT_FAIL("use of a moved-from array: it no longer owns memory");
  }

 private:
  void release() noexcept {
    detail::pool_deallocate(data_, bytes(), stream_);
    data_ = nullptr;
  }

  stream_ref stream_{};
  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool moved_ = false;
};

/// A non-owning window onto an array's elements with its device and stream: what slice() returns.
/// Everything that takes an array takes it (pipelines, copies). The array must outlive it.
template <class T>
class array_ref {
 public:
  /// The element type.
  using value_type = T;
  /// A window of size elements at data, ordered on s. Not checked: slice() is the checked way to make one.
  array_ref(T* data, std::size_t size, stream_ref s) : data_(data), size_(size), stream_(s) {}
  /// Pointer to the first element of the window.
  T* data() const noexcept { return data_; }
  /// Number of elements in the window.
  std::size_t size() const noexcept { return size_; }
  /// Size of the window in bytes.
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  /// The device the elements live on.
  resident::device device() const noexcept { return stream_.device(); }
  /// The stream operations on the window are ordered on.
  stream_ref stream() const noexcept { return stream_; }
  /// What kernels receive.
  array_view<T> view() const noexcept { return {data_, size_}; }
  /// Nothing to check: the array the window refers to must outlive it.
  void check_live() const noexcept {}
  /// Elements [offset, offset + count) of this window, on the same stream.
  /// @throws invalid_argument when the range is outside the window (not just outside the array).
  array_ref slice(std::size_t offset, std::size_t count) const {
    detail::check_slice(offset, count, size_, "a slice");
    return {data_ + offset, count, stream_};
  }

 private:
  T* data_;
  std::size_t size_;
  stream_ref stream_;
};

template <class T>
array_ref<T> array<T>::slice(std::size_t offset, std::size_t count) const {
  check_live();
  detail::check_slice(offset, count, size_, "an array");
  return {data_ + offset, count, stream_};
}

namespace detail {
template <class A>
concept array_like_impl = requires(const A& a) {
  typename A::value_type;
  { a.data() } -> std::convertible_to<const typename A::value_type*>;
  { a.size() } -> std::convertible_to<std::size_t>;
  { a.stream() } -> std::convertible_to<stream_ref>;
  a.check_live();
};
}  // namespace detail

/// Arrays and the slices onto them that pipelines accept (references and const allowed).
template <class A>
concept array_like = detail::array_like_impl<std::remove_cvref_t<A>>;

/// A 2-D row-major array: rows x cols elements with leading dimension ld >= cols (elements between
/// row starts). Storage is one 1-D array of rows * ld elements. Move-only; a moved-from array2d is
/// 0 x 0 and its use throws, like a moved-from array.
template <class T>
class array2d {
 public:
  /// The element type.
  using value_type = T;
  array2d() = default;
  /// @throws invalid_argument when ld < cols or rows * ld * sizeof(T) overflows; out_of_memory.
  array2d(std::size_t rows, std::size_t cols, stream_ref s, std::size_t ld = 0)
      : rows_(rows), cols_(cols), ld_(ld ? ld : cols), storage_(checked_elements(rows, cols, ld), s) {}
  /// rows x cols uninitialized elements on d, on d's default stream; otherwise as above.
  array2d(std::size_t rows, std::size_t cols, device d = default_device(), std::size_t ld = 0)
      : array2d(rows, cols, default_stream(d), ld) {}
  /// Takes over o's elements; o is left empty (0 x 0) and its use throws.
  array2d(array2d&& o) noexcept
      : rows_(std::exchange(o.rows_, 0)), cols_(std::exchange(o.cols_, 0)), ld_(std::exchange(o.ld_, 0)),
        storage_(std::move(o.storage_)) {}
  /// Frees this array's elements and takes over o's.
  array2d& operator=(array2d&& o) noexcept {
    if (this != &o) {
      rows_ = std::exchange(o.rows_, 0);
      cols_ = std::exchange(o.cols_, 0);
      ld_ = std::exchange(o.ld_, 0);
      storage_ = std::move(o.storage_);
    }
    return *this;
  }
  array2d(const array2d&) = delete;
  array2d& operator=(const array2d&) = delete;

  /// Number of rows.
  std::size_t rows() const noexcept { return rows_; }
  /// Number of columns.
  std::size_t cols() const noexcept { return cols_; }
  /// Leading dimension: elements between the starts of two rows.
  std::size_t ld() const noexcept { return ld_; }
  /// rows * cols, the number of elements (padding excluded).
  std::size_t size() const noexcept { return rows_ * cols_; }
  /// Device pointer to element (0, 0).
  T* data() const noexcept { return storage_.data(); }
  /// The device the array lives on.
  resident::device device() const noexcept { return storage_.device(); }
  /// The stream its operations are ordered on.
  stream_ref stream() const noexcept { return storage_.stream(); }
  /// Orders later operations on s, as array::set_stream. @throws device_mismatch.
  void set_stream(stream_ref s) { storage_.set_stream(s); }
  /// The rows * ld elements behind the array, padding included.
  const array<T>& storage() const noexcept { return storage_; }
  /// The rows * ld elements behind the array, padding included (mutable).
  array<T>& storage() noexcept { return storage_; }

  /// What kernels receive. @throws invalid_argument on a moved-from array.
  array2d_view<T> view() const {
    storage_.check_live();
    return {storage_.data(), rows_, cols_, ld_};
  }

  /// rows * cols elements, row-major and packed (padding dropped). Synchronizes.
  std::vector<T> to_host(resident::source_location where = resident::source_location::current()) const {
    std::vector<T> all = storage_.to_host(where);
    if (ld_ == cols_) return all;
    std::vector<T> packed(rows_ * cols_);
    for (std::size_t r = 0; r < rows_; ++r)
      std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(r * ld_), cols_,
                  packed.begin() + static_cast<std::ptrdiff_t>(r * cols_));
    return packed;
  }

 private:
  static std::size_t checked_elements(std::size_t rows, std::size_t cols, std::size_t ld) {
    std::size_t l = ld ? ld : cols;
    if (ld && ld < cols)
      RESIDENT_FAIL("array2d: leading dimension " + std::to_string(ld) + " is smaller than cols " +
                             std::to_string(cols));
    if (l != 0 && rows > array<T>::max_size() / l)
      RESIDENT_FAIL("array2d: " + std::to_string(rows) + " x " + std::to_string(l) +
                             " elements overflow the byte count");
    return rows * l;
  }

  std::size_t rows_ = 0, cols_ = 0, ld_ = 0;
  array<T> storage_;
};

/// Uploads host memory into a new array on s's device: the one explicit host-to-device transfer.
/// Pageable memory is staged through pinned buffers (returns once it has been read); pinned memory is
/// copied asynchronously on s.
///
/// Every transfer takes the caller's line as a last, defaulted argument (`where`): the profile counts
/// the call there (the new array's allocation included), and transfer_policy::log names it.
template <class T>
array<T> to_device(std::span<const T> host, stream_ref s, staging st = staging::chunked, resident::source_location where = resident::source_location::current()) {
  detail::check_host_memory(host.data(), host.size(), "to_device");  // before the allocation
  detail::call_scope scope("to_device", s, detail::transfer_facts(host.size_bytes()), detail::call_kind::transfer,
                           where);
  array<T> a(host.size(), s);
  detail::copy_host_to_device(a.data(), host.data(), a.bytes(), s, st);
  return a;
}
/// Uploads host memory into a new array on d's default stream (default: the default device).
template <class T>
array<T> to_device(std::span<const T> host, device d = default_device(), resident::source_location where = resident::source_location::current()) {
  return to_device(host, default_stream(d), staging::chunked, where);
}
/// Uploads a host vector into a new array on d's default stream (default: the default device).
template <class T>
array<T> to_device(const std::vector<T>& host, device d = default_device(), resident::source_location where = resident::source_location::current()) {
  return to_device(std::span<const T>(host), default_stream(d), staging::chunked, where);
}
/// Uploads a host vector into a new array ordered on s, staged as st says.
template <class T>
array<T> to_device(const std::vector<T>& host, stream_ref s, staging st = staging::chunked, resident::source_location where = resident::source_location::current()) {
  return to_device(std::span<const T>(host), s, st, where);
}
/// Uploads a pinned buffer into a new array: one asynchronous copy on s; keep host alive and unchanged
/// until s is synchronized.
template <class T>
array<T> to_device(const pinned_buffer<T>& host, stream_ref s, resident::source_location where = resident::source_location::current()) {
  return to_device(host.span(), s, staging::chunked, where);
}

/// Uploads a packed rows x cols host matrix into a new 2-D array (leading dimension cols) on s's
/// device, ordered on s. Staging as for the 1-D to_device.
/// @throws shape_mismatch when host does not hold rows * cols elements; invalid_argument when
/// rows * cols overflows.
template <class T>
array2d<T> to_device(std::span<const T> host, std::size_t rows, std::size_t cols, stream_ref s, resident::source_location where = resident::source_location::current()) {
  if (cols != 0 && rows > array<T>::max_size() / cols)
    RESIDENT_FAIL("to_device: " + std::to_string(rows) + " x " + std::to_string(cols) +
                           " elements overflow the byte count");
  if (host.size() != rows * cols)
    RESIDENT_FAIL("to_device: host buffer holds " + std::to_string(host.size()) + " elements, " +
                         std::to_string(rows) + " x " + std::to_string(cols) + " needs " +
                         std::to_string(rows * cols), shape_mismatch);
  detail::check_host_memory(host.data(), host.size(), "to_device");
  detail::call_scope scope("to_device", s, detail::transfer_facts(host.size_bytes()), detail::call_kind::transfer,
                           where);
  array2d<T> a(rows, cols, s);
  detail::copy_host_to_device(a.data(), host.data(), host.size_bytes(), a.stream());
  return a;
}
/// As above, on d's default stream.
template <class T>
array2d<T> to_device(std::span<const T> host, std::size_t rows, std::size_t cols, device d = default_device(),
                     resident::source_location where = resident::source_location::current()) {
  return to_device(host, rows, cols, default_stream(d), where);
}
/// Uploads a packed rows x cols host matrix from a vector, ordered on s. @throws shape_mismatch.
template <class T>
array2d<T> to_device(const std::vector<T>& host, std::size_t rows, std::size_t cols, stream_ref s, resident::source_location where = resident::source_location::current()) {
  return to_device(std::span<const T>(host), rows, cols, s, where);
}
/// Uploads a packed rows x cols host matrix from a vector onto d. @throws shape_mismatch.
template <class T>
array2d<T> to_device(const std::vector<T>& host, std::size_t rows, std::size_t cols,
                     device d = default_device(), resident::source_location where = resident::source_location::current()) {
  return to_device(std::span<const T>(host), rows, cols, default_stream(d), where);
}

/// Copies src into dst (same size): device-to-device when both are on one device, a peer copy
/// (cudaMemcpyPeerAsync, NVLink or PCIe, never through the host) between two GPUs, otherwise an
/// explicit host<->device transfer (counted as such). Streams: runs on dst's stream after the work
/// queued on src's stream (an event, also across two GPUs, no host synchronization); a peer copy also
/// makes src's stream wait for it, so src may be rewritten or freed on its stream right after; a copy
/// into CPU memory from a GPU runs on src's stream and synchronizes it. Peer copies count as peer bytes
/// and copies on dst's device and pass every transfer policy. Copying an array onto itself, or an
/// empty one, does nothing and counts nothing.
/// @throws shape_mismatch; invalid_argument when two different slices of one array overlap.
template <array_like A, array_like B>
void copy(const A& src, B&& dst, resident::source_location where = resident::source_location::current()) {
  static_assert(std::is_same_v<typename std::remove_cvref_t<A>::value_type,
                               typename std::remove_cvref_t<B>::value_type>,
                "copy: source and destination hold the same element type");
  src.check_live();
  dst.check_live();
  if (src.size() != dst.size())
    RESIDENT_FAIL("copy: source has " + std::to_string(src.size()) + " elements, destination " +
                         std::to_string(dst.size()), shape_mismatch);
  const std::size_t bytes = src.size() * sizeof(typename std::remove_cvref_t<A>::value_type);
  if (src.size() == 0 || static_cast<const void*>(src.data()) == static_cast<const void*>(dst.data())) return;
  const stream_ref ss = src.stream(), ds = dst.stream();
  const device s = ss.device(), d = ds.device();
  detail::call_scope scope("copy", s.is_cuda() && d.is_cpu() ? ss : ds, detail::transfer_facts(bytes),
                           detail::call_kind::transfer, where);
  if (s == d) {
    const auto* a = reinterpret_cast<const char*>(src.data());
    const auto* b = reinterpret_cast<const char*>(dst.data());
    if (a < b + bytes && b < a + bytes)
      RESIDENT_FAIL("copy: source and destination overlap (two slices of one array); copy through a "
                    "separate array");
    ds.wait_for(ss);
    detail::copy_device_to_device(dst.data(), src.data(), bytes, ds);
  } else if (s.is_cpu() && d.is_cuda()) {
    detail::copy_host_to_device(dst.data(), src.data(), bytes, ds);
  } else if (s.is_cuda() && d.is_cpu()) {
    detail::copy_device_to_host(dst.data(), src.data(), bytes, ss, sync::blocking);
  } else {
    detail::copy_peer(dst.data(), ds, src.data(), ss, bytes);
  }
}

/// Uploads host memory into an existing array of the same size (no allocation). Staging and
/// synchronization as for to_device. @throws shape_mismatch.
template <class T>
void copy(std::type_identity_t<std::span<const T>> host, array<T>& dst, staging st = staging::chunked,
          resident::source_location where = resident::source_location::current()) {
  dst.check_live();
  detail::check_host_memory(host.data(), host.size(), "copy");
  if (host.size() != dst.size())
    RESIDENT_FAIL("copy: host buffer holds " + std::to_string(host.size()) + " elements, array " +
                         std::to_string(dst.size()), shape_mismatch);
  detail::call_scope scope("copy", dst.stream(), detail::transfer_facts(dst.bytes()), detail::call_kind::transfer,
                           where);
  detail::copy_host_to_device(dst.data(), host.data(), dst.bytes(), dst.stream(), st);
}

/// Starts copying host memory into an array or slice on its stream and returns: from page-locked
/// memory (pinned_buffer) the copy engine moves it while kernels run, which is what lets chunked work
/// overlap copies with compute. Keep the host memory alive and unchanged until the stream is
/// synchronized. Pageable memory is staged and the call returns once it has been read.
/// @throws shape_mismatch.
template <array_like A>
void copy_async(std::span<const typename std::remove_cvref_t<A>::value_type> host, A&& dst, resident::source_location where = resident::source_location::current()) {
  dst.check_live();
  detail::check_host_memory(host.data(), host.size(), "copy_async");
  if (host.size() != dst.size())
    RESIDENT_FAIL("copy_async: host memory holds " + std::to_string(host.size()) + " elements, array " +
                         std::to_string(dst.size()), shape_mismatch);
  detail::call_scope scope("copy_async", dst.stream(), detail::transfer_facts(host.size_bytes()),
                           detail::call_kind::transfer, where);
  detail::copy_host_to_device(dst.data(), host.data(), host.size_bytes(), dst.stream());
}

/// Starts copying an array or slice into page-locked host memory on its stream and returns (pageable
/// destinations block until done). Read the host memory after synchronizing the stream.
/// @throws shape_mismatch.
template <array_like A>
void copy_async(const A& src, std::span<typename std::remove_cvref_t<A>::value_type> host, resident::source_location where = resident::source_location::current()) {
  src.check_live();
  detail::check_host_memory(host.data(), host.size(), "copy_async");
  if (host.size() != src.size())
    RESIDENT_FAIL("copy_async: host memory holds " + std::to_string(host.size()) + " elements, array " +
                         std::to_string(src.size()), shape_mismatch);
  detail::call_scope scope("copy_async", src.stream(), detail::transfer_facts(host.size_bytes()),
                           detail::call_kind::transfer, where);
  detail::copy_device_to_host(host.data(), src.data(), host.size_bytes(), src.stream(), sync::async);
}

/// A new array on `to` holding a copy of a (one explicit transfer, or a device-to-device copy).
template <class T>
array<T> copy_to(const array<T>& a, device to, resident::source_location where = resident::source_location::current()) {
  detail::call_scope scope("copy_to", a.stream(), detail::transfer_facts(a.bytes()), detail::call_kind::transfer,
                           where);
  array<T> r(a.size(), to);
  resident::copy(a, r, where);
  return r;
}

}  // namespace resident
