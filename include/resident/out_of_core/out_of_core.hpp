#pragma once
/// @file out_of_core/out_of_core.hpp
/// Out-of-core pipelines over host data of any size: the data is cut into chunks, each chunk goes up,
/// through the same fused pipeline (one kernel per chunk) and back down, and the upload, kernel and
/// download of different chunks overlap on three streams with pinned staging between them. Only a
/// few chunks are on the device at once, so the host data may be far larger than device memory.
///
///   auto seed = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
///   rs::out_of_core(seed, host_in, host_out);                        // map: host -> host
///   rs::out_of_core(rs::map<add>(), rs::host_zip(a, b), host_out);   // zip of host arrays
///   rs::out_of_core(seed, rs::host_generate(g, n), host_out);        // generated on the device
///   double s = rs::out_of_core(rs::map<f1>() | rs::reduce(rs::plus{}, 0.0), host_in);  // a value
///
/// The stages are a pipeline without a source (maps, optionally ending in a reduction); the source
/// is the host input. Host memory may be pageable (staged through pinned buffers by worker threads,
/// out_of_core_options::host_threads of them, in parallel pieces, while the copy engines move other
/// chunks) or page-locked (copied directly). On the CPU backend the call is a plain loop over the chunks, reading and writing the host arrays in place,
/// with the same results and the same ledger counts.
///
/// Streams: the call runs on streams of its own on options.target and synchronizes before it
/// returns (its host output is written, its value computed). It touches no device memory of the
/// caller, so it waits for no other work on the device.
///
/// Thread safety: out-of-core pipelines may run concurrently from several threads. Each call has its own
/// streams, device staging, events and host copy threads (a host_copy_pool of its own); only the
/// per-device cache of page-locked staging buffers is shared, under a lock (a buffer is taken out of
/// the cache for the call's length).
///
/// The file that runs an out-of-core pipeline on a CUDA device must be compiled by nvcc (as for
/// pipelines). The names of earlier releases (stream_pipeline, stream_options, stream_summary) are
/// deprecated aliases (out_of_core/deprecated.hpp, included here).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ranges>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/error.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/memory/array.hpp"
#include "resident/out_of_core/deprecated.hpp"
#include "resident/out_of_core/detail/chunk_loop.hpp"
#include "resident/out_of_core/options.hpp"

