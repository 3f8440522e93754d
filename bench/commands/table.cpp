#include "table.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>
#include <thread>

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

namespace {

// A header broken at spaces into lines no wider than w (a longer word keeps its own line).
std::vector<std::string> header_lines(const std::string& header, std::size_t w) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t start = 0;
  while (start < header.size()) {
    std::size_t end = header.find(' ', start);
    if (end == std::string::npos) end = header.size();
    const std::string word = header.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > w) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  lines.push_back(line);
  return lines;
}

}  // namespace

void table::print(std::ostream& os, const std::string& indent, std::size_t width) const {
  const std::size_t cols = columns_.size();
  std::vector<std::size_t> w(cols), cells(cols, 0);
  std::size_t total = indent.size();
  for (std::size_t c = 0; c < cols; ++c) {
    for (auto& r : rows_) cells[c] = std::max(cells[c], r[c].text.size());
    w[c] = std::max(cells[c], columns_[c].header.size());
    total += w[c] + (c ? 2 : 0);
  }
  // Too wide: headers broken over lines as narrow as their cells allow (10 columns at least, or the
  // longest word), then the columns in groups that fit, each led by the first column, the rows' key.
  std::vector<std::vector<std::string>> heads(cols);
  std::size_t head_rows = 1;
  for (std::size_t c = 0; c < cols; ++c) {
    if (total <= width) {
      heads[c] = {columns_[c].header};
      continue;
    }
    heads[c] = header_lines(columns_[c].header, std::max(cells[c], std::min<std::size_t>(columns_[c].header.size(), 10)));
    w[c] = cells[c];
    for (auto& l : heads[c]) w[c] = std::max(w[c], l.size());
    head_rows = std::max(head_rows, heads[c].size());
  }
  std::vector<std::vector<std::size_t>> groups{{0}};
  std::size_t used = indent.size() + w[0];
  for (std::size_t c = 1; c < cols; ++c) {
    // A text column at the end stays with its group when 20 columns are left for it (broken below).
    const bool text_fits = c + 1 == cols && !columns_[c].numeric && used + 2 + 20 <= width;
    if (used + 2 + w[c] > width && groups.back().size() > 1 && !text_fits) {
      groups.push_back({0});
      used = indent.size() + w[0];
    }
    groups.back().push_back(c);
    used += 2 + w[c];
  }
  // A group still too wide whose last column is text (a note): that text broken over lines.
  std::vector<bool> wraps(cols, false);
  for (const auto& group : groups) {
    std::size_t before = indent.size();
    for (std::size_t i = 0; i + 1 < group.size(); ++i) before += w[group[i]] + 2;
    const std::size_t last = group.back();
    if (columns_[last].numeric || group.size() < 2 || before + w[last] <= width || before + 20 > width) continue;
    wraps[last] = true;
    w[last] = width - before;
    heads[last] = header_lines(columns_[last].header, w[last]);
    head_rows = std::max(head_rows, heads[last].size());
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    if (g) os << "\n";
    auto line = [&](auto get) {
      std::string s = indent;
      for (std::size_t i = 0; i < group.size(); ++i) {
        const std::size_t c = group[i];
        const std::string t = get(c);
        const std::string pad(w[c] - std::min(w[c], t.size()), ' ');
        s += columns_[c].numeric ? pad + t : t + pad;
        if (i + 1 < group.size()) s += "  ";
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      os << s << "\n";
    };
    // Header lines bottom-aligned, so each header's last line sits on the rule.
    for (std::size_t h = 0; h < head_rows; ++h)
      line([&](std::size_t c) {
        const std::size_t skip = head_rows - heads[c].size();
        return h < skip ? std::string() : heads[c][h - skip];
      });
    std::string rule = indent;
    for (std::size_t i = 0; i < group.size(); ++i)
      rule += std::string(w[group[i]], '-') + (i + 1 < group.size() ? "  " : "");
    os << rule << "\n";
    for (auto& r : rows_) {
      const std::size_t last = group.back();
      const std::vector<std::string> parts =
          wraps[last] ? header_lines(r[last].text, w[last]) : std::vector<std::string>{r[last].text};
      for (std::size_t k = 0; k < parts.size(); ++k)
        line([&](std::size_t c) { return c == last ? parts[k] : k == 0 ? r[c].text : std::string(); });
    }
  }
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
  // Each line keeps its own indent (an example's two spaces) and its inner runs of blanks (columns);
  // one too long breaks at a blank and goes on at the same indent.
  std::string out;
  for (std::size_t start = 0;;) {
    const std::size_t nl = text.find('\n', start);
    const std::string src = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    const std::size_t own = std::min(src.find_first_not_of(' '), src.size());
    const std::string lead = indent + src.substr(0, own);
    std::string line = src.empty() ? "" : lead;  // a blank line stays empty
    for (std::size_t i = own; i < src.size();) {
      std::size_t end = src.find(' ', i);
      if (end == std::string::npos) end = src.size();
      const std::string word = src.substr(i, end - i);
      const bool first = line.size() == lead.size();
      if (!first && line.size() + 1 + word.size() > width) {
        out += line + '\n';
        line = lead + word;
      } else {
        line += (first ? "" : " ") + word;
      }
      i = end + 1;
    }
    out += line;
    if (nl == std::string::npos) return out;
    out += '\n';
    start = nl + 1;
  }
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

namespace {
// TERM=dumb (an editor's shell, some CI logs): no cursor movement, so lines as for a file.
bool dumb_terminal() {
  const char* t = std::getenv("TERM");
  return t == nullptr || std::string(t) == "dumb";
}
}  // namespace

progress::progress(std::string what, std::size_t total)
    : what_(std::move(what)), total_(total), tty_(isatty(STDERR_FILENO) != 0 && !dumb_terminal()) {}

void progress::line(std::size_t seconds) {
  const std::string head = what_ + " [" + std::to_string(done_) + "/" + std::to_string(total_) + "] " + item_;
  if (tty_)
    std::cerr << "\r\033[K" << head << (seconds ? " (" + std::to_string(seconds) + " s)" : "") << std::flush;
  else
    std::cerr << head << (seconds ? ": still running, " + std::to_string(seconds) + " s" : "") << "\n";
}

void progress::step(const std::string& item) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  item_ = item;
  since_ = std::chrono::steady_clock::now();
  line(0);
  if (!ticker_.joinable()) {
    try {
      ticker_ = std::thread([this] { tick(); });
    } catch (const std::system_error&) {  // no thread to be had (a process limit): the steps alone are shown
    }
  }
}

void progress::tick() {
  std::unique_lock<std::mutex> lock(mu_);
  // A terminal: the seconds every second. A file or pipe: a line at 10 s into a step, then every 30 s.
  std::size_t step = 0;
  long long next = 10;  // the next line's second into the step (a file or pipe)
  while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since_).count();
    if (step != done_) step = done_, next = 10;
    if (done_ == 0) continue;
    if (tty_ && s >= 2) line(std::size_t(s));
    if (!tty_ && s >= next) line(std::size_t(s)), next = s + 30;
  }
}

void progress::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (tty_ && done_ > 0) std::cerr << "\r\033[K" << std::flush;
    done_ = 0;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  stop_ = false;
}

}  // namespace resident::cli
