// Run-time chains: reading the stages' signatures, checking the chain's types, generating ONE kernel's
// text from the template below, and dispatching to the backend of the arrays' device.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "resident/detail/tuning.hpp"
#include "jit/backend.hpp"

namespace resident::jit {

const char* type_name(element e) noexcept {
  switch (e) {
    case element::f32: return "float";
    case element::f64: return "double";
    case element::i32: return "int";
    case element::u32: return "unsigned";
    case element::i64: return "long long";
    case element::u64: return "unsigned long long";
  }
  return "?";
}

namespace detail {

kernel_policy policy() noexcept {
  using t = resident::detail::cuda_tuning;  // the compiled kernels' policy: run-time kernels share it
  return {t::reduce_block, t::map_unroll, t::map_block, t::map_tile};
}

int per_block(element t) noexcept { return t == element::f64 ? 2 : 4; }

std::size_t size_of(element t) noexcept {
  return t == element::f32 || t == element::i32 || t == element::u32 ? 4 : 8;
}

namespace {

using kind = part::kind;

// --- reading a function's signature --------------------------------------------------------------

// The text as the compiler's parser sees its declarations: comments, preprocessor lines and the
// contents of string and character literals blanked (newlines kept), so that a brace or "//" inside a
// literal or a macro is not read as code. @throws invalid_argument for text that cannot compile whole
// (an unterminated comment or literal, unbalanced brackets): told before compiling, and in the stage's
// own terms, rather than as a compiler's complaint about the kernel around it.
std::string code_of(const std::string& s, const char* what) {
  std::string out(s.size(), ' ');
  auto line_of = [&](std::size_t i) { return std::to_string(1 + std::count(s.begin(), s.begin() + std::ptrdiff_t(i), '\n')); };
  std::string open;  // the brackets open at this point
  std::vector<std::size_t> open_at;
  bool line_start = true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') {
      out[i] = '\n';
      line_start = true;
      continue;
    }
    if (line_start && c == '#') {  // a directive, with its continuation lines
      for (; i < s.size() && !(s[i] == '\n' && s[i - 1] != '\\'); ++i)
        if (s[i] == '\n') out[i] = '\n';
      if (i < s.size()) out[i] = '\n';
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    if (s.compare(i, 2, "//") == 0) {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const auto e = s.find("*/", i + 2);
      RESIDENT_EXPECTS(e != std::string::npos,
                       std::string(what) + ": the comment opened on line " + line_of(i) + " is not closed with */");
      for (std::size_t k = i; k < e + 2; ++k)
        if (s[k] == '\n') out[k] = '\n';
      i = e + 1;
    } else if (c == 'R' && i + 1 < s.size() && s[i + 1] == '"' &&
               (i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_'))) {
      const auto paren = s.find('(', i + 2);
      const auto e = paren == std::string::npos ? paren : s.find(")" + s.substr(i + 2, paren - i - 2) + "\"", paren);
      RESIDENT_EXPECTS(e != std::string::npos,
                       std::string(what) + ": the raw string opened on line " + line_of(i) + " is not closed");
      out[i] = 'R';
      out[i + 1] = out[s.find('"', e + 1)] = '"';
      for (std::size_t k = i; k < e; ++k)
        if (s[k] == '\n') out[k] = '\n';
      i = s.find('"', e + 1);
    } else if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1]))))) {
      // A literal (a ' between digits is C++14's digit separator): to its closing quote on this line.
      std::size_t k = i + 1;
      for (; k < s.size() && s[k] != c && s[k] != '\n'; ++k)
        if (s[k] == '\\') ++k;
      RESIDENT_EXPECTS(k < s.size() && s[k] == c, std::string(what) + ": the " +
                                                      (c == '"' ? "string" : "character") + " literal on line " +
                                                      line_of(i) + " is not closed on its line");
      out[i] = out[k] = c;
      i = k;
    } else {
      out[i] = c;
      if (c == '{' || c == '(' || c == '[') {
        open += c;
        open_at.push_back(i);
      } else if (c == '}' || c == ')' || c == ']') {
        const char want = c == '}' ? '{' : c == ')' ? '(' : '[';
        RESIDENT_EXPECTS(!open.empty() && open.back() == want,
                         std::string(what) + ": the '" + c + "' on line " + line_of(i) + " closes " +
                             (open.empty() ? std::string("nothing") : "the '" + open.substr(open.size() - 1) +
                                                                           "' of line " + line_of(open_at.back())) +
                             "; balance the text's brackets");
        open.pop_back();
        open_at.pop_back();
      }
    }
  }
  RESIDENT_EXPECTS(open.empty(), std::string(what) + ": the '" + (open.empty() ? "" : open.substr(open.size() - 1)) +
                                     "' on line " + (open_at.empty() ? "" : line_of(open_at.back())) +
                                     " is never closed; balance the text's brackets");
  return out;
}

// Whether a spelled type passes its value by value: no pointer, array or rvalue reference, and a
// reference only to const.
bool by_value(const std::string& type) {
  if (type.find_first_of("*[") != std::string::npos || type.find("&&") != std::string::npos) return false;
  if (type.find('&') == std::string::npos) return true;
  const std::string t = " " + type + " ";
  for (std::size_t p = t.find("const"); p != std::string::npos; p = t.find("const", p + 1))
    if (!std::isalnum(static_cast<unsigned char>(t[p - 1])) && t[p - 1] != '_' &&
        !std::isalnum(static_cast<unsigned char>(t[p + 5])) && t[p + 5] != '_')
      return true;
  return false;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) w.push_back(cur);
    cur.clear();
  };
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':') cur += c;
    else flush();
  }
  flush();
  return w;
}

