// libFuzzer target: the validation of shapes, launch configurations, device and algorithm names, and
// the vector plan of fused kernels. Every input must end in a value or a typed error, nothing else.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "resident/fuse/detail/access.hpp"
#include "resident/resident.hpp"

namespace rs = resident;

namespace {
struct reader {
  const std::uint8_t* p;
  std::size_t n;
  template <class T>
  T get() {
    T v{};
    const std::size_t k = n < sizeof(T) ? n : sizeof(T);
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader r{data, size};
  const auto cpu = rs::device::cpu();
  try {
    rs::launch_config cfg{rs::dims(r.get<std::uint32_t>(), r.get<std::uint32_t>(), r.get<std::uint32_t>()),
                          rs::dims(r.get<std::uint32_t>(), r.get<std::uint32_t>(), r.get<std::uint32_t>()),
                          r.get<std::uint32_t>()};
    rs::validate(cfg, cpu);
  } catch (const rs::invalid_launch&) {
  }
  const std::size_t m = r.get<std::uint16_t>(), k = r.get<std::uint16_t>(), k2 = r.get<std::uint16_t>(),
                    n = r.get<std::uint16_t>(), cm = r.get<std::uint16_t>(), cn = r.get<std::uint16_t>();
  const auto base = r.get<std::uintptr_t>() & 0xFFFFFFFFFFF0u;
  try {
    rs::detail::check_matmul(m, k, k2, n, cm, cn, reinterpret_cast<const void*>(base), m * k * 4,
                             reinterpret_cast<const void*>(base + r.get<std::uint32_t>()), k2 * n * 4,
                             reinterpret_cast<const void*>(base + r.get<std::uint32_t>()), cm * cn * 4, cpu, cpu, cpu);
  } catch (const rs::invalid_argument&) {
  }
  const std::size_t vn = r.get<std::uint32_t>();
  const int V = 1 << (r.get<std::uint8_t>() % 5);
  const auto p1 = r.get<std::uintptr_t>(), p2 = r.get<std::uintptr_t>();
  const std::size_t s1 = std::size_t(1) << (r.get<std::uint8_t>() % 4), s2 = std::size_t(1) << (r.get<std::uint8_t>() % 4);
  auto plan = rs::detail::plan_vectors(vn, V, {{reinterpret_cast<const void*>(p1), s1}, {reinterpret_cast<const void*>(p2), s2}});
  if (plan.vectorized && plan.head + plan.vectors * std::size_t(V) > vn) __builtin_trap();  // the plan left the range
  const std::size_t rows = r.get<std::uint16_t>(), cols = r.get<std::uint16_t>(), ld = r.get<std::uint16_t>();
  try {
    if (rows * (ld ? ld : cols) <= (1u << 20)) rs::array2d<char> a(rows, cols, cpu, ld);
  } catch (const rs::invalid_argument&) {
  }
  std::string text(reinterpret_cast<const char*>(r.p), r.n);
  try {
    rs::parse_device(text);
  } catch (const rs::invalid_argument&) {
  }
  try {
    rs::parse_matmul_algo(text);
  } catch (const rs::invalid_argument&) {
  }
  return 0;
}
