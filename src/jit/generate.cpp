// The kernel text of a run-time chain: its types checked, then ONE kernel written from the template
// below, for the host compiler or for NVRTC (backend.hpp's generate()).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "resident/detail/tuning.hpp"
#include "jit/backend.hpp"
#include "jit/generate.hpp"
#include "jit/kernel_text.hpp"
#include "jit/stage_text.hpp"

namespace resident::jit::detail {

kernel_policy policy() noexcept {
  using t = resident::detail::cuda_tuning;  // the compiled kernels' policy: run-time kernels share it
  return {t::reduce_block, t::map_unroll, t::map_block, t::map_tile};
}

int per_block(element t) noexcept { return t == element::f64 ? 2 : 4; }

std::size_t size_of(element t) noexcept {
  return t == element::f32 || t == element::i32 || t == element::u32 ? 4 : 8;
}

cuda_shape cuda_shape_of(const std::vector<part>& parts, const signature& sig) noexcept {
  cuda_shape r;
  // The empty chain (a copy) has the maps' vector path and so both entries.
  r.slots = sig.reduces && !parts.empty() && parts.back().what != part::kind::reduce && size_of(sig.out) == 4;
  if (sig.in.empty() || (!parts.empty() && is_generator(parts.front().what))) return r;
  bool same = true;
  for (element e : sig.in) same = same && size_of(e) == size_of(sig.in[0]);
  if (!sig.reduces) same = same && size_of(sig.out) == size_of(sig.in[0]);  // a map's vector path
  r.index32 = same;
  return r;
}

namespace {

using kind = part::kind;

std::string stage_label(const part& p, std::size_t index) {
  return (p.what == kind::map ? "stage " : "reduction ") + std::to_string(index) + " (" + p.name + ")";
}

std::string types_text(const std::vector<element>& t) {
  std::string s;
  for (std::size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + std::string(type_name(t[i]));
  return s;
}

// --- the kernel template --------------------------------------------------------------------------

// Keeps the lines of a header text that define things: its own #include and #pragma once go (the
// prelude provides what they would bring in).
std::string definitions_of(const char* text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("#include", 0) != 0 && line.rfind("#pragma once", 0) != 0) out += line + '\n';
  return out;
}

const char* cuda_prelude = R"(// resident run-time kernel (CUDA flavor)
#define RESIDENT_HD __device__
#define RS_FN __device__ __forceinline__
typedef unsigned char uint8_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef unsigned long size_t;
namespace std { using ::int32_t; using ::uint32_t; using ::int64_t; using ::uint64_t; using ::size_t; }
// Programmatic dependent launch, as the compiled fused kernels do it: let the next kernel be scheduled,
// then wait for the stream's previous kernel (its completion and memory) before the first access.
// No-ops for a launch without the attribute, and absent before sm_90.
RS_FN void rs_dependent_launch_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
)";

const char* host_prelude = R"(// resident run-time kernel (host flavor)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <math.h>
#define RESIDENT_HD
#define RS_FN static inline
// pow through functions the compiler does not know as built-ins: libstdc++'s std::pow(float, float)
// calls __builtin_powf, which -fno-builtin-powf leaves one, and the vectorizer turns pow(x, 0.5) into
// a vector sqrt (nan at -inf, -0 at -0) while the loop's tail calls powf (+inf, +0). Kept as the
// built-in does: constant arguments fold (constexpr), and a constant exponent 2 is x * x (the same
// correctly rounded value, and the loop vectorizes).
// (Clang evaluates no pow at compile time: a constexpr function there that calls one is an error.)
#if defined(__clang__)
#define RS_POW(T, call)                                                        \
  RS_FN T rs_pow(T a, T b) {                                                   \
    if (__builtin_constant_p(b) && b == 2) return a * a;                       \
    return ::call(a, b);                                                       \
  }
#define RS_POW_CONSTEXPR
#else
#define RS_POW(T, call)                                                        \
  RS_FN constexpr T rs_pow(T a, T b) {                                         \
    if (__builtin_is_constant_evaluated()) return __builtin_##call(a, b);      \
    if (__builtin_constant_p(b) && b == 2) return a * a;                       \
    return ::call(a, b);                                                       \
  }
#define RS_POW_CONSTEXPR constexpr
#endif
RS_POW(float, powf)
RS_POW(double, pow)
RS_POW(long double, powl)
#undef RS_POW
template <class A, class B> RS_FN RS_POW_CONSTEXPR auto rs_pow(A a, B b) -> decltype(std::pow(a, b)) {
  using R = decltype(std::pow(a, b));
  return rs_pow(R(a), R(b));
}
#undef RS_POW_CONSTEXPR
namespace std { using ::rs_pow; }
#define pow rs_pow
)";