bool is_type_word(const std::string& w) {
  static const char* const known[] = {"float", "double", "int", "unsigned", "signed", "long", "short",
                                      "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t",
                                      "std::int32_t", "std::uint32_t", "std::int64_t", "std::uint64_t", "std::size_t"};
  for (const char* k : known)
    if (w == k) return true;
  return false;
}

// The element a spelled type names; false for anything else.
bool element_named(std::vector<std::string> w, element* e) {
  std::vector<std::string> keep;
  for (auto& x : w)
    if (x != "const" && x != "volatile" && x != "__restrict__" && x != "inline" && x != "static" &&
        x != "constexpr" && x != "__device__" && x != "__host__" && x != "__forceinline__" && x != "RESIDENT_HD")
      keep.push_back(x);
  std::string t;
  for (auto& x : keep) t += (t.empty() ? "" : " ") + x;
  if (t == "float") *e = element::f32;
  else if (t == "double") *e = element::f64;
  else if (t == "int" || t == "signed" || t == "signed int" || t == "int32_t" || t == "std::int32_t") *e = element::i32;
  else if (t == "unsigned" || t == "unsigned int" || t == "uint32_t" || t == "std::uint32_t") *e = element::u32;
  else if (t == "long" || t == "long int" || t == "long long" || t == "long long int" || t == "int64_t" ||
           t == "std::int64_t") *e = element::i64;
  else if (t == "unsigned long" || t == "unsigned long int" || t == "unsigned long long" ||
           t == "unsigned long long int" || t == "uint64_t" || t == "std::uint64_t" || t == "size_t" ||
           t == "std::size_t") *e = element::u64;
  else return false;
  return true;
}

struct function_text {
  std::string name, result, params;
  std::size_t result_at = 0;  // where the return type's text begins
};

// The functions defined at the top level of s: an identifier, (...), then { at depth 0.
std::vector<function_text> functions(const std::string& s) {
  std::vector<function_text> found;
  int depth = 0;
  std::size_t start = 0;  // where the current top-level declaration began
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth == 0) start = i + 1;
    } else if (c == ';' && depth == 0) {
      start = i + 1;
    } else if (c == '(' && depth == 0) {
      std::size_t e = i;
      while (e > start && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
      std::size_t b = e;
      while (b > start && (std::isalnum(static_cast<unsigned char>(s[b - 1])) || s[b - 1] == '_')) --b;
      int paren = 0;
      std::size_t close = i;
      for (; close < s.size(); ++close) {
        if (s[close] == '(') ++paren;
        if (s[close] == ')' && --paren == 0) break;
      }
      if (close >= s.size()) break;
      std::size_t after = close + 1;
      while (after < s.size() && s[after] != '{' && s[after] != ';' && s[after] != '(') ++after;
      if (b < e && after < s.size() && s[after] == '{')
        found.push_back({s.substr(b, e - b), s.substr(start, b - start), s.substr(i + 1, close - i - 1), start});
      i = close;
    }
  }
  return found;
}

std::vector<std::string> split_params(const std::string& p) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : p) {
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!words(cur).empty()) out.push_back(cur);
  return out;
}

// A type's text without attributes ([[nodiscard]], __attribute__((...))), which say nothing of its type.
std::string without_attributes(std::string t) {
  for (std::size_t p; (p = t.find("[[")) != std::string::npos;) {
    const auto e = t.find("]]", p);
    t.replace(p, e == std::string::npos ? std::string::npos : e + 2 - p, " ");
  }
  for (std::size_t p; (p = t.find("__attribute__")) != std::string::npos;) {
    std::size_t e = t.find('(', p);
    for (int depth = 0; e < t.size(); ++e) {
      if (t[e] == '(') ++depth;
      if (t[e] == ')' && --depth == 0) break;
    }
    t.replace(p, e == std::string::npos || e >= t.size() ? std::string::npos : e + 1 - p, " ");
  }
  return t;
}

std::string trimmed(const std::string& t) {
  const auto b = t.find_first_not_of(" \t\r\n");
  return b == std::string::npos ? "" : t.substr(b, t.find_last_not_of(" \t\r\n") - b + 1);
}

part read_stage(kind k, std::string source, std::string name, const char* what) {
  const std::string clean = code_of(source, what);
  const auto fs = functions(clean);
  RESIDENT_EXPECTS(!fs.empty(), std::string(what) + ": the text defines no function; write one, e.g. "
                                "\"float f(float v) { return 2.0f * v; }\"");
  const function_text* f = &fs.back();
  if (!name.empty()) {
    f = nullptr;
    for (auto& g : fs)
      if (g.name == name) f = &g;
    RESIDENT_EXPECTS(f, std::string(what) + ": the text defines no function named '" + name + "'");
  }
  part p;
  p.what = k;
  p.source = std::move(source);
  p.name = f->name;
  const std::string result = without_attributes(f->result);
  // Messages quote the text as written (the parse reads it with literals blanked).
  const std::string shown = trimmed(p.source.substr(f->result_at, f->result.size()));
  RESIDENT_EXPECTS(by_value(result) && result.find('&') == std::string::npos,
                   std::string(what) + ": the return type of " + f->name +
                       " is a pointer or a reference; a stage returns its value by value");
  RESIDENT_EXPECTS(element_named(words(result), &p.result),
                   std::string(what) + ": cannot read the return type '" + shown + "' of " + f->name +
                       "; write one of float, double, int, unsigned, long long, unsigned long long (or the "
                       "<cstdint> names)");
  for (std::string prm : split_params(without_attributes(f->params))) {
    if (auto eq = prm.find('='); eq != std::string::npos) prm.resize(eq);
    prm = trimmed(prm);
    RESIDENT_EXPECTS(by_value(prm), std::string(what) + ": parameter '" + prm + "' of " + f->name +
                                        " is a pointer, an array or a reference to non-const; a stage takes its "
                                        "values by value (or by const&)");
    auto w = words(prm);
    if (w.size() > 1 && !is_type_word(w.back()) && w.back() != "const") w.pop_back();  // the parameter's name
    element e{};
    RESIDENT_EXPECTS(element_named(w, &e), std::string(what) + ": cannot read the type of parameter '" + prm +
                                               "' of " + f->name + "; write one of float, double, int, unsigned, "
                                               "long long, unsigned long long");
    p.params.push_back(e);
  }
  return p;
}

