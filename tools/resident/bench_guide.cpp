// resident bench guide: runs the guide's examples (examples/*.cpp, built next to the CLI) and prints
// their measurements as one table. Each example appends its rows as JSON lines to the file named by
// RESIDENT_GUIDE_OUT; the examples also run on their own and as tests.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "commands.hpp"
#include "resident/resident.hpp"
#include "table.hpp"

namespace resident::cli {
namespace {

namespace fs = std::filesystem;

// The guide's measured examples, in the order docs/guide.md tells them.
const char* const guide_examples[] = {"memory_kinds",     "coalescing",    "divergence",
                                      "redundant_access", "launch_config", "async_overlap"};

fs::path default_examples_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "examples";
  return exe.parent_path().parent_path().parent_path() / "examples";  // <build>/tools/resident/resident
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

int run_bench_guide(const bench_options& o, const std::string& examples_dir) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  const fs::path dir = examples_dir.empty() ? default_examples_dir() : fs::path(examples_dir);
  for (const char* name : guide_examples)
    if (!fs::exists(dir / ("example_" + std::string(name))))
      throw invalid_argument("bench guide: no example_" + std::string(name) + " in '" + dir.string() +
                             "'; build the examples (cmake --build <build>) or pass --examples DIR");
  const fs::path rows_file = fs::temp_directory_path() / ("resident-guide-" + std::to_string(::getpid()) + ".jsonl");
  fs::remove(rows_file);
  out() << "The guide's examples on " << d.name() << " (" << properties(d).name << ")\n";
  {
    progress p("bench guide", std::size(guide_examples));
    for (const char* name : guide_examples) {
      p.step(name);
      const fs::path log = fs::temp_directory_path() / ("resident-guide-" + std::to_string(::getpid()) + ".log");
      const std::string cmd = "RESIDENT_GUIDE_OUT=" + shell_quote(rows_file.string()) +
                              " RESIDENT_DEVICE=" + shell_quote(d.name()) + " " +
                              shell_quote((dir / ("example_" + std::string(name))).string()) + " > " +
                              shell_quote(log.string()) + " 2>&1";
      const int rc = std::system(cmd.c_str());
      std::ifstream in(log);
      std::stringstream out;
      out << in.rdbuf();
      fs::remove(log);
      if (rc != 0) throw error("bench guide: example " + std::string(name) + " failed:\n" + out.str());
    }
  }
  table t({{"example", "example", false}, {"variant", "variant", false}, {"time (ms)", "ms", true},
           {"vs first (x)", "ratio", true}});
  std::ifstream rows(rows_file);
  std::string line;
  while (std::getline(rows, line)) {
    const auto j = nlohmann::json::parse(line);
    t.add({j["example"].get<std::string>(), j["variant"].get<std::string>(), table::cell(j["ms"].get<double>(), 4),
           table::cell(j["ratio"].get<double>(), 2)});
  }
  fs::remove(rows_file);
  t.print(out());
  out() << "Each example prints why its ratio comes out as it does: run it alone (" << dir.string()
            << "/example_NAME).\n";
  if (!o.json.empty()) write_json(bench_json("guide", d.name(), properties(d).name, t), o.json);
  return 0;
}

}  // namespace resident::cli
