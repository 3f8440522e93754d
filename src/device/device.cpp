#include "resident/device/device.hpp"

#include <charconv>
#include <cstdlib>
#include <string>

#include "backend/runtime.hpp"
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
    // One spelling per device, the one name() gives: "cuda:01" or "cuda:00" is not taken.
    if (rest.size() > 1 && rest[0] == '0') RESIDENT_FAIL("unknown device '" + std::string(t) + "': use cpu, cuda or cuda:N (N >= 0, no leading zeros)");
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

void require(device d) { detail::backend_of(d).require(d); }

device default_device() {
  if (const char* env = std::getenv("RESIDENT_DEVICE"); env && *env) {
    device d = parse_device(env);
    require(d);
    return d;
  }
  return cuda_device_count() > 0 ? device::cuda(0) : device::cpu();
}

device_properties properties(device d) {
  require(d);
  return detail::backend_of(d).properties(d);
}

void synchronize(device d) {
  require(d);
  detail::backend_of(d).synchronize(d);
}

device_scope::device_scope(device d) { previous_ = detail::backend_of(d).make_current(d); }
device_scope::~device_scope() {
  if (previous_ < 0) return;  // only a GPU has a current device to restore
  try {
    const device previous = device::cuda(previous_);
    (void)detail::backend_of(previous).make_current(previous);
  } catch (...) {  // a lost context: nothing left to restore
  }
}

}  // namespace resident
