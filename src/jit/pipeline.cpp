// Run-time chains: reading the stages' signatures, building chains, and running them on the backend
// of the arrays' device (the kernel's text comes from generate.cpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "jit/backend.hpp"
#include "jit/generate.hpp"
#include "jit/stage_text.hpp"

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

namespace {

using kind = part::kind;

// --- reading a function's signature --------------------------------------------------------------

// The text as the compiler's parser sees its declarations: comments, preprocessor lines and the
// contents of string and character literals blanked (newlines kept), so that a brace or "//" inside a
// literal or a macro is not read as code. @throws invalid_argument for text that cannot compile whole
// (an unterminated comment or literal, unbalanced brackets): told before compiling, and in the stage's
// own terms, rather than as a compiler's complaint about the kernel around it.
// The bracket an alternative token at s[i] spells, or 0. "<::" is '<' then "::" unless ':' or '>'
// follows (C++11 [lex.pptoken]), so a template argument list that starts with "::" stays one.
char digraph_at(const std::string& s, std::size_t i) {
  if (i + 1 >= s.size()) return 0;
  const char a = s[i], b = s[i + 1];
  if (a == '<' && b == '%') return '{';
  if (a == '%' && b == '>') return '}';
  if (a == ':' && b == '>') return ']';
  if (a == '<' && b == ':') {
    const bool template_scope = i + 2 < s.size() && s[i + 2] == ':' && !(i + 3 < s.size() && (s[i + 3] == ':' || s[i + 3] == '>'));
    return template_scope ? 0 : '[';
  }
  return 0;
}

std::string code_of(const std::string& s, const char* what) {
  std::string out(s.size(), ' ');
  auto line_of = [&](std::size_t i) { return std::to_string(1 + std::count(s.begin(), s.begin() + std::ptrdiff_t(i), '\n')); };
  std::string open;  // the brackets open at this point
  std::vector<std::size_t> open_at;
  const std::vector<directive> ds = directives_of(s);  // found as the preprocessor finds them
  auto d = ds.begin();
  std::size_t line = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 0 || s[i - 1] == '\n') {
      while (d != ds.end() && d->first < line) ++d;
      if (d != ds.end() && d->first == line) {  // a directive, with its continuation lines, blanked
        for (; i < s.size() && line <= d->last; ++i)
          if (s[i] == '\n') out[i] = '\n', ++line;
        if (i-- == s.size()) break;
        continue;
      }
    }
    const char c = s[i];
    if (c == '\n') {
      out[i] = '\n';
      ++line;
      continue;
    }
    if (s.compare(i, 2, "//") == 0) {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const auto e = s.find("*/", i + 2);
      RESIDENT_EXPECTS(e != std::string::npos,
                       std::string(what) + ": the comment opened on line " + line_of(i) + " is not closed with */");
      for (std::size_t k = i; k < e + 2; ++k)
        if (s[k] == '\n') out[k] = '\n', ++line;
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
        if (s[k] == '\n') out[k] = '\n', ++line;
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
      char k = c;  // what the compiler reads here: the alternative tokens <% %> <: :> are brackets
      if (const char d = digraph_at(s, i)) k = d, out[i + 1] = ' ';
      out[i] = k;
      const std::size_t at = i;
      if (k != c) ++i;
      if (k == '{' || k == '(' || k == '[') {
        open += k;
        open_at.push_back(at);
      } else if (k == '}' || k == ')' || k == ']') {
        const char want = k == '}' ? '{' : k == ')' ? '(' : '[';
        RESIDENT_EXPECTS(!open.empty() && open.back() == want,
                         std::string(what) + ": the '" + s.substr(at, k != c ? 2 : 1) + "' on line " + line_of(at) +
                             " closes " +
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

}  // namespace
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
  key += compiler_of(d).target(d);
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
  return detail::generate(parts_, sig, detail::compiler_of(d).text());
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
  detail::compiler_of(d).run(parts_, sig, a, out.size, out.stream, nullptr, kernel, detail::result_memory::host);
  if (!had) memoize(sig, d, kernel);
}

void pipeline::reduce_into(const inputs& in, std::size_t n, device d, element r, void* result,
                           detail::result_memory where) const {
  if (!in.arrays.empty()) {
    d = in.arrays[0].stream.device();
    n = in.arrays[0].size;
  }
  check_inputs(in, n, d, "jit reduction");
  if (in.arrays.empty() && !parts_.empty()) {  // a generator's count, bounded as generate's (sources.hpp)
    const std::size_t bytes = detail::size_of(parts_.front().result);
    const std::size_t most = std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / bytes;
    RESIDENT_EXPECTS(n <= most, "jit reduction: " + std::to_string(n) + " generated values of " + std::to_string(bytes) +
                                    " bytes overflow the byte count (at most " + std::to_string(most) +
                                    " such values); generate them in parts");
  }
  detail::signature sig{types_of(in), r, true};
  detail::kernel_args a = args_for(parts_, in);
  a.n = n;
  const stream_ref s = in.arrays.empty() ? default_stream(d) : in.arrays[0].stream;
  for (const auto& o : in.arrays)
    if (o.stream.native() != s.native()) s.wait_for(o.stream);
  std::shared_ptr<detail::loaded> kernel = memoized(sig, d);
  const bool had = kernel != nullptr;
  detail::compiler_of(d).run(parts_, sig, a, n, s, result, kernel, where);
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
    RESIDENT_EXPECTS(std::isfinite(a) && std::isfinite(b),
                     "jit::uniform: the range [low, high) needs finite bounds; use the largest finite values instead");
    if (!(std::abs(a) <= top && std::abs(b) <= top)) {
      char given[96];
      std::snprintf(given, sizeof given, "low %.17g or high %.17g", a, b);
      RESIDENT_FAIL("jit::uniform: " + std::string(given) + " lies beyond float's range; give bounds within it, "
                    "or make double values");
    }
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
