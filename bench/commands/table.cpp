#include "table.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "resident/detail/files.hpp"
#include "resident/error.hpp"
#include "resident/resident.hpp"
#include "vendor.hpp"

namespace resident::cli {

std::string format_number(double v, int decimals) {
  char buf[64];
  if (!std::isfinite(v)) return "-";
  if (decimals >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  } else {
    // Three significant digits below 100 (0.00123 stays readable), whole numbers above, and an
    // exponent below 0.001, where leading zeros would widen the column.
    const double a = std::fabs(v);
    if (a != 0 && a < 1e-3) {
      std::snprintf(buf, sizeof buf, "%.2e", v);
    } else {
      const int d = a == 0 ? 0 : std::clamp(2 - int(std::floor(std::log10(a))), 0, 5);
      std::snprintf(buf, sizeof buf, "%.*f", d, v);
    }
  }
  return buf;
}

table::cell::cell(double v, int decimals) : text(format_number(v, decimals)), value(v) {
  if (!std::isfinite(v))
    value = nullptr;
  else if (decimals == 0 && v == std::floor(v) && std::fabs(v) < 0x1p53)
    value = std::int64_t(v);
}

table::cell table::cell::bytes(std::uint64_t b) { return cell(detail::format_bytes(double(b)), nlohmann::json(b)); }

table::cell table::cell::scientific(double v, int digits) {
  if (!std::isfinite(v)) return none();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  return cell(buf, nlohmann::json(v));
}

void table::print(std::ostream& os, const std::string& indent) const {
  std::vector<std::size_t> w(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    w[c] = columns_[c].header.size();
    for (auto& r : rows_) w[c] = std::max(w[c], r[c].text.size());
  }
  auto line = [&](auto get, bool header) {
    std::string s = indent;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      std::string t = get(c);
      std::string pad(w[c] - t.size(), ' ');
      bool right = columns_[c].numeric && !header;
      if (header && columns_[c].numeric) right = true;
      s += right ? pad + t : t + pad;
      if (c + 1 < columns_.size()) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    os << s << "\n";
  };
  line([&](std::size_t c) { return columns_[c].header; }, true);
  std::string rule = indent;
  for (std::size_t c = 0; c < columns_.size(); ++c) rule += std::string(w[c], '-') + (c + 1 < columns_.size() ? "  " : "");
  os << rule << "\n";
  for (auto& r : rows_) line([&](std::size_t c) { return r[c].text; }, false);
}

nlohmann::json table::json() const {
  nlohmann::json a = nlohmann::json::array();
  for (auto& r : rows_) {
    nlohmann::json o;
    for (std::size_t c = 0; c < columns_.size(); ++c) o[columns_[c].key] = r[c].value;
    a.push_back(o);
  }
  return a;
}

namespace {
std::ostream* report_stream = &std::cout;

[[noreturn]] void refuse(const std::string& option, const std::string& path, const std::string& why) {
  throw invalid_argument(option + ": cannot write '" + path + "': " + why);
}
}  // namespace

std::ostream& out() { return *report_stream; }
void report_to_stderr() { report_stream = &std::cerr; }

std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
  if (const std::size_t nl = text.find('\n'); nl != std::string::npos) {  // each line on its own
    const std::string rest = text.substr(nl + 1);
    return wrap(text.substr(0, nl), width, indent) + (rest.empty() ? "" : "\n" + wrap(rest, width, indent));
  }
  std::string result, line = indent;
  std::size_t start = text.find_first_not_of(' ');
  while (start != std::string::npos && start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      result += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + word;
    start = text.find_first_not_of(' ', end);
  }
  return result + line;
}

void check_writable(const std::string& option, const std::string& path) {
  if (path.empty() || path == "-") return;  // not given (an empty value is refused when parsed), or stdout
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    refuse(option, path, "it is a directory; give a file name inside it, e.g. '" +
                             (std::filesystem::path(path) / (option == "--plot" ? "out.png" : "out.json")).string() + "'");
  if (std::string why = detail::write_problem(path); !why.empty()) refuse(option, path, why);
}
nlohmann::json run_record(const std::string& device) {
  nlohmann::json r{{"resident_version", version()}, {"commit", RESIDENT_COMMIT}, {"device", device},
                   {"gpu", nullptr}, {"driver", nullptr}, {"cuda_runtime", nullptr}};
  // The GPU the run used: the first CUDA device named in `device` ("cuda:1", "cuda:0,cuda:1").
  if (const auto at = device.find("cuda"); at != std::string::npos && cuda_device_count() > 0) {
    try {
      const std::string first = device.substr(at, device.find(',', at) - at);
      r["gpu"] = properties(parse_device(first)).name;
    } catch (const std::exception&) {  // a device that does not answer has no name to record
    }
  }
  if (cuda_device_count() > 0) {
    const auto [driver, runtime] = cuda_versions();
    auto text = [](int v) {  // 12080 -> "12.8"
      return v > 0 ? nlohmann::json(std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10)) : nlohmann::json();
    };
    r["driver"] = text(driver);
    r["cuda_runtime"] = text(runtime);
  }
  char host[256] = {};
  r["host"] = ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("unknown");
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  r["date"] = date;
  return r;
}

nlohmann::json bench_json(const std::string& benchmark, const std::string& device, const std::string& device_name,
                          const table& rows) {
  return {{"command", "bench " + benchmark}, {"benchmark", benchmark}, {"device", device},
          {"device_name", device_name}, {"run", run_record(device)}, {"rows", rows.json()}};
}

void write_json(const nlohmann::json& given, const std::string& path) {
  RESIDENT_EXPECTS(given.is_object() && given.contains("command"), "a JSON output must name its command");
  nlohmann::json j = given;
  j["schema"] = json_schema;
  j["schema_version"] = json_schema_version;
  if (!j.contains("run")) j["run"] = run_record(j.value("device", std::string()));
  if (path == "-") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  // Aside and renamed into place: a failed write (a full disk, ulimit -f) keeps the earlier file.
  if (std::string why = detail::try_write_file_atomically(path, j.dump(2) + "\n"); !why.empty()) refuse("--json", path, why);
  out() << "JSON written to " << path << "\n";
}

progress::progress(std::string what, std::size_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0) {}

void progress::step(const std::string& item) {
  ++done_;
  if (tty_)
    std::cerr << "\r\033[K" << what_ << " [" << done_ << "/" << total_ << "] " << item << std::flush;
  else
    std::cerr << what_ << " [" << done_ << "/" << total_ << "] " << item << "\n";
}

void progress::finish() {
  if (tty_ && done_ > 0) std::cerr << "\r\033[K" << std::flush;
  done_ = 0;
}

}  // namespace resident::cli
