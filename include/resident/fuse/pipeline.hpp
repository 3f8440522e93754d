#pragma once
/// @file pipeline.hpp
/// Fused pipelines: stages written separately, composed with `|` at compile time, run as ONE kernel
/// (GPU) or one parallel loop (CPU) per call. Each element is read once and written once.
///
///   RESIDENT_HD float f1(float v) { return 1.5f * v + 0.5f; }
///   auto master = rs::map<f1>() | rs::map<f2>() | rs::map<f3>();
///   master(data);          // in place, one kernel
///   master(data, out);     // out of place; out's element type may differ (float -> double)
///   float s = (rs::map<f1>() | rs::reduce(rs::plus{}, 0.f))(data);   // one pass, synchronizes
///
/// The file that calls a pipeline on a CUDA array must be compiled by nvcc.
///
/// Aliasing: a map's or scan's output is either exactly one of its inputs (in place: same first element,
/// same element size) or apart from all of them; an output partly over an input is refused before any
/// work (the elements are computed in no fixed order). A reduction's one-element result array may lie in
/// its input: it is written after every element is read.
///
/// Streams: a call runs on the stream of the array it writes (the output, or the one-element result
/// array of a reduction); a reduction that returns its value runs on its input's stream and
/// synchronizes it. Inputs on other streams of the device are ordered before the call with an event;
/// nothing else synchronizes the host.
///
/// Sources and terminals have one shape (detail/sources.hpp); the executors are per backend
/// (detail/fused_cpu.hpp, detail/fused_cuda.cuh) behind one dispatch (detail/backend.hpp).
///
/// On the CPU backend an exception thrown by a stage (or a generator) reaches the caller: the first
/// one thrown is rethrown after the loop. Other elements may or may not have been computed by then
/// (pieces of the loop already started finish, no new ones start), so an output is partly written.

#include <cstddef>
#include <optional>
#include "resident/detail/source_location.hpp"
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/detail/backend.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/error.hpp"
#include "resident/fuse/detail/access.hpp"
#include "resident/fuse/detail/fused_cpu.hpp"
#include "resident/fuse/detail/sources.hpp"
#include "resident/fuse/detail/tuple.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/launch/config.hpp"
#include "resident/launch/launch.hpp"
#include "resident/memory/array.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {

// ---- reduction operators ---------------------------------------------------------------------
// NaN rule, the same on both backends (these functors run in the CPU loops and the GPU kernels alike):
// every operator propagates NaN. A NaN among the values, or as init, makes the result NaN, for
// minimum and maximum as for plus: a NaN in the data is never hidden (IEEE 754-2019 minimum /
// maximum, NumPy's min / max; unlike std::fmin / std::fmax, which drop it). To skip NaN, map them
// to +-infinity first. Over +0 and -0 alone, which zero comes back depends on the order the backend
// folds in (they compare equal; no sign is promised).

/// a + b; integers wrap (two's complement), as a GPU's and NumPy's integer sums do, where C++'s
/// signed overflow is undefined.
struct plus {
  /// a + b.
  template <class T>
  RESIDENT_HD constexpr T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
    else
      return a + b;
  }
};
namespace detail {
template <class T>
RESIDENT_HD constexpr bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}
}  // namespace detail

/// The smaller of a and b; NaN when either is NaN (a NaN a is kept by the comparison failing).
struct minimum {
  /// The smaller of a and b (a when equal).
  template <class T>
  RESIDENT_HD constexpr T operator()(T a, T b) const {
    return (b < a || detail::is_nan(b)) ? b : a;
  }
};
/// The larger of a and b; NaN when either is NaN (a NaN a is kept by the comparison failing).
struct maximum {
  /// The larger of a and b (a when equal).
  template <class T>
  RESIDENT_HD constexpr T operator()(T a, T b) const {
    return (a < b || detail::is_nan(b)) ? b : a;
  }
};

