// The profile's report: the table, the JSON, and the advice drawn from measured conditions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>


#include "backend/runtime.hpp"
#include "resident/detail/files.hpp"
#include "resident/error.hpp"
#include "resident/insight/profile.hpp"
#include "resident/memory/ledger.hpp"

namespace resident {
namespace {

// When a measured condition becomes advice; one reason each.
struct advice_policy {
  // The same byte count from one line three times or more is a loop moving the same data.
  static constexpr std::uint64_t repeat_min_calls = 3;
  // Launch-bound: many calls, each shorter than a few launch latencies (~2-4 us each on current GPUs).
  static constexpr std::uint64_t launch_min_calls = 16;
  static constexpr double launch_bound_seconds = 10e-6;
  // Far below the copy rate: a quarter of it, on calls large enough (1 MiB and up) that a launch's
  // fixed cost does not explain it, over at least a millisecond of measured time.
  static constexpr double below_fraction = 0.25;
  static constexpr std::uint64_t below_min_call_bytes = std::uint64_t(1) << 20;
  static constexpr double below_min_seconds = 1e-3;
  // The pool grows on every call: four calls or more, each one taking more memory.
  static constexpr std::uint64_t grows_min_calls = 4;
  // Low occupancy: the launch shape keeps under a quarter of the device busy, on calls long enough
  // (20 us and up each, several launch latencies) that the launch's fixed cost does not explain their
  // time: the idle part of the device could have shared the work.
  static constexpr double low_occupancy = 0.25;
  static constexpr double low_occupancy_min_seconds = 20e-6;
  // ... and, where the call's bytes are known (not for a user's kernel), only where each running thread
  // had much to do (a kilobyte read and written per call): a short call over few threads is small,
  // not badly shaped.
  static constexpr double low_occupancy_min_bytes_per_worker = 1024;
};

// Figures written with '.' whatever the C locale (a host program's setlocale): detail::decimal_text.
std::string format_seconds(double s) {
  if (s >= 1) return detail::decimal_text(s, 2) + " s";
  if (s >= 1e-3) return detail::decimal_text(s * 1e3, 2) + " ms";
  return detail::decimal_text(s * 1e6, 1) + " us";
}
std::string format_rate(double gbps) { return detail::decimal_text(gbps, gbps >= 100 ? 0 : 1) + " GB/s"; }
// Text as lines of at most `width` columns, the first indented by two spaces, the rest by four.
std::string wrap(const std::string& text, std::size_t width) {
  std::string out, line = "  ";
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (line.size() > 4 && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line = "    ";
    }
    if (line.back() != ' ') line += ' ';
    line += w;
  }
  return out + line + "\n";
}
std::string bytes(std::uint64_t b) { return detail::format_bytes(double(b)); }

// The length of the well-formed UTF-8 sequence at s[i], 0 when none starts there.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto at = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned c = at(i);
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the second byte's range (narrower after E0, ED, F0, F4)
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  return n;
}

// A JSON string; bytes that are not UTF-8 (a file name in another encoding, from a foreign site)
// become U+FFFD, so the document stays valid.
std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += ch;
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else if (c < 0x80) {
      o += ch;
    } else if (const std::size_t n = utf8_length(s, i)) {
      o.append(s, i, n);
      i += n - 1;
    } else {
      o += "\\ufffd";
    }
  }
  return o + "\"";
}
// A JSON number; a figure that is not finite was not measured: null (docs/json.md).
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return detail::decimal_text(v, -1);
}

}  // namespace

