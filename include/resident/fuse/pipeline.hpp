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
/// On the CPU backend an exception thrown by a stage (or a generator) reaches the caller: the first
/// one thrown is rethrown after the loop. Other elements may or may not have been computed by then
/// (pieces of the loop already started finish, no new ones start), so an output is partly written.

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "resident/error.hpp"
#include "resident/fuse/detail/access.hpp"
#include "resident/fuse/detail/tuple.hpp"
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
// to +-infinity first.

/// a + b.
struct plus {
  /// a + b.
  template <class T>
  RESIDENT_HD constexpr T operator()(T a, T b) const {
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

// ---- what a pipeline starts from and ends in ---------------------------------------------------
struct input_source {};  ///< the array the pipeline is called with

/// Several arrays read in step.
template <class... Ts>
struct zip_source {
  tuple<const Ts*...> ptrs;
  std::size_t size;
  stream_ref stream;

  zip_loader<Ts...> loader() const { return {ptrs}; }
  template <class... Out>
  static constexpr int width = vector_width<Ts..., Out...>();
  /// The vector split for these arrays plus the output (out == nullptr: none).
  template <class... Out>
  vector_plan plan(const Out*... out) const {
    return plan_impl<Out...>(std::index_sequence_for<Ts...>{}, out...);
  }

 private:
  template <class... Out, std::size_t... I>
  vector_plan plan_impl(std::index_sequence<I...>, const Out*... out) const {
    return plan_vectors(size, vector_width<Ts..., Out...>(),
                        {std::pair<const void*, std::size_t>{get<I>(ptrs), sizeof(Ts)}...,
                         std::pair<const void*, std::size_t>{out, sizeof(Out)}...});
  }
};

template <class G>
struct generate_source {
  G g;
  generate_loader<G> loader() const { return {g}; }
};

struct no_reduce {};
template <class Op, class T>
struct reduce_stage {
  Op op;
  T init;
};

/// A stage made from a RESIDENT_HD function named at compile time.
template <auto F>
struct function_stage {
  template <class... A>
  RESIDENT_HD constexpr auto operator()(A... a) const {
    return F(a...);
  }
};

template <class T>
inline constexpr bool is_reduce = false;
template <class Op, class T>
inline constexpr bool is_reduce<reduce_stage<Op, T>> = true;
template <class T>
inline constexpr bool is_zip = false;
template <class... Ts>
inline constexpr bool is_zip<zip_source<Ts...>> = true;
template <class T>
inline constexpr bool is_generate = false;
template <class G>
inline constexpr bool is_generate<generate_source<G>> = true;

// ---- the two executors: CPU loops here, CUDA kernels in fused_cuda.cuh ----------------------
template <int V, class L, class Fn, class W>
void run_map_cuda(stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t n, vector_plan plan,
                  const std::optional<launch_config>& cfg);
template <int V, class L, class Fn, class Op, class T>
T run_reduce_cuda(stream_ref s, const L& in, const Fn& fn, const Op& op, T init, std::size_t n, vector_plan plan,
                  const std::optional<launch_config>& cfg, T* into);

// ---- the CPU loop's evaluation of whole vectors ----------------------------------------------
/// Values the CPU loop evaluates together, U = cpu_tile / V vectors at a time.
inline constexpr int cpu_tile = 16;

template <std::size_t I, class... Fs, class X, std::size_t M, class Use>
void apply_stages(const chain<Fs...>& c, const X (&x)[M], Use& use) {
  if constexpr (I == sizeof...(Fs)) {
    use(x);
  } else {
    using Y = decltype(get<I>(c.fs)(x[0]));
    Y y[M];
    for (std::size_t e = 0; e < M; ++e) y[e] = get<I>(c.fs)(x[e]);
    apply_stages<I + 1>(c, y, use);
  }
}

/// Evaluates fn over U whole vectors of V values from base (aligned) and passes the U * V results, in
/// order, to use. Stage by stage: each stage runs over all of them before the next, so a stage that
/// calls a function (sinf) makes its calls back to back and one that vectorizes does, as in separate
/// maps, while the values stay in registers instead of making a pass through memory per stage.
template <int V, int U, class L, class... Fs, class Use>
void eval_vectors(const L& in, const chain<Fs...>& fn, std::size_t base, Use&& use) {
  constexpr std::size_t M = std::size_t(U) * V;
  auto first_stage = [&](const auto& f0, auto* x) {
    for (int u = 0; u < U; ++u) {
      const std::size_t b = base + std::size_t(u) * V;
      const auto raw = in.template load<V>(b);
      for (int k = 0; k < V; ++k) x[u * V + k] = in.template eval<V>(f0, raw, k, b);
    }
  };
  if constexpr (sizeof...(Fs) <= 1) {
    using R = decltype(in.template eval<V>(fn, in.template load<V>(base), 0, base));
    R r[M];
    first_stage(fn, r);
    use(r);
  } else {
    using X = decltype(in.template eval<V>(get<0>(fn.fs), in.template load<V>(base), 0, base));
    X x[M];
    first_stage(get<0>(fn.fs), x);
    apply_stages<1>(fn, x, use);
  }
}

/// Runs body(j) for every whole vector j in [first, last) with its results: U vectors at a time, then
/// one at a time. body(j, results, count): count vectors of V results each.
template <int V, class L, class Fn, class Body>
void for_each_vector_cpu(const L& in, const Fn& fn, std::size_t head, std::size_t first, std::size_t last,
                         Body&& body) {
  constexpr int U = V >= cpu_tile ? 1 : cpu_tile / V;
  std::size_t j = first;
  for (; j + U <= last; j += U)
    eval_vectors<V, U>(in, fn, head + j * V, [&](const auto& r) { body(j, r, U); });
  for (; j < last; ++j) eval_vectors<V, 1>(in, fn, head + j * V, [&](const auto& r) { body(j, r, 1); });
}

/// out[i] = fn(in[i]) for i in [0, n) on s. V: elements per vector access, when plan says vectorized.
template <int V, class L, class Fn, class W>
void run_map(stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t n, vector_plan plan,
             const std::optional<launch_config>& cfg) {
  if (n == 0) return;
  const device d = s.device();
  if (d.is_cuda()) {
    if constexpr (nvcc_compiled)
      run_map_cuda<V>(s, in, fn, out, n, plan, cfg);
    else
      throw_not_nvcc(d);
    return;
  }
  if (cfg) validate(*cfg, d);
  if constexpr (V > 1) {
    if (plan.vectorized) {
      // The same split as on the GPU: sources that make several values at once (random numbers) do.
      for (std::size_t i = 0; i < plan.head; ++i) out.store1(i, in.eval1(fn, i));
      cpu_loop(plan.vectors, std::size_t(V)).run([&](cpu_piece p) {
        for_each_vector_cpu<V>(in, fn, plan.head, p.first, p.last, [&](std::size_t j, const auto& r, int count) {
          using R = std::remove_cvref_t<decltype(r[0])>;
          for (int u = 0; u < count; ++u)
            out.template store<V>(plan.head + (j + std::size_t(u)) * V, *reinterpret_cast<const R(*)[V]>(r + u * V));
        });
      });
      for (std::size_t i = plan.head + plan.vectors * V; i < n; ++i) out.store1(i, in.eval1(fn, i));
      record_kernel(d);
      return;
    }
  }
  cpu_loop(n, 1).run([&](cpu_piece p) {
    // ivdep, not omp simd: the elements are independent, and an exception may leave this loop.
#pragma GCC ivdep
    for (std::size_t i = p.first; i < p.last; ++i) out.store1(i, in.eval1(fn, i));
  });
  record_kernel(d);
}

/// Folds fn(in[i]) over [0, n) with op, starting from init. into == nullptr: synchronizes and returns
/// the value; otherwise writes it to into (memory of s's device) asynchronously.
template <int V, class L, class Fn, class Op, class T>
T run_reduce(stream_ref s, const L& in, const Fn& fn, const Op& op, T init, std::size_t n, vector_plan plan,
             const std::optional<launch_config>& cfg, T* into = nullptr) {
  const device d = s.device();
  if (d.is_cuda()) {
    if constexpr (nvcc_compiled)
      return run_reduce_cuda<V>(s, in, fn, op, init, n, plan, cfg, into);
    else
      throw_not_nvcc(d);
  }
  if (n == 0) {
    if (into) *into = init;
    return init;
  }
  if (cfg) validate(*cfg, d);
  // Each piece folds in lanes (lane k takes every V-th value; 4 lanes over single elements), then
  // folds its lanes; the pieces' partials are folded in order after the head and before the tail.
  // Independent lanes let the compiler keep the fold in vector registers.
  const bool vec = V > 1 && plan.vectorized;
  const std::size_t head = vec ? plan.head : 0, units = vec ? plan.vectors : n;
  constexpr int W = V > 1 ? V : 4;
  auto value = [&](std::size_t i) { return static_cast<T>(in.eval1(fn, i)); };
  auto fold_lanes = [&](T (&lane)[W]) {
    T r = lane[0];
    for (int k = 1; k < W; ++k) r = op(r, lane[k]);
    return r;
  };
  auto fold_piece = [&](std::size_t first, std::size_t last) -> T {
    if constexpr (V > 1) {
      if (vec) {
        T lane[W];
        eval_vectors<V, 1>(in, fn, head + first * V, [&](const auto& r) {
          for (int k = 0; k < V; ++k) lane[k] = static_cast<T>(r[k]);
        });
        for_each_vector_cpu<V>(in, fn, head, first + 1, last, [&](std::size_t, const auto& r, int count) {
          for (int u = 0; u < count; ++u)
            for (int k = 0; k < V; ++k) lane[k] = op(lane[k], static_cast<T>(r[u * V + k]));
        });
        return fold_lanes(lane);
      }
    }
    if (last - first < std::size_t(W)) {
      T r = value(first);
      for (std::size_t i = first + 1; i < last; ++i) r = op(r, value(i));
      return r;
    }
    T lane[W];
    for (int k = 0; k < W; ++k) lane[k] = value(first + std::size_t(k));
    std::size_t i = first + W;
    for (; i + W <= last; i += W)
      for (int k = 0; k < W; ++k) lane[k] = op(lane[k], value(i + std::size_t(k)));
    T r = fold_lanes(lane);
    for (; i < last; ++i) r = op(r, value(i));
    return r;
  };
  T r = init;
  for (std::size_t i = 0; i < head; ++i) r = op(r, value(i));
  const cpu_loop loop(units, vec ? std::size_t(V) : 1);
  std::vector<T> partial(loop.pieces(), init);
  loop.run([&](cpu_piece p) { partial[p.index] = fold_piece(p.first, p.last); });
  for (const T& v : partial) r = op(r, v);
  for (std::size_t i = head + units * (vec ? V : 1); i < n; ++i) r = op(r, value(i));
  record_kernel(d);
  if (into) *into = r;
  return r;
}

[[noreturn]] inline void throw_size(const char* what, std::size_t a, std::size_t b) {
  RESIDENT_FAIL(std::string("pipeline: ") + what + " " + std::to_string(a) + " elements, expected " +
                       std::to_string(b), shape_mismatch);
}
inline void check_same(device a, device b, const char* what) {
  if (!(a == b))
    RESIDENT_FAIL(std::string("pipeline: ") + what + " is on " + a.name() + ", the rest on " + b.name() +
                          "; copy it over first (rs::copy_to)", device_mismatch);
}

}  // namespace detail

/// A composed pipeline: where elements come from (Src), the stages (Chain), and an optional terminal
/// reduction (Red). Build it with map / zip / generate / reduce and `|`; call it on arrays.
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
  /// The terminal reduction, or none.
  Red red;
  std::optional<launch_config> config;  ///< fixed [grid, block]; default: from occupancy

