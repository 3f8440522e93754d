#pragma once
// The work the Python module runs on arrays: declared with plain signatures here and defined in
// ops.cpp, which nvcc compiles in CUDA builds (kernels are instantiated there), so the binding code
// itself builds with the host compiler.
#include <cstdint>
#include <type_traits>

#include "resident/memory/array.hpp"

namespace resident::py {

template <class T>
void fill_uniform(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, double low, double high);
template <class T>
void fill_normal(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, double mean, double sd);
void fill_bits(array_ref<std::uint32_t> a, std::uint64_t seed, std::uint64_t offset);
/// int32 or uint32: integers in [low, high). @throws invalid_argument for bounds that do not fit T or low >= high.
template <class T>
void fill_integers(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, std::int64_t low, std::int64_t high);

enum class reduction { sum, min, max };
/// What a reduction of T values returns: double for floats, the 64-bit integer of T's signedness for
/// integers (exact: a double holds integers only up to 2^53).
template <class T>
using reduced_type = std::conditional_t<std::is_floating_point_v<T>, double,
                                        std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;
/// The reduction of a's elements. Synchronizes. A sum accumulates floats in double (error at most
/// (n - 1) * 2^-53 * sum|x| before the result's rounding) and integers in 64 bits, wrapping modulo 2^64
/// past their range as NumPy's int64 and uint64 sums do; min and max are exact.
template <class T>
reduced_type<T> reduce(array_ref<T> a, reduction r);
/// The same reduction into a one-element array on a's device and stream, not waited for: shards of
/// one sharded array reduce all at once, then are read (resident.dist's sum, min and max).
template <class T>
array<reduced_type<T>> reduce_into(array_ref<T> a, reduction r);
/// out[i] = a[0] + ... + a[i] (sum), or the least / greatest of them (min, max; U is T), computed in U, one
/// pass on out's stream after a's work; not waited for. U is T or, for a sum, reduced_type<T>.
template <class T, class U>
void scan(array_ref<T> a, array_ref<U> out, reduction r);

}  // namespace resident::py
