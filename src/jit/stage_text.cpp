// A user's stage text in the kernel's text: its directives found as the preprocessor finds them, so
// that nothing is inserted into a comment or a raw string, and a spliced or commented directive is
// still seen (see stage_text.hpp).
#include "jit/stage_text.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "resident/error.hpp"

namespace resident::jit::detail {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The directive's name and the identifier after it, from its text (comments already spaces).
directive parsed(const std::string& text, std::size_t first, std::size_t last) {
  directive d{"", "", first, last};
  std::size_t i = 0;
  const auto word = [&] {
    while (i < text.size() && blank(text[i])) ++i;
    const std::size_t from = i;
    while (i < text.size() && ident(text[i])) ++i;
    return text.substr(from, i - from);
  };
  d.name = word();
  d.argument = word();
  return d;
}

}  // namespace

std::vector<directive> directives_of(const std::string& t) {
  enum class in { code, block, line, str, chr, raw } st = in::code;
  std::vector<directive> out;
  std::string dir, close;                    // the directive's text so far; a raw string's end
  bool at_start = true, in_dir = false;      // only blanks and comments since the line began
  std::size_t line = 1, first = 1;
  const std::size_t n = t.size();
  for (std::size_t i = 0; i < n;) {
    const char c = t[i];
    if (st != in::raw && c == '\\') {  // a splice: the next line continues this one
      std::size_t j = i + 1;
      while (j < n && blank(t[j])) ++j;
      if (j < n && t[j] == '\n') {
        ++line;
        i = j + 1;
        continue;
      }
    }
    if (c == '\n') {
      if (st != in::block && st != in::raw) {  // the logical line ends here
        if (in_dir) out.push_back(parsed(dir, first, line));
        in_dir = false;
        at_start = true;
        st = in::code;
      }
      ++line;
      ++i;
      continue;
    }
    switch (st) {
      case in::block:
        if (c == '*' && i + 1 < n && t[i + 1] == '/') st = in::code, i += 2;
        else ++i;
        continue;
      case in::line: ++i; continue;
      case in::str:
      case in::chr:
        if (c == '\\') {
          i += 2;
          continue;
        }
        if (c == (st == in::str ? '"' : '\'')) {
          st = in::code;
          if (in_dir) dir += ' ';
        }
        ++i;
        continue;
      case in::raw:
        if (t.compare(i, close.size(), close) == 0) st = in::code, i += close.size();
        else ++i;
        continue;
      case in::code: break;
    }
    if (c == '/' && i + 1 < n && (t[i + 1] == '*' || t[i + 1] == '/')) {
      st = t[i + 1] == '*' ? in::block : in::line;
      if (in_dir) dir += ' ';
      i += 2;
      continue;
    }
    if (at_start && (c == '#' || (c == '%' && i + 1 < n && t[i + 1] == ':'))) {
      in_dir = true, at_start = false, first = line;
      dir.clear();
      i += c == '#' ? 1 : 2;
      continue;
    }
    if (!blank(c)) at_start = false;
    if (c == '"') {  // a raw string when R (or u8R, uR, UR, LR) is the whole token before it
      std::size_t from = i;
      while (from > 0 && ident(t[from - 1])) --from;
      const std::string prefix = t.substr(from, i - from);
      const std::size_t open = t.find('(', i);
      if ((prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" || prefix == "LR") &&
          open != std::string::npos && open - i <= 17) {
        close = ")" + t.substr(i + 1, open - i - 1) + "\"";
        st = in::raw;
        i = open + 1;
        continue;
      }
      st = in::str;
    } else if (c == '\'' && !(i > 0 && std::isdigit(static_cast<unsigned char>(t[i - 1])))) {  // not 1'000
      st = in::chr;
    }
    if (in_dir) dir += c;
    ++i;
  }
  if (in_dir) out.push_back(parsed(dir, first, line));
  return out;
}

std::pair<std::string, std::string> hoist_includes(const std::string& source, const std::string& label) {
  std::vector<std::size_t> hoisted;  // the lines of #includes outside any #if, each on one line
  int conditional = 0;
  for (const directive& d : directives_of(source)) {
    if (d.name == "if" || d.name == "ifdef" || d.name == "ifndef") ++conditional;
    if (d.name == "endif") --conditional;
    if (d.name == "include" && conditional == 0 && d.first == d.last) hoisted.push_back(d.first);
  }
  if (hoisted.empty()) return {"", source};
  std::istringstream in(source);
  std::string line, includes, body;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    const bool hoist = std::find(hoisted.begin(), hoisted.end(), number) != hoisted.end();
    if (hoist) includes += "#line " + std::to_string(number) + " \"" + label + "\"\n" + line + "\n";
    body += hoist ? "\n" : line + "\n";
  }
  return {includes, body};
}

// Each name the text #defines or #undefs, when no macro of that name came before it, is #undef'd
// after it (a `#define sqrtf(x) (x)` made the built-in operations after it the identity). NVRTC has no
// push_macro / pop_macro to restore one that came before, so an active #define or #undef of such a
// name is an #error at its line (an `#ifndef M_PI` guard or a commented-out line is not active). The
// checks go after the directive's last line, where the text is code again; a #line after each group's
// end keeps the numbering of the user's own text.
ended_macros macros_ended(const std::string& body, std::size_t stage, const std::string& label) {
  ended_macros r;
  const std::string marker = "RS_NEW_MACRO_";
  const std::string prefix = marker + std::to_string(stage) + "_";
  if (body.find(marker) != std::string::npos)  // the markers' names are resident's: a stage's could forge one
    r.body = "#line 1 \"" + label + "\"\n#error \"" + label + " uses the name prefix " + marker +
             ", which resident keeps for itself\"\n";
  std::vector<directive> ds = directives_of(body);
  std::vector<std::string> seen;
  std::istringstream in(body);
  std::string line;
  bool checked = false;  // lines were added: the numbering is set again where a skipped group may end
  auto d = ds.begin();
  if (!r.body.empty()) r.body += "#line 1 \"" + label + "\"\n";
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    r.body += line + "\n";
    for (; d != ds.end() && d->last == number; ++d) {
      const bool ends_group = d->name == "else" || d->name == "elif" || d->name == "endif";
      if ((d->name != "define" && d->name != "undef") || d->argument.empty()) {
        if (checked && ends_group) r.body += "#line " + std::to_string(number + 1) + " \"" + label + "\"\n";
        continue;
      }
      const std::string& x = d->argument;
      const std::string mark = prefix + x;
      if (std::find(seen.begin(), seen.end(), x) == seen.end()) {
        seen.push_back(x);
        r.before += "#ifndef " + x + "\n#define " + mark + "\n#endif\n";
        r.after += "#ifdef " + mark + "\n#undef " + x + "\n#undef " + mark + "\n#endif\n";
      }
      r.body += "#ifndef " + mark + "\n#line " + std::to_string(d->first) + " \"" + label + "\"\n#error \"" + label +
                " #" + d->name + "s " + x +
                ", a macro defined before it, which would change it for the code after the stage: give the "
                "stage's macro a name of its own\"\n#endif\n#line " + std::to_string(number + 1) + " \"" + label +
                "\"\n";
      checked = true;
    }
  }
  return r;
}

}  // namespace resident::jit::detail
