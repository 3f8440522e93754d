#pragma once
/// @file access.hpp
/// How a fused kernel reads its inputs and writes its output: one element at a time, or V at a time
/// through 16-byte (or narrower) vector loads when the pointers are aligned. Host and device code.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "resident/config.hpp"
#include "resident/fuse/detail/tuple.hpp"

namespace resident::detail {

/// V elements of T loaded or stored as one aligned access (ld.global.v4 for 4 floats).
template <class T, int V>
struct alignas(sizeof(T) * V) vec {
  T v[V];
};

template <class T>
constexpr bool power_of_two_size = sizeof(T) <= 16 && (sizeof(T) & (sizeof(T) - 1)) == 0;

/// Elements per vector access for a pipeline touching these element types: 16 bytes over the widest,
/// or 1 when any type's size is not a power of two.
template <class... Ts>
constexpr int vector_width() {
  if constexpr (sizeof...(Ts) == 0) {
    return 1;
  } else {
    if (!(power_of_two_size<Ts> && ...)) return 1;
    std::size_t widest = 1;
    ((widest = sizeof(Ts) > widest ? sizeof(Ts) : widest), ...);
    return int(16 / widest);
  }
}

/// The split of [0, n) into a scalar head, whole vectors of V, and a scalar tail.
struct vector_plan {
  std::size_t head = 0, vectors = 0;  ///< tail = n - head - vectors * V
  bool vectorized = false;
};

/// Plans the split so that every (pointer, element size) is aligned to V elements after the head;
/// falls back to scalar when their misalignments differ.
inline vector_plan plan_vectors(std::size_t n, int V, std::initializer_list<std::pair<const void*, std::size_t>> ptrs) {
  vector_plan p;
  if (V <= 1 || n == 0 || ptrs.size() == 0) return p;
  auto first = *ptrs.begin();
  auto addr = reinterpret_cast<std::uintptr_t>(first.first);
  if (addr % first.second) return p;
  std::size_t mis = (addr / first.second) % std::size_t(V);
  std::size_t head = (std::size_t(V) - mis) % std::size_t(V);
  if (head > n) return p;
  for (auto [ptr, size] : ptrs) {
    auto a = reinterpret_cast<std::uintptr_t>(ptr) + head * size;
    if (a % (size * std::size_t(V))) return p;
  }
  p.head = head;
  p.vectors = (n - head) / std::size_t(V);
  p.vectorized = p.vectors > 0;
  if (!p.vectorized) p.head = 0;
  return p;
}

template <class T, int V>
RESIDENT_HD inline vec<T, V> load_vec(const T* p) {
  return *reinterpret_cast<const vec<T, V>*>(p);
}

/// Reads one input array.
template <class T>
struct view_loader {
  const T* p;
  template <int V>
  using raw = vec<T, V>;
  template <int V>
  RESIDENT_HD raw<V> load(std::size_t i) const {
    return load_vec<T, V>(p + i);
  }
  template <int V, class Fn>
  RESIDENT_HD auto eval(const Fn& fn, const raw<V>& r, int k, std::size_t) const {
    return fn(r.v[k]);
  }
  template <class Fn>
  RESIDENT_HD auto eval1(const Fn& fn, std::size_t i) const {
    return fn(p[i]);
  }
  /// The same array from element by on.
  RESIDENT_HD view_loader shifted(std::size_t by) const { return {p + by}; }
};

/// Reads several arrays of possibly different types, element by element in step.
template <class... Ts>
struct zip_loader {
  tuple<const Ts*...> ps;
  template <int V>
  using raw = tuple<vec<Ts, V>...>;
  template <int V>
  RESIDENT_HD raw<V> load(std::size_t i) const {
    return load_impl<V>(i, std::index_sequence_for<Ts...>{});
  }
  template <int V, class Fn>
  RESIDENT_HD auto eval(const Fn& fn, const raw<V>& r, int k, std::size_t) const {
    return eval_impl<V>(fn, r, k, std::index_sequence_for<Ts...>{});
  }
  template <class Fn>
  RESIDENT_HD auto eval1(const Fn& fn, std::size_t i) const {
    return eval1_impl(fn, i, std::index_sequence_for<Ts...>{});
  }
  /// The same arrays from element by on.
  RESIDENT_HD zip_loader shifted(std::size_t by) const {
    return shifted_impl(by, std::index_sequence_for<Ts...>{});
  }