namespace resident {

/// Host arrays read in step by an out-of-core pipeline (its first map takes one argument per array).
/// Holds spans: the arrays must outlive the call.
template <class... Ts>
struct host_zip_input {
  std::tuple<std::span<const Ts>...> spans;  ///< the arrays, all of one size
};

/// Reads several host arrays (vectors, spans, pinned buffers) in step. @throws shape_mismatch when
/// their sizes differ.
template <std::ranges::contiguous_range... R>
auto host_zip(const R&... r) {
  host_zip_input<std::ranges::range_value_t<R>...> z{
      {std::span<const std::ranges::range_value_t<R>>(std::ranges::data(r), std::ranges::size(r))...}};
  const std::size_t sizes[] = {std::size_t(std::ranges::size(r))...};
  for (std::size_t s : sizes)
    RESIDENT_EXPECTS(s == sizes[0], "host_zip: an array holds " + std::to_string(s) + " elements, expected " +
                                        std::to_string(sizes[0]), shape_mismatch);
  return z;
}

/// Elements made on the device as g(i) for i in [0, n): an out-of-core pipeline with this source
/// uploads nothing (g as for generate()).
template <class G>
struct host_generate_input {
  G g;            ///< the generator
  std::size_t n;  ///< how many elements
};

/// A source of n elements g(0), ..., g(n - 1) made on the device, for an out-of-core pipeline.
template <class G>
host_generate_input<G> host_generate(G g, std::size_t n) {
  return {g, n};
}

namespace detail {

template <class P>
struct out_of_core_stages {
  static constexpr bool valid = false;
  static constexpr bool scans = false;
};
template <class S, class C, class R>
struct out_of_core_stages<pipeline<S, C, R>> {
  static constexpr bool valid = std::is_same_v<S, input_source>;  ///< stages only, no source of their own
  static constexpr bool reduces = is_reduce<R>;
  static constexpr bool scans = is_scan<R>;
};

/// A reduction's value over part of the data, or none yet: folding chunks with these adds the
/// user's init once, whatever the number of chunks.
template <class R>
struct partial {
  R value{};
  /// Whether value holds one; as wide as R, so the struct has no padding bytes that a copy of the
  /// partial would read uninitialized.
  std::conditional_t<sizeof(R) >= 8, std::uint64_t, std::uint32_t> has = 0;
};
template <class R>
struct to_partial {
  template <class X>
  RESIDENT_HD partial<R> operator()(X x) const {
    return {static_cast<R>(x), 1};
  }
};
template <class Op, class R>
struct partial_op {
  Op op;
  RESIDENT_HD partial<R> operator()(partial<R> a, partial<R> b) const {
    if (!a.has) return b;
    if (!b.has) return a;
    return {op(a.value, b.value), 1};
  }
};

/// g shifted to a chunk: element i of the chunk is g(first + i).
template <class G>
struct shifted_generator {
  G g;
  std::size_t first;
  RESIDENT_HD auto operator()(std::size_t i) const { return g(first + i); }
};

template <class T>
struct single_input {
  std::span<const T> span;
};

// What each kind of host input gives the loop: its size, its host arrays, and the pipeline source of a
// chunk (the stages q composed after it, run into y or reduced into a result array).
template <class T>
struct input_traits;
template <class T>
struct input_traits<single_input<T>> {
  static std::size_t size(const single_input<T>& in) { return in.span.size(); }
  static std::vector<host_side> sides(const single_input<T>& in) { return {{in.span.data(), sizeof(T)}}; }
  static constexpr bool single = true;
  using first_type = T;
  template <class Q, class Y>
  static void map(const single_input<T>&, const Q& q, const chunk_view& v, stream_ref s, Y& y) {
    array_ref<T> x(static_cast<T*>((*v.inputs)[0]), v.count, s);
    // In place only with the same element type: an output of another type of the same size over the
    // input's memory (allowed on the host) must still be converted.
    if constexpr (std::is_same_v<T, std::remove_cvref_t<decltype(*y.data())>>) {
      if (static_cast<void*>(y.data()) == static_cast<void*>(x.data())) {
        q(x);
        return;
      }
    }
    q(x, y);
  }
  template <class Q, class M>
  static void reduce(const single_input<T>&, const Q& q, const chunk_view& v, stream_ref s, array<M>& out) {
    q(array_ref<T>(static_cast<T*>((*v.inputs)[0]), v.count, s), out);
  }
};
template <class... Ts>
struct input_traits<host_zip_input<Ts...>> {
  static std::size_t size(const host_zip_input<Ts...>& in) { return std::get<0>(in.spans).size(); }
  static std::vector<host_side> sides(const host_zip_input<Ts...>& in) {
    return std::apply([](const auto&... s) { return std::vector<host_side>{{s.data(), sizeof(*s.data())}...}; },
                      in.spans);
  }
  static constexpr bool single = false;
  template <std::size_t... I>
  static auto source(const chunk_view& v, stream_ref s, std::index_sequence<I...>) {
    return zip(array_ref<Ts>(static_cast<Ts*>((*v.inputs)[I]), v.count, s)...);
  }
  template <class Q, class Y>
  static void map(const host_zip_input<Ts...>&, const Q& q, const chunk_view& v, stream_ref s, Y& y) {
    (source(v, s, std::index_sequence_for<Ts...>{}) | q)(y);
  }
  template <class Q, class M>
  static void reduce(const host_zip_input<Ts...>&, const Q& q, const chunk_view& v, stream_ref s, array<M>& out) {
    (source(v, s, std::index_sequence_for<Ts...>{}) | q)(out);
  }
};
template <class G>
struct input_traits<host_generate_input<G>> {
  static std::size_t size(const host_generate_input<G>& in) { return in.n; }
  static std::vector<host_side> sides(const host_generate_input<G>&) { return {}; }
  static constexpr bool single = false;
  template <class Q, class Y>
  static void map(const host_generate_input<G>& in, const Q& q, const chunk_view& v, stream_ref, Y& y) {
    (generate(shifted_generator<G>{in.g, v.first}) | q)(y);
  }
  template <class Q, class M>
  static void reduce(const host_generate_input<G>& in, const Q& q, const chunk_view& v, stream_ref, array<M>& out) {
    (generate(shifted_generator<G>{in.g, v.first}) | q)(v.count, out);
  }
};

template <class In>
inline constexpr bool is_host_source = false;
template <class... Ts>
inline constexpr bool is_host_source<host_zip_input<Ts...>> = true;
template <class G>
inline constexpr bool is_host_source<host_generate_input<G>> = true;

/// A zip or generate input as it is; a contiguous range as the single input.
template <class In>
auto as_input(const In& in) {
  if constexpr (is_host_source<In>) {
    return in;
  } else {
    static_assert(std::ranges::contiguous_range<In>,
                  "an out-of-core pipeline's input is a contiguous host range, host_zip(...) or host_generate(g, n)");
    using T = std::ranges::range_value_t<In>;
    return single_input<T>{std::span<const T>(std::ranges::data(in), std::ranges::size(in))};
  }
}

template <class P>
void check_stages() {
  static_assert(out_of_core_stages<P>::valid,
                "out_of_core takes stages without a source of their own (map | map | reduce): the host "
                "input is the source; give host_zip(...) or host_generate(g, n) as the input instead");
  static_assert(!out_of_core_stages<P>::scans,
                "a scan cannot be streamed (each chunk's values depend on every chunk before it): copy the "
                "data to the device and run the pipeline there, or stream the maps and scan afterwards");
}

inline void check_backend(device d) {
  if (d.is_cuda() && !nvcc_compiled) throw_not_nvcc(d);
}

}  // namespace detail

/// Streams host input through the stages into host output: out[i] = stages(input element i),
/// converted to out's element type, in chunks (see the file's description). input: a contiguous
/// host range (vector, span, pinned_buffer), host_zip(a, b, ...) or host_generate(g, n); out: a
/// contiguous host range of the input's size, which may be the single input itself (in place).
/// Synchronizes: returns when out is written. Every check is made before any data moves.
/// @throws shape_mismatch (sizes), invalid_argument (options, an output overlapping an input other
/// than exactly, a null host array with elements), transfer_forbidden (under transfer_policy::forbid), out_of_memory (the staging does
/// not fit, e.g. under the pool's limit with a chunk given), device_unavailable.
template <class P, class In, std::ranges::contiguous_range Out>
  requires(!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<Out>>>)
out_of_core_summary out_of_core(const P& stages, const In& input, Out&& out, const out_of_core_options& o = {}) {
  detail::check_stages<P>();
  static_assert(!detail::out_of_core_stages<P>::reduces, "a reduction returns its value: call out_of_core(stages, input)");
  using U = std::ranges::range_value_t<Out>;
  const auto in = detail::as_input(input);
  using traits = detail::input_traits<std::remove_cvref_t<decltype(in)>>;
  const std::size_t n = traits::size(in);
  const std::size_t m = std::ranges::size(out);
  RESIDENT_EXPECTS(m == n, "out_of_core: the host output holds " + std::to_string(m) + " elements, the input " +
                               std::to_string(n), shape_mismatch);
  detail::check_backend(o.target);
  bool in_place = false;
  if constexpr (traits::single) in_place = std::is_same_v<typename traits::first_type, U>;
  U* out_data = std::ranges::data(out);
  detail::chunk_loop loop(n, traits::sides(in), {out_data, sizeof(U)}, in_place, 0, o);
  const stream_ref s = loop.kernel_stream();
  loop.run(
      [&](const detail::chunk_view& v) {
        array_ref<U> y(static_cast<U*>(v.output), v.count, s);
        traits::map(in, stages, v, s, y);
      },
      {});
  return loop.summary();
}

/// Streams host input through stages ending in reduce(op, init) and returns the value: init folded
/// with every element's value, as the unstreamed pipeline (chunks are folded in order; op must be
/// associative and commutative, as for reduce). input as above. Synchronizes. If summary is given,
/// it receives how the call ran.
/// @throws as the other overload.
template <class P, class In>
auto out_of_core(const P& stages, const In& input, const out_of_core_options& o = {}, out_of_core_summary* summary = nullptr) {
  detail::check_stages<P>();
  static_assert(detail::out_of_core_stages<P>::reduces,
                "stages without a reduction write their values: call out_of_core(stages, input, out)");
  using R = std::remove_cvref_t<decltype(stages.red.init)>;
  using M = detail::partial<R>;
  const auto in = detail::as_input(input);
  using traits = detail::input_traits<std::remove_cvref_t<decltype(in)>>;
  const std::size_t n = traits::size(in);
  detail::check_backend(o.target);
  const auto op = stages.red.op;
  // The chunks fold into partials that carry no init; init joins once, on the host.
  const auto q = map(stages.chain) | map(detail::to_partial<R>{}) | reduce(detail::partial_op<decltype(op), R>{op}, M{});
  detail::chunk_loop loop(n, traits::sides(in), {}, false, sizeof(M), o);
  const stream_ref s = loop.kernel_stream();
  std::vector<array<M>> partials;
  std::vector<void*> slots;
  if (n > 0)
    for (int k = 0; k < loop.depth(); ++k) {
      partials.emplace_back(1, s);
      slots.push_back(partials.back().data());
    }
  loop.run([&](const detail::chunk_view& v) { traits::reduce(in, q, v, s, partials[std::size_t(v.slot)]); }, slots);
  R r = stages.red.init;
  const auto* got = static_cast<const unsigned char*>(loop.host_results());
  for (std::size_t c = 0; c < loop.summary().chunks; ++c) {
    M part;
    std::memcpy(&part, got + c * sizeof(M), sizeof(M));
    if (part.has) r = op(r, part.value);
  }
  if (summary) *summary = loop.summary();
  return r;
}

}  // namespace resident