namespace detail {

/// A stage made from a RESIDENT_HD function named at compile time.
template <auto F>
struct function_stage {
  template <class... A>
  RESIDENT_HD constexpr auto operator()(A... a) const {
    return F(a...);
  }
};

template <class C>
inline constexpr std::size_t chain_size = 0;
template <class... Fs>
inline constexpr std::size_t chain_size<chain<Fs...>> = sizeof...(Fs);

/// What the stages make from one element of source S (several arguments for a zip).
template <class S, class Chain>
using stage_result = decltype(std::declval<const decltype(std::declval<const S&>().loader())&>().eval1(
    std::declval<const Chain&>(), std::size_t(0)));
/// Whether the executors' static_cast<U>(a stage's result R) compiles.
template <class R, class U>
concept converts_to = requires(R r) { static_cast<U>(r); };

template <class T>
inline constexpr bool is_zip = false;
template <class... Ts>
inline constexpr bool is_zip<zip_source<Ts...>> = true;
template <class T>
inline constexpr bool is_generate = false;
template <class G>
inline constexpr bool is_generate<generate_source<G>> = true;

/// A reduction's fixed shape, as the CUDA kernel needs it on every backend (a program that runs on the
/// CPU runs on a GPU): blocks of reduce_block threads in x, told apart by their x index alone.
/// @throws invalid_launch.
inline void check_reduce_shape(const launch_config& c) {
  constexpr int block = cuda_tuning::reduce_block;
  if (c.block.count() != std::size_t(block) || c.block.y != 1 || c.block.z != 1)
    RESIDENT_FAIL("a fused reduction runs blocks of " + std::to_string(block) + " threads; " + c.str() +
                      " asks for " + std::to_string(c.block.count()),
                  invalid_launch);
  if (c.grid.y != 1 || c.grid.z != 1)
    RESIDENT_FAIL("a fused reduction runs a one-dimensional grid; " + c.str() + " has " + std::to_string(c.grid.y) +
                      " x " + std::to_string(c.grid.z) + " in y and z: give the blocks as x alone",
                  invalid_launch);
}

// The CUDA twins of fused_cpu.hpp's executors, defined in fused_cuda.cuh (nvcc only).
template <int V, class L, class Fn, class W>
void run_map(cuda_backend, stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t n, vector_plan plan,
             const std::optional<launch_config>& cfg);
template <int V, class L, class Fn, class Op, class T>
T run_reduce(cuda_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, T init, std::size_t n,
             vector_plan plan, const std::optional<launch_config>& cfg, T* into);
template <class U, class L, class Fn, class Op>
void run_scan(cuda_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, U* out, std::size_t n,
              const std::optional<launch_config>& cfg);

}  // namespace detail

/// A composed pipeline: where elements come from (Src), the stages (Chain), and an optional terminal
/// (Red: a reduction or a scan). Build it with map / zip / generate / reduce / inclusive_scan and `|`;
/// call it on arrays. Every call binds its source and its target and runs `execute`, one kernel.
template <class Src, class Chain, class Red>
class pipeline {
  static constexpr bool from_input = std::is_same_v<Src, detail::input_source>;
  static constexpr bool reduces = detail::is_reduce<Red>;
  static constexpr bool zips = detail::is_zip<Src>;
  static constexpr bool generates = detail::is_generate<Src>;

 public:
  /// Where the elements come from: the called array, a zip of arrays, or a generator.
  Src src;
  /// The stages, applied in order to each element.
  Chain chain;
  /// The terminal stage (reduction or scan), or none.
  Red red;
  std::optional<launch_config> config;  ///< fixed [grid, block]; default: from occupancy

  /// The same pipeline with a fixed launch configuration (validated at each call).
  pipeline with_config(launch_config cfg) const {
    pipeline p = *this;
    p.config = cfg;
    return p;
  }

  /// Reading the array x. Maps and scans write x in place (one kernel on x's stream, asynchronous);
  /// a reduction returns its value (synchronizes x's stream; on a GPU the value's download is a
  /// device-to-host transfer in the ledger, refused under transfer_policy::forbid). x: array or slice.
  template <array_like A>
    requires(from_input)
  auto operator()(A&& x, resident::source_location where = resident::source_location::current()) const {
    if constexpr (reduces)
      return execute(detail::bind_input(x), detail::host_target{}, where);
    else
      execute(detail::bind_input(x), detail::write_into(x), where);
  }

