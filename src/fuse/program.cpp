// Run-time element-wise programs: one interpreter functor, instantiated here for float and double, so
// code compiled by any compiler runs them as fused kernels on a GPU. Compiled by nvcc in CUDA builds.
// On the CPU they run a block of values at a time (fuse/program_cpu.cpp, always the host compiler).
#include "resident/fuse/program.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <sstream>

#include "backend/runtime.hpp"
#include "fuse/program_cpu.hpp"
#include "resident/fuse/pipeline.hpp"

namespace resident {
namespace {

constexpr const char* names[] = {"add", "mul", "affine", "square", "sqrt", "rsqrt", "exp", "log", "sin",
                                 "cos", "tanh", "abs", "neg", "recip", "minimum", "maximum", "pow"};
constexpr int n_codes = int(sizeof(names) / sizeof(names[0]));
constexpr int constants(op::code c) {
  switch (c) {
    case op::code::add: case op::code::mul: case op::code::minimum: case op::code::maximum:
    case op::code::pow: return 1;
    case op::code::affine: return 2;
    default: return 0;
  }
}

void check_code(op::code c) {
  if (int(c) >= n_codes)
    RESIDENT_FAIL("op: unknown operation code " + std::to_string(int(c)) + " (0.." +
                           std::to_string(n_codes - 1) + " are defined)");
}

// The program as the kernel receives it: operations and constants inline, in the array's precision.
template <class T>
struct interpreter {
  std::uint8_t code[program::max_ops];
  T a[program::max_ops], b[program::max_ops];
  int n;

  RESIDENT_HD static T sqrt_(T v) { if constexpr (sizeof(T) == 4) return sqrtf(v); else return ::sqrt(v); }
  RESIDENT_HD static T exp_(T v) { if constexpr (sizeof(T) == 4) return expf(v); else return ::exp(v); }
  RESIDENT_HD static T log_(T v) { if constexpr (sizeof(T) == 4) return logf(v); else return ::log(v); }
  RESIDENT_HD static T sin_(T v) { if constexpr (sizeof(T) == 4) return sinf(v); else return ::sin(v); }
  RESIDENT_HD static T cos_(T v) { if constexpr (sizeof(T) == 4) return cosf(v); else return ::cos(v); }
  RESIDENT_HD static T tanh_(T v) { if constexpr (sizeof(T) == 4) return tanhf(v); else return ::tanh(v); }
  RESIDENT_HD static T abs_(T v) { if constexpr (sizeof(T) == 4) return fabsf(v); else return ::fabs(v); }
  RESIDENT_HD static T pow_(T v, T e) { if constexpr (sizeof(T) == 4) return powf(v, e); else return ::pow(v, e); }