  /// The same pipeline with a fixed launch configuration (validated at each call).
  pipeline with_config(launch_config cfg) const {
    pipeline p = *this;
    p.config = cfg;
    return p;
  }

  /// In place: x[i] = stages(x[i]). One kernel on x's stream; asynchronous. x: an array or a slice.
  template <array_like A>
    requires(from_input && !reduces)
  void operator()(A&& x) const {
    using T = typename std::remove_cvref_t<A>::value_type;
    x.check_live();
    constexpr int V = detail::vector_width<T>();
    detail::run_map<V>(x.stream(), detail::view_loader<T>{x.data()}, chain, detail::writer<T>{x.data()}, x.size(),
                       detail::plan_vectors(x.size(), V, {{x.data(), sizeof(T)}}), config);
  }

  /// Out of place: y[i] = stages(x[i]), converted to y's element type. One kernel on y's stream.
  /// @throws shape_mismatch, device_mismatch before any work.
  template <array_like A, array_like B>
    requires(from_input && !reduces)
  void operator()(const A& x, B&& y) const {
    using T = typename std::remove_cvref_t<A>::value_type;
    using U = typename std::remove_cvref_t<B>::value_type;
    x.check_live();
    y.check_live();
    if (x.size() != y.size()) detail::throw_size("the output holds", y.size(), x.size());
    detail::check_same(y.stream().device(), x.stream().device(), "the output");
    constexpr int V = detail::vector_width<T, U>();
    detail::run_map<V>(y.stream(), detail::view_loader<T>{x.data()}, chain, detail::writer<U>{y.data()}, y.size(),
                       detail::plan_vectors(y.size(), V, {{x.data(), sizeof(T)}, {y.data(), sizeof(U)}}), config);
  }