  /// Reading x into y: y[i] = stages(x[i]) converted to y's element type (maps, scans), or a
  /// reduction's value into y[0] of a one-element array, left on the device. One kernel on y's stream,
  /// after x's work; asynchronous. @throws shape_mismatch, device_mismatch, invalid_argument (y partly
  /// over x) before any work.
  template <array_like A, array_like B>
    requires(from_input)
  void operator()(const A& x, B&& y, resident::source_location where = resident::source_location::current()) const {
    execute(detail::bind_input(x), target(y), where);
  }

  /// From a zip or generate source into y (the elements; or a reduction's value into y[0] of a
  /// one-element array, from a zip). One kernel on y's stream, after the zipped arrays' work.
  /// @throws shape_mismatch, device_mismatch, invalid_argument (y partly over a zipped array; a
  /// generator's count past the byte count) before any work.
  template <array_like B>
    requires(!from_input && !(generates && reduces))
  void operator()(B&& y, resident::source_location where = resident::source_location::current()) const {
    if constexpr (generates)
      execute(src.bind(y.size(), y.stream()), target(y), where);
    else
      execute(src, target(y), where);
  }

  /// Reduces over a zip source; synchronizes the first zipped array's stream and returns the value.
  auto operator()(resident::source_location where = resident::source_location::current()) const
    requires(zips && reduces)
  {
    return execute(src, detail::host_target{}, where);
  }

  /// Reduces over a generate source for i in [0, n) on s; synchronizes and returns the value.
  /// @throws invalid_argument when n values' bytes pass PTRDIFF_MAX.
  auto operator()(std::size_t n, stream_ref s = default_stream(default_device()),
                  resident::source_location where = resident::source_location::current()) const
    requires(generates && reduces)
  {
    require(s.device());
    return execute(src.bind(n, s), detail::host_target{}, where);
  }

  /// Reduces over a generate source for i in [0, n) into out[0], a one-element array or slice, on out's
  /// stream, without synchronizing: the value stays on the device. @throws shape_mismatch;
  /// invalid_argument when n values' bytes pass PTRDIFF_MAX.
  template <array_like B>
    requires(generates && reduces)
  void operator()(std::size_t n, B&& out, resident::source_location where = resident::source_location::current()) const {
    out.check_live();
    execute(src.bind(n, out.stream()), target(out), where);
  }