  RESIDENT_HD T operator()(T v) const {
    for (int i = 0; i < n; ++i) {
      switch (static_cast<op::code>(code[i])) {
        case op::code::add: v = v + a[i]; break;
        case op::code::mul: v = v * a[i]; break;
        case op::code::affine: v = a[i] * v + b[i]; break;
        case op::code::square: v = v * v; break;
        case op::code::sqrt: v = sqrt_(v); break;
        case op::code::rsqrt: v = T(1) / sqrt_(v); break;
        case op::code::exp: v = exp_(v); break;
        case op::code::log: v = log_(v); break;
        case op::code::sin: v = sin_(v); break;
        case op::code::cos: v = cos_(v); break;
        case op::code::tanh: v = tanh_(v); break;
        case op::code::abs: v = abs_(v); break;  // the sign cleared: +0 at -0, +NaN at -NaN
        case op::code::neg: v = -v; break;
        case op::code::recip: v = T(1) / v; break;
        case op::code::minimum: v = v < a[i] || a[i] != a[i] ? v : a[i]; break;  // fmin: NaN loses
        case op::code::maximum: v = v > a[i] || a[i] != a[i] ? v : a[i]; break;
        case op::code::pow: v = a[i] == T(2) ? v * v : pow_(v, a[i]); break;  // as compiled: pow(v, 2) is v * v
      }
    }
    return v;
  }
};

template <class T>
interpreter<T> compile(const program& p) {
  interpreter<T> k{};
  k.n = int(p.ops().size());
  for (int i = 0; i < k.n; ++i) {
    const op& o = p.ops()[std::size_t(i)];
    k.code[i] = static_cast<std::uint8_t>(o.what);
    k.a[i] = T(o.a);
    k.b[i] = T(o.b);
  }
  return k;
}

std::string format(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

}  // namespace

std::string op::name() const {
  check_code(what);
  std::string s = names[int(what)];
  if (constants(what) == 1) s += "(" + format(a) + ")";
  if (constants(what) == 2) s += "(" + format(a) + ", " + format(b) + ")";
  return s;
}

op op::parse(const std::string& text) {
  auto fail = [&] {
    std::string all;
    for (int c = 0; c < n_codes; ++c) {
      all += (c ? ", " : "") + std::string(names[c]);
      if (constants(op::code(c)) == 1) all += "(c)";
      if (constants(op::code(c)) == 2) all += "(a, b)";
    }
    std::string shown;  // control characters (a NUL would end the message) written as \xNN
    for (const unsigned char c : text) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(c));
      shown += c < 0x20 || c == 0x7f ? std::string(hex) : std::string(1, char(c));
    }
    return invalid_argument("op: cannot read '" + shown + "': the operations are " + all);
  };
  const auto open = text.find('(');
  const std::string word = text.substr(0, open);
  for (int c = 0; c < n_codes; ++c) {
    if (word != names[c]) continue;
    op o{op::code(c), 0, 0};
    const int want = constants(o.what);
    if (want == 0) {
      if (open != std::string::npos) throw fail();
      return o;
    }
    if (open == std::string::npos || text.back() != ')') throw fail();
    const std::string args = text.substr(open + 1, text.size() - open - 2);
    // from_chars, not strtod: '.' whatever the C locale (a host's setlocale made "1,5" read as 1.5), and
    // the text's end is its size, not a NUL inside it.
    const char* p = args.data();
    const char* const last = args.data() + args.size();
    auto number = [&](double& v) {
      while (p < last && *p == ' ') ++p;
      if (p < last && *p == '+' && p + 1 < last && *(p + 1) != '-') ++p;
      const auto r = std::from_chars(p, last, v);
      if (r.ec == std::errc::result_out_of_range) {  // below the smallest double a zero, signed as written
        const std::string_view t(p, std::size_t(r.ptr - p));
        const auto e = t.find_first_of("eE");
        const bool tiny = e != std::string_view::npos && e + 1 < t.size() && t[e + 1] == '-';
        if (!tiny)  // past the largest: refused, as op.add(10**400) is (strtod's silent inf)
          throw invalid_argument("op: the constant " + std::string(t) + " is beyond the range of a double (about "
                                 "1.8e308); write inf where an infinite constant is meant");
        v = std::copysign(0.0, *p == '-' ? -1.0 : 1.0);
      } else if (r.ec != std::errc()) {
        throw fail();
      }
      p = r.ptr;
    };
    number(o.a);
    if (want == 2) {
      while (p < last && *p == ' ') ++p;
      if (p == last || *p++ != ',') throw fail();
      number(o.b);
    }
    while (p < last && *p == ' ') ++p;
    if (p != last) throw fail();
    return o;
  }
  throw fail();
}

program::program(std::vector<op> ops) {
  for (const op& o : ops) *this = *this | o;
}

std::string program::name() const {
  if (ops_.empty()) return "identity";
  std::string s;
  for (std::size_t i = 0; i < ops_.size(); ++i) s += (i ? " | " : "") + ops_[i].name();
  return s;
}

program operator|(program p, op o) {
  check_code(o.what);
  if (p.ops_.size() == program::max_ops)
    RESIDENT_FAIL("program: more than " + std::to_string(program::max_ops) +
                           " operations; split it into two programs run one after the other");
  p.ops_.push_back(o);
  return p;
}

program operator|(program p, const program& q) {
  for (const op& o : q.ops()) p = p | o;
  return p;
}

template <class T>
void run(const program& p, array_ref<T> x, array_ref<T> y) {
  if (!(x.device() == y.device()))
    RESIDENT_FAIL("run: the input is on " + x.device().name() + ", the output on " + y.device().name() +
                          "; copy it over first", device_mismatch);
  if (x.size() != y.size())
    RESIDENT_FAIL("run: the input has " + std::to_string(x.size()) + " elements, the output " +
                         std::to_string(y.size()), shape_mismatch);
  if (x.stream().native() != y.stream().native()) y.stream().wait_for(x.stream());
  if (detail::backend_of(y.device()).host_memory()) return detail::run_program_cpu(p, x, y);
  auto k = map(compile<T>(p));
  if (x.data() == y.data()) k(y);
  else k(x, y);
}

template <class T>
T run_sum(const program& p, array_ref<T> x) {
  if (detail::backend_of(x.device()).host_memory()) return detail::sum_program_cpu(p, x);
  return (map(compile<T>(p)) | reduce(plus{}, T(0)))(x);
}

template void run<float>(const program&, array_ref<float>, array_ref<float>);
template void run<double>(const program&, array_ref<double>, array_ref<double>);
template float run_sum<float>(const program&, array_ref<float>);
template double run_sum<double>(const program&, array_ref<double>);

}  // namespace resident
