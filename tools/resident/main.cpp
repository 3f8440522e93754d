// resident: the command-line tool.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "table.hpp"
#include "resident/resident.hpp"

namespace cli = resident::cli;

int main(int argc, char** argv) {
  CLI::App app{"resident: GPU data pipelines whose data stays on the device.\n\n"
               "Examples:\n"
               "  resident info --measure          devices, backends and measured copy rates\n"
               "  resident demo                    the seed pipeline four ways, checked and timed\n"
               "  resident demo --device cpu --n 1000000 --json demo.json\n"
               "  resident bench pipeline --sizes 20,22,24,26,28 --json p.json --plot p.png\n"
               "  resident bench pipeline --from p.json --peers peers.json --plot p.png\n",
               "resident"};
  app.set_version_flag("--version", resident::version());
  app.require_subcommand(1);

  cli::info_options info;
  auto* i = app.add_subcommand("info", "Backends compiled in, each device, the default device");
  i->add_flag("--measure", info.measure, "Also measure device-to-device and host<->device copy rates");
  i->add_option("--device", info.device, "Device for --measure: cpu, cuda or cuda:N (default: the default device)");
  i->add_option("--json", info.json, "Write the same as JSON to FILE ('-' for stdout)");

  cli::demo_options demo;
  auto* d = app.add_subcommand("demo", "The seed pipeline f1 -> f2 -> f3 run four ways, checked against FP64 and timed");
  d->add_option("--device", demo.device, "cpu, cuda or cuda:N (default: the GPU if one answers, else the CPU)");
  d->add_option("--n", demo.n, "Elements (default: 2^26 on a GPU, 2^22 on the CPU)")
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 34).description("an element count from 1 to 2^34"));
  d->add_option("--reps", demo.reps, "Timed repetitions per mode (median reported)")->check(CLI::Range(1, 100000));
  d->add_option("--json", demo.json, "Write the table and ledger as JSON to FILE ('-' for stdout)");

  auto* b = app.add_subcommand("bench", "Benchmarks, timed with device events (median of many)");
  b->require_subcommand(1);
  cli::bench_options bo;
  auto common = [&](CLI::App* c, const char* sizes_help) {
    c->add_option("--device", bo.device, "cpu, cuda or cuda:N");
    c->add_option("--sizes", bo.sizes, sizes_help)->delimiter(',');
    c->add_option("--json", bo.json, "Write the results as JSON to FILE ('-' for stdout)");
    c->add_option("--reps", bo.reps, "Timed repetitions per point")->check(CLI::Range(1, 100000));
  };
  auto* bp = b->add_subcommand("pipeline", "Fused pipeline time over device-to-device memcpy time, per size");
  common(bp, "log2 of the element counts (default 20,22,24,26,28 on a GPU; 16,18,20,22 on the CPU)");
  bp->add_option("--plot", bo.plot, "Draw the ratio per size into FILE.png (needs gnuplot)");
  bp->add_option("--from", bo.from, "Plot an earlier --json output instead of measuring (with --plot)")
      ->check(CLI::ExistingFile);
  bp->add_option("--peers", bo.peers, "Add the peers' series from bench/peers/peers.py --json output to the plot")
      ->check(CLI::ExistingFile);
  auto* bs = b->add_subcommand("small", "n = 10^4: time per call for a fused launch, three kernels, graph replay");
  common(bs, "element counts (default 10000)");
  auto* bf = b->add_subcommand("foundation", "Uploads (pageable raw, staged, pinned), pool vs cudaMalloc, launch overhead");
  common(bf, "unused");
  auto* br = b->add_subcommand("rng", "Fill rate vs cuRAND, Monte-Carlo pi fused vs fill-then-reduce, a 60%-of-memory array");
  common(br, "unused");
  auto* bfl = b->add_subcommand("flow", "Independent stages on concurrent streams; an 8-stage chain eager vs graph replay");
  common(bfl, "unused");
  std::vector<std::string> algos;
  auto* bm = b->add_subcommand("matmul", "The matrix-multiply ladder: every algorithm per size, TFLOP/s, ratio to the vendor");
  common(bm, "matrix sizes n (default 512,1024,2048,4096,8192 on a GPU; 128..1024 on the CPU)");
  bm->add_option("--algos", algos, "naive,blocked,shared,tuned,vendor,vendor_tf32 (default: all for the device)")
      ->delimiter(',');
  bm->add_option("--plot", bo.plot, "Draw TFLOP/s per size into FILE.png (needs gnuplot)");
  bm->add_option("--from", bo.from, "Plot an earlier --json output instead of measuring (with --plot)")
      ->check(CLI::ExistingFile);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    // Output files are checked before any work, so a long run does not end in "cannot write".
    for (const std::string* path : {&info.json, &demo.json, &bo.json, &bo.plot}) cli::check_writable(*path);
    if (*i) return cli::run_info(info);
    if (*d) return cli::run_demo(demo);
    if (*bp) return cli::run_bench_pipeline(bo);
    if (*bs) return cli::run_bench_small(bo);
    if (*bf) return cli::run_bench_foundation(bo);
    if (*br) return cli::run_bench_rng(bo);
    if (*bfl) return cli::run_bench_flow(bo);
    if (*bm) return cli::run_bench_matmul(bo, algos);
  } catch (const resident::error& e) {
    std::cerr << "resident: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "resident: unexpected error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