  /// Runs the pipeline from a bound source into a target: the one path every call takes. Checks sizes
  /// and devices, orders the source's streams before the stream it runs on (the target's; the
  /// source's for a value returned to the host), opens the call's insight scope (NVTX range, profile
  /// row at `where`), and hands the loader, the stages and the terminal to the device's executor, with
  /// that stream's device current (the caller's restored after).
  template <class S, class Target>
  auto execute(const S& in, const Target& out, resident::source_location where = resident::source_location::current()) const {
    const stream_ref s = run_stream(in, out);
    detail::check_same(s.device(), in.device(), std::is_same_v<Target, detail::host_target> ? "the input" : "the output");
    if constexpr (!reduces) {
      if (out.size() != in.size()) detail::throw_size("the output holds", out.size(), in.size());
      // Maps and scans: exactly in place or apart. (A reduction's one-element result may lie in its input:
      // both backends write it after every element is read.)
      detail::check_no_partial_overlap(in, out.output(), sizeof(*out.data()), in.size());
    }
    // A fixed shape is checked here, for every length (0 too) and on every backend, before any work.
    if constexpr (detail::is_scan<Red>)
      RESIDENT_EXPECTS(!config, "a fused scan chooses its own launch shape; call it without with_config",
                       invalid_launch);
    if (config) {
      validate(*config, s.device());
      if constexpr (reduces) detail::check_reduce_shape(*config);
    }
    in.order_before(s);
    constexpr const char* name = reduces ? "pipeline reduce" : detail::is_scan<Red> ? "pipeline scan" : "pipeline";
    const device_scope current(s.device());  // a launch goes to the current device: make it s's
    detail::call_scope scope(name, s,
                             {in.bytes(), out.bytes(), in.size(), int(detail::chain_size<Chain>), in.input(),
                              out.output()},
                             detail::call_kind::compute, where);
    const std::size_t n = in.size();
    if constexpr (reduces) {
      constexpr int V = S::template width<>;
      using T = decltype(red.init);
      static_assert(detail::converts_to<detail::stage_result<S, Chain>, T>,
                    "the stages' result cannot be converted to the reduction's init type: end the stages with a "
                    "map to that type, or give an init of the type the stages make");
      // std::accumulate's trap: an integer init makes an integer accumulator, each value truncated.
      static_assert(!(std::is_floating_point_v<detail::stage_result<S, Chain>> && std::is_integral_v<T>),
                    "the reduction's init is an integer but the stages make floating-point values: each value "
                    "would be truncated to the init's type; give a floating-point init, e.g. 0.0f or 0.0, not 0");
      T* into = nullptr;
      if constexpr (!std::is_same_v<Target, detail::host_target>) into = out.p;
      return detail::dispatch(s.device(), [&](auto backend) {
        return detail::run_reduce<V>(backend, s, in.loader(), chain, red.op, red.init, n, in.template plan<V>(),
                                     config, into);
      });
    } else if constexpr (detail::is_scan<Red>) {
      static_assert(detail::converts_to<detail::stage_result<S, Chain>, std::remove_pointer_t<decltype(out.data())>>,
                    "the stages' result cannot be converted to the output array's element type: end the stages "
                    "with a map to that type, or write into an array of the type the stages make");
      if (n == 0) return;
      detail::dispatch(s.device(), [&](auto backend) {
        detail::run_scan(backend, s, in.loader(), chain, red.op, out.data(), n, config);
      });
    } else {
      if (n == 0) return;
      using U = std::remove_pointer_t<decltype(out.data())>;
      static_assert(detail::converts_to<detail::stage_result<S, Chain>, U>,
                    "the stages' result cannot be converted to the output array's element type: end the stages "
                    "with a map to that type, or write into an array of the type the stages make");
      constexpr int V = S::template width<U>;
      detail::dispatch(s.device(), [&](auto backend) {
        detail::run_map<V>(backend, s, in.loader(), chain, detail::writer<U>{out.data()}, n,
                           in.template plan<V>(static_cast<const U*>(out.data())), config);
      });
    }
  }

 private:
  template <class S, class Target>
  static stream_ref run_stream(const S& in, const Target& out) {
    if constexpr (std::is_same_v<Target, detail::host_target>)
      return in.stream();
    else
      return out.stream();
  }

  // A map's or scan's output array, or a reduction's one-element result array.
  template <array_like B>
  auto target(B& y) const {
    if constexpr (reduces) {
      using T = typename std::remove_cvref_t<B>::value_type;
      static_assert(std::is_same_v<T, decltype(red.init)>, "the result array's type must be the reduction's init type");
      y.check_live();
      if (y.size() != 1) detail::throw_size("the result array holds", y.size(), 1);
      return detail::value_target<T>{y.data(), y.stream()};
    } else {
      return detail::write_into(y);
    }
  }
};

// ---- the stages ------------------------------------------------------------------------------

/// A stage from a RESIDENT_HD function: map<f>().
template <auto F>
constexpr auto map() {
  using S = detail::function_stage<F>;
  return pipeline<detail::input_source, detail::chain<S>, detail::no_reduce>{{}, {{{S{}}}}, {}, {}};
}

/// A stage from a functor or a RESIDENT_HD lambda (nvcc: --extended-lambda).
template <class F>
constexpr auto map(F f) {
  return pipeline<detail::input_source, detail::chain<F>, detail::no_reduce>{{}, {{{f}}}, {}, {}};
}