  /// From a zip or generate source into y. One kernel on y's stream.
  /// @throws shape_mismatch, device_mismatch before any work.
  template <array_like B>
    requires(!from_input && !reduces)
  void operator()(B&& y) const {
    using U = typename std::remove_cvref_t<B>::value_type;
    y.check_live();
    if constexpr (zips) {
      if (src.size != y.size()) detail::throw_size("the output holds", y.size(), src.size);
      detail::check_same(y.stream().device(), src.stream.device(), "the output");
      detail::run_map<Src::template width<U>>(y.stream(), src.loader(), chain, detail::writer<U>{y.data()},
                                             y.size(), src.plan(y.data()), config);
    } else {
      constexpr int V = detail::vector_width<U>();
      detail::run_map<V>(y.stream(), src.loader(), chain, detail::writer<U>{y.data()}, y.size(),
                         detail::plan_vectors(y.size(), V, {{y.data(), sizeof(U)}}), config);
    }
  }

  /// Reduces stages(x[i]) over x in one pass; synchronizes and returns the value. On a GPU the value's
  /// download is a device-to-host transfer in the ledger (and refused under transfer_policy::forbid);
  /// the overload taking a result array keeps it on the device.
  template <array_like A>
    requires(from_input && reduces)
  auto operator()(const A& x) const {
    using T = typename std::remove_cvref_t<A>::value_type;
    x.check_live();
    constexpr int V = detail::vector_width<T>();
    return detail::run_reduce<V>(x.stream(), detail::view_loader<T>{x.data()}, chain, red.op, red.init, x.size(),
                                 detail::plan_vectors(x.size(), V, {{x.data(), sizeof(T)}}), config);
  }