// The fold's identity-free operator for the built-in reductions, and their init.
std::string builtin_op(kind k) {
  switch (k) {
    case kind::sum: return "return a + b;";
    case kind::min: return "return a != a ? a : b != b ? b : b < a ? b : a;";  // NaN wins
    case kind::max: return "return a != a ? a : b != b ? b : b > a ? b : a;";
    default: return "";
  }
}

std::string builtin_init(kind k, element t) {
  const bool real = t == element::f32 || t == element::f64;
  if (k == kind::sum) return "0";
  if (real) return k == kind::min ? "(1.0/0.0)" : "(-1.0/0.0)";
  switch (t) {
    case element::i32: return k == kind::min ? "2147483647" : "(-2147483647 - 1)";
    case element::u32: return k == kind::min ? "4294967295u" : "0u";
    case element::i64: return k == kind::min ? "9223372036854775807ll" : "(-9223372036854775807ll - 1)";
    default: return k == kind::min ? "18446744073709551615ull" : "0ull";
  }
}

// One value of the generator from Philox words w, lane l: as random.hpp's distributions do.
std::string generator_code(const part& g) {
  const bool f = g.result == element::f32;
  std::string s = "namespace rs_gen {\nusing namespace resident::random;\nusing resident::random::detail::mul_rn;\n";
  s += f ? "typedef float T;\ntypedef uint32_t U;\n" : "typedef double T;\ntypedef uint64_t U;\n";
  s += R"(RS_FN T below(T x) {
  if (x == T(0)) return -resident::random::detail::bits_as<T>(U(1));
  const U b = resident::random::detail::bits_as<U>(x);
  return resident::random::detail::bits_as<T>(x > T(0) ? U(b - 1) : U(b + 1));
}
)";
  if (g.what == kind::uniform) {
    if (f)
      s += R"(RS_FN T value(const words4& w, int lane, T low, T high) {
  const double du = unit_float(word(w, lane));
  const T v = float(double(low) * (1.0 - du) + double(high) * du);
  return v < high ? v : below(high);
}
)";
    else
      s += R"(RS_FN T value(const words4& w, int lane, T low, T high) {
  const T u = unit_double(word(w, 2 * lane), word(w, 2 * lane + 1));
  T v = fma(high, u, mul_rn(low, 1.0 - u));
  if (v < low) v = low;
  return v < high ? v : below(high);
}
)";
  } else {
    if (f)
      s += R"(RS_FN T value(const words4& w, int lane, T mean, T sd) {
  const int j = lane & ~1;
  const resident::random::detail::cos_sin<float> z =
      resident::random::detail::normal_pair(word(w, j), word(w, j + 1), mean, sd);
  return (lane & 1) ? z.s : z.c;
}
)";
    else
      s += R"(RS_FN T value(const words4& w, int lane, T mean, T sd) {
  const resident::random::detail::cos_sin<double> z =
      resident::random::detail::normal_pair(w.w[0], w.w[1], w.w[2], w.w[3], mean, sd);
  return lane ? z.s : z.c;
}
)";
  }
  s += "}  // namespace rs_gen\n";
  return s;
}