std::string profile_site::site() const {
  if (file.empty()) return "(outside any call)";
  const auto slash = file.find_last_of('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(line);
}
double profile_site::gbps() const {
  if (timed_calls == 0 || seconds <= 0 || calls == 0) return 0;
  // The timed calls' share of the bytes (calls captured into graphs are not timed); a transfer's rate
  // is that of the bytes it moves across.
  const double moved = double(transfer ? bytes_read : bytes_read + bytes_written) * double(timed_calls) / double(calls);
  return moved / seconds / 1e9;
}
double profile_site::seconds_per_call() const { return timed_calls ? seconds / double(timed_calls) : 0; }
std::string profile_site::shape() const {
  if (shaped_launches == 0) return "-";
  if (block_threads == 0)  // the CPU: a loop cut into pieces, run by a team of threads
    return std::to_string(grid_blocks) + (grid_blocks == 1 ? " piece" : " pieces") + " on " +
           std::to_string(workers) + (workers == 1 ? " thread" : " threads");
  return std::to_string(grid_blocks) + "x" + std::to_string(block_threads) + ", " + std::to_string(blocks_per_sm) +
         "/SM";
}

double profile_report::copy_rate(device d) const {
  for (auto& [dev, rate] : copy_rates)
    if (dev == d) return rate;
  return 0;
}

std::vector<profile_advice> advise(const std::vector<profile_site>& sites,
                                   const std::vector<std::pair<device, double>>& copy_rates) {
  using P = advice_policy;
  std::vector<profile_advice> out;
  auto rate_of = [&](device d) {
    for (auto& [dev, r] : copy_rates)
      if (dev == d) return r;
    return 0.0;
  };
  for (const profile_site& s : sites) {
    if (s.calls == 0) continue;  // work outside any call site has no line to point at
    const std::string at = s.site();
    std::ostringstream m;
    if (s.transfer && (s.h2d_bytes || s.d2h_bytes) && s.calls >= P::repeat_min_calls &&
        s.min_call_bytes == s.max_call_bytes && s.min_call_bytes > 0) {
      m << s.name << " moved the same " << bytes(s.max_call_bytes / 2) << " between host and device " << s.calls
        << " times (" << bytes(s.h2d_bytes + s.d2h_bytes)
        << " in all): move it once outside the loop and keep the array on the device; chain the work on it"
           " there (guideline: minimize host<->device transfers)";
      out.push_back({"repeated_transfer", at, m.str(), "examples/seed_pipeline.cpp"});
      m.str("");
    }
    if (!s.transfer && s.name != "graph replay" && detail::backend_of(s.dev).queued() && s.timed_calls >= P::launch_min_calls &&
        s.seconds_per_call() < P::launch_bound_seconds) {
      m << s.name << " ran " << s.calls << " times at " << format_seconds(s.seconds_per_call()) << " per call on "
        << bytes((s.bytes_read + s.bytes_written) / s.calls)
        << ": launch-bound, the fixed cost of each launch outweighs the work; capture the sequence once as a"
           " graph and replay it (rs::graph::capture), or batch the work into fewer, larger calls";
      out.push_back({"launch_bound", at, m.str(), "resident bench small (docs/guide.md: small pipelines)"});
      m.str("");
    }
    const double rate = rate_of(s.dev);
    if (!s.transfer && rate > 0 && s.timed_calls > 0 && s.seconds >= P::below_min_seconds &&
        s.min_call_bytes >= P::below_min_call_bytes && s.gbps() < P::below_fraction * rate) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.0f%%", 100 * s.gbps() / rate);
      m << s.name << " moved its bytes at " << format_rate(s.gbps()) << ", " << pct << " of this device's copy rate ("
        << format_rate(rate)
        << "): memory is not what limits it; look for uncoalesced access, divergent branches or repeated "
           "reads of the same data, or arithmetic that dominates (guidelines: coalescing, divergence, "
           "redundant access)";
      out.push_back({"below_copy_rate", at, m.str(), "examples/coalescing.cpp, examples/divergence.cpp, "
                                                     "examples/redundant_access.cpp"});
      m.str("");
    }
    const std::uint64_t moved = s.bytes_read + s.bytes_written;
    const bool spread_out = moved == 0 || (s.workers && s.calls &&
                                           double(moved) / double(s.calls) / double(s.workers) >=
                                               P::low_occupancy_min_bytes_per_worker);
    if (!s.transfer && s.shaped_launches > 0 && s.occupancy < P::low_occupancy && s.timed_calls > 0 &&
        s.seconds_per_call() >= P::low_occupancy_min_seconds &&
        spread_out) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.0f%%", 100 * s.occupancy);
      m << s.name << " took " << format_seconds(s.seconds_per_call()) << " per call with a launch shape of "
        << s.shape() << " that keeps " << pct
        << " of the device busy: give it more blocks (a grid of at least one full wave, SMs x blocks per SM) or"
           " let the library choose the shape (for_each_index, for_each_config, a pipeline without"
           " with_config) (guideline: occupancy)";
      out.push_back({"low_occupancy", at, m.str(), "examples/launch_config.cpp"});
      m.str("");
    }
    if (s.fusable_calls > 0) {
      const auto colon = at.rfind(':');
      m << s.name << " maps the array that the single map on line " << s.fusable_with_line
        << " has just written (" << s.fusable_calls << (s.fusable_calls == 1 ? " time" : " times")
        << "): compose the two into one pipeline (map(f) | map(g)), one pass through memory instead of two";
      out.push_back({"could_fuse", at.substr(0, colon + 1) + std::to_string(s.fusable_with_line) + "-" +
                                       std::to_string(s.line),
                     m.str(), "examples/seed_pipeline.cpp"});
      m.str("");
    }
    if (s.calls >= P::grows_min_calls && s.calls_pool_grew == s.calls) {
      m << "memory in use grew on every one of the " << s.calls << " calls of " << s.name << " ("
        << bytes(s.allocated_bytes) << " allocated, " << bytes(s.bytes_in_use) << " in use after the last): the arrays made here stay alive; reuse one array (write into it with copy or a "
           "pipeline's output argument) or let each go before the next call";
      out.push_back({"pool_grows", at, m.str(), "examples/async_overlap.cpp"});
      m.str("");
    }
  }
  return out;
}

