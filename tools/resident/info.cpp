#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

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

// The CPU's copy rate, measured so that runs agree: a copy well above the last-level cache, so that the
// cache cannot hold it (4x, 128 MiB to 512 MiB; less when the host is short of memory), two unmeasured
// copies first, the median of seven.
struct cpu_copy_rate {
  double gbs = 0;
  std::size_t bytes = 0, cache = 0;
  int threads = 1, reps = 7;
};

cpu_copy_rate measure_cpu_copy_rate() {
  cpu_copy_rate r;
  const long llc = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  r.cache = llc > 0 ? std::size_t(llc) : std::size_t(32) << 20;  // unknown: assume 32 MiB
  r.bytes = std::clamp(4 * r.cache, std::size_t(128) << 20, std::size_t(512) << 20);
  while (r.bytes > (std::size_t(16) << 20) && 4 * r.bytes > host_available_bytes()) r.bytes /= 2;
#ifdef _OPENMP
  r.threads = omp_get_max_threads();
#endif
  std::unique_ptr<char[]> a(new char[r.bytes]), b(new char[r.bytes]);
  std::fill_n(a.get(), r.bytes, char(1));  // touched, so the copies below fault no pages in
  std::fill_n(b.get(), r.bytes, char(2));
  std::vector<double> gbs;
  for (int rep = 0; rep < 2 + r.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    detail::parallel_memcpy(b.get(), a.get(), r.bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep >= 2 && s > 0) gbs.push_back(2.0 * double(r.bytes) / s / 1e9);
  }
  std::sort(gbs.begin(), gbs.end());
  r.gbs = gbs.empty() ? 0 : gbs[gbs.size() / 2];
  return r;
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
  cpu_copy_rate cpu_rate;
  for (device d : all) {
    const pool_statistics ps = pool_stats(d);
    // A device too full to hold the measurement's buffers still gets its pool's row.
    table::cell rate = table::cell::none();
    try {
      if (d.is_cpu()) cpu_rate = measure_cpu_copy_rate();
      rate = table::cell(d.is_cpu() ? cpu_rate.gbs : copy_rate(d), -1);
    } catch (const out_of_memory& e) {
      out() << "copy rate of " << d.name() << " not measured: " << e.what() << "\n";
    }
    state.add({d.name(), rate, table::cell::bytes(ps.bytes_in_use),
               table::cell::bytes(ps.bytes_reserved), table::cell::bytes(ps.peak_bytes),
               ps.limit ? table::cell::bytes(*ps.limit) : no_limit});
  }
  out() << "copy rate (bytes read + written per second of a device-to-device copy) and memory pool:\n";
  state.print(out());
  if (cpu_rate.bytes)
    out() << wrap("cpu's copy rate: a parallel memcpy of " + detail::format_bytes(double(cpu_rate.bytes)) + " (" +
                      std::to_string(cpu_rate.threads) + " threads; the last-level cache holds " +
                      detail::format_bytes(double(cpu_rate.cache)) + "), the median of " +
                      std::to_string(cpu_rate.reps) + " copies after 2 unmeasured ones",
                  100, "  ")
          << "\n";
  const nlohmann::json rows = state.json();
  for (std::size_t i = 0; i < all.size(); ++i) {
    nlohmann::json row = rows[i];
    row.erase("device");
    j["devices"][i].update(row);
  }
  if (cpu_rate.bytes)
    j["cpu_copy_rate"] = {{"bytes", cpu_rate.bytes}, {"threads", cpu_rate.threads}, {"reps", cpu_rate.reps},
                          {"last_level_cache_bytes", cpu_rate.cache}};
  const char* policy = policy_name(current_transfer_policy());
  out() << "transfer policy: " << policy << " (RESIDENT_TRANSFER_POLICY: allow, log or forbid)\n";
  j["transfer_policy"] = policy;
  const char* nvtx = detail::nvtx_state();
  out() << "NVTX ranges (domain \"resident\"): " << nvtx << "\n";
  j["nvtx"] = nvtx;

  std::string why = cuda_unavailable_reason();
  out() << wrap("default device: " + def.name() +
                    (def.is_cpu() && !why.empty() ? " (no CUDA device: " + why + ")" : std::string()))
        << "\n";
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
    j["bandwidth_bytes_per_copy"] = bytes;  // what the text's heading says
    j["bandwidth_reps"] = reps;
  }
  if (!o.json.empty()) write_json(j, o.json);
  return 0;
}

}  // namespace resident::cli
