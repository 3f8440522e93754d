#include "resident/config.hpp"

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

}  // namespace resident
