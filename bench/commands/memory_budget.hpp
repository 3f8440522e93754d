#pragma once
// Memory a command needs, compared with what is available before anything is allocated, so that a
// size that cannot fit is refused up front with figures rather than failing mid-run.

#include <cstddef>
#include <string>

#include "resident/device/device.hpp"

namespace resident::cli {

/// Bytes the host can still give this process: MemAvailable from /proc/meminfo, lowered by a cgroup
/// memory limit and by the address-space limit (ulimit -v) where those are set.
std::size_t host_available_bytes();

/// Refuses work that needs more memory than d and the host have available. device_bytes live on d
/// (host memory as well when d is the CPU); host_bytes are host vectors. Trims d's pool first.
/// @throws out_of_memory with the figures, ending with advice (what to choose instead).
void require_memory(device d, const std::string& what, double device_bytes, double host_bytes,
                    const std::string& advice);

}  // namespace resident::cli
