#include "resident/config.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace resident {

#define RESIDENT_STR2(x) #x
#define RESIDENT_STR(x) RESIDENT_STR2(x)
// The version's one home is config.hpp's RESIDENT_VERSION_* (CMake and pyproject.toml read them too).
const char* version() noexcept {
  return RESIDENT_STR(RESIDENT_VERSION_MAJOR) "." RESIDENT_STR(RESIDENT_VERSION_MINOR) "." RESIDENT_STR(
      RESIDENT_VERSION_PATCH);
}
#undef RESIDENT_STR
#undef RESIDENT_STR2

bool detail::environment_switch(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::string s(v);
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "0" || s == "off" || s == "false" || s == "no") return false;
  if (s == "1" || s == "on" || s == "true" || s == "yes") return true;
  std::fprintf(stderr, "resident: %s is '%s': use 1 or 0 (also on/off, true/false, yes/no); taking %d\n", name, v,
               fallback ? 1 : 0);
  return fallback;
}

}  // namespace resident
