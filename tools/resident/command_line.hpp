#pragma once
// The resident command line: its options, parsed apart from running them (the fuzz target parses only).

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"

namespace resident::cli {

class command_line {
 public:
  command_line();
  /// Parses argv. @throws CLI::ParseError (print it with app().exit(e)).
  void parse(int argc, const char* const* argv);
  /// Checks what parsing could not (devices, algorithm names, output folders) and runs the command.
  /// @throws resident::error.
  int run();
  /// The checks of run() without running anything. @throws resident::error.
  void check() const;
  CLI::App& app() { return *app_; }
  /// Whether --json names a file (not '-'): then standard output carries the table alone.
  bool writes_json_file() const {
    for (const std::string* j : {&info_.json, &demo_.json, &bench_.json, &stream_.json})
      if (!j->empty() && *j != "-") return true;
    return false;
  }
  /// What to print for a parse error: the option, the value given and an example, in place of the
  /// parser's own words (CLI::Success, help and version, are printed by app().exit(e)).
  std::string explain(const CLI::ParseError& e) const;

 private:
  std::string command_named() const;  ///< "demo", "bench pipeline", ... as given ("" before the command)
  const CLI::App* app_named(const std::string& command) const;
  std::string example(const std::string& option, const std::string& command) const;
  std::string unexpected(const std::string& message, const std::string& command) const;

  std::unique_ptr<CLI::App> app_;
  std::vector<std::string> args_;
  info_options info_;
  demo_options demo_;
  bench_options bench_;
  stream_bench_options stream_;
  std::vector<std::string> algos_;
  std::string examples_dir_;
  CLI::App *info_cmd_ = nullptr, *demo_cmd_ = nullptr, *bench_cmd_ = nullptr, *pipeline_ = nullptr,
           *small_ = nullptr, *foundation_ = nullptr, *rng_ = nullptr, *flow_ = nullptr, *jit_ = nullptr, *matmul_ = nullptr,
           *guide_ = nullptr, *stream_cmd_ = nullptr, *dist_ = nullptr;
  CLI::Option *demo_gpus_ = nullptr, *demo_beyond_ = nullptr, *demo_size_ = nullptr;
};

}  // namespace resident::cli
