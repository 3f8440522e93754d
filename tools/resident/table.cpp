#include "table.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "resident/error.hpp"

namespace resident::cli {

std::string format_number(double v, int decimals) {
  char buf[64];
  if (!std::isfinite(v)) return "-";
  if (decimals >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  } else {
    double a = std::fabs(v);
    int d = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
    std::snprintf(buf, sizeof buf, "%.*f", d, v);
  }
  return buf;
}

table::cell::cell(double v, int decimals) : text(format_number(v, decimals)), value(v) {
  if (!std::isfinite(v)) value = nullptr;
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

void check_writable(const std::string& path) {
  if (path.empty() || path == "-") return;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const std::filesystem::path dir = folder.empty() ? std::filesystem::path(".") : folder;
  std::error_code ec;  // a path the system cannot even look up (too long, bad bytes) is an error too
  if (!std::filesystem::is_directory(dir, ec)) {
    const bool missing = !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
    throw invalid_argument("cannot write '" + path + "': the folder '" + dir.string() +
                           (missing ? "' does not exist" : "' cannot be used (" + ec.message() + ")") +
                           "; create it or choose another path");
  }
  if (access(dir.c_str(), W_OK) != 0)
    throw invalid_argument("cannot write '" + path + "': the folder '" + dir.string() + "' is not writable");
}

nlohmann::json bench_json(const std::string& benchmark, const std::string& device, const std::string& device_name,
                          const table& rows) {
  return {{"benchmark", benchmark}, {"device", device}, {"device_name", device_name}, {"rows", rows.json()}};
}

void write_json(const nlohmann::json& j, const std::string& path) {
  if (path == "-") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::ofstream f(path);
  if (!f) throw invalid_argument("cannot write JSON to '" + path + "': check that the folder exists and is writable");
  f << j.dump(2) << "\n";
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

progress::~progress() {
  if (tty_) std::cerr << "\r\033[K" << std::flush;
}

}  // namespace resident::cli
