// Copy rates on one device, each way and each kind of host memory: `info --measure` and
// `bench foundation`.
#include <algorithm>
#include <span>
#include <vector>

#include "bench.hpp"
#include "resident/insight/timing.hpp"
#include "resident/resident.hpp"

namespace resident::cli {

std::vector<bandwidth_row> measure_bandwidth(device d, std::size_t bytes, int reps) {
  std::vector<bandwidth_row> rows;
  stream s(d);
  const std::size_t n = bytes / sizeof(float);
  std::vector<float> pageable(n);
  for (std::size_t i = 0; i < n; ++i) pageable[i] = float(i % 1000) * 0.5f + 1.f;
  pinned_buffer<float> pinned(n);
  std::copy(pageable.begin(), pageable.end(), pinned.begin());
  array<float> a(n, s), b(n, s);
  copy(std::span<const float>(pageable), a);
  auto gbs = [&](double ms, double moved) { return moved / (ms * 1e-3) / 1e9; };
  const double B = double(n * sizeof(float));

  auto t = time_region(s, reps, 2, [&] { copy(a, b); });
  rows.push_back({"device-to-device", gbs(t.median(), 2 * B), "bytes read + written"});
  t = time_region(s, reps, 2, [&] { copy(pinned.span(), a); });
  rows.push_back({"host-to-device, pinned", gbs(t.median(), B), "page-locked source"});
  if (d.is_cuda()) {
    t = time_region(s, reps, 1, [&] { copy(std::span<const float>(pageable), a, staging::none); });
    rows.push_back({"host-to-device, pageable raw", gbs(t.median(), B), "one cudaMemcpyAsync"});
  }
  t = time_region(s, reps, 1, [&] { copy(std::span<const float>(pageable), a); });
  rows.push_back({"host-to-device, pageable staged", gbs(t.median(), B), "resident's to_device"});
  t = time_region(s, reps, 1, [&] { a.to_host_async(pinned); });
  rows.push_back({"device-to-host, pinned", gbs(t.median(), B), "page-locked destination"});
  if (d.is_cuda()) {
    t = time_region(s, reps, 1, [&] { a.to_host(std::span<float>(pageable), staging::none); });
    rows.push_back({"device-to-host, pageable raw", gbs(t.median(), B), "one cudaMemcpyAsync"});
  }
  t = time_region(s, reps, 1, [&] { a.to_host(std::span<float>(pageable)); });
  rows.push_back({"device-to-host, pageable staged", gbs(t.median(), B), "resident's to_host"});
  s.synchronize();
  return rows;
}

}  // namespace resident::cli
