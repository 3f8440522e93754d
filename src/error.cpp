#include "resident/error.hpp"

#include <cstring>

#include "resident/detail/library_check.hpp"

namespace resident::detail {

std::string site(const char* file, int line) {
  // Relative to the source tree: from the last top-level folder of the repository in the path.
  std::string_view f = file;
  for (const char* root : {"/include/", "/src/", "/tools/", "/python/", "/bench/"}) {
    if (auto at = f.rfind(root); at != std::string_view::npos) {
      f = f.substr(at + 1);
      break;
    }
  }
  return " [" + std::string(f) + ":" + std::to_string(line) + "]";
}

void throw_library(const char* library, int code, const std::string& name, const std::string& description,
                   const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed" + site(file, line) + ": " + library + " " + name;
  if (!description.empty() && description != name) msg += " (" + description + ")";
  throw library_error(library, code, name, msg);
}

}  // namespace resident::detail
