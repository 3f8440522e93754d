#include "command_line.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>

#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "commands/table.hpp"

namespace resident::cli {
namespace {

// A whole number from lo to hi, refused with the option's name (CLI11 adds it), what it counts and the range.
CLI::Validator whole_number(const std::string& what, std::uint64_t lo, std::uint64_t hi, const std::string& hi_text) {
  const std::string range = what + " from " + std::to_string(lo) + " to " + hi_text;
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        // Leading zeros count for nothing (00001 is 1), also in the length that keeps stoull in range.
        if (v.size() > 1 && v[0] == '0' && v.find_first_not_of("0123456789") == std::string::npos)
          v.erase(0, std::min(v.find_first_not_of('0'), v.size() - 1));
        const bool digits = !v.empty() && v.size() <= 19 &&
                            std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
        if (!digits) {
          const bool negative = v.size() > 1 && v[0] == '-' && v.find_first_not_of("0123456789", 1) == std::string::npos;
          const bool long_digits = v.size() > 19 && v.find_first_not_of("0123456789") == std::string::npos;
          if (v.rfind("--", 0) == 0)  // `--n --reps 3`: the next option taken as the value
            return "needs a value before the next option ('" + v + "'); give " + range;
          const bool signs = !v.empty() && v.find_first_not_of("+-0123456789") == std::string::npos;
          return "'" + v + "' is " +
                 ((negative && v.find_first_not_of('0', 1) != std::string::npos) || long_digits ? "out of range"
                  : signs ? "not written in digits alone"
                          : "not a whole number") +
                 "; give " + range;
        }
        const std::uint64_t x = std::stoull(v);
        if (x < lo || x > hi) return v + " is out of range; give " + range;
        return {};
      },
      range);
}

// A byte count such as 8GiB, 512MiB or 1000000 from lo (named lo_text) to 2^50, rewritten as its digits.
// unit: the size of one value the bytes hold (4 for float32); a count of bytes not a whole number of
// them is refused, not cut down without a word.
CLI::Validator byte_count(std::size_t lo = 1, const std::string& lo_text = "1", std::size_t unit = 1) {
  const std::string range = "a byte count from " + lo_text + " to 1PiB, e.g. 8GiB, 512MiB or 1000000";
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        const auto b = detail::parse_bytes(v);
        if (!b && !v.empty() && v.find_first_not_of("0123456789") == std::string::npos)
          return v + " is out of range; give " + range;  // digits past what a count holds
        if (!b)
          return "'" + v + "' is not a byte count; give " + range +
                 (v.find('.') != std::string::npos ? " (counts are whole: 1536MiB, not 1.5GiB)" : "");
        if (*b < lo || *b > (std::size_t(1) << 50)) return v + " is out of range; give " + range;
        if (*b % unit != 0)
          return v + " is not a whole number of float32 values (" + std::to_string(unit) + " bytes each); give " +
                 std::to_string(*b / unit * unit) + " or " + std::to_string((*b / unit + 1) * unit);
        v = std::to_string(*b);
        return {};
      },
      "a byte count such as 8GiB");
}

// An existing file (or folder) for what the option reads, refused with the path and what to give.
CLI::Validator existing(const std::string& what, bool folder) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        std::error_code ec;
        const auto st = std::filesystem::status(v, ec);
        if (!std::filesystem::exists(st))
          return "'" + v + "' does not exist; give " + what;
        if (folder != std::filesystem::is_directory(st))
          return "'" + v + "' is " + (folder ? "not a folder" : "a folder") + "; give " + what;
        return {};
      },
      what);
}

const char* const commands[] = {"info", "demo", "bench"};
const char* const benchmarks[] = {"pipeline", "small", "foundation", "rng", "flow", "jit", "matmul", "guide", "stream", "dist"};

template <std::size_t N>
std::string one_of(const char* const (&names)[N]) {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + names[i];
  return s;
}

