#pragma once
/// @file sources.hpp
/// The one shape of a pipeline's ends. Every source, bound for a call, answers:
///   size()                  how many elements it yields
///   device()                where they are made
///   stream()                the stream a call that returns a value to the host runs on
///   order_before(s)         makes s wait for the work queued on the source's arrays (an event, no host
///                           synchronization; nothing on the CPU)
///   loader()                the reader the executors call (load<V> / eval<V> / eval1, see access.hpp)
///   width<Out...>           elements per vector access together with outputs of types Out
///   plan<V>(out...)         the split of [0, size()) into a head, vectors of V and a tail
///   bytes(), input()        the bytes it reads and the array it reads (nullptr: several, or none)
///   reads()                 each array it reads: where it starts and its element size (none: a generator)
/// and every target (where the values go) answers stream(), bytes(), output() and, for element
/// outputs, size() and data(). A new source or terminal is one new type here; the executors take any of them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/fuse/detail/access.hpp"
#include "resident/fuse/detail/tuple.hpp"
#include "resident/memory/array.hpp"

namespace resident::detail {

[[noreturn]] inline void throw_size(const char* what, std::size_t a, std::size_t b) {
  RESIDENT_FAIL(std::string("pipeline: ") + what + " " + std::to_string(a) + " elements, expected " +
                    std::to_string(b),
                shape_mismatch);
}
inline void check_same(device a, device b, const char* what) {
  if (!(a == b))
    RESIDENT_FAIL(std::string("pipeline: ") + what + " is on " + a.name() + ", the rest on " + b.name() +
                      "; copy it over first (rs::copy_to)",
                  device_mismatch);
}
/// Makes s wait for before's queued work, unless they are one stream (the common case costs a compare).
inline void order_after(stream_ref s, stream_ref before) {
  if (before.native() != s.native()) s.wait_for(before);
}

/// An array a source reads: its first element and its element size (it holds the source's size()).
struct read_range {
  const void* p;
  std::size_t element_bytes;
};

/// Refuses an output of n elements of out_bytes each at out that shares memory with an array the source
/// reads without being exactly it (same start, same element size). The elements are computed in no fixed
/// order (pieces of a parallel loop, blocks of a grid, a scan's tiles), so an output shifted over an
/// input would read some elements already written and others not yet: the result would depend on the
/// order. Exactly in place is safe: each element is read before it is written, by the same thread.
/// @throws invalid_argument before any work.
template <class S>
void check_no_partial_overlap(const S& in, const void* out, std::size_t out_bytes, std::size_t n) {
  if (n == 0) return;
  const auto o = reinterpret_cast<std::uintptr_t>(out);
  const std::size_t ob = n * out_bytes;  // both spans exist, so neither byte count overflows
  std::size_t k = 0;
  for (const read_range& r : in.reads()) {
    const auto i = reinterpret_cast<std::uintptr_t>(r.p);
    const std::size_t ib = n * r.element_bytes;
    const bool apart = i >= o + ob || o >= i + ib;
    if (!apart && !(i == o && r.element_bytes == out_bytes)) {
      const std::string where = o >= i ? "starts " + std::to_string(o - i) + " bytes after"
                                       : "starts " + std::to_string(i - o) + " bytes before";
      RESIDENT_FAIL("pipeline: the output (" + std::to_string(n) + " elements of " + std::to_string(out_bytes) +
                    " bytes) overlaps the input " + (in.reads().size() > 1 ? "array " + std::to_string(k) + " " : "") +
                    "without being the same elements: it " + where +
                    " it, and the order the elements are computed in is not fixed; write into separate memory or "
                    "exactly in place");
    }
    ++k;
  }
}

// ---- sources ---------------------------------------------------------------------------------

/// Placeholder of a pipeline that reads the array it is called with; bound to array_source per call.
struct input_source {};

/// One array, read element by element.
template <class T>
struct array_source {
  const T* p;
  std::size_t n;
  stream_ref s;

  std::size_t size() const { return n; }
  resident::device device() const { return s.device(); }
  stream_ref stream() const { return s; }
  void order_before(stream_ref run) const { order_after(run, s); }
  std::size_t bytes() const { return n * sizeof(T); }
  const void* input() const { return p; }
  std::array<read_range, 1> reads() const { return {{{p, sizeof(T)}}}; }
  view_loader<T> loader() const { return {p}; }
  template <class... Out>
  static constexpr int width = vector_width<T, Out...>();
  template <int V, class... Out>
  vector_plan plan(const Out*... out) const {
    return plan_vectors(n, V, {{p, sizeof(T)}, {out, sizeof(Out)}...});
  }
};

/// The array a pipeline is called with, as its source. @throws invalid_argument when moved from.
template <array_like A>
auto bind_input(const A& x) {
  x.check_live();
  return array_source<typename std::remove_cvref_t<A>::value_type>{x.data(), x.size(), x.stream()};
}

/// Several arrays read in step (bound when zip() is called).
template <class... Ts>
struct zip_source {
  tuple<const Ts*...> ptrs;
  std::size_t n;
  std::array<stream_ref, sizeof...(Ts)> streams;