bool is_generator(kind k) { return k == kind::uniform || k == kind::normal; }
bool is_reduction(kind k) { return k == kind::sum || k == kind::min || k == kind::max || k == kind::reduce; }

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

// A stage's #include lines outside any #if, moved before its namespace (a header included inside a
// namespace does not compile), each at its own line number; blank lines keep the others' numbers.
std::pair<std::string, std::string> hoist_includes(const std::string& source, const std::string& label) {
  std::istringstream in(source);
  std::string line, includes, body;
  int number = 0, conditional = 0;
  while (std::getline(in, line)) {
    ++number;
    std::size_t i = line.find_first_not_of(" \t");
    const bool directive = i != std::string::npos && line[i] == '#';
    if (directive) i = line.find_first_not_of(" \t", i + 1);
    const auto is = [&](const char* w) { return directive && i != std::string::npos && line.compare(i, std::strlen(w), w) == 0; };
    if (is("if")) ++conditional;
    if (is("endif")) --conditional;
    if (is("include") && conditional == 0) {
      includes += "#line " + std::to_string(number) + " \"" + label + "\"\n" + line + "\n";
      body += "\n";
    } else {
      body += line + "\n";
    }
  }
  if (includes.empty()) return {"", source};
  return {includes, body};
}

}  // namespace

