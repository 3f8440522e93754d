#include "command_line.hpp"

#include "resident/resident.hpp"
#include "table.hpp"

namespace resident::cli {

command_line::command_line() {
  app_ = std::make_unique<CLI::App>("resident: GPU data pipelines whose data stays on the device.\n\n"
               "Examples:\n"
               "  resident info --measure          devices, backends and measured copy rates\n"
               "  resident demo                    the seed pipeline four ways, checked and timed\n"
               "  resident demo --device cpu --n 1000000 --json demo.json\n"
               "  resident bench pipeline --sizes 20,22,24,26,28 --json p.json --plot p.png\n"
               "  resident bench pipeline --from p.json --peers peers.json --plot p.png\n"
               "  resident bench guide --json guide.json   the guide's examples as one table\n",
               "resident");
  app_->set_version_flag("--version", resident::version());
  app_->require_subcommand(1);

  info_cmd_ = app_->add_subcommand("info", "Backends compiled in, each device, the default device");
  info_cmd_->add_flag("--measure", info_.measure, "Also measure device-to-device and host<->device copy rates");
  info_cmd_->add_option("--device", info_.device, "Device for --measure: cpu, cuda or cuda:N (default: the default device)");
  info_cmd_->add_option("--json", info_.json, "Write the same as JSON to FILE ('-' for stdout)");

  demo_cmd_ = app_->add_subcommand("demo", "The seed pipeline f1 -> f2 -> f3 run four ways, checked against FP64 and timed");
  demo_cmd_->add_option("--device", demo_.device, "cpu, cuda or cuda:N (default: the GPU if one answers, else the CPU)");
  demo_cmd_->add_option("--n", demo_.n, "Elements (default: 2^26 on a GPU, 2^22 on the CPU)")
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 34).description("an element count from 1 to 2^34"));
  demo_cmd_->add_option("--reps", demo_.reps, "Timed repetitions per mode (median reported)")->check(CLI::Range(1, 100000));
  demo_cmd_->add_option("--json", demo_.json, "Write the table and ledger as JSON to FILE ('-' for stdout)");

  bench_cmd_ = app_->add_subcommand("bench", "Benchmarks, timed with device events (median of many)");
  bench_cmd_->require_subcommand(1);
  auto common = [&](CLI::App* c, const char* sizes_help) {
    c->add_option("--device", bench_.device, "cpu, cuda or cuda:N");
    c->add_option("--sizes", bench_.sizes, sizes_help)->delimiter(',');
    c->add_option("--json", bench_.json, "Write the results as JSON to FILE ('-' for stdout)");
    c->add_option("--reps", bench_.reps, "Timed repetitions per point")->check(CLI::Range(1, 100000));
  };
  pipeline_ = bench_cmd_->add_subcommand("pipeline", "Fused pipeline time over device-to-device memcpy time, per size");
  common(pipeline_, "log2 of the element counts (default 20,22,24,26,28 on a GPU; 16,18,20,22 on the CPU)");
  pipeline_->add_option("--plot", bench_.plot, "Draw the ratio per size into FILE.png (needs gnuplot)");
  pipeline_->add_option("--from", bench_.from, "Plot an earlier --json output instead of measuring (with --plot)")
      ->check(CLI::ExistingFile);
  pipeline_->add_option("--peers", bench_.peers, "Add the peers' series from bench/peers/peers.py --json output to the plot")
      ->check(CLI::ExistingFile);
  small_ = bench_cmd_->add_subcommand("small", "n = 10^4: time per call for a fused launch, three kernels, graph replay");
  common(small_, "element counts (default 10000)");
  foundation_ = bench_cmd_->add_subcommand("foundation", "Uploads (pageable raw, staged, pinned), pool vs cudaMalloc, launch overhead");
  common(foundation_, "unused");
  rng_ = bench_cmd_->add_subcommand("rng", "Fill rate vs cuRAND, Monte-Carlo pi fused vs fill-then-reduce, a 60%-of-memory array");
  common(rng_, "unused");
  flow_ = bench_cmd_->add_subcommand("flow", "Independent stages on concurrent streams; an 8-stage chain eager vs graph replay");
  common(flow_, "unused");
  matmul_ = bench_cmd_->add_subcommand("matmul", "The matrix-multiply ladder: every algorithm per size, TFLOP/s, ratio to the vendor");
  common(matmul_, "matrix sizes n (default 512,1024,2048,4096,8192 on a GPU; 128..1024 on the CPU)");
  matmul_->add_option("--algos", algos_, "naive,blocked,shared,tuned,vendor,vendor_tf32 (default: all for the device)")
      ->delimiter(',');
  matmul_->add_option("--plot", bench_.plot, "Draw TFLOP/s per size into FILE.png (needs gnuplot)");
  matmul_->add_option("--from", bench_.from, "Plot an earlier --json output instead of measuring (with --plot)")
      ->check(CLI::ExistingFile);
  guide_ = bench_cmd_->add_subcommand("guide", "The guide's examples (memory kinds, coalescing, divergence, ...) as one table");
  common(guide_, "unused");
  guide_->add_option("--examples", examples_dir_, "Folder holding the example programs (default: the build tree)")
      ->check(CLI::ExistingDirectory);

}

void command_line::parse(int argc, const char* const* argv) { app_->parse(argc, argv); }

void command_line::check() const {
  // Output files are checked before any work, so a long run does not end in "cannot write".
  for (const std::string* path : {&info_.json, &demo_.json, &bench_.json, &bench_.plot}) check_writable(*path);
  for (const std::string* dev : {&info_.device, &demo_.device, &bench_.device})
    if (!dev->empty()) parse_device(*dev);
  for (auto& a : algos_) parse_matmul_algo(a);
}

int command_line::run() {
  check();
  if (*info_cmd_) return run_info(info_);
  if (*demo_cmd_) return run_demo(demo_);
  if (*pipeline_) return run_bench_pipeline(bench_);
  if (*small_) return run_bench_small(bench_);
  if (*foundation_) return run_bench_foundation(bench_);
  if (*rng_) return run_bench_rng(bench_);
  if (*flow_) return run_bench_flow(bench_);
  if (*matmul_) return run_bench_matmul(bench_, algos_);
  if (*guide_) return run_bench_guide(bench_, examples_dir_);
  return 0;
}

}  // namespace resident::cli
