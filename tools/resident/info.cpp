#include <iostream>
#include <vector>

#include "commands.hpp"
#include "memory_budget.hpp"
#include "resident/insight/timing.hpp"
#include "resident/resident.hpp"
#include "table.hpp"

namespace resident::cli {
namespace {

std::string gib(std::size_t b) { return format_number(double(b) / double(1u << 30), 1) + " GiB"; }

}  // namespace

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

int run_info(const info_options& o) {
  const device def = o.device.empty() ? default_device() : parse_device(o.device);
  require(def);
  nlohmann::json j;
  out() << "resident " << version() << "\n";
  out() << "backends compiled: cpu" << (cuda_compiled ? ", cuda" : "") << "\n";
  j["version"] = version();
  j["backends"] = cuda_compiled ? nlohmann::json{"cpu", "cuda"} : nlohmann::json{"cpu"};

  table devs({{"device", "device", false},
              {"name", "name", false},
              {"SMs / threads", "multiprocessors"},
              {"memory", "memory", true},
              {"compute capability", "compute_capability", false}});
  std::vector<device> all{device::cpu()};
  for (int i = 0; i < cuda_device_count(); ++i) all.push_back(device::cuda(i));
  for (device d : all) {
    auto p = properties(d);
    devs.add({d.name(), p.name, table::cell(p.multiprocessors, 0), gib(p.memory_bytes),
              d.is_cuda() ? std::to_string(p.cc_major) + "." + std::to_string(p.cc_minor) : std::string("-")});
  }
  out() << "devices:\n";
  devs.print(out());
  j["devices"] = devs.json();

  std::string why = cuda_unavailable_reason();
  out() << "default device: " << def.name();
  if (def.is_cpu() && !why.empty()) out() << " (no CUDA device: " << why << ")";
  out() << "\n";
  j["default_device"] = def.name();
  if (!why.empty()) j["cuda_unavailable"] = why;

  if (o.measure) {
    const std::size_t bytes = def.is_cuda() ? std::size_t(1) << 30 : std::size_t(256) << 20;
    const int reps = def.is_cuda() ? 10 : 5;
    require_memory(def, "info --measure", 2 * double(bytes), 2 * double(bytes), "Free memory and run it again");
    out() << "\nbandwidth on " << def.name() << " (" << detail::format_bytes(double(bytes))
              << " per copy, median of " << reps << "):\n";
    table bw({{"copy", "copy", false}, {"rate (GB/s)", "gb_per_s"}, {"note", "note", false}});
    for (auto& r : measure_bandwidth(def, bytes, reps)) bw.add({r.what, table::cell(r.gbs, -1), r.note});
    bw.print(out());
    j["bandwidth"] = bw.json();
  }
  if (!o.json.empty()) write_json(j, o.json);
  return 0;
}

}  // namespace resident::cli
