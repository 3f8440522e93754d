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
/// and every target (where the values go) answers stream(), bytes(), output() and, for element
/// outputs, size() and data(). A new source or terminal is one new type here; the executors take any of them.

#include <array>
#include <cstddef>
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
  zip_loader<Ts...> loader() const { return {ptrs}; }
  template <class... Out>
  static constexpr int width = vector_width<Ts..., Out...>();
  template <int V, class... Out>
  vector_plan plan(const Out*... out) const {
    return plan_impl<V, Out...>(std::index_sequence_for<Ts...>{}, out...);
  }

 private:
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

  /// The same generator over [0, count) on stream run.
  generate_source bind(std::size_t count, stream_ref run) const { return {g, count, run}; }
  std::size_t size() const { return n; }
  resident::device device() const { return s.device(); }
  stream_ref stream() const { return s; }
  void order_before(stream_ref) const {}
  std::size_t bytes() const { return 0; }
  const void* input() const { return nullptr; }
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