// A user reduction's init becomes a value of the chain's type: one the type cannot hold (a fraction,
// NaN or out of range for an integer; beyond float's range for float) would start the fold from
// another value, or from undefined behaviour.
void check_init(const part& r, element t) {
  const double a = r.a;
  bool ok = true;
  switch (t) {
    case element::f64: break;
    case element::f32: ok = !std::isfinite(a) || std::abs(a) <= double(std::numeric_limits<float>::max()); break;
    case element::i32: ok = a == std::trunc(a) && a >= -0x1p31 && a < 0x1p31; break;
    case element::u32: ok = a == std::trunc(a) && a >= 0 && a < 0x1p32; break;
    case element::i64: ok = a == std::trunc(a) && a >= -0x1p63 && a < 0x1p63; break;
    case element::u64: ok = a == std::trunc(a) && a >= 0 && a < 0x1p64; break;
  }
  if (!ok) {
    std::ostringstream v;
    v << a;
    RESIDENT_FAIL("jit: the reduction " + r.name + " starts from init " + v.str() + ", which " + type_name(t) +
                  " cannot hold; give a " + (t == element::f32 ? "value within float's range" : "whole number in its range"));
  }
}

// --- the chain's parts and types --------------------------------------------------------------------

// The chain's argument count, reduction and generator against sig; the caller's mistakes first.
void check_call(const signature& sig, const part* gen, const part* red) {
  RESIDENT_EXPECTS(sig.reduces == (red != nullptr),
                   red ? "jit: the chain ends in a reduction; call result<T>(...) to get its value"
                       : "jit: the chain has no reduction; end it with | jit::sum() (or min, max, reduce) to call "
                         "result<T>, or call it with an output array");
  RESIDENT_EXPECTS(!gen || sig.in.empty(), "jit: the chain starts with a generator, so it reads no array; "
                                            "call it with the output alone");
  RESIDENT_EXPECTS(gen || !sig.in.empty(), "jit: the chain reads no array and has no generator source");
  RESIDENT_EXPECTS(sig.in.size() <= std::size_t(max_inputs), "jit: at most 8 arrays zipped");
}

// The values flowing between stages, checked stage by stage before anything compiles; returns the
// type of the last stage's value.
element check_stages(const std::vector<part>& parts, const signature& sig, const part* gen) {
  std::vector<element> v = gen ? std::vector<element>{gen->result} : sig.in;
  std::size_t index = 0;
  for (const part& p : parts) {
    if (p.what != kind::map) continue;
    ++index;
    if (p.params != v)
      RESIDENT_FAIL("jit: " + stage_label(p, index) + " takes (" + types_text(p.params) + ") but " +
                    (index == 1 ? std::string(gen ? "the generator gives (" : "the arrays hold (")
                                : "stage " + std::to_string(index - 1) + " returns (") +
                    types_text(v) + "); make the types agree");
    v = {p.result};
  }
  RESIDENT_EXPECTS(v.size() == 1, "jit: " + std::to_string(v.size()) + " zipped arrays need a stage taking " +
                                      std::to_string(v.size()) + " values to combine them");
  return v[0];
}

// The terminal against the chain's values: the operator's types and init, the type asked for.
void check_terminal(const signature& sig, const part* red, element value) {
  if (red) {
    if (red->what == kind::reduce &&
        (red->params != std::vector<element>{value, value} || red->result != value))
      RESIDENT_FAIL("jit: the reduction operator " + red->name + " takes (" + types_text(red->params) +
                    ") and returns " + type_name(red->result) + "; the chain's values are " + type_name(value) +
                    ", so it must take (" + type_name(value) + ", " + type_name(value) + ") and return " +
                    type_name(value));
    if (red->what == kind::reduce) check_init(*red, value);
    const bool wide = red->what == kind::sum && value == element::f32 && sig.out == element::f64;
    RESIDENT_EXPECTS(sig.out == value || wide, std::string("jit: the chain reduces ") + type_name(value) +
                                                   " values; ask for result<" + type_name(value) + "> (not " +
                                                   type_name(sig.out) + ")");
  } else {
    RESIDENT_EXPECTS(sig.out == value, std::string("jit: the chain makes ") + type_name(value) +
                                           " values but the output holds " + type_name(sig.out) +
                                           "; write into a " + type_name(value) + " array, or end the chain with "
                                           "a stage of C++ text converting them (jit::map(\"" + type_name(sig.out) +
                                           " to(" + type_name(value) + " v) { return v; }\")): a Python stage "
                                           "returns its values' own type");
  }
}

