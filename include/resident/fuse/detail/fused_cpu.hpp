#pragma once
/// @file fused_cpu.hpp
/// The CPU backend of the fused pipeline executors (twin of fused_cuda.cuh): run_map, run_reduce and
/// run_scan as loops over cpu_loop's pieces, each piece in the copy of cpu_simd_run for the CPU's
/// vectors (docs/cpu.md). Sources read element by element run as plain loops the compiler vectorizes,
/// math calls included; block generators apply the stages to tiles of values in registers.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <vector>

#include "resident/detail/backend.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/device/stream.hpp"
#include "resident/fuse/detail/access.hpp"
#include "resident/fuse/detail/tuple.hpp"
#include "resident/launch/config.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "resident/launch/detail/launch_cpu.hpp"
#include "resident/memory/ledger.hpp"

namespace resident::detail {

/// One value per piece of a loop, written by the pieces' threads at once: a std::vector<bool> would
/// pack the values into shared words and lose some of the writes.
template <class T>
struct piece_value {
  T v;
};

/// Whether a loader reads element i by itself (arrays, a generator making one value per index): a plain
/// loop over indices then vectorizes, the stages' math calls included. A block generator (random
/// numbers) makes several values per call and keeps the tiles below.
template <class L>
inline constexpr bool element_wise = true;
template <class G>
inline constexpr bool element_wise<generate_loader<G>> = !makes_blocks<G>;

/// Values made together by one vectorized loop before they are folded or scanned (a few KiB on the
/// stack), and the lanes a fold keeps: one AVX-512 register of floats.
inline constexpr std::size_t cpu_block_values = 256, cpu_fold_lanes = 16;

/// buf[j] = value(first + j) for j in [0, m): a plain loop, so that it vectorizes.
template <class T, class Value>
void make_values(const Value& value, std::size_t first, std::size_t m, T* buf) {
#pragma GCC ivdep
  for (std::size_t j = 0; j < m; ++j) buf[j] = value(first + j);
}

/// op folded over value(i) for i in [first, last) (not empty), in cpu_fold_lanes lanes by position,
/// then the lanes in order, then the rest: the values are made a block at a time by a vectorized loop.
template <class T, class Value, class Op>
T fold_blocks(const Value& value, const Op& op, std::size_t first, std::size_t last) {
  constexpr std::size_t W = cpu_fold_lanes, B = cpu_block_values;
  std::size_t i = first;
  if (last - first < W) {
    T r = value(i);
    for (++i; i < last; ++i) r = op(r, value(i));
    return r;
  }
  T buf[B], lane[W];
  make_values(value, i, W, lane);
  for (i += W; i + W <= last;) {
    const std::size_t m = std::min(B, (last - i) / W * W);
    make_values(value, i, m, buf);
    for (std::size_t j = 0; j < m; j += W)
      for (std::size_t k = 0; k < W; ++k) lane[k] = op(lane[k], buf[j + k]);
    i += m;
  }
  T r = lane[0];
  for (std::size_t k = 1; k < W; ++k) r = op(r, lane[k]);
  for (; i < last; ++i) r = op(r, value(i));
  return r;
}

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
  constexpr int U = V >= cpu_tuning::tile ? 1 : cpu_tuning::tile / V;
  std::size_t j = first;
  for (; j + U <= last; j += U)
    eval_vectors<V, U>(in, fn, head + j * V, [&](const auto& r) { body(j, r, U); });
  for (; j < last; ++j) eval_vectors<V, 1>(in, fn, head + j * V, [&](const auto& r) { body(j, r, 1); });
}

/// out[i] = fn(in[i]) for i in [0, n) on s. V: elements per vector access, when plan says vectorized.
template <int V, class L, class Fn, class W>
void run_map(cpu_backend, stream_ref s, const L& in, const Fn& fn, const W& out, std::size_t n, vector_plan plan,
             const std::optional<launch_config>&) {  // a configuration shapes nothing on the CPU
  const device d = s.device();
  if constexpr (cpu_simd_copies && element_wise<L>) {
    cpu_loop(n, 1).run([&](cpu_piece p) {
      cpu_simd_run([&] {
#pragma GCC ivdep
        for (std::size_t i = p.first; i < p.last; ++i) out.store1(i, in.eval1(fn, i));
      });
    });
    record_kernel(d);
    return;
  }
  if constexpr (V > 1) {
    if (plan.vectorized) {
      // The same split as on the GPU: sources that make several values at once (random numbers) do.
      for (std::size_t i = 0; i < plan.head; ++i) out.store1(i, in.eval1(fn, i));
      cpu_loop(plan.vectors, std::size_t(V)).run([&](cpu_piece p) {
        cpu_simd_run([&] {
          for_each_vector_cpu<V>(in, fn, plan.head, p.first, p.last, [&](std::size_t j, const auto& r, int count) {
            using R = std::remove_cvref_t<decltype(r[0])>;
            for (int u = 0; u < count; ++u)
              out.template store<V>(plan.head + (j + std::size_t(u)) * V, *reinterpret_cast<const R(*)[V]>(r + u * V));
          });
        });
      });
      for (std::size_t i = plan.head + plan.vectors * V; i < n; ++i) out.store1(i, in.eval1(fn, i));
      record_kernel(d);
      return;
    }
  }
  cpu_loop(n, 1).run([&](cpu_piece p) {
    cpu_simd_run([&] {
      // ivdep, not omp simd: the elements are independent, and an exception may leave this loop.
#pragma GCC ivdep
      for (std::size_t i = p.first; i < p.last; ++i) out.store1(i, in.eval1(fn, i));
    });
  });
  record_kernel(d);
}

