// resident demo: the seed's question answered with measured numbers. Compiled by nvcc in CUDA builds.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "commands/memory_budget.hpp"
#include "resident/resident.hpp"
#include "common/seed.hpp"
#include "commands/table.hpp"

namespace resident::cli {
namespace {

struct mode_result {
  std::string key, name;
  double ms = 0;
  ledger_counts per_call{};
  double error = 0;
};

constexpr double tolerance = 1e-5;  // float32 math against the FP64 reference, relative to max |ref|

// Why the demo runs on the CPU: the option, the variable, or no GPU to run on ("" on a GPU).
std::string why_cpu(const demo_options& o, device d) {
  if (!d.is_cpu()) return {};
  if (!o.device.empty()) return "the CPU as --device " + o.device + " asks";
  if (const char* env = std::getenv("RESIDENT_DEVICE"); env && *env)
    return std::string("the CPU as RESIDENT_DEVICE=") + env + " asks";
  const std::string why = cuda_unavailable_reason();
  return "the CPU because no GPU was found" + (why.empty() ? std::string() : " (" + why + ")");
}

// The ledger of every device used; the CPU's copies named as what they are there, copies within host
// memory (its backend has no bus: "host-to-device" is a memcpy).
std::string ledger_text() {
  std::string text;
  for (const auto& [dev, c] : ledger().devices) {
    std::string line = "ledger " + dev.name() + ": ";
    if (dev.is_cpu()) {
      std::string rest = c.summary();
      rest = rest.substr(std::min(rest.find("kernels"), rest.size()));
      for (auto [from, to] : {std::pair{"H2D ", "in "}, std::pair{"D2H ", "out "}})
        for (auto at = rest.find(from); at != std::string::npos; at = rest.find(from)) rest.replace(at, 4, to);
      line += "host memory copies (no bus on the CPU backend): " + std::to_string(c.h2d_copies) + " in (" +
              detail::format_bytes(double(c.h2d_bytes)) + "), " + std::to_string(c.d2h_copies) + " out (" +
              detail::format_bytes(double(c.d2h_bytes)) + "), " + std::to_string(c.d2d_copies) + " within (" +
              detail::format_bytes(double(c.d2d_bytes)) + "); " + rest;
    } else {
      line += c.summary();
    }
    text += (text.empty() ? "" : "\n") + line;
  }
  return text;
}

}  // namespace

int run_demo(const demo_options& o) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  const std::size_t n = o.n ? o.n : (d.is_cuda() ? std::size_t(1) << 26 : std::size_t(1) << 22);
  const int reps = o.reps ? o.reps : (d.is_cuda() ? 30 : 10);
  const int slow_reps = std::max(3, reps / 6);
  const double bytes = double(n) * 8.0;  // one pass: read 4 bytes, write 4 bytes per element
  // Per element: x, y and a round trip's temporary on the device; the input, the poison, the round
  // trips' result and a checked download on the host.
  constexpr std::size_t device_per_element = 12, host_per_element = 16;
  // The largest n that fits the host, and the pool's limit where one is set (its arrays only).
  std::size_t fits = host_available_bytes() / (device_per_element + host_per_element);
  if (const pool_statistics p = pool_stats(d); p.limit)
    fits = std::min(fits, (*p.limit > p.bytes_in_use ? *p.limit - p.bytes_in_use : 0) / device_per_element);
  const std::string advice =
      d.is_cpu() && fits == 0 ? std::string("Nothing fits: free memory (or raise RESIDENT_POOL_LIMIT) first")
      : d.is_cpu() ? "Choose a smaller --n (" + std::to_string(device_per_element + host_per_element) +
                         " bytes per element: at most about " + std::to_string(fits) + " here)"
                 : "Choose a smaller --n (" + std::to_string(device_per_element) + " bytes per element on " +
                       d.name() + ", " + std::to_string(host_per_element) + " on the host)";
  require_memory(d, "demo --n " + std::to_string(n), double(device_per_element) * double(n),
                 double(host_per_element) * double(n), advice);