// The chain read and checked against sig, its mistakes told in the order a user makes them.
chain checked(const std::vector<part>& parts, const signature& sig, flavor fl) {
  const part* gen = !parts.empty() && is_generator(parts.front().what) ? &parts.front() : nullptr;
  const part* red = !parts.empty() && is_reduction(parts.back().what) ? &parts.back() : nullptr;
  check_call(sig, gen, red);
  const element value = check_stages(parts, sig, gen);
  check_terminal(sig, red, value);
  const bool wide = red && red->what == kind::sum && value == element::f32;
  return {parts, sig, fl == flavor::cuda, gen, red, value, gen ? 1 : sig.in.size(), type_name(sig.out), wide};
}

// --- the text before the kernel ---------------------------------------------------------------------

// The prelude, the launch shape, and the generator's definitions.
std::string head(const chain& c) {
  const kernel_policy pol = policy();
  std::string s = c.cuda ? cuda_prelude : host_prelude;
  s += "#define RS_BLOCK " + std::to_string(pol.block) + "\n#define RS_UNROLL " + std::to_string(pol.unroll) +
       "\n#define RS_TILE " + std::to_string(pol.map_tile) + "\n";
  if (c.gen) {
    s += definitions_of(philox_text);
    s += definitions_of(normal_math_text);
    s += generator_code(*c.gen);
  }
  return s;
}

// An external stage's declaration: its LTO-IR's function (CUDA), or the type of its host function.
std::string external_stage(const chain& c, const part& p, std::size_t index) {
  const std::string k = std::to_string(&p - c.parts.data());
  RESIDENT_EXPECTS(&p - c.parts.data() < 16, "jit: an external stage must be among a chain's first 16 parts");
  RESIDENT_EXPECTS(!c.cuda || !p.ltoir.empty(), "jit: stage " + std::to_string(index) + " (" + p.name +
                                                    ") was given no LTO-IR, so it cannot run on a GPU");
  RESIDENT_EXPECTS(c.cuda || p.host_function, "jit: stage " + std::to_string(index) + " (" + p.name +
                                                  ") was given no host function, so it cannot run on the CPU");
  std::string prm;
  for (std::size_t i = 0; i < p.params.size(); ++i) prm += (i ? ", " : "") + std::string(type_name(p.params[i]));
  if (c.cuda)
    return "// stage " + std::to_string(index) + ": LTO-IR " + hash_hex(p.ltoir) + "\nextern \"C\" __device__ " +
           type_name(p.result) + " " + p.name + "(" + prm + ");\n";
  return "typedef " + std::string(type_name(p.result)) + " (*rs_fn_" + k + ")(" + prm + ");\n";
}

// The user's stages, each in its own namespace, their lines numbered as in their own text.
std::string stages(const chain& c) {
  std::string s;
  std::size_t index = 0;
  for (const part& p : c.parts) {
    if ((p.what == kind::map || p.what == kind::reduce) && p.source.empty()) {  // external: compiled elsewhere
      ++index;
      if (p.what == kind::reduce) --index;
      s += external_stage(c, p, index);
      continue;
    }
    if (p.what != kind::map && p.what != kind::reduce) continue;
    const std::string label = p.what == kind::map ? "stage " + std::to_string(++index) : std::string("reduction");
    const auto [includes, body] = hoist_includes(p.source, label);
    const ended_macros m = macros_ended(body, std::size_t(&p - c.parts.data()), label);
    s += includes + m.before + "namespace rs_" + std::to_string(&p - c.parts.data()) + " {\n#line 1 \"" + label +
         "\"\n" + m.body + "}\n" + m.after;
  }
  return s;
}

// The arguments struct and the chain: the arrays' (or the generator's) values in, the last stage's
// value out.
std::string chain_function(const chain& c) {
  std::string s = "#line 1 \"resident kernel\"\n";
  s += "typedef " + std::string(type_name(c.value)) + " rs_value;\n";
  s += "struct rs_args { const void* in[8]; void* out; unsigned long long n, seed, offset; double a, b; "
       "void* partials; unsigned long long* counters; const void* fns[16]; int vec; };\n";
  std::string params, args;
  for (std::size_t k = 0; k < c.nin; ++k) {
    params += (k ? ", " : "") + std::string(type_name(c.gen ? c.gen->result : c.sig.in[k])) + " x" + std::to_string(k);
    args += (k ? ", " : "") + std::string("x") + std::to_string(k);
  }
  s += "RS_FN rs_value rs_chain(const rs_args& a, " + params + ") {\n";
  std::string prev = args;
  int vi = 0;
  for (const part& p : c.parts) {
    if (p.what != kind::map) continue;
    const std::string k = std::to_string(&p - c.parts.data());
    const std::string fn = !p.source.empty() ? "rs_" + k + "::" + p.name
                           : c.cuda          ? p.name
                                             : "((rs_fn_" + k + ")a.fns[" + k + "])";
    s += "  const auto v" + std::to_string(vi) + " = " + fn + "(" + prev + ");\n";
    prev = "v" + std::to_string(vi++);
  }
  s += "  return " + prev + ";\n}\n";
  return s;
}

