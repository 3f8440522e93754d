#pragma once
// Internal to src/jit: a user's stage text placed in the one kernel's text (generate.cpp): its
// preprocessing directives read as the preprocessor reads them, its #includes moved before its
// namespace, and its macros ended with it.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace resident::jit::detail {

/// A preprocessing directive of a stage's text, found as the preprocessor finds one: lines spliced by
/// a backslash (blanks after it allowed), comments read as a space, `%:` as `#`; never one inside a
/// comment, a string or a raw string.
struct directive {
  std::string name;         ///< "define", "undef", "include", "endif", ...
  std::string argument;     ///< the identifier after the name, if one follows
  std::size_t first, last;  ///< its first and last physical lines, counted from 1
};
std::vector<directive> directives_of(const std::string& text);

/// The stage's #include lines outside any #if, moved before its namespace (a header included inside
/// a namespace does not compile), each at its own line number; blank lines keep the others' numbers.
/// Returns {includes, body}.
std::pair<std::string, std::string> hoist_includes(const std::string& source, const std::string& label);

/// The text around a stage's body that ends its macros with it. Returns {before, body, after}.
struct ended_macros {
  std::string before, body, after;
};
ended_macros macros_ended(const std::string& body, std::size_t stage, const std::string& label);

}  // namespace resident::jit::detail