std::string profile_report::table() const {
  std::ostringstream os;
  os << "resident profile:";
  if (sites.empty()) return os.str() + " nothing recorded\n";
  os << " " << sites.size() << (sites.size() == 1 ? " call site" : " call sites") << "; copy rate";
  for (std::size_t i = 0; i < copy_rates.size(); ++i)
    os << (i ? ", " : " ") << copy_rates[i].first.name() << " "
       << (copy_rates[i].second > 0 ? format_rate(copy_rates[i].second) : "not measured");
  os << "\n";
  // The device column only when the sites ran on several devices.
  const bool one_device = std::all_of(sites.begin(), sites.end(), [&](const profile_site& s) { return s.dev == sites[0].dev; });
  const std::vector<std::string> head = {"site", "call", "device", "calls", "kernels", "time", "per call",
                                         "read", "written", "GB/s", "of copy", "H2D", "D2H", "launch shape",
                                         "occupancy"};
  std::vector<std::vector<std::string>> rows;
  for (const profile_site& s : sites) {
    const double rate = copy_rate(s.dev);
    const bool timed = s.timed_calls > 0;
    char pct[16] = "-";
    if (timed && !s.transfer && rate > 0 && (s.bytes_read + s.bytes_written) > 0)
      std::snprintf(pct, sizeof pct, "%.0f%%", 100 * s.gbps() / rate);
    char occ[16] = "-";
    if (s.shaped_launches > 0) std::snprintf(occ, sizeof occ, "%.0f%%", 100 * s.occupancy);
    const double moved = double(s.bytes_read + s.bytes_written);
    const std::string call =
        s.file.empty() ? "-" : s.stages > 1 ? s.name + " (" + std::to_string(s.stages) + " stages)" : s.name;
    rows.push_back({s.site(), call, s.dev.name(), std::to_string(s.calls), std::to_string(s.kernels),
                    timed ? format_seconds(s.seconds) : "-", timed ? format_seconds(s.seconds_per_call()) : "-",
                    bytes(s.bytes_read), bytes(s.bytes_written), timed && moved > 0 ? format_rate(s.gbps()) : "-", pct,
                    bytes(s.h2d_bytes), bytes(s.d2h_bytes), s.shape(), occ});
  }
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (auto& r : rows) w[c] = std::max(w[c], r[c].size());
  }
  // Within 100 columns: the columns in panels, each after the first led by the row's number (which the
  // first shows too), so that no line is wider; one panel, as it was, where everything fits.
  std::vector<std::size_t> shown;
  for (std::size_t c = 0; c < head.size(); ++c)
    if (!(c == 2 && one_device)) shown.push_back(c);
  const std::size_t number_width = std::to_string(rows.size()).size() + 1, most = 100;
  std::size_t whole = 0;
  for (std::size_t c : shown) whole += (whole ? 2 : 0) + w[c];
  const bool numbered = whole > most;
  std::vector<std::vector<std::size_t>> panels(1);
  std::size_t width = numbered ? number_width : 0;
  for (std::size_t c : shown) {
    if (!panels.back().empty() && width + 2 + w[c] > most) panels.emplace_back(), width = number_width;
    width += (width ? 2 : 0) + w[c];
    panels.back().push_back(c);
  }
  auto line = [&](const std::vector<std::string>& r, const std::vector<std::size_t>& cols, const std::string& number) {
    std::string l = numbered ? std::string(number_width - number.size(), ' ') + number : "";
    for (std::size_t c : cols) {
      const std::size_t pad = w[c] - r[c].size();
      if (!l.empty()) l += "  ";
      if (c < 3) l += r[c] + std::string(pad, ' ');  // text left, figures right
      else l += std::string(pad, ' ') + r[c];
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    return l + "\n";
  };
  for (std::size_t p = 0; p < panels.size(); ++p) {
    if (p) os << "\n";
    os << line(head, panels[p], "#");
    for (std::size_t i = 0; i < rows.size(); ++i) os << line(rows[i], panels[p], std::to_string(i + 1));
  }
  if (advice.empty()) {
    os << "advice: none (nothing measured calls for a change)\n";
  } else {
    os << "advice:\n";
    for (const profile_advice& a : advice)
      os << wrap(a.site + " [" + a.kind + "] " + a.message + "; see " + a.example + ".", 100);
  }
  return os.str();
}