  out() << wrap("The seed pipeline func1 -> func2 -> func3 (f1 = 1.5v + 0.5, f2 = sqrt(v^2 + 1), f3 = 0.5 sin v) "
                "on " + d.name() + " (" + properties(d).name + "), n = " + std::to_string(n) + " float32 (" +
                detail::format_bytes(double(n) * 4) + ")" +
                (d.is_cpu() ? "; " + why_cpu(o, d) : std::string()) +
                (d.is_cpu() && !o.n ? "; the CPU backend uses a smaller default n than a GPU (2^26)" : ""))
        << "\n\n";

  const std::vector<float> hx = seed_input(n);
  // --profile: every call below is counted at its line of this file.
  std::optional<profile> prof;
  if (o.profile) prof.emplace(profile_output::quiet);
  stream s(d);
  std::vector<mode_result> results;
  progress bar("demo", o.stream ? 6 : 5);

  auto master = map<func1>() | map<func2>() | map<func3>();
  auto k1 = map<func1>();
  auto k2 = map<func2>();
  auto k3 = map<func3>();

  {
    array<float> x = to_device(hx, s.ref());
    array<float> y(n, s.ref());
    std::vector<float> poison(n, -1234.5f);

    std::vector<float> host_result;
    // Checks one mode: outputs poisoned, one call under a ledger, its result compared with the FP64
    // reference (result_on_host: the mode leaves it in host_result, as the seed's user did).
    auto check = [&](mode_result& r, auto&& call, bool result_on_host = false) {
      copy(std::span<const float>(poison), y);
      host_result.assign(n, -1234.5f);
      s.synchronize();
      scoped_ledger l(d);
      call();
      s.synchronize();
      r.per_call = l.delta();
      r.error = seed_error(hx, result_on_host ? host_result : y.to_host());
    };

    // (a) what the seed's user did: every function uploads its input and downloads its output, through
    // plain pageable copies as Numba makes them implicitly; (a2) the same round trips through
    // resident's staged copies.
    for (staging st : {staging::none, staging::chunked}) {
      const bool raw = st == staging::none;
      bar.step(raw ? "round trip per function" : "round trip per function, staged");
      mode_result r{raw ? "round_trip" : "round_trip_staged",
                    raw ? "(a) round trip" : "(a2) round trip, staged"};
      auto call = [&] {
        host_result = hx;
        auto round_trip = [&](const auto& stage) {
          array<float> t = to_device(host_result, s.ref(), st);
          stage(t);
          t.to_host(std::span<float>(host_result), st);
        };
        round_trip(k1);
        round_trip(k2);
        round_trip(k3);
      };
      check(r, call, true);
      r.ms = time_region(s.ref(), slow_reps, 2, call).median();
      results.push_back(r);
    }
    // (b) data resident, three separate kernels.
    {
      bar.step("three kernels");
      mode_result r{"three_kernels", "(b) three kernels"};
      auto call = [&] {
        k1(x, y);
        k2(y);
        k3(y);
      };
      check(r, call);
      r.ms = time_region(s.ref(), reps, 3, call).median();
      results.push_back(r);
    }
    // (c) data resident, one fused kernel.
    {
      bar.step("fused");
      mode_result r{"fused", "(c) fused"};
      auto call = [&] { master(x, y); };
      check(r, call);
      r.ms = time_region(s.ref(), reps, 3, call).median();
      results.push_back(r);
    }
    // (d) fused, as a one-stage flow captured once into a graph and replayed.
    {
      bar.step("fused, graph replay");
      mode_result r{"fused_graph", "(d) fused, graph"};
      flow f(d, 1);
      y.set_stream(f.stream());
      f.add("seed pipeline", [&](stream_ref fs) {
        y.set_stream(fs);
        master(x, y);
      }, access{}.reads(x).writes(y));
      graph g = f.capture();
      y.set_stream(s.ref());
      auto call = [&] { g.replay(s.ref()); };  // a graph replays on any stream of its device
      check(r, call);
      r.ms = time_region(s.ref(), reps, 3, call).median();
      results.push_back(r);
    }
    // (e) host to host, streamed in chunks: upload, fused kernel and download overlapped on three
    // streams; the answer for data larger than the device.
    if (o.stream) {
      bar.step("streamed from host memory");
      mode_result r{"streamed", "(e) streamed, host to host"};
      const out_of_core_options so{.target = d};
      auto call = [&] { out_of_core(master, hx, host_result, so); };
      check(r, call, true);
      r.ms = time_region(s.ref(), slow_reps, 2, call).median();
      results.push_back(r);
    }
  }

