#include "ops.hpp"

#include <limits>
#include <type_traits>

#include "resident/fuse/pipeline.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/random/random.hpp"

namespace resident::py {

template <class T>
void fill_uniform(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, double low, double high) {
  random::fill_uniform(a, seed, offset, T(low), T(high));
}
template <class T>
void fill_normal(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, double mean, double sd) {
  random::fill_normal(a, seed, offset, T(mean), T(sd));
}
void fill_bits(array_ref<std::uint32_t> a, std::uint64_t seed, std::uint64_t offset) {
  random::fill_bits(a, seed, offset);
}
template <class T>
void fill_integers(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, std::int64_t low, std::int64_t high) {
  random::fill_integers(a, seed, offset, low, high);
}

// A sum accumulates in reduced_type: double for floats (a float32 value is exact in it, so n values add
// with an error of at most (n - 1) * 2^-53 * sum|x| before the one rounding to the result), 64 bits for
// integers (no overflow of a 32-bit sum).
template <class T>
constexpr T largest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::max();
}
template <class T>
constexpr T smallest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  return std::numeric_limits<T>::lowest();
}

template <class T>
reduced_type<T> reduce(array_ref<T> a, reduction r) {
  using R = reduced_type<T>;
  auto id = map([] RESIDENT_HD(T v) { return v; });
  auto wide = map([] RESIDENT_HD(T v) { return reduced_type<T>(v); });
  switch (r) {
    case reduction::sum: return R((wide | resident::reduce(plus{}, R(0)))(a));
    // The identities are the infinities where T has them: min of all +inf is +inf, not the largest float.
    case reduction::min: return R((id | resident::reduce(minimum{}, largest<T>()))(a));
    case reduction::max: return R((id | resident::reduce(maximum{}, smallest<T>()))(a));
  }
  return 0;
}

template <class T>
array<reduced_type<T>> reduce_into(array_ref<T> a, reduction r) {
  using R = reduced_type<T>;
  device_scope on(a.device());
  // One call with the result's allocation: the pipeline's scope, opened at the same line, counts into it.
  const auto where = resident::source_location::current();
  const detail::call_scope call("pipeline reduce", a.stream(),
                                {a.size() * sizeof(T), sizeof(R), a.size(), 1, a.data(), nullptr},
                                detail::call_kind::compute, where);
  array<R> out(1, a.stream());
  auto wide = map([] RESIDENT_HD(T v) { return reduced_type<T>(v); });  // min and max of widened values: exact
  switch (r) {
    case reduction::sum: (wide | resident::reduce(plus{}, R(0)))(a, out, where); break;
    case reduction::min: (wide | resident::reduce(minimum{}, R(largest<T>())))(a, out, where); break;
    case reduction::max: (wide | resident::reduce(maximum{}, R(smallest<T>())))(a, out, where); break;
  }
  return out;
}

template <class T, class U>
void scan(array_ref<T> a, array_ref<U> out, reduction r) {
  if (r == reduction::sum) return resident::inclusive_scan(plus{})(a, out);
  if constexpr (std::is_same_v<T, U>) {
    if (r == reduction::min) return resident::inclusive_scan(minimum{})(a, out);
    return resident::inclusive_scan(maximum{})(a, out);
  } else {
    throw resident::invalid_argument("scan: the least or greatest of the values is written in their own type");
  }
}

template void fill_uniform<float>(array_ref<float>, std::uint64_t, std::uint64_t, double, double);
template void fill_uniform<double>(array_ref<double>, std::uint64_t, std::uint64_t, double, double);
template void fill_normal<float>(array_ref<float>, std::uint64_t, std::uint64_t, double, double);
template void fill_normal<double>(array_ref<double>, std::uint64_t, std::uint64_t, double, double);
template void fill_integers<std::int32_t>(array_ref<std::int32_t>, std::uint64_t, std::uint64_t, std::int64_t, std::int64_t);
template void fill_integers<std::uint32_t>(array_ref<std::uint32_t>, std::uint64_t, std::uint64_t, std::int64_t, std::int64_t);
template reduced_type<float> reduce<float>(array_ref<float>, reduction);
template reduced_type<double> reduce<double>(array_ref<double>, reduction);
template reduced_type<std::int32_t> reduce<std::int32_t>(array_ref<std::int32_t>, reduction);
template reduced_type<std::int64_t> reduce<std::int64_t>(array_ref<std::int64_t>, reduction);
template reduced_type<std::uint32_t> reduce<std::uint32_t>(array_ref<std::uint32_t>, reduction);
template reduced_type<std::uint64_t> reduce<std::uint64_t>(array_ref<std::uint64_t>, reduction);
template array<reduced_type<float>> reduce_into<float>(array_ref<float>, reduction);
template array<reduced_type<double>> reduce_into<double>(array_ref<double>, reduction);
template array<reduced_type<std::int32_t>> reduce_into<std::int32_t>(array_ref<std::int32_t>, reduction);
template array<reduced_type<std::int64_t>> reduce_into<std::int64_t>(array_ref<std::int64_t>, reduction);
template array<reduced_type<std::uint32_t>> reduce_into<std::uint32_t>(array_ref<std::uint32_t>, reduction);
template array<reduced_type<std::uint64_t>> reduce_into<std::uint64_t>(array_ref<std::uint64_t>, reduction);
// Scans into the input's type, and sums into the widened one.
#define RESIDENT_PY_SCANS(T)                                                   \
  template void scan<T, T>(array_ref<T>, array_ref<T>, reduction);            \
  template void scan<T, reduced_type<T>>(array_ref<T>, array_ref<reduced_type<T>>, reduction);
RESIDENT_PY_SCANS(float)
RESIDENT_PY_SCANS(std::int32_t)
RESIDENT_PY_SCANS(std::uint32_t)
#undef RESIDENT_PY_SCANS
template void scan<double, double>(array_ref<double>, array_ref<double>, reduction);
template void scan<std::int64_t, std::int64_t>(array_ref<std::int64_t>, array_ref<std::int64_t>, reduction);
template void scan<std::uint64_t, std::uint64_t>(array_ref<std::uint64_t>, array_ref<std::uint64_t>, reduction);

}  // namespace resident::py