// The reduction's operator, init, and the fold of values that may be absent (an empty range).
std::string reduction_ops(const chain& c) {
  const part* red = c.red;
  const std::string rk = std::to_string(&c.parts.back() - c.parts.data());
  const bool external_op = red->what == kind::reduce && red->source.empty();
  std::string s;
  // The host calls an external operator through a pointer each thread takes from its arguments.
  if (external_op && !c.cuda) s += "static thread_local const void* rs_reduce_fn;\n";
  // A float32 sum folds in double (a float32 value is exact there): a host thread's lanes fold
  // millions of values in order, a GPU thread hundreds past 2^26 values, which float32 would round
  // away. A GPU thread adds a trip's few values in float32 first (cuda_reduce_vectors): one conversion
  // per trip, not per value.
  s += std::string("typedef ") + (c.wide ? "double" : "rs_value") + " rs_acc;\n";
  // What the call asked for: the values' type, or for a float32 sum double (its accumulator unrounded:
  // a stream's chunks or a sharded array's shards then join without a rounding each).
  s += "typedef " + c.O + " rs_result;\n";
  s += "RS_FN rs_acc rs_op(rs_acc a, rs_acc b) { ";
  if (external_op) s += c.cuda ? "return " + red->name + "(a, b); }\n" : "return ((rs_fn_" + rk + ")rs_reduce_fn)(a, b); }\n";
  else if (red->what == kind::reduce) s += "return rs_" + rk + "::" + red->name + "(a, b); }\n";
  else s += builtin_op(red->what) + " }\n";
  s += "RS_FN rs_acc rs_init(double a) { return " +
       (red->what == kind::reduce ? std::string("rs_acc(a)") : "rs_acc(" + builtin_init(red->what, c.value) + ")") +
       "; }\n";
  // On the GPU a built-in reduction's accumulators start from its operator's identity (-0.0 for a
  // floating sum: -0.0 + x is x), so a fold skips the validity select per value, as the compiled
  // reductions do (fuse/detail/cuda/block_fold.cuh); other operators may have none.
  const bool identity = c.cuda && red->what != kind::reduce;
  const bool real = c.value == element::f32 || c.value == element::f64;
  const std::string id = red->what == kind::sum ? (real ? "-0.0" : "0") : builtin_init(red->what, c.value);
  s += "struct rs_maybe { rs_acc value; int valid; };\n";
  if (identity)
    s += "RS_FN rs_maybe rs_start() { rs_maybe m; m.value = rs_acc(" + id + "); m.valid = 1; return m; }\n"
         "RS_FN void rs_fold(rs_maybe& m, rs_acc v) { m.value = rs_op(m.value, v); }\n";
  else
    s += "RS_FN rs_maybe rs_start() { rs_maybe m; m.value = rs_acc(); m.valid = 0; return m; }\n"
         "RS_FN void rs_fold(rs_maybe& m, rs_acc v) { m.value = m.valid ? rs_op(m.value, v) : v; m.valid = 1; }\n";
  s += 
"RS_FN rs_maybe rs_combine(rs_maybe a, rs_maybe b) {\n"
       "  if (!a.valid) return b;\n  if (!b.valid) return a;\n  rs_maybe r; r.value = rs_op(a.value, b.value); r.valid = 1; return r;\n}\n";
  return s;
}

// --- the loops ----------------------------------------------------------------------------------------

