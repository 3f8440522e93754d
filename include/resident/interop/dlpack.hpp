#pragma once
/// @file dlpack.hpp
/// Zero-copy exchange with other array libraries (PyTorch, CuPy, Numba, NumPy, JAX, ...) through DLPack
/// (https://dmlc.github.io/dlpack/latest/): a resident array exported as a DLManagedTensor, and a
/// tensor of another library used by resident's pipelines, fills and copies where it lies. Nothing is
/// ever copied: what resident cannot use as it is (another device type, a strided layout, another
/// element type) is a typed error. Needs the DLPack header (Debian: libdlpack-dev).
///
/// Streams (the DLPack Python protocol's rule): the consumer's stream must see the producer's work.
/// `to_dlpack(..., consumer)` makes `consumer` wait for the array's queued work with an event (no host
/// synchronization); `from_dlpack(tensor, s)` expects the producer's work to be ordered before `s`
/// already (Python: pass `s` as the `stream` argument of the producer's `__dlpack__`).

#include <dlpack/dlpack.h>

#include <complex>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/error.hpp"
#include "resident/memory/array.hpp"

namespace resident {

/// The DLPack element type of T (integers, float, double, complex<float>, complex<double>).
template <class T>
constexpr DLDataType dlpack_dtype() noexcept {
  constexpr auto bits = static_cast<std::uint8_t>(8 * sizeof(T));
  if constexpr (std::is_same_v<T, bool>) static_assert(sizeof(T) == 0, "dlpack_dtype: bool has no DLPack 0.6 type");
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return {kDLInt, bits, 1};
  else if constexpr (std::is_integral_v<T>) return {kDLUInt, bits, 1};
  else if constexpr (std::is_floating_point_v<T>) return {kDLFloat, bits, 1};
  else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>)
    return {kDLComplex, bits, 1};
  else static_assert(sizeof(T) == 0, "dlpack_dtype: no DLPack type for this element type");
}

/// "float32", "int64", ... for messages.
std::string dlpack_dtype_name(DLDataType t);

/// The DLPack device of d: kDLCPU or kDLCUDA with d's index.
DLDevice dlpack_device(device d) noexcept;

/// The resident device that can use memory of a DLPack device: kDLCPU and kDLCUDAHost (page-locked host
/// memory) are the CPU, kDLCUDA N is cuda:N. @throws invalid_argument for any other device type
/// (managed memory included: copy it into a device or host tensor first).
device device_of(DLDevice d);

namespace detail {
struct dlpack_export {
  DLManagedTensor tensor{};
  std::vector<std::int64_t> shape, strides;
  std::shared_ptr<const void> owner;  // keeps the exported memory alive until the consumer's deleter
};

DLManagedTensor* make_dlpack(void* data, DLDataType dtype, device d, int ndim, const std::int64_t* shape,
                             const std::int64_t* strides, std::shared_ptr<const void> owner);

/// Checks t against element type `want` and returns its first element and element count.
/// @throws invalid_argument (device type, strides, alignment, a null tensor), shape_mismatch never.
std::pair<void*, std::size_t> dlpack_checked(const DLTensor& t, DLDataType want, std::size_t align);

/// Makes the consumer's stream wait for the producer's queued work. @throws device_mismatch.
void order_for(stream_ref producer, const std::optional<stream_ref>& consumer);
}  // namespace detail

/// Exports an array, which the tensor takes over: it is freed when the consumer calls the tensor's
/// deleter (on the array's stream, as any release). `consumer`, when given, waits for the array's
/// queued work (an event, no host synchronization). @throws invalid_argument on a moved-from array.
template <class T>
DLManagedTensor* to_dlpack(array<T>&& a, std::optional<stream_ref> consumer = std::nullopt) {
  a.check_live();
  detail::order_for(a.stream(), consumer);
  auto owner = std::make_shared<array<T>>(std::move(a));
  const std::int64_t shape[1] = {static_cast<std::int64_t>(owner->size())};
  const std::int64_t strides[1] = {1};
  return detail::make_dlpack(owner->data(), dlpack_dtype<T>(), owner->device(), 1, shape, strides, owner);
}

/// Exports an array that stays shared: the tensor holds a reference to it until the consumer calls the
/// deleter, so the memory outlives whichever side lets go last.
template <class T>
DLManagedTensor* to_dlpack(std::shared_ptr<array<T>> a, std::optional<stream_ref> consumer = std::nullopt) {
  if (!a) RESIDENT_FAIL("to_dlpack: a null array pointer");
  a->check_live();
  detail::order_for(a->stream(), consumer);
  const std::int64_t shape[1] = {static_cast<std::int64_t>(a->size())};
  const std::int64_t strides[1] = {1};
  return detail::make_dlpack(a->data(), dlpack_dtype<T>(), a->device(), 1, shape, strides, a);
}

/// Exports a 2-D array (shape rows x cols, strides ld x 1), which the tensor takes over.
template <class T>
DLManagedTensor* to_dlpack(array2d<T>&& a, std::optional<stream_ref> consumer = std::nullopt) {
  a.storage().check_live();
  detail::order_for(a.stream(), consumer);
  auto owner = std::make_shared<array2d<T>>(std::move(a));
  const std::int64_t shape[2] = {static_cast<std::int64_t>(owner->rows()), static_cast<std::int64_t>(owner->cols())};
  const std::int64_t strides[2] = {static_cast<std::int64_t>(owner->ld()), 1};
  return detail::make_dlpack(owner->data(), dlpack_dtype<T>(), owner->device(), 2, shape, strides, owner);
}