std::string generate(const std::vector<part>& parts, const signature& sig, flavor fl) {
  const bool cuda = fl == flavor::cuda;
  const part* gen = !parts.empty() && is_generator(parts.front().what) ? &parts.front() : nullptr;
  const part* red = !parts.empty() && is_reduction(parts.back().what) ? &parts.back() : nullptr;
  RESIDENT_EXPECTS(sig.reduces == (red != nullptr),
                   red ? "jit: the chain ends in a reduction; call result<T>(...) to get its value"
                       : "jit: the chain has no reduction; end it with | jit::sum() (or min, max, reduce) to call "
                         "result<T>, or call it with an output array");
  RESIDENT_EXPECTS(!gen || sig.in.empty(), "jit: the chain starts with a generator, so it reads no array; "
                                            "call it with the output alone");
  RESIDENT_EXPECTS(gen || !sig.in.empty(), "jit: the chain reads no array and has no generator source");
  RESIDENT_EXPECTS(sig.in.size() <= std::size_t(max_inputs), "jit: at most 8 arrays zipped");

  // The values flowing between stages, checked stage by stage before anything compiles.
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
  const element value = v[0];
  if (red) {
    if (red->what == kind::reduce &&
        (red->params != std::vector<element>{value, value} || red->result != value))
      RESIDENT_FAIL("jit: the reduction operator " + red->name + " takes (" + types_text(red->params) +
                    ") and returns " + type_name(red->result) + "; the chain's values are " + type_name(value) +
                    ", so it must take (" + type_name(value) + ", " + type_name(value) + ") and return " +
                    type_name(value));
    if (red->what == kind::reduce) check_init(*red, value);
    RESIDENT_EXPECTS(sig.out == value, std::string("jit: the chain reduces ") + type_name(value) +
                                           " values; ask for result<" + type_name(value) + "> (not " +
                                           type_name(sig.out) + ")");
  } else {
    RESIDENT_EXPECTS(sig.out == value, std::string("jit: the chain makes ") + type_name(value) +
                                           " values but the output holds " + type_name(sig.out) +
                                           "; add a stage converting them, or write into a " +
                                           type_name(value) + " array");
  }

  const kernel_policy pol = policy();
  std::string s = cuda ? cuda_prelude : host_prelude;
  s += "#define RS_BLOCK " + std::to_string(pol.block) + "\n#define RS_UNROLL " + std::to_string(pol.unroll) +
       "\n#define RS_TILE " + std::to_string(pol.map_tile) + "\n";
  if (gen) {
    s += definitions_of(philox_text);
    s += definitions_of(normal_math_text);
    s += generator_code(*gen);
  }
  // The user's stages, each in its own namespace, their lines numbered as in their own text.
  index = 0;
  for (const part& p : parts) {
    if ((p.what == kind::map || p.what == kind::reduce) && p.source.empty()) {  // external: compiled elsewhere
      const std::string k = std::to_string(&p - parts.data());
      ++index;
      RESIDENT_EXPECTS(&p - parts.data() < 16, "jit: an external stage must be among a chain's first 16 parts");
      if (p.what == kind::reduce) --index;
      RESIDENT_EXPECTS(!cuda || !p.ltoir.empty(), "jit: stage " + std::to_string(index) + " (" + p.name +
                                                      ") was given no LTO-IR, so it cannot run on a GPU");
      RESIDENT_EXPECTS(cuda || p.host_function, "jit: stage " + std::to_string(index) + " (" + p.name +
                                                    ") was given no host function, so it cannot run on the CPU");
      std::string prm;
      for (std::size_t i = 0; i < p.params.size(); ++i) prm += (i ? ", " : "") + std::string(type_name(p.params[i]));
      if (cuda)
        s += "// stage " + std::to_string(index) + ": LTO-IR " + hash_hex(p.ltoir) + "\nextern \"C\" __device__ " +
             type_name(p.result) + " " + p.name + "(" + prm + ");\n";
      else
        s += "typedef " + std::string(type_name(p.result)) + " (*rs_fn_" + k + ")(" + prm + ");\n";
      continue;
    }
    if (p.what != kind::map && p.what != kind::reduce) continue;
    const std::string label = p.what == kind::map ? "stage " + std::to_string(++index) : std::string("reduction");
    const auto [includes, body] = hoist_includes(p.source, label);
    s += includes + "namespace rs_" + std::to_string(&p - parts.data()) + " {\n#line 1 \"" + label + "\"\n" + body +
         "\n}\n";
  }
  s += "#line 1 \"resident kernel\"\n";
  const std::string V = type_name(value), O = type_name(sig.out);
  s += "typedef " + V + " rs_value;\n";
  s += "struct rs_args { const void* in[8]; void* out; unsigned long long n, seed, offset; double a, b; "
       "void* partials; unsigned long long* counters; const void* fns[16]; int vec; };\n";
  // The chain: the arrays' (or the generator's) values in, the last stage's value out.
  std::string params, args;
  const std::size_t nin = gen ? 1 : sig.in.size();
  for (std::size_t k = 0; k < nin; ++k) {
    params += (k ? ", " : "") + std::string(type_name(gen ? gen->result : sig.in[k])) + " x" + std::to_string(k);
    args += (k ? ", " : "") + std::string("x") + std::to_string(k);
  }
  s += "RS_FN rs_value rs_chain(const rs_args& a, " + params + ") {\n";
  std::string prev = args;
  int vi = 0;
  for (const part& p : parts) {
    if (p.what != kind::map) continue;
    const std::string k = std::to_string(&p - parts.data());
    const std::string fn = !p.source.empty() ? "rs_" + k + "::" + p.name : cuda ? p.name : "((rs_fn_" + k + ")a.fns[" + k + "])";
    s += "  const auto v" + std::to_string(vi) + " = " + fn + "(" + prev + ");\n";
    prev = "v" + std::to_string(vi++);
  }
  s += "  return " + prev + ";\n}\n";
  if (red) {
    const std::string rk = std::to_string(&parts.back() - parts.data());
    const bool external_op = red->what == kind::reduce && red->source.empty();
    // The host calls an external operator through a pointer each thread takes from its arguments.
    if (external_op && !cuda) s += "static thread_local const void* rs_reduce_fn;\n";
    s += "RS_FN rs_value rs_op(rs_value a, rs_value b) { ";
    if (external_op) s += cuda ? "return " + red->name + "(a, b); }\n" : "return ((rs_fn_" + rk + ")rs_reduce_fn)(a, b); }\n";
    else if (red->what == kind::reduce) s += "return rs_" + rk + "::" + red->name + "(a, b); }\n";
    else s += builtin_op(red->what) + " }\n";
    s += "RS_FN rs_value rs_init(double a) { return " +
         (red->what == kind::reduce ? std::string("rs_value(a)") : "rs_value(" + builtin_init(red->what, value) + ")") +
         "; }\n";
    s += "struct rs_maybe { rs_value value; int valid; };\n"
         "RS_FN void rs_fold(rs_maybe& m, rs_value v) { m.value = m.valid ? rs_op(m.value, v) : v; m.valid = 1; }\n"
         "RS_FN rs_maybe rs_combine(rs_maybe a, rs_maybe b) {\n"
         "  if (!a.valid) return b;\n  if (!b.valid) return a;\n  rs_maybe r; r.value = rs_op(a.value, b.value); r.valid = 1; return r;\n}\n";
  }
  // What each element does: written (map) or folded (reduction).
  // The host folds into 16 independent lanes (as the compiled CPU reductions do), then the lanes
  // in order: a float sum keeps its accuracy over long pieces.
  const std::string use = !red ? "out[i] = (" : cuda ? "rs_fold(acc, " : "rs_fold(lanes[i & 15], ";
  std::string loads, call;
  for (std::size_t k = 0; k < nin && !gen; ++k) {
    const std::string T = type_name(sig.in[k]);
    loads += "  const " + T + "* in" + std::to_string(k) + " = (const " + T + "*)a.in[" + std::to_string(k) + "];\n";
    call += (k ? ", " : "") + std::string("in") + std::to_string(k) + "[i]";
  }
  if (!red) loads += "  " + O + "* out = (" + O + "*)a.out;\n";
  const std::string P = gen ? std::to_string(per_block(gen->result)) : "1";
  const std::string gen_loop =
      "  const unsigned long long lead = a.offset % " + P + ", c0 = a.offset / " + P + ";\n"
      "  const unsigned long long blocks = (lead + n + " + P + " - 1) / " + P + ";\n"
      "  const unsigned long long mask = ~0ull / " + P + ";\n"
      "  const rs_gen::T ga = rs_gen::T(a.a), gb = rs_gen::T(a.b);\n";
  const std::string gen_body =
      "    const resident::random::words4 w = resident::random::philox_block(a.seed, (c0 + b) & mask);\n"
      "#pragma unroll\n"
      "    for (int l = 0; l < " + P + "; ++l) {\n"
      "      const unsigned long long i = b * " + P + " + l - lead;  // wraps above n for a lane before 0\n"
      "      if (i < n) " + use + "rs_chain(a, rs_gen::value(w, l, ga, gb)));\n"
      "    }\n";

  if (cuda) {
    // Vector loads: every array's elements the same size, 16-byte vectors of V of them.
    std::size_t esize = size_of(gen ? gen->result : sig.in[0]);
    bool same = true;
    for (element e : sig.in) same = same && size_of(e) == esize;
    if (!red) same = same && size_of(sig.out) == esize;
    const std::string Vn = std::to_string(16 / esize);
    s += "template <class T> struct __align__(16) rs_vec { T v[" + Vn + "]; };\n"
         // One 16-byte store (nvcc splits a store of the struct into one per element).
         "template <class T> RS_FN void rs_store(rs_vec<T>* p, const rs_vec<T>& o) {\n"
         "  union { rs_vec<T> v; unsigned w[4]; } u;\n  u.v = o;\n"
         "  asm volatile(\"st.global.v4.b32 [%0], {%1, %2, %3, %4};\" :: \"l\"(p), \"r\"(u.w[0]), \"r\"(u.w[1]), "
         "\"r\"(u.w[2]), \"r\"(u.w[3]) : \"memory\");\n}\n";
    if (same && !gen) {
      // U vectors j0, j0 + step, ... (those below nv), all loads issued before the first use.
      std::string vload, vcall, decl;
      for (std::size_t k = 0; k < nin; ++k) {
        const std::string T = type_name(sig.in[k]), ks = std::to_string(k);
        decl += "  rs_vec<" + T + "> r" + ks + "[U];\n";
        vload += "      r" + ks + "[u] = ((const rs_vec<" + T + ">*)in" + ks + ")[j];\n";
        vcall += (k ? ", " : "") + std::string("r") + ks + "[u].v[l]";
      }
      s += "template <int U>\nRS_FN void rs_vectors(const rs_args& a, unsigned long long j0, unsigned long long step, "
           "unsigned long long nv" + std::string(red ? ", rs_maybe& acc" : "") + ") {\n" + loads + decl +
           "#pragma unroll\n"
           "  for (int u = 0; u < U; ++u) {\n"
           "    const unsigned long long j = j0 + u * step;\n"
           "    if (j < nv) {\n" + vload + "    }\n  }\n"
           "#pragma unroll\n"
           "  for (int u = 0; u < U; ++u) {\n"
           "    const unsigned long long j = j0 + u * step;\n"
           "    if (j < nv) {\n";
      if (red)
        s += "#pragma unroll\n      for (int l = 0; l < " + Vn + "; ++l) rs_fold(acc, rs_chain(a, " + vcall + "));\n";
      else
        s += "      rs_vec<" + O + "> o;\n"
             "#pragma unroll\n      for (int l = 0; l < " + Vn + "; ++l) o.v[l] = rs_chain(a, " + vcall + ");\n"
             "      rs_store((rs_vec<" + O + ">*)out + j, o);\n";
      s += "    }\n  }\n}\n";
    }
    s += "extern \"C\" __global__ void __launch_bounds__(RS_BLOCK) rs_kernel(rs_args a) {\n"
         "  rs_dependent_launch_prologue();\n"
         "  const unsigned long long n = a.n;\n"
         "  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n";
    s += loads;
    if (red) s += "  rs_maybe acc; acc.value = rs_value(); acc.valid = 0;\n";
    if (gen) {
      s += gen_loop + "  for (unsigned long long b = tid; b < blocks; b += stride) {\n" + gen_body + "  }\n";
    } else {
      s += "  unsigned long long done = 0;\n";
      const std::string acc_arg = red ? ", acc" : "";
      if (same) {
        s += "  const unsigned long long nv = n / " + Vn + ";\n";
        if (!red)
          // Maps: tiles of RS_TILE * blockDim.x vectors, one per block of a flat grid, each thread
          // taking RS_TILE of them blockDim.x apart (coalesced loads). Only
          // this vector path: a striding one beside it (RS_UNROLL vectors in flight) would raise the
          // whole kernel's register count and cut its occupancy below the compiled map's.
          // The grid has a block per tile (run_cuda): no loop, no test beyond rs_vectors' own, and the
          // scalar tail is the last block's: a map is issue-bound enough that a thread's fixed
          // instructions show.
          s += "  if (a.vec) {\n"
               "    const unsigned long long tile = (unsigned long long)blockDim.x * RS_TILE;\n"
               "    rs_vectors<RS_TILE>(a, blockIdx.x * tile + threadIdx.x, blockDim.x, nv);\n"
               "    if (blockIdx.x != gridDim.x - 1) return;\n"
               "    for (unsigned long long i = nv * " + Vn + " + threadIdx.x; i < n; i += blockDim.x) " + use +
               "rs_chain(a, " + call + "));\n"
               "    return;\n  }\n";
        else
          // Reductions: one wave striding, RS_UNROLL vectors in flight per thread.
          s += "  if (a.vec) {\n"
               "    for (unsigned long long base = tid; base < nv; base += RS_UNROLL * stride)\n"
               "      rs_vectors<RS_UNROLL>(a, base, stride, nv" + acc_arg + ");\n"
               "    done = nv * " + Vn + ";\n  }\n";
      }
      s += "  for (unsigned long long i = done + tid; i < n; i += stride) " + use + "rs_chain(a, " + call + "));\n";
    }
    if (red) {
      // Each block folds its threads' values in shared memory (a fixed tree, so the operator's
      // order is the same every run), the last block to finish folds the blocks' partials (in a
      // fixed order too, for a given grid).
      s += R"(  __shared__ rs_maybe shared[RS_BLOCK];
  __shared__ bool last;
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int w = RS_BLOCK / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) shared[threadIdx.x] = rs_combine(shared[threadIdx.x], shared[threadIdx.x + w]);
    __syncthreads();
  }
  rs_maybe* partials = (rs_maybe*)a.partials;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = shared[0];
    __threadfence();
    last = atomicAdd(a.counters + 1, 1ull) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Every thread of the last block folds the partials of blocks t, t + RS_BLOCK, ... (written by other
  // blocks: volatile), then the same tree as above: a fixed order for a given grid, and a few loads a
  // thread rather than one thread loading them all.
  rs_maybe m; m.value = rs_value(); m.valid = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += RS_BLOCK) {
    const volatile rs_maybe* p = partials + b;
    rs_maybe q; q.valid = p->valid; q.value = p->value;
    m = rs_combine(m, q);
  }
  shared[threadIdx.x] = m;
  __syncthreads();
  for (int w = RS_BLOCK / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) shared[threadIdx.x] = rs_combine(shared[threadIdx.x], shared[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    rs_value r = rs_init(a.a);
    if (shared[0].valid) r = rs_op(r, shared[0].value);
    *(rs_value*)a.out = r;
    a.counters[1] = 0;
  }
}
)";
    } else {
      s += "}\n";
    }
  } else {
    // Host flavor: a range of elements per call, the library's CPU loop spreading the ranges.
    if (red)
      s += "extern \"C\" void rs_range(const rs_args& a, unsigned long long first, unsigned long long last, "
           "rs_maybe* partial) {\n" + std::string(red->what == kind::reduce && red->source.empty() ?
           "  rs_reduce_fn = a.fns[" + std::to_string(&parts.back() - parts.data()) + "];\n" : "") +
           "  rs_maybe lanes[16];\n"
           "  for (int l = 0; l < 16; ++l) { lanes[l].value = rs_value(); lanes[l].valid = 0; }\n";
    else
      s += "extern \"C\" void rs_range(const rs_args& a, unsigned long long first, unsigned long long last, void*) {\n";
    s += loads;
    if (gen) {
      s += "  const unsigned long long n = last;\n" + gen_loop +
           "  for (unsigned long long b = (first + lead) / " + P + "; b < (last + lead + " + P + " - 1) / " + P +
           "; ++b) {\n" + gen_body.substr(0, gen_body.find("      if (i < n)")) +
           "      if (i >= first && i < n) " + use + "rs_chain(a, rs_gen::value(w, l, ga, gb)));\n    }\n  }\n";
    } else {
      // Loops the host compiler vectorizes, the stages' math calls included (launch/detail/cpu_simd.hpp):
      // a map element by element; a reduction makes 256 values at a time, then folds them into 16
      // lanes by position (as the compiled CPU reductions do, fused_cpu.hpp).
      auto call_at = [&](const std::string& at) {
        std::string c;
        for (std::size_t k = 0; k < nin; ++k) c += (k ? ", in" : "in") + std::to_string(k) + "[" + at + "]";
        return c;
      };
      s += "  unsigned long long i = first;\n";
      if (red)
        s += "  if (last - first >= 32) {\n"
             "    rs_value lane[16], buf[256];\n"
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
        s += "#pragma GCC ivdep\n";
      s += "  for (; i < last; ++i) " + use + "rs_chain(a, " + call + "));\n";
    }
    if (red) s += "  rs_maybe acc = lanes[0];\n  for (int l = 1; l < 16; ++l) acc = rs_combine(acc, lanes[l]);\n  *partial = acc;\n";
    s += "}\n";
    if (red)
      s += "extern \"C\" void rs_finish(const rs_args& a, const rs_maybe* partials, unsigned long long count, "
           "double init, void* out) {\n" +
           std::string(red->what == kind::reduce && red->source.empty() ?
                       "  rs_reduce_fn = a.fns[" + std::to_string(&parts.back() - parts.data()) + "];\n" : "") +
           "  rs_value r = rs_init(init);\n"
           "  for (unsigned long long p = 0; p < count; ++p) if (partials[p].valid) r = rs_op(r, partials[p].value);\n"
           "  *(rs_value*)out = r;\n}\n"
           "extern \"C\" unsigned long long rs_partial_bytes() { return sizeof(rs_maybe); }\n";
  }
  return s;
}

}  // namespace detail