loop_text loops_of(const chain& c) {
  loop_text t;
  // The host folds into 16 independent lanes (as the compiled CPU reductions do), then the lanes
  // in order: a float sum keeps its accuracy over long pieces.
  t.use = !c.red ? "out[i] = (" : c.cuda ? "rs_fold(acc[0], " : "rs_fold(lanes[i & 15], ";
  for (std::size_t k = 0; k < c.nin && !c.gen; ++k) {
    const std::string T = type_name(c.sig.in[k]);
    t.loads += "  const " + T + "* in" + std::to_string(k) + " = (const " + T + "*)a.in[" + std::to_string(k) + "];\n";
    t.call += (k ? ", " : "") + std::string("in") + std::to_string(k) + "[i]";
  }
  if (!c.red) t.loads += "  " + c.O + "* out = (" + c.O + "*)a.out;\n";
  t.P = c.gen ? std::to_string(per_block(c.gen->result)) : "1";
  const std::string& P = t.P;
  t.gen_loop =
      "  const unsigned long long lead = a.offset % " + P + ", c0 = a.offset / " + P + ";\n"
      "  const unsigned long long blocks = (lead + n + " + P + " - 1) / " + P + ";\n"
      "  const unsigned long long mask = ~0ull / " + P + ";\n"
      "  const rs_gen::T ga = rs_gen::T(a.a), gb = rs_gen::T(a.b);\n";
  t.gen_body =
      "    const resident::random::words4 w = resident::random::philox_block(a.seed, (c0 + b) & mask);\n"
      "#pragma unroll\n"
      "    for (int l = 0; l < " + P + "; ++l) {\n"
      "      const unsigned long long i = b * " + P + " + l - lead;  // wraps above n for a lane before 0\n"
      "      if (i < n) " + t.use + "rs_chain(a, rs_gen::value(w, l, ga, gb)));\n"
      "    }\n";
  // A GPU's float32 sum adds a block's values in float32, then the block's total in double.
  if (c.cuda && c.wide)
    t.gen_body = "    rs_value part = rs_value(-0.0);\n" +
                 std::string(t.gen_body).replace(t.gen_body.find(t.use), t.use.size(), "part = part + (") +
                 "    rs_fold(acc[0], rs_acc(part));\n";
  return t;
}

// --- the host flavor ----------------------------------------------------------------------------------

// A reduction whose operator is external takes its host function from the arguments, per thread.
std::string reduce_fn_of(const chain& c) {
  return c.red->what == kind::reduce && c.red->source.empty()
             ? "  rs_reduce_fn = a.fns[" + std::to_string(&c.parts.back() - c.parts.data()) + "];\n"
             : "";
}

// The arrays' elements through the chain, in loops the host compiler vectorizes, the stages' math
// calls included (launch/detail/cpu_simd.hpp): a map element by element; a reduction makes 256 values
// at a time, then folds them into 16 lanes by position (as the compiled CPU reductions do,
// fused_cpu.hpp).
std::string host_array_loop(const chain& c, const loop_text& t) {
  auto call_at = [&](const std::string& at) {
    std::string r;
    for (std::size_t k = 0; k < c.nin; ++k) r += (k ? ", in" : "in") + std::to_string(k) + "[" + at + "]";
    return r;
  };
  std::string s = "  unsigned long long i = first;\n";
  if (c.red)
    s += "  if (last - first >= 32) {\n"
         "    rs_acc lane[16];\n    rs_value buf[256];\n"
         "    for (int l = 0; l < 16; ++l) lane[l] = rs_chain(a, " + call_at("i + l") + ");\n"
         "    for (i += 16; i + 16 <= last;) {\n"
         "      unsigned long long m = (last - i) / 16 * 16;\n"
         "      if (m > 256) m = 256;\n"
         "#pragma GCC ivdep\n"
         "      for (unsigned long long j = 0; j < m; ++j) buf[j] = rs_chain(a, " + call_at("i + j") + ");\n"
         "      for (unsigned long long j = 0; j < m; j += 16)\n"
         "        for (int l = 0; l < 16; ++l) lane[l] = rs_op(lane[l], buf[j + l]);\n"
         "      i += m;\n"
         "    }\n"
         "    for (int l = 0; l < 16; ++l) { lanes[l].value = lane[l]; lanes[l].valid = 1; }\n"
         "  }\n";
  else
    s += "  const unsigned long long whole = first + (last - first) / 16 * 16;\n"
         "#pragma GCC ivdep\n"
         "  for (; i < whole; ++i) " + t.use + "rs_chain(a, " + t.call + "));\n";
  // The last partial vector, padded to 16 with its last element, takes the same vector code as the
  // rest: an element's value never depends on where a range (a thread's, a chunk's, a shard's) ends
  // (the scalar libm functions differ from the vector ones by an ulp).
  std::string padded, at0;
  for (std::size_t k = 0; k < c.nin; ++k) {
    const std::string K = std::to_string(k);
    padded += std::string("    ") + type_name(c.sig.in[k]) + " t" + K + "[16];\n    for (int l = 0; l < 16; ++l) t" + K + "[l] = in" + K +
              "[i + (l < k ? l : k - 1)];\n";
    at0 += (k ? ", t" : "t") + K + "[l]";
  }
  s += "  while (i < last) {\n"
       "    const unsigned long long k = last - i < 16 ? last - i : 16;\n" + padded +
       "    decltype(rs_chain(a, " + call_at("0") + ")) v[16];\n"
       "#pragma GCC unroll 1\n"  // a loop the vectorizer sees, not 16 calls unrolled before it runs
       "#pragma GCC ivdep\n"
       "    for (int l = 0; l < 16; ++l) v[l] = rs_chain(a, " + at0 + ");\n"
       "    for (unsigned long long l = 0; l < k; ++l, ++i) " + t.use + "v[l]);\n"
       "  }\n";
  return s;
}

