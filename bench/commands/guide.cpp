// resident bench guide: runs the guide's examples (examples/*.cpp, built next to the CLI) and prints
// their measurements as one table. Each example appends its rows as JSON lines to the file named by
// RESIDENT_GUIDE_OUT; the examples also run on their own and as tests.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench.hpp"
#include "plot.hpp"
#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "table.hpp"

namespace resident::cli {
namespace {

namespace fs = std::filesystem;

// The guide's measured examples, in the order docs/guide.md tells them.
const char* const guide_examples[] = {"memory_kinds",     "coalescing",    "divergence",
                                      "redundant_access", "launch_config", "async_overlap"};

// The build tree's examples, for the CLI the build tree made; an installed CLI (or a copy elsewhere) has
// no default: a folder beside its install prefix is whoever made it first's (and its programs would run).
fs::path default_examples_dir() {
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  const fs::path built = fs::weakly_canonical(RESIDENT_BUILT_CLI_DIR, ec);
  if (ec || exe.parent_path() != built)
    throw invalid_argument("bench guide: this resident was not run from the build tree it was built in, so it "
                           "knows no examples folder; pass --examples DIR (the built examples, e.g. build/cpu/examples)");
  return RESIDENT_BUILT_EXAMPLES_DIR;
}

// The examples run as this user: the folder and each program must be this user's (or root's) alone.
void require_trusted(const fs::path& dir, const std::string& program) {
  if (const std::string why = detail::untrusted_path(dir.string()); !why.empty())
    throw invalid_argument("bench guide: the examples folder '" + dir.string() + "' is not safe to run programs "
                           "from: " + why + "; pass --examples with a folder of your own");
  struct stat st {};
  const std::string path = (dir / program).string();
  if (::lstat(path.c_str(), &st) != 0)
    throw invalid_argument("bench guide: no " + program + " in '" + dir.string() +
                           "'; build the examples (cmake --build <build>) or pass --examples DIR");
  if (const std::string why = detail::untrusted_program(path); !why.empty())
    throw invalid_argument("bench guide: '" + path + "' is not a program of yours that no one else can change (" +
                           why + "); it is not run");
}

}  // namespace

// An example's time limit: each takes seconds, so one past this waits on something (a stuck device).
constexpr double example_seconds = 600;

int run_bench_guide(const bench_options& o, const std::string& examples_dir) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  const fs::path dir = examples_dir.empty() ? default_examples_dir() : fs::path(examples_dir);
  for (const char* name : guide_examples) require_trusted(dir, "example_" + std::string(name));
  // The rows file and each example's output live in a private folder (mkdtemp, 0700), removed on every
  // path out: no name in /tmp another user could guess and plant a link at. The examples start with an
  // argument vector, no shell.
  const detail::private_dir work("resident-guide");
  const std::string rows_file = work.file("rows.jsonl");
  out() << wrap("The guide's examples on " + d.name() + " (" + properties(d).name + ")") << "\n";
  {
    progress p("bench guide", std::size(guide_examples));
    for (const char* name : guide_examples) {
      p.step(name);
      const detail::program_result r = detail::run_program(
          {(dir / ("example_" + std::string(name))).string()}, {{"RESIDENT_GUIDE_OUT", rows_file}, {"RESIDENT_DEVICE", d.name()}},
          example_seconds);
      if (r.status == detail::program_result::timed_out)
        throw error("bench guide: example " + std::string(name) + " ran past " + format_number(example_seconds, 0) +
                    " s and was stopped; run it alone (" + (dir / ("example_" + std::string(name))).string() +
                    ") to see where it waits");
      if (r.status != 0)
        throw error("bench guide: example " + std::string(name) + " failed" +
                    (r.status < 0 ? std::string(" to start") : " (exit " + std::to_string(r.status) + ")") + ":\n" + r.output);
    }
  }
  table t({{"example", "example", false}, {"variant", "variant", false}, {"time (ms)", "ms", true},
           {"vs first (x)", "ratio", true}});
  std::ifstream rows(rows_file);
  std::string line;
  for (std::size_t number = 1; std::getline(rows, line); ++number) try {
      const auto j = nlohmann::json::parse(line);
      t.add({j.at("example").get<std::string>(), j.at("variant").get<std::string>(),
             table::cell(j.at("ms").get<double>(), 4), table::cell(j.at("ratio").get<double>(), 2)});
    } catch (const nlohmann::json::exception& e) {
      throw error("bench guide: line " + std::to_string(number) + " the examples wrote to RESIDENT_GUIDE_OUT is not a "
                  "row (" + json_problem(e) + "): rebuild the examples with this resident, e.g. in build/cpu/examples");
    }
  if (t.rows() == 0)
    throw error("bench guide: no example in '" + dir.string() + "' reported a time (RESIDENT_GUIDE_OUT stayed empty): "
                "give --examples the folder of the built examples, e.g. build/cpu/examples");
  t.print(out());
  out() << wrap("Each example prints why its ratio comes out as it does: run it alone (" + dir.string() +
                "/example_NAME).")
        << "\n";
  if (!o.json.empty()) write_json(bench_json("guide", d.name(), properties(d).name, t), o.json);
  return 0;
}

}  // namespace resident::cli