// --- the public API ---------------------------------------------------------------------------------

using detail::kind;

namespace detail {
std::shared_ptr<memo> new_memo() { return std::make_shared<memo>(); }

namespace {
// The chain's kernel slot for these types on this target (a CUDA architecture, or the host).
std::shared_ptr<loaded>* memo_slot(memo& m, const signature& sig, device d, std::unique_lock<std::mutex>& lock) {
  std::string key;
  for (element e : sig.in) key += char('a' + int(e));
  key += char('A' + int(sig.out));
  key += sig.reduces ? 'r' : 'w';
  if (d.is_cuda()) {
    const auto p = resident::properties(d);
    key += std::to_string(p.cc_major * 10 + p.cc_minor);
  }
  lock = std::unique_lock<std::mutex>(m.m);
  for (auto& e : m.kernels)
    if (e.first == key) return &e.second;
  m.kernels.emplace_back(key, nullptr);
  return &m.kernels.back().second;
}
}  // namespace
}  // namespace detail

pipeline operator|(pipeline a, const pipeline& b) {
  a.memo_ = detail::new_memo();  // other parts: other kernels
  for (const auto& p : b.parts_) {
    if (detail::is_generator(p.what))
      RESIDENT_FAIL("jit: a generator (uniform, normal) starts a chain; it cannot follow " + a.name());
    if (!a.parts_.empty() && detail::is_reduction(a.parts_.back().what))
      RESIDENT_FAIL("jit: " + a.name() + " ends in a reduction; nothing can follow it");
    a.parts_.push_back(p);
  }
  return a;
}

