#include <iostream>
#include <vector>

#include "commands.hpp"
#include "commands/memory_budget.hpp"
#include "resident/insight/profile.hpp"
#include "resident/insight/timing.hpp"
#include "resident/resident.hpp"
#include "commands/table.hpp"

namespace resident::cli {
namespace {

table::cell gib(std::size_t b) {
  table::cell c = table::cell::count(b);
  c.text = format_number(double(b) / double(1u << 30), 1) + " GiB";
  return c;
}

const char* policy_name(transfer_policy p) {
  switch (p) {
    case transfer_policy::allow: return "allow";
    case transfer_policy::log: return "log";
    case transfer_policy::forbid: return "forbid";
  }
  return "?";
}

}  // namespace

int run_info(const info_options& o) {
  const device def = o.device.empty() ? default_device() : parse_device(o.device);
  require(def);
  // --measure's copies: checked before the first line, so a refusal is the only output.
  const std::size_t bytes = def.is_cuda() ? std::size_t(1) << 30 : std::size_t(256) << 20;
  if (o.measure)
    require_memory(def, "info --measure", 2 * double(bytes), 2 * double(bytes), "Free memory and run it again");
  nlohmann::json j;
  j["command"] = "info";
  j["run"] = run_record(def.name());
  out() << "resident " << version() << "\n";
  out() << "backends compiled: cpu" << (cuda_compiled ? ", cuda" : "") << "\n";
  j["version"] = version();
  j["backends"] = cuda_compiled ? nlohmann::json{"cpu", "cuda"} : nlohmann::json{"cpu"};

  table devs({{"device", "device", false},
              {"name", "name", false},
              {"SMs / threads", "multiprocessors"},
              {"memory", "memory_bytes", true},
              {"compute capability", "compute_capability", false}});
  std::vector<device> all{device::cpu()};
  for (int i = 0; i < cuda_device_count(); ++i) all.push_back(device::cuda(i));
  for (device d : all) {
    auto p = properties(d);
    devs.add({d.name(), p.name, table::cell(p.multiprocessors, 0), gib(p.memory_bytes),
              d.is_cuda() ? table::cell(std::to_string(p.cc_major) + "." + std::to_string(p.cc_minor)) : table::cell::none()});
  }
  out() << "devices:\n";
  devs.print(out());
  j["devices"] = devs.json();

  // Each device's copy rate (measured once per process, as the profile measures it) and its pool now.
  table state({{"device", "device", false},
               {"copy rate (GB/s)", "copy_rate_gb_per_s"},
               {"pool in use", "pool_in_use_bytes"},
               {"reserved", "pool_reserved_bytes"},
               {"peak", "pool_peak_bytes"},
               {"limit", "pool_limit_bytes"}});
  table::cell no_limit = table::cell::none();
  no_limit.text = "none";
  for (device d : all) {
    const pool_statistics ps = pool_stats(d);
    // A device too full to hold the measurement's buffers still gets its pool's row.
    table::cell rate = table::cell::none();
    try {
      rate = table::cell(copy_rate(d), -1);
    } catch (const out_of_memory& e) {
      out() << "copy rate of " << d.name() << " not measured: " << e.what() << "\n";
    }
    state.add({d.name(), rate, table::cell::bytes(ps.bytes_in_use),
               table::cell::bytes(ps.bytes_reserved), table::cell::bytes(ps.peak_bytes),
               ps.limit ? table::cell::bytes(*ps.limit) : no_limit});
  }
  out() << "copy rate (bytes read + written per second of a device-to-device copy) and memory pool:\n";
  state.print(out());
  const nlohmann::json rows = state.json();
  for (std::size_t i = 0; i < all.size(); ++i) {
    nlohmann::json row = rows[i];
    row.erase("device");
    j["devices"][i].update(row);
  }
  const char* policy = policy_name(current_transfer_policy());
  out() << "transfer policy: " << policy << " (RESIDENT_TRANSFER_POLICY: allow, log or forbid)\n";
  j["transfer_policy"] = policy;
  const char* nvtx = detail::nvtx_state();
  out() << "NVTX ranges (domain \"resident\"): " << nvtx << "\n";
  j["nvtx"] = nvtx;

  std::string why = cuda_unavailable_reason();
  out() << "default device: " << def.name();
  if (def.is_cpu() && !why.empty()) out() << " (no CUDA device: " << why << ")";
  out() << "\n";
  j["default_device"] = def.name();
  if (!why.empty()) j["cuda_unavailable"] = why;

  if (o.measure) {
    const int reps = def.is_cuda() ? 10 : 5;
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