template <std::size_t N>
bool known(const char* const (&names)[N], const std::string& a) {
  return std::find_if(std::begin(names), std::end(names), [&](const char* n) { return a == n; }) != std::end(names);
}

bool ends_with_png(const std::string& path) {
  if (path.size() < 4) return false;
  std::string ext = path.substr(path.size() - 4);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".png";
}

// Whether two output paths name one file, however spelled (./, .., a link): the later write would
// replace the earlier one.
bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || a == "-" || b == "-") return false;
  std::error_code ea, eb;
  // Made absolute first: a relative name of a file not there yet stays relative in weakly_canonical.
  const auto x = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea),
             y = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  return ea || eb ? a == b : x == y;
}

// Help text within 100 columns: descriptions wrapped at spaces to the room right of the names'
// column (CLI11 2.1 does not wrap; format_help indents the lines after a newline).
constexpr std::size_t help_columns = 100;

class wrapping_formatter : public CLI::Formatter {
 public:
  std::string make_option_desc(const CLI::Option* o) const override {
    return wrap(CLI::Formatter::make_option_desc(o), help_columns - get_column_width());
  }
  std::string make_description(const CLI::App* app) const override {
    return wrap(CLI::Formatter::make_description(app), help_columns);
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true),
                             wrap(sub->get_description(), help_columns - get_column_width()), get_column_width());
    return out.str();
  }
};

}  // namespace