std::string pipeline::name() const {
  if (parts_.empty()) return "identity";
  std::string s;
  for (const auto& p : parts_) {
    std::string n;
    switch (p.what) {
      case kind::map: n = "map " + p.name; break;
      case kind::uniform: n = "uniform"; break;
      case kind::normal: n = "normal"; break;
      case kind::sum: n = "sum"; break;
      case kind::min: n = "min"; break;
      case kind::max: n = "max"; break;
      case kind::reduce: n = "reduce " + p.name; break;
    }
    s += (s.empty() ? "" : " | ") + n;
  }
  return s;
}

bool pipeline::generates() const noexcept { return !parts_.empty() && detail::is_generator(parts_.front().what); }

std::string pipeline::kernel_source(const std::vector<element>& in, element out, device d) const {
  detail::signature sig{in, out, !parts_.empty() && detail::is_reduction(parts_.back().what)};
  return detail::generate(parts_, sig, d.is_cuda() ? detail::flavor::cuda : detail::flavor::host);
}

namespace {

detail::kernel_args args_for(const std::vector<detail::part>& parts, const inputs& in) {
  detail::kernel_args a{};
  for (std::size_t k = 0; k < in.arrays.size() && k < std::size_t(detail::max_inputs); ++k) a.in[k] = in.arrays[k].data;
  if (!parts.empty() && detail::is_generator(parts.front().what)) {
    a.seed = parts.front().seed;
    a.offset = parts.front().offset;
    a.a = parts.front().a;
    a.b = parts.front().b;
  }
  if (!parts.empty() && parts.back().what == kind::reduce) a.a = parts.back().a;
  for (std::size_t k = 0; k < parts.size() && k < 16; ++k) a.fns[k] = parts[k].host_function;
  return a;
}

// The checks every call makes: sizes, devices, and the stream the call runs on.
void check_inputs(const inputs& in, std::size_t n, device d, const char* what) {
  RESIDENT_EXPECTS(in.arrays.size() <= std::size_t(detail::max_inputs), "jit: at most 8 arrays zipped");
  for (std::size_t k = 0; k < in.arrays.size(); ++k) {
    const operand& o = in.arrays[k];
    if (!(o.stream.device() == d))
      RESIDENT_FAIL(std::string(what) + ": input " + std::to_string(k) + " is on " + o.stream.device().name() +
                    ", the call on " + d.name() + "; copy it over first", device_mismatch);
    if (o.size != n)
      RESIDENT_FAIL(std::string(what) + ": input " + std::to_string(k) + " has " + std::to_string(o.size) +
                    " elements, the call " + std::to_string(n), shape_mismatch);
  }
}

// An output partly over an input would read elements the same call has already written (the order
// of the pieces is not fixed): refused. Exactly in place, element for element, is allowed.
void check_overlap(const inputs& in, const operand& out, const char* what) {
  const auto o = reinterpret_cast<std::uintptr_t>(out.data);
  const std::size_t ob = out.size * detail::size_of(out.type);
  for (std::size_t k = 0; k < in.arrays.size(); ++k) {
    const operand& x = in.arrays[k];
    const auto i = reinterpret_cast<std::uintptr_t>(x.data);
    const std::size_t ib = x.size * detail::size_of(x.type);
    if (ob == 0 || ib == 0 || i >= o + ob || o >= i + ib) continue;
    if (i == o && detail::size_of(x.type) == detail::size_of(out.type)) continue;
    RESIDENT_FAIL(std::string(what) + ": the output overlaps input " + std::to_string(k) +
                  " without being the same elements; write into separate memory or exactly in place");
  }
}

std::vector<element> types_of(const inputs& in) {
  std::vector<element> t;
  for (const auto& o : in.arrays) t.push_back(o.type);
  return t;
}

}  // namespace