/// A source reading several arrays in step (same size, same device; types may differ). The next map
/// receives one argument per array. The arrays must outlive the pipeline's calls.
/// @throws shape_mismatch, device_mismatch.
template <array_like A, array_like... As>
auto zip(const A& a, const As&... rest) {
  a.check_live();
  (rest.check_live(), ...);
  ((rest.size() == a.size() ? void() : detail::throw_size("zip: an array holds", rest.size(), a.size())), ...);
  (detail::check_same(rest.stream().device(), a.stream().device(), "a zipped array"), ...);
  using S = detail::zip_source<typename std::remove_cvref_t<A>::value_type, typename std::remove_cvref_t<As>::value_type...>;
  S s{{{a.data()}, {rest.data()}...}, a.size(), {a.stream(), rest.stream()...}};
  return pipeline<S, detail::chain<>, detail::no_reduce>{s, {}, {}, {}};
}

/// A source making element i as g(i) (i is std::size_t): nothing is read from memory.
template <class G>
constexpr auto generate(G g) {
  return pipeline<detail::generate_source<G>, detail::chain<>, detail::no_reduce>{{g, 0, {}}, {}, {}, {}};
}

/// A terminal stage folding the values with op (associative and commutative, like std::reduce)
/// starting from init; the result has init's type. plus, minimum and maximum propagate NaN.
template <class Op, class T>
constexpr auto reduce(Op op, T init) {
  return pipeline<detail::input_source, detail::chain<>, detail::reduce_stage<Op, T>>{
      {}, {}, {op, init}, {}};
}

/// A terminal stage writing the inclusive prefix combinations of the values with op (associative, like
/// std::inclusive_scan): out[i] = op(v[0], ..., v[i]), computed in out's element type. In place or out
/// of place; after maps, zips or a generator. One pass over the input (CUB's single-pass scan on CUDA,
/// whose look-back state is set up by a second, small kernel: two kernels in the ledger).
template <class Op>
constexpr auto inclusive_scan(Op op) {
  return pipeline<detail::input_source, detail::chain<>, detail::scan_stage<Op>>{{}, {}, {op}, {}};
}

namespace detail {
inline bool same_config(const launch_config& a, const launch_config& b) {
  auto same = [](dims p, dims q) { return p.x == q.x && p.y == q.y && p.z == q.z; };
  return same(a.grid, b.grid) && same(a.block, b.block) && a.shared_bytes == b.shared_bytes;
}
}  // namespace detail

/// Composition: a's source and stages, then b's stages and reduction. b must not have a source of its
/// own, and a must not end in a reduction or a scan (checked at compile time). The composed pipeline
/// runs as one kernel with one launch configuration: a's or b's, whichever has one.
/// @throws invalid_launch when both carry configurations that differ (one of them would be dropped).
template <class S1, class C1, class R1, class S2, class C2, class R2>
constexpr auto operator|(const pipeline<S1, C1, R1>& a, const pipeline<S2, C2, R2>& b) {
  static_assert(std::is_same_v<R1, detail::no_reduce>,
                "a reduction or a scan ends a pipeline: nothing may follow it (compose the maps first, then "
                "| reduce(...) or | inclusive_scan(...) once, last)");
  static_assert(std::is_same_v<S2, detail::input_source>,
                "only the first stage of a pipeline may be a source (zip or generate)");
  if (a.config && b.config && !detail::same_config(*a.config, *b.config))
    RESIDENT_FAIL("pipeline |: both pipelines carry a launch configuration, " + a.config->str() + " and " +
                      b.config->str() + ", and the composition runs as one kernel; give a "
                      "configuration to one of them only, or to the composed pipeline (with_config after |)",
                  invalid_launch);
  using C = decltype(detail::concat(a.chain, b.chain));
  return pipeline<S1, C, R2>{a.src, detail::concat(a.chain, b.chain), b.red, a.config ? a.config : b.config};
}

}  // namespace resident

#if defined(__CUDACC__)
#include "resident/fuse/detail/fused_cuda.cuh"
#endif
