#include "memory_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/resident.hpp"

namespace resident::cli {
namespace {

// The value of `key` in a "key: value kB" file such as /proc/meminfo, in bytes; 0 when absent.
std::size_t kib_field(const char* file, const std::string& key) {
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream v(line.substr(key.size() + 1));
      std::size_t kib = 0;
      v >> kib;
      return kib * 1024;
    }
  return 0;
}

// A number read from a one-line file ("max" or missing: no limit).
std::size_t number_file(const char* file) {
  std::ifstream f(file);
  std::size_t v = 0;
  return f >> v ? v : SIZE_MAX;
}

}  // namespace

std::size_t host_available_bytes() {
  std::size_t avail = kib_field("/proc/meminfo", "MemAvailable");
  if (avail == 0) avail = SIZE_MAX;
  for (auto [limit, usage] : {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                              std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                        "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const std::size_t l = number_file(limit), u = number_file(usage);
    if (l != SIZE_MAX && u != SIZE_MAX) avail = std::min(avail, l > u ? l - u : 0);
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const std::size_t mapped = kib_field("/proc/self/status", "VmSize");
    avail = std::min(avail, as.rlim_cur > mapped ? std::size_t(as.rlim_cur) - mapped : 0);
  }
  return avail;
}

void require_memory(device d, const std::string& what, double device_bytes, double host_bytes,
                    const std::string& advice) {
  const std::size_t host = host_available_bytes();
  auto refuse = [&](const std::string& where, double needed, std::size_t available, const std::string& parts) {
    const pool_statistics p = pool_stats(d);
    throw out_of_memory("out of memory: " + what + " needs " + detail::format_bytes(needed) + parts + " on " +
                            where + ", which has " + detail::format_bytes(double(available)) +
                            " available; nothing was allocated. " + advice,
                        needed >= 1.8e19 ? SIZE_MAX : std::size_t(needed), available, p.bytes_reserved,
                        p.bytes_in_use);
  };
  // A pool limit (RESIDENT_POOL_LIMIT) caps the arrays: refused here rather than at an allocation mid-run.
  // Against the limit itself (a command checks before it allocates; bench stream's arrays are its limit).
  if (const pool_statistics p = pool_stats(d); p.limit && device_bytes > 0) {
    const std::size_t room = *p.limit;
    if (device_bytes > double(room))
      throw out_of_memory("out of memory: " + what + " needs " + detail::format_bytes(device_bytes) + " in arrays on " +
                              d.name() + ", whose pool's limit of " + detail::format_bytes(double(*p.limit)) +
                              " (RESIDENT_POOL_LIMIT) leaves " + detail::format_bytes(double(room)) +
                              "; nothing was allocated. Raise or unset RESIDENT_POOL_LIMIT. " + advice,
                          std::size_t(std::min(device_bytes, 1.8e19)), room, p.bytes_reserved, p.bytes_in_use, p.limit,
                          std::nullopt);
  }
  if (d.is_cpu()) {
    const double needed = device_bytes + host_bytes;
    if (needed > double(host))
      refuse("the host", needed, host,
             " (" + detail::format_bytes(device_bytes) + " in arrays + " + detail::format_bytes(host_bytes) +
                 " in host vectors)");
    return;
  }
  trim_pool(d);
  std::size_t free_b = 0, total = 0;
  detail::cuda::mem_info(d.index(), &free_b, &total);
  if (device_bytes > double(free_b)) refuse(d.name(), device_bytes, free_b, " in arrays");
  if (host_bytes > double(host)) refuse("the host", host_bytes, host, " in host vectors");
}

}  // namespace resident::cli