std::shared_ptr<detail::loaded> pipeline::memoized(const detail::signature& sig, device d) const {
  if (!memo_) return nullptr;  // a moved-from chain: its parts are gone too
  std::unique_lock<std::mutex> lock;
  auto k = *detail::memo_slot(*memo_, sig, d, lock);
  if (k) detail::count_memory_hit();
  return k;
}

void pipeline::memoize(const detail::signature& sig, device d, std::shared_ptr<detail::loaded> k) const {
  if (!memo_) return;
  std::unique_lock<std::mutex> lock;
  *detail::memo_slot(*memo_, sig, d, lock) = std::move(k);
}

void pipeline::run(const inputs& in, const operand& out) const {
  const device d = out.stream.device();
  check_inputs(in, out.size, d, "jit pipeline");
  check_overlap(in, out, "jit pipeline");
  detail::signature sig{types_of(in), out.type, false};
  detail::kernel_args a = args_for(parts_, in);
  a.out = const_cast<void*>(out.data);
  a.n = out.size;
  for (const auto& o : in.arrays)
    if (o.stream.native() != out.stream.native()) out.stream.wait_for(o.stream);
  std::shared_ptr<detail::loaded> kernel = memoized(sig, d);
  const bool had = kernel != nullptr;
  if (d.is_cuda()) detail::run_cuda(parts_, sig, a, out.size, out.stream, nullptr, kernel);
  else detail::run_host(parts_, sig, a, out.size, kernel);
  if (!had) memoize(sig, d, kernel);
}