  bar.finish();
  const double base = results[0].ms;
  // On the CPU the "transfers" are copies within host memory: named so, their keys unchanged.
  const bool cpu = d.is_cpu();
  table t({{"mode", "mode", false},
           {"median (ms)", "median_ms"},
           {cpu ? "in/call" : "H2D/call", "h2d_bytes", true},
           {cpu ? "out/call" : "D2H/call", "d2h_bytes", true},
           {"kernels", "kernels"},
           {"GB/s", "gb_per_s"},
           {"speedup", "speedup"},
           {"rel. error", "max_rel_error"}});
  bool ok = true;
  for (auto& r : results) {
    ok = ok && r.error <= tolerance;
    t.add({r.name, table::cell(r.ms, -1), table::cell::bytes(r.per_call.h2d_bytes),
           table::cell::bytes(r.per_call.d2h_bytes), table::cell::count(r.per_call.kernels),
           table::cell(bytes / (r.ms * 1e-3) / 1e9, -1), table::cell(base / r.ms, -1), table::cell::scientific(r.error, 1)});
  }
  t.print(out());
  out() << wrap("(a) every function uploads its input and downloads its output, through plain pageable copies "
                "as Numba makes them; (a2) the same through resident's staged copies; (b) data resident, three "
                "kernels; (c) data resident, one fused kernel; (d) (c) as a flow captured once as a graph and "
                "replayed" + std::string(o.stream ? "; (e) host memory in, through the fused kernel in chunks overlapped "
                                                  "on three streams, host memory out" : "") +
                std::string(cpu ? ". in/call, out/call: bytes copied into and out of the arrays per call, copies "
                                  "within host memory (the CPU backend has no bus)" : "") +
                ". GB/s: one pass, 4 bytes read and 4 written per element; speedup: (a)'s time over the "
                "mode's; rel. error: the largest difference from the FP64 reference over its largest value.",
                100, "  ")
        << "\n";
  out() << "\n" << wrap(ledger_text(), 100, "") << "\n";

  const auto& fused = results[3];
  // The answer's first words stay on one line, as scripts look for them.
  out() << "\nAnswer: " << (cpu ? "on the CPU backend there is no bus to cross, yet " : "")
        << "the data stays resident on " << d.name() << ";\n"
        << wrap("the fused pipeline ran in " + format_number(fused.ms, -1) + " ms with " +
                    std::to_string(fused.per_call.h2d_bytes + fused.per_call.d2h_bytes) +
                    (cpu ? " bytes copied and " : " bytes over the bus and ") + std::to_string(fused.per_call.kernels) +
                    " kernel, " + format_number(base / fused.ms, -1) + "x faster than " +
                    (cpu ? "copying the data in and out of host memory" : "copying to the device and back") +
                    " around each function (" + format_number(base, -1) +
                    " ms; with resident's staged copies the round trips take " + format_number(results[1].ms, -1) +
                    " ms, still " + format_number(results[1].ms / fused.ms, -1) + "x the fused time).",
                100, "  ")
        << "\n";
  std::optional<profile_report> report;
  if (prof) {
    report = prof->report();
    out() << "\nProfile of this run (each call site of tools/resident/demo.cpp; docs/insight.md explains it):\n"
          << *report;
  }
  out().flush();
  if (!ok)
    std::cerr << "resident: error: a mode's result differs from the FP64 reference by more than " << tolerance << "\n";

  if (!o.json.empty()) {
    nlohmann::json j;
    j["command"] = "demo";
    j["device"] = d.name();
    j["device_name"] = properties(d).name;
    j["n"] = n;
    j["reps"] = reps;
    j["modes"] = t.json();
    for (std::size_t i = 0; i < results.size(); ++i) j["modes"][i]["key"] = results[i].key;
    j["ledger"] = nlohmann::json::parse(ledger().json());
    j["checked"] = ok;
    if (report) j["profile"] = nlohmann::json::parse(report->json());
    write_json(j, o.json);
  }
  return ok ? 0 : 1;
}

}  // namespace resident::cli