command_line::command_line() {
  app_ = std::make_unique<CLI::App>("resident: GPU data pipelines whose data stays on the device.\n\n"
               "Examples:\n"
               "  resident info --measure          devices, backends and measured copy rates\n"
               "  resident demo                    the seed pipeline five ways, checked and timed\n"
               "  resident demo --device cpu --n 1000000 --json demo.json\n"
               "  resident demo --gpus 2           the same sharded over two GPUs against one\n"
               "  resident bench pipeline --sizes 20,22,24,26,28 --json p.json --plot p.png\n"
               "  resident bench pipeline --from p.json --peers peers.json --plot p.png\n"
               "  resident bench guide --json guide.json   the guide's examples as one table\n"
               "  resident bench stream --size 8GiB --pool-limit 2GiB   data larger than the pool, streamed\n",
               "resident");
  app_->formatter(std::make_shared<wrapping_formatter>());
  app_->set_version_flag("--version", resident::version());
  app_->require_subcommand(1);

  info_cmd_ = app_->add_subcommand("info", "Backends compiled in, each device, the default device");
  info_cmd_->add_flag("--measure", info_.measure, "Also measure device-to-device and host<->device copy rates");
  info_cmd_->add_option("--device", info_.device, "Device for --measure: cpu, cuda or cuda:N (default: the default device)")
      ->type_name("DEVICE");
  info_cmd_->add_option("--json", info_.json, "Write the same as JSON to FILE ('-' for stdout)")->type_name("FILE");

  demo_cmd_ = app_->add_subcommand("demo", "The seed pipeline f1 -> f2 -> f3 run five ways, checked against FP64 and timed");
  demo_cmd_->add_option("--device", demo_.device, "cpu, cuda or cuda:N (default: the GPU if one answers, else the CPU)")
      ->type_name("DEVICE");
  const auto element_count = whole_number("an element count", 1, std::uint64_t(1) << 34, "2^34 (17179869184)");
  const auto repetitions = whole_number("a repetition count", 1, 100000, "100000");
  demo_cmd_->add_option("--n", demo_.n, "Elements (default: 2^26 on a GPU, 2^22 on the CPU)")
      ->type_name("N")
      ->check(element_count);
  demo_cmd_->add_option("--reps", demo_.reps, "Timed repetitions per mode (median reported)")
      ->type_name("N")
      ->check(repetitions);
  demo_cmd_->add_option("--json", demo_.json, "Write the table and ledger as JSON to FILE ('-' for stdout)")
      ->type_name("FILE");
  demo_cmd_->add_flag("--stream", demo_.stream, "Add a mode (e): host to host, streamed in overlapped chunks");
  demo_cmd_->add_flag("--profile", demo_.profile,
                      "Profile the run: each call site's calls, time, bytes and GB/s, with advice (docs/insight.md)");
  demo_gpus_ = demo_cmd_->add_option("--gpus", demo_.gpus,
                                     "Shard the seed pipeline over N devices against one (default n: 2^30 on GPUs, "
                                     "2^22 on the CPU, whose N devices share the host); cuda:K..K+N-1 with --device cuda:K")
                     ->type_name("N")
                     ->check(whole_number("a device count", 1, 64, "64"));
  demo_beyond_ = demo_cmd_->add_flag("--beyond-one", demo_.beyond_one,
                                     "With --gpus (default 2): one array larger than a GPU's memory filled with random "
                                     "numbers, mapped in place and summed on the devices, checked against FP64");
  demo_size_ = demo_cmd_->add_option("--size", demo_.size,
                                     "With --beyond-one: bytes of float32 (default 1.25x cuda:0's free memory; 64MiB on "
                                     "the CPU)")
                   ->type_name("BYTES")
                   ->transform(byte_count(4, "4 (one float32)", 4));

  info_cmd_->footer("Example:\n  resident info --measure --json info.json");
  demo_cmd_->footer("Examples:\n  resident demo --device cpu --n 1000000 --json demo.json\n"
                    "  resident demo --profile          the report per call site, and what to change\n"
                    "  resident demo --gpus 2           2^30 floats over cuda:0 and cuda:1 against cuda:0 alone\n"
                    "  resident demo --gpus 2 --beyond-one --size 200GB   200 GB filled, mapped, summed on two GPUs\n"
                    "  resident demo --device cpu --gpus 2 --beyond-one   the same on two CPU devices, 64 MiB");
  bench_cmd_ = app_->add_subcommand("bench", "Benchmarks, timed with device events (median of many)");
  bench_cmd_->require_subcommand(1);
  // reps: whether the benchmark takes --reps (bench guide runs the examples as they are: none).
  auto common = [&](CLI::App* c, bool reps = true) {
    c->add_option("--device", bench_.device, "cpu, cuda or cuda:N")->type_name("DEVICE");
    c->add_option("--json", bench_.json, "Write the results as JSON to FILE ('-' for stdout)")->type_name("FILE");
    if (reps) c->add_option("--reps", bench_.reps, "Timed repetitions per point")->type_name("N")->check(repetitions);
  };
  auto sizes = [&](CLI::App* c, const char* help, const CLI::Validator& each, const char* type = "N,N,...") {
    c->add_option("--sizes", bench_.sizes, help)->delimiter(',')->type_name(type)->check(each);
  };
  pipeline_ = bench_cmd_->add_subcommand("pipeline", "The fused pipeline, map + sum, a scan and zipped forms against a device memcpy, per size");
  common(pipeline_);
  sizes(pipeline_, "log2 of the element counts (default 20,22,24,26,28 on a GPU; 16,18,20,22 on the CPU)",
        whole_number("log2 element counts", 4, 32, "32"));
  pipeline_->add_option("--repeat", bench_.repeat,
                        "Sweeps of all sizes in one call; each size reports their median and spread (default 3 on a GPU, "
                        "1 on the CPU)")
      ->type_name("N")
      ->check(whole_number("a count of sweeps", 1, 100, "100"));
  pipeline_->add_option("--batch", bench_.batch,
                        "Calls queued back-to-back between two events, time per call: the device's throughput "
                        "(default 20 on a GPU, 1 on the CPU); the fused and memcpy times of one call per event "
                        "pair (latency) are reported beside")
      ->type_name("N")
      ->check(whole_number("a count of calls", 1, 1000, "1000"));
  pipeline_->add_option("--plot", bench_.plot, "Draw the ratio per size into FILE.png (needs gnuplot)")
      ->type_name("FILE.png");
  pipeline_->add_option("--from", bench_.from, "Plot an earlier --json output instead of measuring (with --plot)")
      ->type_name("FILE")
      ->check(existing("the --json output of an earlier run", false));
  pipeline_->add_option("--peers", bench_.peers, "Add the peers' series from bench/peers/peers.py --json output to the plot")
      ->type_name("FILE")
      ->check(existing("the --json output of bench/peers/peers.py", false));
  small_ = bench_cmd_->add_subcommand("small", "n = 10^4: time per call for a fused launch, three kernels, graph replay");
  common(small_);
  sizes(small_, "element count (default 10000)", element_count, "N");
  foundation_ = bench_cmd_->add_subcommand("foundation", "Uploads (pageable raw, staged, pinned), pool vs cudaMalloc, launch overhead");
  common(foundation_);
  rng_ = bench_cmd_->add_subcommand("rng", "Fill rate vs cuRAND, Monte-Carlo pi fused vs fill-then-reduce, a 60%-of-memory array");
  common(rng_);
  flow_ = bench_cmd_->add_subcommand("flow", "Independent stages on concurrent streams; an 8-stage chain eager vs graph replay");
  common(flow_);
  jit_ = bench_cmd_->add_subcommand("jit", "The seed pipeline as run-time stages vs compiled vs memcpy; compile and cache load times");
  common(jit_);
  sizes(jit_, "log2 of the element counts (default 24,26,28 on a GPU; 18,20,22 on the CPU)",
        whole_number("log2 element counts", 4, 32, "32"));
  matmul_ = bench_cmd_->add_subcommand("matmul", "The matrix-multiply ladder: every algorithm per size, TFLOP/s, ratio to the vendor");
  common(matmul_);
  sizes(matmul_, "matrix sizes n (default 512,1024,2048,4096,8192 on a GPU; 128,256,512,1024 on the CPU)",
        whole_number("matrix sizes", 1, 65536, "65536"));
  matmul_->add_option("--algos", algos_, "naive,blocked,shared,tuned,vendor,vendor_tf32, or auto (runs vendor) (default: all for the device)")
      ->delimiter(',')
      ->type_name("ALGO,ALGO,...");
  matmul_->add_option("--plot", bench_.plot, "Draw TFLOP/s per size into FILE.png (needs gnuplot)")
      ->type_name("FILE.png");
  matmul_->add_option("--from", bench_.from, "Plot an earlier --json output instead of measuring (with --plot)")
      ->type_name("FILE")
      ->check(existing("the --json output of an earlier run", false));
  dist_ = bench_cmd_->add_subcommand("dist", "Two devices: peer copies, NCCL all-reduce, the seed map and a sum, one vs sharded");
  common(dist_);
  sizes(dist_, "log2 of the seed map's element count (default 28 on GPUs, 22 on the CPU)",
        whole_number("log2 element counts", 4, 32, "32"), "N");
  guide_ = bench_cmd_->add_subcommand("guide", "The guide's examples (memory kinds, coalescing, divergence, ...) as one table");
  common(guide_, false);
  guide_->add_option("--examples", examples_dir_, "Folder holding the example programs (default: the build tree)")
      ->type_name("DIR")
      ->check(existing("the folder holding the built examples (example_memory_kinds, ...)", true));

  stream_cmd_ = bench_cmd_->add_subcommand(
      "stream", "The seed pipeline out of core over host data of 4x the pool's limit vs the seed's way and pinned copies alone");
  stream_cmd_->alias("out-of-core");  // the layer's name; "stream" stays for existing scripts
  stream_cmd_->add_option("--device", stream_.device, "cpu, cuda or cuda:N")->type_name("DEVICE");
  stream_cmd_->add_option("--json", stream_.json, "Write the results and the chunk sweep as JSON to FILE ('-' for stdout)")
      ->type_name("FILE");
  stream_cmd_->add_option("--reps", stream_.reps, "Timed repetitions per measure (default 3)")->type_name("N")->check(repetitions);
  // Sizes below one float, and a pool too small for the benchmark's own buffers, are refused while parsing.
  stream_cmd_->add_option("--size", stream_.size, "Bytes of host float32 input (default: 4x the pool's limit)")
      ->type_name("BYTES")
      ->transform(byte_count(4, "4 (one float32)", 4));
  stream_cmd_->add_option("--pool-limit", stream_.pool_limit,
                          "Cap on the device pool, 1MiB at least (default: RESIDENT_POOL_LIMIT, else 2GiB on a GPU, "
                          "64MiB on the CPU)")
      ->type_name("BYTES")
      ->transform(byte_count(std::size_t(1) << 20, "1MiB"));
  stream_cmd_->add_option("--chunk", stream_.chunk, "Bytes of input per chunk (default: chosen from memory, 64MiB at most)")
      ->type_name("BYTES")
      ->transform(byte_count(4, "4 (one float32)", 4));
  stream_cmd_->add_option("--depth", stream_.depth, "Chunks in flight, 1 to 16 (default: chosen, 3)")
      ->type_name("N")
      ->check(whole_number("a chunk count", 1, 16, "16"));
  auto* pin = stream_cmd_->add_flag("--pinned", stream_.pinned, "Stream page-locked host memory only");
  auto* page = stream_cmd_->add_flag("--pageable", stream_.pageable, "Stream pageable host memory only");
  pin->excludes(page);
  stream_cmd_->footer("Examples:\n  resident bench stream --size 8GiB --pool-limit 2GiB --json stream.json\n"
                      "  resident bench stream --device cpu --size 256MiB --pageable --chunk 16MiB --depth 2");
  pipeline_->footer("Examples:\n  resident bench pipeline --sizes 20,22,24 --json p.json --plot p.png\n"
                    "  resident bench pipeline --sizes 24,26,28 --repeat 5 --json p.json\n"
                    "  resident bench pipeline --from p.json --peers peers.json --plot p.png");
  small_->footer("Example:\n  resident bench small --sizes 10000 --json small.json");
  foundation_->footer("Example:\n  resident bench foundation --device cpu --json foundation.json");
  rng_->footer("Example:\n  resident bench rng --json rng.json");
  flow_->footer("Example:\n  resident bench flow --reps 50 --json flow.json");
  jit_->footer("Example:\n  resident bench jit --sizes 24,26 --json jit.json");
  matmul_->footer("Examples:\n  resident bench matmul --sizes 1024,2048 --algos tuned,vendor --json m.json --plot m.png\n"
                  "  resident bench matmul --from m.json --plot m.png");
  guide_->footer("Example:\n  resident bench guide --json guide.json");
  dist_->footer("Examples:\n  resident bench dist --json dist.json          cuda:0 and cuda:1\n"
                "  resident bench dist --device cpu --sizes 20   two CPU shards");
  bench_cmd_->footer("Example:\n  resident bench pipeline --help");
}

