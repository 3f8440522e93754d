// Run-time programs on the CPU, a block of values at a time: the operation's switch runs once per
// block, not per element, and each case is a loop over the block (the first reading the input, the
// last writing the output, those between a buffer in L1; linear operations folded into their
// neighbours' loops) that vectorizes in the copies of
// cpu_simd_run (sinf, expf, ... become libmvec calls). Each case computes exactly the expression the
// element-wise interpreter of program.cpp computes.
#include "fuse/program_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "resident/fuse/detail/sources.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/launch/detail/cpu_simd.hpp"
#include "resident/launch/detail/launch_cpu.hpp"
#include "resident/memory/ledger.hpp"

namespace resident::detail {
namespace {

// Values per block: 2-4 KiB, in L1 while every operation passes over it.
constexpr std::size_t block = 512;
static_assert(block % cpu_tuning::piece_items == 0, "a block is whole vectors");
constexpr std::size_t lanes = 16;  // a sum's lanes by position, as the fused reductions keep them

// One loop over a block: y = qa * f(pa * x + pb) + qb, the operation f with the linear operation
// before it (add, mul, affine, neg) and the one after it folded in, so that the values make one pass
// through memory for the three. Each linear operation is an affine one with the same result: v + c
// is 1 * v + c, c * v is c * v + (-0.0), -v is -1 * v + (-0.0) (adding -0.0 changes no value, -0.0
// included; fused into one rounding, each is still exact). A linear operation with no operation to
// join is a step of its own (f = affine).
template <class T>
struct step {
  op::code code;  // f
  T a, b;         // its constants
  bool pre = false, post = false;
  T pa = 1, pb = 0, qa = 1, qb = 0;
};

template <class T>
struct block_program {
  step<T> steps[program::max_ops];
  int n = 0;
};

bool linear(op::code c) {
  return c == op::code::add || c == op::code::mul || c == op::code::affine || c == op::code::neg;
}

template <class T>
block_program<T> compile(const program& p) {
  block_program<T> k{};
  for (const op& o : p.ops()) {
    const T a = T(o.a), b = T(o.b);
    step<T>* last = k.n ? &k.steps[k.n - 1] : nullptr;
    if (linear(o.what)) {
      const T la = o.what == op::code::add ? T(1) : o.what == op::code::neg ? T(-1) : a;
      const T lb = o.what == op::code::add ? a : o.what == op::code::affine ? b : T(-0.0);
      if (last && last->code != op::code::affine && !last->post) {
        last->post = true;
        last->qa = la;
        last->qb = lb;
      } else {
        k.steps[k.n++] = {op::code::affine, la, lb};
      }
    } else if (last && last->code == op::code::affine) {  // a linear step alone: it becomes the pre
      *last = {o.what, a, b, true, false, last->a, last->b};
    } else {
      k.steps[k.n++] = {o.what, a, b};
    }
  }
  return k;
}

// The C library's names, which cpu_simd.hpp declares as SIMD functions (std:: overloads are not).
inline float sqrt_(float v) { return sqrtf(v); }
inline double sqrt_(double v) { return ::sqrt(v); }
inline float abs_(float v) { return fabsf(v); }
inline double abs_(double v) { return ::fabs(v); }
inline float exp_(float v) { return expf(v); }
inline double exp_(double v) { return ::exp(v); }
inline float log_(float v) { return logf(v); }
inline double log_(double v) { return ::log(v); }
inline float sin_(float v) { return sinf(v); }
inline double sin_(double v) { return ::sin(v); }
inline float cos_(float v) { return cosf(v); }
inline double cos_(double v) { return ::cos(v); }
inline float tanh_(float v) { return tanhf(v); }
inline double tanh_(double v) { return ::tanh(v); }
inline float pow_(float v, float e) { return powf(v, e); }
inline double pow_(double v, double e) { return ::pow(v, e); }

// dst[j] = step(src[j]) for j in [0, m). src and dst may be the same memory (ivdep: each element
// is read before it is written, in the same iteration).
template <bool Pre, bool Post, class T>
void run_step(const step<T>& s, const T* src, T* dst, std::size_t m) {
  const T a = s.a, b = s.b, pa = s.pa, pb = s.pb, qa = s.qa, qb = s.qb;
#define RESIDENT_EACH(expr)                                  \
  _Pragma("GCC ivdep") for (std::size_t j = 0; j < m; ++j) { \
    T x = src[j];                                            \
    if constexpr (Pre) x = pa * x + pb;                      \
    T y = (expr);                                            \
    if constexpr (Post) y = qa * y + qb;                     \
    dst[j] = y;                                              \
  }                                                          \
  break
  switch (s.code) {
    case op::code::add: RESIDENT_EACH(x + a);
    case op::code::mul: RESIDENT_EACH(x * a);
    case op::code::affine: RESIDENT_EACH(a * x + b);
    case op::code::square: RESIDENT_EACH(x * x);
    case op::code::sqrt: RESIDENT_EACH(sqrt_(x));
    case op::code::rsqrt: RESIDENT_EACH(T(1) / sqrt_(x));
    case op::code::exp: RESIDENT_EACH(exp_(x));
    case op::code::log: RESIDENT_EACH(log_(x));
    case op::code::sin: RESIDENT_EACH(sin_(x));
    case op::code::cos: RESIDENT_EACH(cos_(x));
    case op::code::tanh: RESIDENT_EACH(tanh_(x));
    case op::code::abs: RESIDENT_EACH(abs_(x));  // the sign cleared: +0 at -0, +NaN at -NaN
    case op::code::neg: RESIDENT_EACH(-x);
    case op::code::recip: RESIDENT_EACH(T(1) / x);
    case op::code::minimum: RESIDENT_EACH(x < a || a != a ? x : a);  // fmin: NaN loses
    case op::code::maximum: RESIDENT_EACH(x > a || a != a ? x : a);
    case op::code::pow:
      if (a == T(2)) {  // as a compiled program: pow(v, 2) is v * v (the vector pow may differ by an ulp)
        RESIDENT_EACH(x * x);
      }
      RESIDENT_EACH(pow_(x, a));
  }
#undef RESIDENT_EACH
}

// out[j] = program(in[j]) for j in [0, m): one loop per step, the first reading in, the last writing
// out, those between working in buf (apart from both; in and out may be the same memory).
template <class T>
void apply(const block_program<T>& k, const T* in, T* out, T* __restrict buf, std::size_t m) {
  if (k.n == 0) {
    if (in != out)
      for (std::size_t j = 0; j < m; ++j) out[j] = in[j];
    return;
  }
  for (int o = 0; o < k.n; ++o) {
    const step<T>& s = k.steps[o];
    const T* src = o == 0 ? in : buf;
    T* dst = o == k.n - 1 ? out : buf;
    if (s.pre && s.post) run_step<true, true>(s, src, dst, m);
    else if (s.pre) run_step<true, false>(s, src, dst, m);
    else if (s.post) run_step<false, true>(s, src, dst, m);
    else run_step<false, false>(s, src, dst, m);
  }
}

// apply() over m values where m may not fill whole vectors (the array's last block): run over a copy
// padded to whole vectors, so that each value takes the vector math its place elsewhere would (the
// loop's scalar tail calls the C library's functions, an ulp or two apart), then m values copied out.
template <class T>
void apply_whole(const block_program<T>& k, const T* in, T* out, T* __restrict buf, std::size_t m) {
  constexpr std::size_t whole = cpu_tuning::piece_items;
  if (m % whole == 0) return apply(k, in, out, buf, m);
  alignas(64) T padded[block];
  const std::size_t full = (m + whole - 1) / whole * whole;
  for (std::size_t j = 0; j < m; ++j) padded[j] = in[j];
  for (std::size_t j = m; j < full; ++j) padded[j] = in[m - 1];
  apply(k, padded, padded, buf, full);
  for (std::size_t j = 0; j < m; ++j) out[j] = padded[j];
}

// The checks a pipeline makes before its work: one device, one size, same memory or apart.
template <class T>
void check(array_ref<T> x, array_ref<T> y) {
  require(y.device());
  check_no_partial_overlap(array_source<T>{x.data(), x.size(), x.stream()}, y.data(), sizeof(T), x.size());
}

}  // namespace

template <class T>
void run_program_cpu(const program& p, array_ref<T> x, array_ref<T> y) {
  check(x, y);
  const std::size_t n = x.size();
  if (n == 0) return;
  const block_program<T> k = compile<T>(p);
  const stream_ref s = y.stream();
  const device_scope current(s.device());
  call_scope scope("pipeline", s, {n * sizeof(T), n * sizeof(T), n, 1, x.data(), y.data()}, call_kind::compute,
                   resident::source_location::current());
  const T* in = x.data();
  T* out = y.data();
  cpu_loop(n, 1).run([&](cpu_piece pc) {
    cpu_simd_run([&] {
      alignas(64) T buf[block];
      for (std::size_t i = pc.first; i < pc.last;) {
        const std::size_t m = std::min(block, pc.last - i);
        apply_whole(k, in + i, out + i, buf, m);
        i += m;
      }
    });
  });
  record_kernel(s.device());
}

template <class T>
T sum_program_cpu(const program& p, array_ref<T> x) {
  require(x.device());
  const std::size_t n = x.size();
  const stream_ref s = x.stream();
  const device_scope current(s.device());
  call_scope scope("pipeline reduce", s, {n * sizeof(T), 0, n, 1, x.data(), nullptr}, call_kind::compute,
                   resident::source_location::current());
  if (n == 0) return T(0);
  const block_program<T> k = compile<T>(p);
  const T* in = x.data();
  const cpu_loop loop(n, 1);
  // Added in double, float values too: the fused reductions' bound (docs/python.md), where lanes of
  // float drifted by 0.25% over 2^24 values of 0.1.
  struct partial {
    double v;
  };
  std::vector<partial> partials(loop.pieces(), partial{0.0});
  loop.run([&](cpu_piece pc) {
    cpu_simd_run([&] {
      alignas(64) T buf[block], values[block];
      double lane[lanes] = {};
      double rest = 0.0;
      for (std::size_t i = pc.first; i < pc.last;) {
        const std::size_t m = std::min(block, pc.last - i);
        apply_whole(k, in + i, values, buf, m);
        const std::size_t whole = m / lanes * lanes;  // only a piece's last block has a rest
        for (std::size_t j = 0; j < whole; j += lanes)
          for (std::size_t l = 0; l < lanes; ++l) lane[l] += values[j + l];
        for (std::size_t j = whole; j < m; ++j) rest += values[j];
        i += m;
      }
      double r = lane[0];
      for (std::size_t l = 1; l < lanes; ++l) r += lane[l];
      partials[pc.index].v = r + rest;
    });
  });
  double r = 0.0;
  for (const partial& v : partials) r += v.v;
  record_kernel(s.device());
  return T(r);
}

template void run_program_cpu<float>(const program&, array_ref<float>, array_ref<float>);
template void run_program_cpu<double>(const program&, array_ref<double>, array_ref<double>);
template float sum_program_cpu<float>(const program&, array_ref<float>);
template double sum_program_cpu<double>(const program&, array_ref<double>);

}  // namespace resident::detail