  std::size_t size() const { return n; }
  resident::device device() const { return streams[0].device(); }
  stream_ref stream() const { return streams[0]; }
  void order_before(stream_ref run) const {
    for (stream_ref s : streams) order_after(run, s);
  }
  std::size_t bytes() const { return n * (sizeof(Ts) + ...); }
  const void* input() const { return nullptr; }
  std::array<read_range, sizeof...(Ts)> reads() const { return reads_impl(std::index_sequence_for<Ts...>{}); }
  zip_loader<Ts...> loader() const { return {ptrs}; }
  template <class... Out>
  static constexpr int width = vector_width<Ts..., Out...>();
  template <int V, class... Out>
  vector_plan plan(const Out*... out) const {
    return plan_impl<V, Out...>(std::index_sequence_for<Ts...>{}, out...);
  }

 private:
  template <std::size_t... I>
  std::array<read_range, sizeof...(Ts)> reads_impl(std::index_sequence<I...>) const {
    return {{read_range{get<I>(ptrs), sizeof(Ts)}...}};
  }
  template <int V, class... Out, std::size_t... I>
  vector_plan plan_impl(std::index_sequence<I...>, const Out*... out) const {
    return plan_vectors(n, V,
                        {std::pair<const void*, std::size_t>{get<I>(ptrs), sizeof(Ts)}...,
                         std::pair<const void*, std::size_t>{out, sizeof(Out)}...});
  }
};

/// Element i made as g(i); nothing is read. Bound to a size and a stream per call.
template <class G>
struct generate_source {
  G g;
  std::size_t n = 0;
  stream_ref s{};

  /// The same generator over [0, count) on stream run. Its values span count * sizeof(value) bytes as
  /// an array's would; a count whose bytes pass PTRDIFF_MAX (the most any array spans) is refused: the
  /// executors' index sums (count + a vector, + a block of random numbers, + a grid's threads) would
  /// wrap, and no such loop ends anyway. @throws invalid_argument before any work.
  generate_source bind(std::size_t count, stream_ref run) const {
    using R = typename generate_loader<G>::R;
    constexpr std::size_t most = std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(R);
    if (count > most)
      RESIDENT_FAIL("generate: " + std::to_string(count) + " values of " + std::to_string(sizeof(R)) +
                    " bytes overflow the byte count (at most " + std::to_string(most) +
                    " such values); generate them in parts");
    return {g, count, run};
  }
  std::size_t size() const { return n; }
  resident::device device() const { return s.device(); }
  stream_ref stream() const { return s; }
  void order_before(stream_ref) const {}
  std::size_t bytes() const { return 0; }
  const void* input() const { return nullptr; }
  std::array<read_range, 0> reads() const { return {}; }
  generate_loader<G> loader() const { return {g}; }
  /// With an output: vectors of its width; without (a reduction): every index is "aligned", so
  /// generators that make several values at once do.
  template <class... Out>
  static constexpr int width = sizeof...(Out) == 0 ? 4 : vector_width<Out...>();
  template <int V, class... Out>
  vector_plan plan(const Out*... out) const {
    if constexpr (sizeof...(Out) == 0)
      return {0, n / std::size_t(V), n / std::size_t(V) > 0};
    else
      return plan_vectors(n, V, {{out, sizeof(Out)}...});
  }
};

// ---- terminals: what the stages' values become -----------------------------------------------

/// No terminal stage: the values are written to an array.
struct no_reduce {};
/// A fold of the values with op from init (rs::reduce).
template <class Op, class T>
struct reduce_stage {
  Op op;
  T init;
};
/// Inclusive prefix combinations of the values with op, written to an array (rs::inclusive_scan).
template <class Op>
struct scan_stage {
  Op op;
};

template <class T>
inline constexpr bool is_reduce = false;
template <class Op, class T>
inline constexpr bool is_reduce<reduce_stage<Op, T>> = true;
template <class T>
inline constexpr bool is_scan = false;
template <class Op>
inline constexpr bool is_scan<scan_stage<Op>> = true;

/// Elements written into an array or slice (map and scan pipelines).
template <class U>
struct array_target {
  U* p;
  std::size_t n;
  stream_ref s;
  std::size_t size() const { return n; }
  U* data() const { return p; }
  stream_ref stream() const { return s; }
  std::size_t bytes() const { return n * sizeof(U); }
  const void* output() const { return p; }
};
/// A reduction's value written into out[0] of a one-element array, left on the device.
template <class T>
struct value_target {
  T* p;
  stream_ref s;
  stream_ref stream() const { return s; }
  std::size_t bytes() const { return sizeof(T); }
  const void* output() const { return p; }
};
/// A reduction's value returned to the caller (synchronizes the source's stream).
struct host_target {
  std::size_t bytes() const { return 0; }
  const void* output() const { return nullptr; }
};

/// The output array of a map or scan. @throws invalid_argument when moved from.
template <array_like B>
auto write_into(B& y) {
  y.check_live();
  return array_target<typename std::remove_cvref_t<B>::value_type>{y.data(), y.size(), y.stream()};
}

}  // namespace resident::detail