/// Exports a slice; `keep_alive` (for example the shared_ptr owning its array) is held until the
/// deleter runs. Without one the caller keeps the array alive while the consumer uses the tensor.
template <class T>
DLManagedTensor* to_dlpack(array_ref<T> r, std::shared_ptr<const void> keep_alive, std::optional<stream_ref> consumer = std::nullopt) {
  detail::order_for(r.stream(), consumer);
  const std::int64_t shape[1] = {static_cast<std::int64_t>(r.size())};
  const std::int64_t strides[1] = {1};
  return detail::make_dlpack(r.data(), dlpack_dtype<T>(), r.device(), 1, shape, strides, std::move(keep_alive));
}

/// A tensor of another library seen as a resident array of its elements (C-contiguous, any number of
/// dimensions, flattened), ordered on `s` (default: the default stream of the tensor's device). It owns
/// the DLManagedTensor and calls its deleter when destroyed. Move-only; usable wherever an array_ref is
/// (pipelines, fills, copies). @throws invalid_argument when resident cannot use the tensor as it is;
/// device_mismatch when `s` is on another device than the tensor.
template <class T>
class dlpack_array {
 public:
/// The element type.
  using value_type = T;

/// Takes over t, ordered on s; on an error t stays the caller's. @throws as above.
  explicit dlpack_array(DLManagedTensor* t, stream_ref s) : managed_(t) {
    if (!t) RESIDENT_FAIL("from_dlpack: a null DLManagedTensor");
    try {
      const resident::device d = device_of(t->dl_tensor.device);
      if (!(s.device() == d))
        RESIDENT_FAIL("from_dlpack: the tensor lies on " + d.name() + ", the stream is on " + s.device().name(), device_mismatch);
      auto [data, n] = detail::dlpack_checked(t->dl_tensor, dlpack_dtype<T>(), alignof(T));
      data_ = static_cast<T*>(data);
      size_ = n;
      stream_ = s;
    } catch (...) {
      managed_ = nullptr;  // the caller still owns a tensor it could not hand over
      throw;
    }
  }
  ~dlpack_array() { release(); }
/// Takes over o's tensor; o is left empty and its use throws.
  dlpack_array(dlpack_array&& o) noexcept
      : managed_(std::exchange(o.managed_, nullptr)), data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)), stream_(o.stream_), moved_(std::exchange(o.moved_, true)) {}
/// Releases this tensor (its deleter) and takes over o's.
  dlpack_array& operator=(dlpack_array&& o) noexcept {
    if (this != &o) {
      release();
      managed_ = std::exchange(o.managed_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
      moved_ = std::exchange(o.moved_, true);
    }
    return *this;
  }
  dlpack_array(const dlpack_array&) = delete;
  dlpack_array& operator=(const dlpack_array&) = delete;

/// Pointer to the first element (the tensor's data plus its byte offset).
  T* data() const noexcept { return data_; }
/// Number of elements (the product of the extents).
  std::size_t size() const noexcept { return size_; }
/// size() * sizeof(T).
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
/// The device the tensor lies on.
  resident::device device() const noexcept { return stream_.device(); }
/// The stream resident orders its work on this tensor on.
  stream_ref stream() const noexcept { return stream_; }
  /// @throws invalid_argument when moved from.
  void check_live() const {
    if (moved_) RESIDENT_FAIL("use of a moved-from dlpack_array: it no longer holds a tensor");
  }
/// What kernels receive. @throws invalid_argument when moved from.
  array_view<T> view() const {
    check_live();
    return {data_, size_};
  }
  /// The whole tensor as an array_ref (valid while this object lives).
  array_ref<T> ref() const {
    check_live();
    return {data_, size_, stream_};
  }

 private:
  void release() noexcept {
    if (managed_ && managed_->deleter) managed_->deleter(managed_);
    managed_ = nullptr;
  }
  DLManagedTensor* managed_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  stream_ref stream_{};
  bool moved_ = false;
};

/// Takes over a tensor of another library (its deleter runs when the result is destroyed), ordered on
/// s. On an error the tensor stays the caller's. See dlpack_array.
template <class T>
dlpack_array<T> from_dlpack(DLManagedTensor* t, stream_ref s) {
  return dlpack_array<T>(t, s);
}
/// The same, on the default stream of the tensor's device.
template <class T>
dlpack_array<T> from_dlpack(DLManagedTensor* t) {
  if (!t) RESIDENT_FAIL("from_dlpack: a null DLManagedTensor");
  return dlpack_array<T>(t, default_stream(device_of(t->dl_tensor.device)));
}

/// A non-owning view of a tensor's elements (the tensor's owner keeps it alive), ordered on s.
/// @throws as dlpack_array.
template <class T>
array_ref<T> as_array_ref(const DLTensor& t, stream_ref s) {
  const device d = device_of(t.device);
  if (!(s.device() == d))
    RESIDENT_FAIL("as_array_ref: the tensor lies on " + d.name() + ", the stream is on " + s.device().name(), device_mismatch);
  auto [data, n] = detail::dlpack_checked(t, dlpack_dtype<T>(), alignof(T));
  return {static_cast<T*>(data), n, s};
}

}  // namespace resident