  /// Reduces stages(x[i]) over x into out[0], a one-element array on x's device, without
  /// synchronizing: the value stays resident for later stages. @throws shape_mismatch, device_mismatch.
  template <array_like A, class T>
    requires(from_input && reduces)
  void operator()(const A& x, array<T>& out) const {
    using X = typename std::remove_cvref_t<A>::value_type;
    x.check_live();
    check_result(out, x.stream().device());
    constexpr int V = detail::vector_width<X>();
    detail::run_reduce<V>(x.stream(), detail::view_loader<X>{x.data()}, chain, red.op, red.init, x.size(),
                          detail::plan_vectors(x.size(), V, {{x.data(), sizeof(X)}}), config, out.data());
  }

  /// Reduces over a zip source; synchronizes and returns the value.
  auto operator()() const
    requires(zips && reduces)
  {
    return detail::run_reduce<Src::template width<>>(src.stream, src.loader(), chain, red.op, red.init, src.size,
                                                     src.plan(), config);
  }

  /// Reduces over a zip source into out[0], a one-element array on the zip's device, on the zip's
  /// stream, without synchronizing. @throws shape_mismatch, device_mismatch.
  template <class T>
    requires(zips && reduces)
  void operator()(array<T>& out) const {
    check_result(out, src.stream.device());
    detail::run_reduce<Src::template width<>>(src.stream, src.loader(), chain, red.op, red.init, src.size, src.plan(),
                                              config, out.data());
  }

