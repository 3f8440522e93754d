#include "resident/config.hpp"

namespace resident {

const char* version() noexcept { return "0.1.0"; }

}  // namespace resident