 private:
  template <int V, std::size_t... I>
  RESIDENT_HD raw<V> load_impl(std::size_t i, std::index_sequence<I...>) const {
    return raw<V>{{load_vec<Ts, V>(get<I>(ps) + i)}...};
  }
  template <int V, class Fn, std::size_t... I>
  RESIDENT_HD auto eval_impl(const Fn& fn, const raw<V>& r, int k, std::index_sequence<I...>) const {
    return fn(get<I>(r).v[k]...);
  }
  template <class Fn, std::size_t... I>
  RESIDENT_HD auto eval1_impl(const Fn& fn, std::size_t i, std::index_sequence<I...>) const {
    return fn(get<I>(ps)[i]...);
  }
  template <std::size_t... I>
  RESIDENT_HD zip_loader shifted_impl(std::size_t by, std::index_sequence<I...>) const {
    return {{(get<I>(ps) + by)...}};
  }
};

/// Values of a generator for V consecutive indices.
template <class R, int V>
struct values {
  R v[V];
};

/// A generator that declares `using block_generator = void;` offers block<V>(i) -> values<R, V>, making
/// V values at once (a counter-based RNG makes four per call). (A tag rather than a requires-expression:
/// the check must come out the same in nvcc's device pass.)
template <class G, class = void>
inline constexpr bool makes_blocks = false;
template <class G>
inline constexpr bool makes_blocks<G, std::void_t<typename G::block_generator>> = true;

/// A block generator that also declares `using aligned_blocks = void;` makes its values a block at a
/// time: per_block values per call, values_of_block(c) those of block c, first_block() the block that
/// holds value 0 and block_lead() how many of its values precede value 0.
template <class G, class = void>
inline constexpr bool makes_aligned_blocks = false;
template <class G>
inline constexpr bool makes_aligned_blocks<G, std::void_t<typename G::aligned_blocks>> = true;

/// Makes each element from its index: nothing is read from memory.
template <class G>
struct generate_loader {
  G g;
  using R = decltype(g(std::size_t(0)));
  template <int V>
  using raw = values<R, V>;
  template <int V>
  RESIDENT_HD raw<V> load(std::size_t i) const {
    if constexpr (makes_blocks<G>) {
      return g.template block<V>(i);
    } else {
      raw<V> r;
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = g(i + std::size_t(k));
      return r;
    }
  }
  template <int V, class Fn>
  RESIDENT_HD auto eval(const Fn& fn, const raw<V>& r, int k, std::size_t) const {
    return fn(r.v[k]);
  }
  template <class Fn>
  RESIDENT_HD auto eval1(const Fn& fn, std::size_t i) const {
    return fn(g(i));
  }
};

/// r as a U. A floating value into an integer type saturates and NaN gives 0, as a GPU's conversion
/// does: C++ leaves a value out of the type's range undefined (x86 gives the lowest value).
template <class U, class R>
RESIDENT_HD U converted(const R& r) {
  if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool> && std::is_floating_point_v<R>) {
    if (r != r) return U(0);
    if (r <= static_cast<R>(std::numeric_limits<U>::lowest())) return std::numeric_limits<U>::lowest();
    if (r >= static_cast<R>(std::numeric_limits<U>::max())) return std::numeric_limits<U>::max();
  }
  return static_cast<U>(r);
}

/// Writes the output array, converting to its element type (converted).
template <class U>
struct writer {
  U* p;
  template <int V, class R>
  RESIDENT_HD void store(std::size_t i, const R (&r)[V]) const {
    vec<U, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = converted<U>(r[k]);
    *reinterpret_cast<vec<U, V>*>(p + i) = out;
  }
  template <class R>
  RESIDENT_HD void store1(std::size_t i, const R& r) const {
    p[i] = converted<U>(r);
  }
  /// Whether store<V> may write at i, i + V, ... when the first of them lies lead elements before p.
  template <int V>
  static constexpr bool stores_vectors = power_of_two_size<U> && sizeof(U) * V <= 32;
  template <int V>
  RESIDENT_HD bool vectors_aligned(std::size_t lead) const {
    return (reinterpret_cast<std::uintptr_t>(p) - lead * sizeof(U)) % (sizeof(U) * V) == 0;
  }
};

}  // namespace resident::detail