  /// Reduces over a generate source for i in [0, n) on s; synchronizes and returns the value.
  auto operator()(std::size_t n, stream_ref s = default_stream(default_device())) const
    requires(generates && reduces)
  {
    require(s.device());
    return detail::run_reduce<generated_width>(s, src.loader(), chain, red.op, red.init, n, generated_plan(n), config);
  }

  /// Reduces over a generate source for i in [0, n) into out[0], a one-element array, on out's stream,
  /// without synchronizing: the value stays on the device. @throws shape_mismatch.
  template <class T>
    requires(generates && reduces)
  void operator()(std::size_t n, array<T>& out) const {
    check_result(out, out.device());
    detail::run_reduce<generated_width>(out.stream(), src.loader(), chain, red.op, red.init, n, generated_plan(n),
                                        config, out.data());
  }

 private:
  // Nothing is read: every index is "aligned", so generators that make several values at once do.
  static constexpr int generated_width = 4;
  static detail::vector_plan generated_plan(std::size_t n) {
    return {0, n / generated_width, n / generated_width > 0};
  }

  template <class T>
  void check_result(const array<T>& out, device d) const {
    static_assert(std::is_same_v<T, decltype(red.init)>, "the result array's type must be the reduction's init type");
    out.check_live();
    if (out.size() != 1) detail::throw_size("the result array holds", out.size(), 1);
    detail::check_same(out.device(), d, "the result array");
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
  S s{{{a.data()}, {rest.data()}...}, a.size(), a.stream()};
  return pipeline<S, detail::chain<>, detail::no_reduce>{s, {}, {}, {}};
}

/// A source making element i as g(i) (i is std::size_t): nothing is read from memory.
template <class G>
constexpr auto generate(G g) {
  return pipeline<detail::generate_source<G>, detail::chain<>, detail::no_reduce>{{g}, {}, {}, {}};
}

/// A terminal stage folding the values with op (associative and commutative, like std::reduce)
/// starting from init; the result has init's type. plus, minimum and maximum propagate NaN.
template <class Op, class T>
constexpr auto reduce(Op op, T init) {
  return pipeline<detail::input_source, detail::chain<>, detail::reduce_stage<Op, T>>{
      {}, {}, {op, init}, {}};
}

/// Composition: a's source and stages, then b's stages and reduction. b must not have a source of its
/// own, and a must not end in a reduction.
template <class S1, class C1, class S2, class C2, class R2>
constexpr auto operator|(const pipeline<S1, C1, detail::no_reduce>& a, const pipeline<S2, C2, R2>& b) {
  static_assert(std::is_same_v<S2, detail::input_source>,
                "only the first stage of a pipeline may be a source (zip or generate)");
  using C = decltype(detail::concat(a.chain, b.chain));
  return pipeline<S1, C, R2>{a.src, detail::concat(a.chain, b.chain), b.red, a.config ? a.config : b.config};
}

}  // namespace resident

#if defined(__CUDACC__)
#include "resident/fuse/detail/fused_cuda.cuh"
#endif
