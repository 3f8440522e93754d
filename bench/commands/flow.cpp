// resident bench flow: independent stages on concurrent streams vs one stream; a chain of tiny stages,
// eager vs graph replay. Compiled by nvcc in CUDA builds.
#include <chrono>
#include <iostream>

#include "bench.hpp"
#include "memory_budget.hpp"
#include "resident/resident.hpp"
#include "table.hpp"
#include "wall_timing.hpp"

namespace resident::cli {
namespace {

// One block of one warp busy for about `ns` nanoseconds: a small stage that leaves most of the GPU idle.
struct busy {
  long long ns;
  RESIDENT_HD void operator()(thread_index) const {
#if defined(__CUDA_ARCH__)
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    unsigned long long t = t0;
    while (t - t0 < static_cast<unsigned long long>(ns)) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#else
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::nanoseconds(ns)) {
    }
#endif
  }
};


}  // namespace

int run_bench_flow(const bench_options& o) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  const int reps = o.reps ? o.reps : 20;
  // The chain's array of chain_elements floats is the benchmark's one allocation (the stages, streams,
  // events and graphs take none from the pool): checked before the heading, so that under a pool limit
  // the refusal is the only output rather than an allocation failing after two progress lines.
  const std::size_t chain_elements = 1024;
  require_memory(d, "bench flow", double(chain_elements * sizeof(float)), 0, "Free memory and run it again");
  out() << wrap("Flows on " + d.name() + " (" + properties(d).name + ")") << "\n";
  table t({{"measure", "measure", false}, {"median", "median", true}, {"unit", "unit", false}, {"note", "note", false}});

  const bool gpu = d.is_cuda();
  progress bar("bench flow", gpu ? 5 : 4);

  // (a) Four independent stages, each about 0.2 ms on a GPU (one block of one warp, busy); the
  // stage's own time is measured, since the CPU backend runs the block's threads one after another.
  const long long stage_ns = 200000;
  const launch_config one_warp{dims(1), dims(32)};
  bar.step("one stage alone");
  const double stage_ms = [&] {
    stream st(d);
    return wall_ms(reps, [&] {
      launch(st.ref(), one_warp, busy{stage_ns});
      st.synchronize();
    });
  }();
  flow concurrent(d, 4), serial(d, 1);
  for (int i = 0; i < 4; ++i) {
    auto work = [=](stream_ref s) { launch(s, one_warp, busy{stage_ns}); };
    concurrent.add("stage " + std::to_string(i), work);
    serial.add("stage " + std::to_string(i), work);
  }
  bar.step("4 stages, 4 streams and 1 stream");
  const double c_ms = wall_ms(reps, [&] { concurrent.run(); });
  const double s_ms = wall_ms(reps, [&] { serial.run(); });
  t.add({"4 independent stages of " + format_number(stage_ms, -1) + " ms, 4 streams", table::cell(c_ms, 3), "ms",
         "wall time of run(); one stage alone, measured"});
  t.add({"the same on 1 stream (serialized)", table::cell(s_ms, 3), "ms", ""});
  t.add({"concurrent / serialized", table::cell(c_ms / s_ms, 3), "ratio", "lower is better"});

  // (b) A chain of eight tiny stages, each depending on the one before.
  array<float> x(chain_elements, d);
  map([] RESIDENT_HD(float) { return 1.f; })(x);
  synchronize(d);
  flow chain(d, 1);
  for (int i = 0; i < 8; ++i)
    chain.add("step " + std::to_string(i), [&](stream_ref s) {
      x.set_stream(s);
      map([] RESIDENT_HD(float v) { return v * 1.0001f + 0.5f; })(x);
    }, access{}.reads(x).writes(x));
  const int batch = 50;
  bar.step("8-stage chain, eager");
  const double eager = time_batched(chain.stream(), reps, 2, batch, [&] { chain.run_async(); }).median();
  bar.step("8-stage chain, graph replay");
  graph g = chain.capture();
  const double replay = time_batched(chain.stream(), reps, 2, batch, [&] { g.replay(chain.stream()); }).median();
  // The same graph captured without programmatic dependent launch: what overlapping launches gains
  // (a GPU feature; the CPU backend has no launches to overlap).
  const bool pdl = gpu && programmatic_launch();
  double replay_plain = 0;
  if (gpu) {
    bar.step("8-stage chain, graph replay without dependent launch");
    set_programmatic_launch(false);
    graph plain = chain.capture();
    set_programmatic_launch(pdl);
    replay_plain = time_batched(chain.stream(), reps, 2, batch, [&] { plain.replay(chain.stream()); }).median();
  }
  x.set_stream(default_stream(d));
  t.add({"8-stage chain, eager, per stage", table::cell(eager * 1e3 / 8, 2), "us", "run_async: launches + events"});
  t.add({"8-stage chain, graph replay, per stage", table::cell(replay * 1e3 / 8, 2), "us",
         std::string("flow.capture() replayed") + (pdl ? ", dependent launch" : "")});
  if (gpu) t.add({"the same without dependent launch", table::cell(replay_plain * 1e3 / 8, 2), "us", "RESIDENT_PDL=0"});
  bar.finish();
  t.print(out());
  if (!gpu) out() << "  (no dependent-launch row: programmatic dependent launch is a GPU feature)\n";
  const std::string report = concurrent.report_table();
  out() << "\nLast run of the concurrent flow:\n" << report << (report.empty() || report.back() != '\n' ? "\n" : "");
  if (!o.json.empty()) {
    nlohmann::json j = bench_json("flow", d.name(), properties(d).name, t);
    j["last_concurrent_run"] = nlohmann::json::array();  // the table printed under "Last run of ..."
    for (const stage_report& r : concurrent.report())
      j["last_concurrent_run"].push_back({{"stage", r.name}, {"device", r.device.name()}, {"stream", r.stream_index},
                                          {"ms", r.ms}, {"kernels", r.issued.kernels},
                                          {"h2d_bytes", r.issued.h2d_bytes}, {"d2h_bytes", r.issued.d2h_bytes}});
    write_json(j, o.json);
  }
  return 0;
}

}  // namespace resident::cli
