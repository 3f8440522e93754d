#pragma once
// Aligned text tables with units in the headers, and the same rows as JSON.

#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>
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

  /// A row: one cell per column; numbers keep their value for JSON and their text for printing.
  struct cell {
    std::string text;
    nlohmann::json value;
    cell(const char* s) : text(s), value(s) {}
    cell(std::string s) : text(s), value(std::move(s)) {}
    cell(double v, int decimals);
    static cell none() { return cell(std::string("-"), nullptr); }

   private:
    cell(std::string t, std::nullptr_t) : text(std::move(t)), value(nullptr) {}
  };
  void add(std::vector<cell> row) { rows_.push_back(std::move(row)); }

  void print(std::ostream& os, const std::string& indent = "  ") const;
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

/// The common head of a benchmark's JSON: {"benchmark", "device", "device_name", "rows"}.
nlohmann::json bench_json(const std::string& benchmark, const std::string& device, const std::string& device_name,
                          const table& rows);

/// Writes j to path ("-" = stdout). @throws resident::invalid_argument saying why the file cannot be written.
void write_json(const nlohmann::json& j, const std::string& path);

/// Progress on stderr for runs longer than a moment: a "\r" counter on a terminal, else a line per step.
class progress {
 public:
  progress(std::string what, std::size_t total);
  void step(const std::string& item);
  /// Clears the terminal's counter line, so that what follows starts on a clean line.
  void finish();
  ~progress() { finish(); }

 private:
  std::string what_;
  std::size_t total_, done_ = 0;
  bool tty_;
};

}  // namespace resident::cli