/// Folds fn(in[i]) over [0, n) with op, starting from init. into == nullptr: synchronizes and returns
/// the value; otherwise writes it to into (memory of s's device) asynchronously.
template <int V, class L, class Fn, class Op, class T>
T run_reduce(cpu_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, T init, std::size_t n,
             vector_plan plan, const std::optional<launch_config>&, T* into) {
  const device d = s.device();
  if (n == 0) {
    if (into) *into = init;
    return init;
  }
  auto value = [&](std::size_t i) { return converted<T>(in.eval1(fn, i)); };
  if constexpr (cpu_simd_copies && element_wise<L>) {
    const cpu_loop loop(n, 1);
    std::vector<piece_value<T>> partial(loop.pieces(), piece_value<T>{init});
    loop.run([&](cpu_piece p) { cpu_simd_run([&] { partial[p.index].v = fold_blocks<T>(value, op, p.first, p.last); }); });
    T r = init;
    for (const auto& p : partial) r = op(r, p.v);
    record_kernel(d);
    if (into) *into = r;
    return r;
  }
  // Each piece folds in lanes (lane k takes every V-th value; 4 lanes over single elements), then
  // folds its lanes; the pieces' partials are folded in order after the head and before the tail.
  // Independent lanes let the compiler keep the fold in vector registers.
  const bool vec = V > 1 && plan.vectorized;
  const std::size_t head = vec ? plan.head : 0, units = vec ? plan.vectors : n;
  constexpr int W = V > 1 ? V : 4;
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
          for (int k = 0; k < V; ++k) lane[k] = converted<T>(r[k]);
        });
        for_each_vector_cpu<V>(in, fn, head, first + 1, last, [&](std::size_t, const auto& r, int count) {
          for (int u = 0; u < count; ++u)
            for (int k = 0; k < V; ++k) lane[k] = op(lane[k], converted<T>(r[u * V + k]));
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
  std::vector<piece_value<T>> partial(loop.pieces(), piece_value<T>{init});
  loop.run([&](cpu_piece p) { cpu_simd_run([&] { partial[p.index].v = fold_piece(p.first, p.last); }); });
  for (const auto& p : partial) r = op(r, p.v);
  for (std::size_t i = head + units * (vec ? V : 1); i < n; ++i) r = op(r, value(i));
  record_kernel(d);
  if (into) *into = r;
  return r;
}

/// out[i] = op(fn(in[0]), ..., fn(in[i])) in U (out's element type) for i in [0, n): each piece scans
/// its range, the pieces' totals are folded in order, and every piece after the first folds the total
/// before it into its outputs. out may be the input (each element is read before it is written).
template <class U, class L, class Fn, class Op>
void run_scan(cpu_backend, stream_ref s, const L& in, const Fn& fn, const Op& op, U* out, std::size_t n,
              const std::optional<launch_config>&) {
  const device d = s.device();
  const cpu_loop loop(n, 1);
  std::vector<piece_value<U>> total(loop.pieces());
  auto value = [&](std::size_t i) { return converted<U>(in.eval1(fn, i)); };
  loop.run([&](cpu_piece p) {
    cpu_simd_run([&] {
      U acc = value(p.first);
      out[p.first] = acc;
      if constexpr (cpu_simd_copies && element_wise<L>) {
        // A block of values made by a vectorized loop (read before out's same elements are written),
        // then scanned.
        U buf[cpu_block_values];
        for (std::size_t i = p.first + 1; i < p.last;) {
          const std::size_t m = std::min(cpu_block_values, p.last - i);
          make_values(value, i, m, buf);
          for (std::size_t j = 0; j < m; ++j) out[i + j] = acc = op(acc, buf[j]);
          i += m;
        }
      } else {
        for (std::size_t i = p.first + 1; i < p.last; ++i) out[i] = acc = op(acc, value(i));
      }
      total[p.index].v = acc;
    });
  });
  for (std::size_t k = 1; k < total.size(); ++k) total[k].v = op(total[k - 1].v, total[k].v);
  loop.run([&](cpu_piece p) {
    if (p.index == 0) return;
    const U before = total[p.index - 1].v;
    cpu_simd_run([&] {
      for (std::size_t i = p.first; i < p.last; ++i) out[i] = op(before, out[i]);
    });
  });
  record_kernel(d);
}

}  // namespace resident::detail