void command_line::parse(int argc, const char* const* argv) {
  // CLI11 answers an unknown command with "A subcommand is required"; name it and the choices instead.
  args_.assign(argv + std::min(argc, 1), argv + argc);
  const std::vector<std::string>& args = args_;
  const bool asks_help = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "-h" || a == "--help" || a == "--version";
  });
  if (!asks_help) {
    auto command = std::find_if(args.begin(), args.end(), [](const std::string& a) { return a.empty() || a[0] != '-'; });
    if (command != args.begin()) {
      // `resident --device cpu info`: the command's options came first; say where they go.
      std::string moved;
      const auto named = std::find_if(args.begin(), args.end(), [](const std::string& a) { return known(commands, a); });
      if (named != args.end()) {
        moved = "resident " + *named;
        for (auto a = args.begin(); a != args.end(); ++a)
          if (a != named) moved += " " + *a;
      }
      throw CLI::ExtrasError("'" + args.front() + "' comes before the command: options follow the command, e.g. `" +
                                 (moved.empty() ? std::string("resident demo --n 1000") : moved) +
                                 "`; resident --help lists the commands",
                             CLI::ExitCodes::ExtrasError);
    }
    if (command == args.end())
      throw CLI::RequiredError("a command is required: " + one_of(commands) + ", e.g. `resident demo`; " +
                                   "resident --help describes them",
                               CLI::ExitCodes::RequiredError);
    if (!known(commands, *command))
      throw CLI::ExtrasError("unknown command '" + *command + "': use " + one_of(commands) +
                                 " (resident --help describes them)",
                             CLI::ExitCodes::ExtrasError);
    if (*command == "bench") {
      const auto which = command + 1;
      if (which == args.end() || which->empty() || (*which)[0] == '-') {
        const auto named = std::find_if(which, args.end(), [&](const std::string& a) { return known(benchmarks, a); });
        if (named != args.end())  // `resident bench --device cpu pipeline`: the options came first
          throw CLI::RequiredError("bench's options follow the benchmark's name: `resident bench " + *named +
                                       " --device ...`; resident bench " + *named + " --help lists them",
                                   CLI::ExitCodes::RequiredError);
        throw CLI::RequiredError("bench needs a benchmark: " + one_of(benchmarks) + ", e.g. `resident bench pipeline`",
                                 CLI::ExitCodes::RequiredError);
      }
      if (!known(benchmarks, *which) && *which != "out-of-core")
        throw CLI::ExtrasError("unknown benchmark '" + *which + "': use " + one_of(benchmarks) +
                                   " (resident bench --help describes them)",
                               CLI::ExitCodes::ExtrasError);
    }
  }
  // A list with an empty entry (`--sizes 10,,12`, a trailing comma): CLI11 drops the entry; refused.
  for (std::size_t i = 0; i < args.size(); ++i)
    for (const std::string list : {"--sizes", "--algos"}) {
      const bool joined = args[i].rfind(list + "=", 0) == 0;
      if (args[i] != list && !joined) continue;
      const std::string v = joined ? args[i].substr(list.size() + 1) : i + 1 < args.size() ? args[i + 1] : "";
      if (!v.empty() && (v.front() == ',' || v.back() == ',' || v.find(",,") != std::string::npos))
        throw CLI::ValidationError(list, "'" + v + "' has an empty entry; give the entries separated by single "
                                         "commas, e.g. " + (list == "--algos" ? "tuned,vendor" : "20,22"));
    }
  // An option followed by another (`--json --stream`, `--json --help`) would take it as its value: a file
  // named --stream written, --help never shown. Refused; '-' alone is standard output.
  std::function<const CLI::Option*(const CLI::App*, const std::string&)> taking = [&](const CLI::App* a,
                                                                                       const std::string& name) {
    for (const CLI::Option* o : a->get_options())
      if (o->get_expected_min() > 0 && o->check_name(name)) return o;  // an option with a value, not a flag
    for (const CLI::App* sub : a->get_subcommands(std::function<bool(const CLI::App*)>()))
      if (const CLI::Option* o = taking(sub, name)) return o;
    return static_cast<const CLI::Option*>(nullptr);
  };
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i].rfind("--", 0) == 0 && args[i + 1].size() > 1 && args[i + 1][0] == '-' &&
        !std::isdigit(static_cast<unsigned char>(args[i + 1][1])))  // -5: a value, refused as one
      if (const CLI::Option* o = taking(app_.get(), args[i])) {
        const std::string type = o->get_type_name().substr(0, o->get_type_name().find(':'));
        throw CLI::ValidationError(args[i], "needs a value before the next option ('" + args[i + 1] + "'); give " +
                                                type +
                                                (type.rfind("FILE", 0) == 0 || type == "DIR"
                                                     ? " (a name that starts with '-' is written ./" + args[i + 1] + ")"
                                                     : std::string()));
      }
  app_->parse(argc, argv);
  // An option given an empty value (`--json ''`, a variable that expanded to nothing) is refused, never
  // read as "not given".
  std::function<void(const CLI::App*)> refuse_empty = [&](const CLI::App* a) {
    for (const CLI::Option* o : a->get_options())
      if (o->get_type_size() != 0)
        for (const std::string& r : o->results())
          if (r.empty())
            throw CLI::ValidationError(o->get_name(), "the value is empty; give " +
                                                          o->get_type_name().substr(0, o->get_type_name().find(':')) +
                                                          " (an empty string is never read as the default)");
    for (const CLI::App* sub : a->get_subcommands()) refuse_empty(sub);
  };
  refuse_empty(app_.get());
}

