#pragma once
// Aligned text tables with units in the headers, and the same rows as JSON.

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <iosfwd>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace resident::cli {

class table {
 public:
  struct column {
    std::string header;  ///< with its unit, e.g. "time (ms)"
    std::string key;     ///< JSON key
    bool numeric = true; ///< right-aligned
  };
  explicit table(std::vector<column> columns) : columns_(std::move(columns)) {}

  /// A row: one cell per column; numbers keep their value for JSON (a JSON number, an integer where
  /// the figure is a count) and their text for printing.
  struct cell {
    std::string text;
    nlohmann::json value;
    cell(const char* s) : text(s), value(s) {}
    cell(std::string s) : text(s), value(std::move(s)) {}
    /// v with `decimals` decimals (see format_number); decimals == 0 and a whole v: a JSON integer.
    cell(double v, int decimals);
    /// A count: printed and written as an integer.
    static cell count(std::uint64_t n) { return cell(std::to_string(n), nlohmann::json(n)); }
    /// A byte count: printed with a binary unit ("128.0 KiB"), written as the integer byte count.
    static cell bytes(std::uint64_t b);
    /// A size 2^log2: printed "2^14", written as the integer exponent (name its key log2_*).
    static cell power_of_two(int log2) { return cell("2^" + std::to_string(log2), nlohmann::json(log2)); }
    /// v printed in scientific notation with `digits` digits after the point ("1.6e-07"), written as v.
    static cell scientific(double v, int digits);
    static cell none() { return cell(std::string("-"), nlohmann::json(nullptr)); }

   private:
    cell(std::string t, nlohmann::json v) : text(std::move(t)), value(std::move(v)) {}
  };
  void add(std::vector<cell> row) { rows_.push_back(std::move(row)); }
  std::size_t rows() const noexcept { return rows_.size(); }

  /// Prints the table within width columns where it can: a wider one gets its headers broken over
  /// lines, then its columns printed in groups, each led by the first column.
  void print(std::ostream& os, const std::string& indent = "  ", std::size_t width = 100) const;
  nlohmann::json json() const;

 private:
  std::vector<column> columns_;
  std::vector<std::vector<cell>> rows_;
};

/// A number with a fixed count of decimals, or with at least 3 significant digits when decimals < 0.
std::string format_number(double v, int decimals);

/// Where tables, notes and progress go: stdout, or stderr once JSON has claimed stdout (`--json -`).
std::ostream& out();
/// Sends out() to stderr, so that stdout carries JSON alone.
void report_to_stderr();

/// text broken at spaces into lines of at most width columns (a longer word keeps its own line), each
/// starting with indent; the text's own line breaks are kept.
std::string wrap(const std::string& text, std::size_t width = 100, const std::string& indent = "");

/// Checks that option's output file path ("" = none, "-" = stdout) can be written, by opening it for
/// writing (created and removed again when it did not exist; an existing file is left as it is).
/// @throws resident::invalid_argument naming the option and what is wrong (a directory, permission
/// denied, no such folder, ...).
void check_writable(const std::string& option, const std::string& path);

/// The schema every JSON of the CLI follows (docs/json.md, docs/schema/resident-cli.schema.json): each
/// output names it as "schema" with "schema_version", and the command that wrote it as "command".
inline constexpr const char* json_schema = "resident.cli";
/// The schema's version: raised when a field is removed or renamed or its unit changes (a field added
/// keeps it).
inline constexpr int json_schema_version = 1;

/// The record of this run that every JSON of the CLI carries as "run": resident_version, commit (of
/// the source the CLI was built from; "unknown" without git), device (as given), gpu (its name; null
/// on the CPU), driver and cuda_runtime (CUDA versions such as "12.8"; null where no GPU answers),
/// host (the host name) and date (UTC, ISO 8601).
nlohmann::json run_record(const std::string& device);

/// The common head of a benchmark's JSON: {"benchmark", "device", "device_name", "run", "rows"}.
nlohmann::json bench_json(const std::string& benchmark, const std::string& device, const std::string& device_name,
                          const table& rows);

/// Writes j to path ("-" = stdout), with "schema" and "schema_version" added; an object without "run"
/// gets run_record(j["device"]) first. j must name its "command" ("info", "demo", "bench NAME"). @throws resident::invalid_argument saying why the file cannot be written.
void write_json(const nlohmann::json& j, const std::string& path);

/// Progress on stderr for runs longer than a moment: a "\r" counter on a terminal (not TERM=dumb), else a
/// line per step. A step that lasts says so while it runs: its seconds every second on a terminal, else a
/// line at 10 s and every 30 s after (a ticker thread, stopped by finish()).
class progress {
 public:
  progress(std::string what, std::size_t total);
  void step(const std::string& item);
  /// Clears the terminal's counter line, so that what follows starts on a clean line.
  void finish();
  ~progress() { finish(); }
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

 private:
  void tick();
  void line(std::size_t seconds);  // with mu_ held

  std::string what_, item_;
  std::size_t total_, done_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point since_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread ticker_;
};

}  // namespace resident::cli