std::string profile_report::json() const {
  std::ostringstream os;
  os << "{\"schema\":\"resident.profile\",\"schema_version\":1,\"copy_rates\":[";
  for (std::size_t i = 0; i < copy_rates.size(); ++i)
    os << (i ? "," : "") << "{\"device\":" << json_string(copy_rates[i].first.name())
       << ",\"gbps\":" << json_number(copy_rates[i].second) << "}";
  os << "],\"sites\":[";
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const profile_site& s = sites[i];
    os << (i ? "," : "") << "{\"file\":" << json_string(s.file) << ",\"line\":" << s.line
       << ",\"name\":" << json_string(s.name) << ",\"transfer\":" << (s.transfer ? "true" : "false") << ",\"stages\":" << s.stages
       << ",\"device\":" << json_string(s.dev.name()) << ",\"calls\":" << s.calls
       << ",\"timed_calls\":" << s.timed_calls << ",\"kernels\":" << s.kernels
       << ",\"seconds\":" << json_number(s.seconds) << ",\"bytes_read\":" << s.bytes_read
       << ",\"bytes_written\":" << s.bytes_written << ",\"elements\":" << s.elements
       << ",\"gbps\":" << json_number(s.gbps()) << ",\"h2d_bytes\":" << s.h2d_bytes
       << ",\"d2h_bytes\":" << s.d2h_bytes << ",\"d2d_bytes\":" << s.d2d_bytes
       << ",\"allocations\":" << s.allocations << ",\"allocated_bytes\":" << s.allocated_bytes
       << ",\"calls_pool_grew\":" << s.calls_pool_grew << ",\"bytes_in_use\":" << s.bytes_in_use
       << ",\"fusable_calls\":" << s.fusable_calls << ",\"shaped_launches\":" << s.shaped_launches
       << ",\"grid_blocks\":" << s.grid_blocks << ",\"block_threads\":" << s.block_threads
       << ",\"blocks_per_sm\":" << s.blocks_per_sm << ",\"workers\":" << s.workers
       << ",\"occupancy\":" << json_number(s.occupancy) << "}";
  }
  os << "],\"advice\":[";
  for (std::size_t i = 0; i < advice.size(); ++i)
    os << (i ? "," : "") << "{\"kind\":" << json_string(advice[i].kind) << ",\"site\":" << json_string(advice[i].site)
       << ",\"message\":" << json_string(advice[i].message) << ",\"example\":" << json_string(advice[i].example)
       << "}";
  os << "]}";
  return os.str();
}

// Written through the one file writer (resident/detail/files.hpp): a regular file only (a device node
// or FIFO at the path is refused, never replaced), aside in the same folder, then renamed over the
// path, so a reader, or another process saving to the same path (ranks of one job share
// RESIDENT_PROFILE_JSON), sees the previous document or the new one, and a failed write keeps the
// previous file.
void profile_report::save_json(const std::string& path) const {
  RESIDENT_EXPECTS(!path.empty(), "could not write the profile: the path is empty; give a file name");
  if (std::string why = detail::try_write_file_atomically(path, json() + "\n"); !why.empty())
    RESIDENT_FAIL("could not write the profile to '" + path + "': " + why);
}

std::ostream& operator<<(std::ostream& os, const profile_report& r) { return os << r.table(); }

}  // namespace resident
