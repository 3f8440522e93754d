#pragma once
// The work the Python module runs on arrays: declared with plain signatures here and defined in
// ops.cpp, which nvcc compiles in CUDA builds (kernels are instantiated there), so the binding code
// itself builds with the host compiler.
#include <cstdint>

#include "resident/memory/array.hpp"

namespace resident::py {

template <class T>
void fill_uniform(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, double low, double high);
template <class T>
void fill_normal(array_ref<T> a, std::uint64_t seed, std::uint64_t offset, double mean, double sd);
void fill_bits(array_ref<std::uint32_t> a, std::uint64_t seed, std::uint64_t offset);

enum class reduction { sum, min, max };
/// The reduction of a's elements, returned as a double. Synchronizes. A sum accumulates floats in double
/// (error at most (n - 1) * 2^-53 * sum|x| before the result's rounding) and integers in 64 bits.
template <class T>
double reduce(array_ref<T> a, reduction r);

}  // namespace resident::py
