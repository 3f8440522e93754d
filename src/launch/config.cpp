#include "resident/launch/config.hpp"

#include <atomic>
#include <cstdlib>

#include "resident/error.hpp"

namespace resident {

namespace {
std::atomic<bool>& dependent_launch_switch() {
  static std::atomic<bool> on{detail::environment_switch("RESIDENT_PDL", true)};
  return on;
}
}  // namespace

bool programmatic_launch() noexcept { return dependent_launch_switch().load(std::memory_order_relaxed); }
void set_programmatic_launch(bool on) noexcept { dependent_launch_switch().store(on, std::memory_order_relaxed); }

std::string dims::str() const {
  return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + ")";
}

std::string launch_config::str() const {
  return "[grid " + grid.str() + ", block " + block.str() + ", shared " + std::to_string(shared_bytes) + " B]";
}

void validate(const launch_config& cfg, device d) {
  const device_properties p = properties(d);
  auto fail = [&](const std::string& what) {
    RESIDENT_FAIL("invalid launch configuration " + cfg.str() + " on " + d.name() + ": " + what, invalid_launch);
  };
  const char* axis[] = {"x", "y", "z"};
  unsigned g[] = {cfg.grid.x, cfg.grid.y, cfg.grid.z};
  unsigned b[] = {cfg.block.x, cfg.block.y, cfg.block.z};
  for (int i = 0; i < 3; ++i) {
    if (g[i] == 0) fail(std::string("grid.") + axis[i] + " is 0; every extent must be at least 1");
    if (b[i] == 0) fail(std::string("block.") + axis[i] + " is 0; every extent must be at least 1");
    if (b[i] > unsigned(p.max_block_dim[i]))
      fail(std::string("block.") + axis[i] + " = " + std::to_string(b[i]) + " exceeds the limit " +
           std::to_string(p.max_block_dim[i]));
    if (g[i] > unsigned(p.max_grid_dim[i]))
      fail(std::string("grid.") + axis[i] + " = " + std::to_string(g[i]) + " exceeds the limit " +
           std::to_string(p.max_grid_dim[i]));
  }
  if (cfg.block.count() > std::size_t(p.max_threads_per_block))
    fail(std::to_string(cfg.block.count()) + " threads per block exceed the limit " +
         std::to_string(p.max_threads_per_block) + "; use fewer threads per block and more blocks");
  if (cfg.shared_bytes > p.shared_per_block_optin)
    fail(std::to_string(cfg.shared_bytes) + " bytes of shared memory exceed the device's per-block maximum " +
         std::to_string(p.shared_per_block_optin) + " bytes (with opt-in)");
}

}  // namespace resident
