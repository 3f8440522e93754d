#pragma once
/// @file source_location.hpp
/// resident::source_location: resident::source_location, or where the standard library lacks it (clang
/// before 15 with libstdc++) the same interface from the compilers' builtins, so the headers build
/// with every compiler resident supports.

#include <version>

#if defined(__cpp_lib_source_location)
#include <source_location>

namespace resident {
/// The caller's file, line, column and function (std::source_location).
using source_location = std::source_location;
}  // namespace resident

#else

namespace resident {
/// The caller's file, line, column and function, as resident::source_location gives them.
class source_location {
 public:
  /// The location of the call's site, when used as a default argument.
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE(),
                                           unsigned column = __builtin_COLUMN()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    s.column_ = column;
    return s;
  }
  constexpr source_location() noexcept = default;
  /// The file's name.
  constexpr const char* file_name() const noexcept { return file_; }
  /// The function's name.
  constexpr const char* function_name() const noexcept { return function_; }
  /// The line, from 1.
  constexpr unsigned line() const noexcept { return line_; }
  /// The column, from 1 (0: unknown).
  constexpr unsigned column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
  unsigned column_ = 0;
};
}  // namespace resident

#endif