void command_line::check() const {
  // Output files are checked before any work, so a long run does not end in "cannot write".
  check_writable("--json", info_.json);
  check_writable("--json", demo_.json);
  check_writable("--json", bench_.json);
  check_writable("--json", stream_.json);
  // --from measures nothing: its conflicts first, before --plot's file and gnuplot are looked at.
  if (!bench_.from.empty() && bench_.plot.empty())
    throw invalid_argument("--from '" + bench_.from + "' only draws an earlier run: add --plot FILE.png");
  if (!bench_.from.empty() && (!bench_.sizes.empty() || bench_.reps || bench_.repeat || bench_.batch ||
                               !algos_.empty() || !bench_.json.empty() || !bench_.device.empty()))
    throw invalid_argument("--from draws an earlier run without measuring: leave out --sizes, --reps, --repeat, "
                           "--batch, --algos, --json and --device");
  if (!bench_.plot.empty()) {
    if (!ends_with_png(bench_.plot))
      throw invalid_argument("--plot draws a PNG image: give a file name ending in .png, got '" + bench_.plot + "'");
    if (same_file(bench_.plot, bench_.json))
      throw invalid_argument("--plot and --json name the same file '" + bench_.plot + "': give each its own");
    check_writable("--plot", bench_.plot);
    if (!detail::program_found("gnuplot"))
      throw invalid_argument("--plot needs gnuplot, which is not installed: install gnuplot-nox "
                             "(scripts/setup.sh does), or write --json and plot that elsewhere");
  }
  if (*dist_ && bench_.sizes.size() > 1)
    throw invalid_argument("--sizes: bench dist measures one element count, got " +
                           std::to_string(bench_.sizes.size()) + "; give one log2 count, e.g. --sizes 28");
  if (*small_ && bench_.sizes.size() > 1)
    throw invalid_argument("--sizes: bench small measures one element count, got " +
                           std::to_string(bench_.sizes.size()) + "; give one, e.g. --sizes 10000");
  if (!bench_.peers.empty() && bench_.plot.empty())
    throw invalid_argument("--peers '" + bench_.peers + "' adds series to the plot: add --plot FILE.png");
  // A size given twice would be measured twice and drawn as two points at one x.
  for (std::size_t i = 0; i < bench_.sizes.size(); ++i)
    if (std::find(bench_.sizes.begin(), bench_.sizes.begin() + std::ptrdiff_t(i), bench_.sizes[i]) !=
        bench_.sizes.begin() + std::ptrdiff_t(i))
      throw invalid_argument("--sizes: " + std::to_string(bench_.sizes[i]) + " is given twice; give each size once");
  if (*demo_beyond_ || *demo_size_ || *demo_gpus_) {
    if (*demo_size_ && !*demo_beyond_)
      throw invalid_argument("--size gives the size of --beyond-one's array: add --beyond-one, or give --n for --gpus");
    if (*demo_beyond_ && demo_.n)
      throw invalid_argument("--n: --beyond-one sizes its array in bytes; give --size (e.g. --size 200GB) instead");
    if (demo_.stream || demo_.profile)
      throw invalid_argument(std::string(demo_.stream ? "--stream" : "--profile") +
                             " belongs to the one-device demo; leave it out with --gpus and --beyond-one");
  }
  for (const std::string* dev : {&info_.device, &demo_.device, &bench_.device, &stream_.device}) {
    if (dev->empty()) continue;
    try {
      parse_device(*dev);
    } catch (const invalid_argument& e) {
      throw invalid_argument(std::string("--device: ") + e.what());
    }
  }
  // Without --device the commands read RESIDENT_DEVICE: a bad value is named as the variable, not as a device
  // the user never typed (--from measures nothing and needs no device).
  const std::string& given = *info_cmd_ ? info_.device : *demo_cmd_ ? demo_.device : *stream_cmd_ ? stream_.device
                                                                                                   : bench_.device;
  if (const char* env = std::getenv("RESIDENT_DEVICE"); env && *env && given.empty() && bench_.from.empty()) {
    try {
      parse_device(env);
    } catch (const invalid_argument& e) {
      throw invalid_argument(std::string("RESIDENT_DEVICE, which --device overrides: ") + e.what());
    }
  }
  // The library reads these variables at its first transfer or allocation: a bad value is refused here,
  // before a table is half printed, and a policy that forbids the transfers a command makes is named.
  const transfer_policy policy = default_transfer_policy();
  const bool transfers = *demo_cmd_ || (*info_cmd_ && info_.measure) || (*bench_cmd_ && bench_.from.empty());
  if (policy == transfer_policy::forbid && transfers)
    throw invalid_argument("RESIDENT_TRANSFER_POLICY is 'forbid', and `resident " + command_named() +
                           "` moves data between the host and the devices; unset it, or set it to log");
  (void)pool_limit(parse_device("cpu"));  // RESIDENT_POOL_LIMIT, refused here if it is no byte count
  std::vector<matmul_algo> chosen;
  for (const std::string& a : algos_) {
    try {
      chosen.push_back(parse_matmul_algo(a));
    } catch (const invalid_argument& e) {
      throw invalid_argument(std::string("--algos: ") + e.what());
    }
    // As with --sizes: measured twice, shown as two rows, drawn as one series with two points per size.
    // auto runs vendor, so the two are one algorithm.
    auto same = [](matmul_algo x) { return x == matmul_algo::automatic ? matmul_algo::vendor : x; };
    for (std::size_t j = 0; j + 1 < chosen.size(); ++j)
      if (same(chosen[j]) == same(chosen.back()))
        throw invalid_argument("--algos: " +
                               (algos_[j] == a ? a + " is given twice"
                                               : "'" + algos_[j] + "' and '" + a + "' name one algorithm (auto runs vendor)") +
                               "; give each algorithm once");
  }
}

int command_line::run() {
  check();
  if (info_.json == "-" || demo_.json == "-" || bench_.json == "-" || stream_.json == "-") report_to_stderr();
  if (*info_cmd_) return run_info(info_);
  if (*demo_cmd_) return demo_.gpus || demo_.beyond_one ? run_demo_sharded(demo_) : run_demo(demo_);
  if (*pipeline_) return run_bench_pipeline(bench_);
  if (*small_) return run_bench_small(bench_);
  if (*foundation_) return run_bench_foundation(bench_);
  if (*rng_) return run_bench_rng(bench_);
  if (*flow_) return run_bench_flow(bench_);
  if (*jit_) return run_bench_jit(bench_);
  if (*matmul_) return run_bench_matmul(bench_, algos_);
  if (*guide_) return run_bench_guide(bench_, examples_dir_);
  if (*stream_cmd_) return run_bench_stream(stream_);
  if (*dist_) return run_bench_dist(bench_);
  return 0;
}

}  // namespace resident::cli