// Host flavor: rs_range, a range of elements per call (the library's CPU loop spreading the ranges);
// a reduction's rs_range leaves a partial, which rs_finish folds in order.
std::string host_functions(const chain& c, const loop_text& t) {
  std::string s;
  if (c.red)
    s += "extern \"C\" void rs_range(const rs_args& a, unsigned long long first, unsigned long long last, "
         "rs_maybe* partial) {\n" + reduce_fn_of(c) +
         "  rs_maybe lanes[16];\n"
         "  for (int l = 0; l < 16; ++l) lanes[l] = rs_start();\n";
  else
    s += "extern \"C\" void rs_range(const rs_args& a, unsigned long long first, unsigned long long last, void*) {\n";
  s += t.loads;
  if (c.gen) {
    const std::string& P = t.P;
    s += "  const unsigned long long n = last;\n" + t.gen_loop +
         "  for (unsigned long long b = (first + lead) / " + P + "; b < (last + lead + " + P + " - 1) / " + P +
         "; ++b) {\n" + t.gen_body.substr(0, t.gen_body.find("      if (i < n)")) +
         "      if (i >= first && i < n) " + t.use + "rs_chain(a, rs_gen::value(w, l, ga, gb)));\n    }\n  }\n";
  } else {
    s += host_array_loop(c, t);
  }
  if (c.red) s += "  rs_maybe acc = lanes[0];\n  for (int l = 1; l < 16; ++l) acc = rs_combine(acc, lanes[l]);\n  *partial = acc;\n";
  s += "}\n";
  if (c.red)
    s += "extern \"C\" void rs_finish(const rs_args& a, const rs_maybe* partials, unsigned long long count, "
         "double init, void* out) {\n" + reduce_fn_of(c) +
         "  rs_acc r = rs_init(init);\n"
         "  for (unsigned long long p = 0; p < count; ++p) if (partials[p].valid) r = rs_op(r, partials[p].value);\n"
         "  *(rs_result*)out = rs_result(r);\n}\n"
         "extern \"C\" unsigned long long rs_partial_bytes() { return sizeof(rs_maybe); }\n";
  return s;
}

}  // namespace

std::string generate(const std::vector<part>& parts, const signature& sig, flavor fl) {
  const chain c = checked(parts, sig, fl);
  std::string s = head(c);
  s += stages(c);
  s += chain_function(c);
  if (c.red) s += reduction_ops(c);
  const loop_text t = loops_of(c);
  s += c.cuda ? cuda_kernel(c, t) : host_functions(c, t);
  return s;
}

}  // namespace resident::jit::detail