void pipeline::reduce_into(const inputs& in, std::size_t n, device d, element r, void* result,
                           detail::result_memory where) const {
  if (!in.arrays.empty()) {
    d = in.arrays[0].stream.device();
    n = in.arrays[0].size;
  }
  check_inputs(in, n, d, "jit reduction");
  detail::signature sig{types_of(in), r, true};
  detail::kernel_args a = args_for(parts_, in);
  a.n = n;
  const stream_ref s = in.arrays.empty() ? default_stream(d) : in.arrays[0].stream;
  for (const auto& o : in.arrays)
    if (o.stream.native() != s.native()) s.wait_for(o.stream);
  std::shared_ptr<detail::loaded> kernel = memoized(sig, d);
  const bool had = kernel != nullptr;
  if (d.is_cuda()) {
    detail::run_cuda(parts_, sig, a, n, s, result, kernel, where);
  } else {
    a.out = result;
    detail::run_host(parts_, sig, a, n, kernel);
  }
  if (!had) memoize(sig, d, kernel);
}

pipeline map(std::string source, std::string name) {
  return pipeline(detail::read_stage(kind::map, std::move(source), std::move(name), "jit::map"));
}

pipeline external(std::string name, std::vector<element> params, element result, std::string ltoir,
                  const void* host_function) {
  RESIDENT_EXPECTS(!name.empty(), "jit::external: give the stage's function name");
  RESIDENT_EXPECTS(!params.empty() && params.size() <= std::size_t(detail::max_inputs),
                   "jit::external: " + name + " takes " + std::to_string(params.size()) + " parameters; 1 to 8 are allowed");
  detail::part p;
  p.what = kind::map;
  p.name = std::move(name);
  p.params = std::move(params);
  p.result = result;
  p.ltoir = std::move(ltoir);
  p.host_function = host_function;
  return pipeline(std::move(p));
}

pipeline external_reduce(std::string name, element type, double init, std::string ltoir,
                         const void* host_function) {
  RESIDENT_EXPECTS(!name.empty(), "jit::external_reduce: give the operator's function name");
  detail::part p;
  p.what = kind::reduce;
  p.name = std::move(name);
  p.params = {type, type};
  p.result = type;
  p.a = init;
  p.ltoir = std::move(ltoir);
  p.host_function = host_function;
  return pipeline(std::move(p));
}

pipeline sum() { return pipeline(detail::part{kind::sum, {}, "sum", {}, element::f32, 0, 0, 0, 0, {}, nullptr}); }
pipeline min() { return pipeline(detail::part{kind::min, {}, "min", {}, element::f32, 0, 0, 0, 0, {}, nullptr}); }
pipeline max() { return pipeline(detail::part{kind::max, {}, "max", {}, element::f32, 0, 0, 0, 0, {}, nullptr}); }

pipeline reduce(std::string source, double init, std::string name) {
  detail::part p = detail::read_stage(kind::reduce, std::move(source), std::move(name), "jit::reduce");
  RESIDENT_EXPECTS(p.params.size() == 2, "jit::reduce: the operator " + p.name + " takes " +
                                             std::to_string(p.params.size()) + " values; it combines two");
  p.a = init;
  return pipeline(std::move(p));
}

namespace detail {
pipeline generator(part::kind k, element t, std::uint64_t seed, std::uint64_t offset, double a, double b) {
  const double top = t == element::f32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max();
  if (k == kind::uniform) {
    RESIDENT_EXPECTS(std::isfinite(a) && std::isfinite(b) && std::abs(a) <= top && std::abs(b) <= top,
                     "jit::uniform: the range [low, high) needs finite bounds; use the largest finite values instead");
    RESIDENT_EXPECTS(a < b, "jit::uniform: low must be below high; the range is [low, high), so swap them or widen it");
    // Bounds that differ as given (Python passes doubles) but round to one float hold no float value.
    if (t == element::f32 && !(float(a) < float(b))) {
      char given[96], as_float[40];
      std::snprintf(given, sizeof given, "low %.17g and high %.17g", a, b);
      std::snprintf(as_float, sizeof as_float, "%.9g", double(float(a)));
      RESIDENT_FAIL(std::string("jit::uniform: ") + given + " are both " + as_float +
                    " as float, the element type, so [low, high) holds no value; give bounds that differ in it "
                    "(or make double values)");
    }
  } else {
    RESIDENT_EXPECTS(std::isfinite(a) && std::isfinite(b), "jit::normal: mean and standard deviation must be finite");
    RESIDENT_EXPECTS(b >= 0, "jit::normal: the standard deviation must be >= 0; pass its absolute value");
    const double z_max = t == element::f32 ? 6.0 : 9.0;
    RESIDENT_EXPECTS(std::abs(a) + z_max * b <= top, "jit::normal: mean and sd give values beyond the largest "
                                                     "finite value; scale the values after generating them");
  }
  part p{k, {}, k == kind::uniform ? "uniform" : "normal", {}, t, seed, offset, a, b, {}, nullptr};
  return pipeline(std::move(p));
}
}  // namespace detail

}  // namespace resident::jit
