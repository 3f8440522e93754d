#include "resident/device/device.hpp"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/error.hpp"

namespace resident {

std::string device::name() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_);
}

device parse_device(std::string_view t) {
  if (t == "cpu") return device::cpu();
  if (t == "cuda" || t == "gpu") return device::cuda(0);
  if (t.substr(0, 5) == "cuda:" && t.size() > 5) {
    int i = -1;
    auto rest = t.substr(5);
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), i);
    if (ec == std::errc{} && p == rest.data() + rest.size() && i >= 0) return device::cuda(i);
  }
  RESIDENT_FAIL("unknown device '" + std::string(t) + "': use cpu, cuda or cuda:N (N >= 0)");
}

int cuda_device_count() noexcept {
  static const int n = detail::cuda::device_count(nullptr);
  return n;
}

std::string cuda_unavailable_reason() {
  std::string why;
  int n = detail::cuda::device_count(&why);
  return n > 0 ? std::string() : why;
}

void require(device d) {
  if (d.is_cpu()) return;
  if (d.index() < 0)
    RESIDENT_FAIL("device " + d.name() + " does not exist: CUDA device indices start at 0", device_unavailable);
  int n = cuda_device_count();
  if (n == 0)
    RESIDENT_FAIL("device " + d.name() + " is not available: " + cuda_unavailable_reason() +
                             ". Use the cpu device (RESIDENT_DEVICE=cpu or --device cpu)", device_unavailable);
  if (d.index() >= n)
    RESIDENT_FAIL("device " + d.name() + " does not exist: this machine has " +
                             std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") + " (cuda:0 .. cuda:" +
                             std::to_string(n - 1) + ")", device_unavailable);
}

device default_device() {
  if (const char* env = std::getenv("RESIDENT_DEVICE"); env && *env) {
    device d = parse_device(env);
    require(d);
    return d;
  }
  return cuda_device_count() > 0 ? device::cuda(0) : device::cpu();
}

namespace {
device_properties cpu_properties() {
  device_properties p;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) p.name = line.substr(c + 2);
      break;
    }
  }
  if (p.name.empty()) p.name = "host CPU";
  p.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) p.memory_bytes = static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  return p;
}
}  // namespace

device_properties properties(device d) {
  require(d);
  if (d.is_cpu()) {
    static const device_properties p = cpu_properties();
    return p;
  }
  // Cached: cudaGetDeviceProperties is too slow for every launch's validation.
  static std::mutex m;
  static std::map<int, device_properties> cache;
  std::lock_guard lock(m);
  auto it = cache.find(d.index());
  if (it == cache.end()) it = cache.emplace(d.index(), detail::cuda::properties(d.index())).first;
  return it->second;
}

void synchronize(device d) {
  if (d.is_cpu()) return;
  require(d);
  detail::cuda::synchronize_device(d.index());
}

device_scope::device_scope(device d) {
  if (!d.is_cuda()) return;
  const int now = detail::cuda::current_device();
  if (now == d.index()) return;
  detail::cuda::set_device(d.index());
  previous_ = now;
}
device_scope::~device_scope() {
  if (previous_ < 0) return;
  try {
    detail::cuda::set_device(previous_);
  } catch (...) {  // a lost context: nothing left to restore
  }
}

}  // namespace resident
