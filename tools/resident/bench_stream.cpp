// resident bench stream: the seed pipeline streamed over host data larger than the pool's limit,
// against the seed's way (upload, run, download in pieces that fit, one after another) and against
// pinned copies alone, all measured in the same run. Compiled by nvcc in CUDA builds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>

#include "commands.hpp"
#include "memory_budget.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/resident.hpp"
#include "seed.hpp"
#include "table.hpp"
#include "vendor.hpp"
#include "wall_timing.hpp"

namespace resident::cli {
namespace {

constexpr double tolerance = 1e-5;  // float32 math against the FP64 reference, relative to max |ref|
constexpr std::size_t MiB = std::size_t(1) << 20;


// max |y - ref(x)| / max |ref| over every element, in parallel; +inf when y holds a NaN or infinity.
double seed_error(const float* x, const float* y, std::size_t n) {
  double num = 0, den = 0;
  bool bad = false;
#pragma omp parallel for reduction(max : num, den) reduction(|| : bad)
  for (long i = 0; i < long(n); ++i) {
    const double r = seed_reference(x[i]);
    if (!std::isfinite(double(y[i]))) bad = true;
    num = std::max(num, std::fabs(double(y[i]) - r));
    den = std::max(den, std::fabs(r));
  }
  return bad ? INFINITY : (den > 0 ? num / den : num);
}

double gbs(std::size_t bytes, double ms) { return double(bytes) / (ms * 1e-3) / 1e9; }

}  // namespace

int run_bench_stream(const stream_bench_options& o) {
  const device d = o.device.empty() ? default_device() : parse_device(o.device);
  require(d);
  const bool gpu = d.is_cuda();
  const int reps = o.reps ? o.reps : 3;
  // The pool's limit: given, else the one in force, else 2 GiB on a GPU and 64 MiB on the CPU.
  const auto in_force = pool_limit(d);
  const std::size_t limit = o.pool_limit ? o.pool_limit : in_force ? *in_force : gpu ? std::size_t(2) << 30 : 64 * MiB;
  const bool pinned = o.pinned || !o.pageable, pageable = o.pageable || !o.pinned;
  // Refused before any work: --pool-limit's own floor holds for RESIDENT_POOL_LIMIT too (the copies' and
  // the seed's buffers, and a GPU's staging, need room), and the chunk must fit under the limit in force
  // (on a GPU, the chunks in flight and the MiB the sweeps below keep free).
  const std::string limit_text =
      o.pool_limit ? "--pool-limit " + std::to_string(limit)
                   : "the pool's limit of " + std::to_string(limit) + " bytes (" +
                         (in_force ? "RESIDENT_POOL_LIMIT" : "the default; --pool-limit sets it") + ")";
  if (limit < MiB)
    throw invalid_argument("bench stream: " + limit_text + " leaves no room for the benchmark's buffers; give "
                           "--pool-limit 1MiB or more");
  if (o.chunk) {
    const int depth = o.depth            ? o.depth
                      : pageable         ? detail::streaming_tuning::staged_depth
                                         : detail::streaming_tuning::depth;
    if (!gpu && o.chunk > limit)
      throw invalid_argument("--chunk: " + std::to_string(o.chunk) + " bytes do not fit under " + limit_text +
                             "; give a smaller chunk or a larger limit");
    if (gpu && std::size_t(depth) * o.chunk + MiB > limit)
      throw invalid_argument("--chunk: " + std::to_string(depth) + " chunks in flight of " + std::to_string(o.chunk) +
                             " bytes, and 1 MiB kept free, do not fit under " + limit_text +
                             "; give a smaller chunk or --depth, or a larger limit");
    // A chunk larger than the data would stream it as one short chunk, not the chunk asked for. Without
    // --size the data is 4x the limit, which the checks above keep the chunk under.
    if (o.size && o.chunk > o.size)
      throw invalid_argument("--chunk: " + std::to_string(o.chunk) + " bytes are more than --size " +
                             std::to_string(o.size) + " bytes, so the data would be one chunk of its own size; give "
                             "a --chunk of at most " + std::to_string(o.size) + " bytes, or a --size of at least " +
                             std::to_string(o.chunk) + " bytes");
  }
  const std::size_t bytes = (o.size ? o.size : 4 * limit) / sizeof(float) * sizeof(float);
  const std::size_t n = bytes / sizeof(float);
  const std::size_t chunk = o.chunk / sizeof(float);
  // Host: the pinned and the pageable input and output; device: the pool's limit, set first so that a
  // RESIDENT_POOL_LIMIT which --pool-limit overrides does not count.
  const double host_bytes = double(bytes) * 2 * (int(pinned) + int(pageable));
  trim_pool(d);
  set_pool_limit(d, limit);
  struct restore {
    device d;
    std::optional<std::size_t> was;
    ~restore() {
      if (was)
        set_pool_limit(d, *was);
      else
        clear_pool_limit(d);
    }
  } restored{d, in_force};
  require_memory(d, "bench stream --size " + std::to_string(bytes) + (o.size ? "" : " (the default: 4x the pool's limit)"),
                 gpu ? double(limit) : 0.0, host_bytes,
                 "Choose a smaller --size (" + std::string(pinned && pageable ? "4" : "2") +
                     " host bytes per byte of data; --pinned or --pageable alone halves it)");

  out() << wrap("The seed pipeline func1 -> func2 -> func3 streamed on " + d.name() + " (" + properties(d).name +
                ") over " + detail::format_bytes(double(bytes)) + " of host float32 (" + std::to_string(n) +
                " elements), " + format_number(double(bytes) / double(limit), -1) + "x the pool's limit of " +
                detail::format_bytes(double(limit)) + "; input bytes per second, median of " + std::to_string(reps) +
                " runs")
        << "\n\n";

  const auto seed = map<func1>() | map<func2>() | map<func3>();
  const auto sum = seed | reduce(plus{}, 0.0);
  const stream_options opts{.chunk_elements = chunk, .depth = o.depth, .target = d};
  const std::size_t sweep_count = 7;
  // Pageable staging on a GPU: host copy threads against three chunk sizes.
  const int host_thread_counts[] = {2, 4, 8, 12, 16};
  const std::size_t thread_sweep_chunks[] = {4 * MiB, 16 * MiB, 64 * MiB};
  const std::size_t thread_sweep_count = gpu ? std::size(host_thread_counts) * std::size(thread_sweep_chunks) : 0;
  const bool hand_written = pinned && gpu;  // the bar of the pinned stream, written by hand in CUDA
  // Steps: host data, both copies, the seed's way and the first reduction; each stream's own steps.
  progress bar("bench stream", 5 + std::size_t(pinned) * (1 + sweep_count) + std::size_t(hand_written) +
                                   std::size_t(pageable) * (1 + thread_sweep_count) + std::size_t(pinned && pageable));

  bar.step("host data");
  pinned_buffer<float> pin_in(pinned ? n : 0), pin_out(pinned ? n : 0);
  std::vector<float> page_in, page_out;
  {
    const std::vector<float> hx = seed_input(n);
    if (pinned) detail::parallel_memcpy(pin_in.data(), hx.data(), bytes);
    if (pageable) page_in = hx;
  }
  if (pageable) page_out.assign(n, -1234.5f);
  // Copies alone run between pinned memory (the pageable buffers when --pageable alone).
  float* host_in = pinned ? pin_in.data() : page_in.data();
  float* host_out = pinned ? pin_out.data() : page_out.data();
  const std::string copies_kind = pinned ? "pinned" : "pageable";  // what the rows below name

  // (b) Pinned copies alone: both directions at once on two streams, and the upload alone, in pieces
  // of 64 MiB through device buffers that fit the limit.
  const std::size_t piece = std::min<std::size_t>(std::max<std::size_t>(limit / 4 / sizeof(float), 1), std::min(n, 16 * MiB));
  stream up(d), down(d);
  array<float> up_buf(piece, up.ref()), down_buf(piece, down.ref());
  event start(d), up_end(d), down_end(d);
  auto copies = [&](bool both) {
    start.record(up.ref());
    start.wait_on(down.ref());
    for (std::size_t first = 0; first < n; first += piece) {
      const std::size_t c = std::min(piece, n - first);
      copy_async(std::span<const float>(host_in + first, c), up_buf.slice(0, c));
      if (both) copy_async(down_buf.slice(0, c), std::span<float>(host_out + first, c));
    }
    up_end.record(up.ref());
    down_end.record(down.ref());
    up.synchronize();
    down.synchronize();
  };
  bar.step(copies_kind + " copies, both directions at once");
  copies(true);  // warm-up
  std::vector<double> up_ms, down_ms, solo_ms;
  for (int r = 0; r < reps; ++r) {
    copies(true);
    up_ms.push_back(elapsed_ms(start, up_end));
    down_ms.push_back(elapsed_ms(start, down_end));
  }
  bar.step(copies_kind + " upload alone");
  for (int r = 0; r < reps; ++r) {
    copies(false);
    solo_ms.push_back(elapsed_ms(start, up_end));
  }
  up_buf = array<float>();
  down_buf = array<float>();
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double duplex_up = gbs(bytes, med(up_ms)), duplex_down = gbs(bytes, med(down_ms)), upload = gbs(bytes, med(solo_ms));

  // (a) The seed's way: upload a piece, run, download it, one after another, in pieces that fit.
  bar.step("the seed's way, in pieces that fit");
  synchronize(d);
  const std::size_t seed_piece = std::max<std::size_t>(std::min(n, (limit - pool_stats(d).bytes_in_use) / 2 / sizeof(float)), 1);
  double seed_ms = 0;
  {
    stream s(d);
    array<float> x(seed_piece, s.ref());
    auto seeds_way = [&] {
      for (std::size_t first = 0; first < n; first += seed_piece) {
        const std::size_t c = std::min(seed_piece, n - first);
        auto xs = x.slice(0, c);
        copy_async(std::span<const float>(host_in + first, c), xs);
        seed(xs);
        copy_async(xs, std::span<float>(host_out + first, c));
        s.synchronize();
      }
    };
    seeds_way();
    seed_ms = wall_ms(reps, seeds_way, 0);
  }
  if (seed_error(host_in, host_out, n) > tolerance) throw error("bench stream: the seed's way gave a wrong result");

  table t({{"measure", "measure", false}, {"GB/s", "gbs", true}, {"ratio", "ratio", true},
           {"slowest rep", "slowest_ratio", true}, {"target", "target", true},
           {"note", "note", false}});
  nlohmann::json extra;
  t.add({copies_kind + " duplex copies: upload", table::cell(duplex_up, -1), table::cell(1.0, 2), table::cell::none(), table::cell::none(),
         "reference of the ratios"});
  t.add({copies_kind + " duplex copies: download", table::cell(duplex_down, -1), table::cell(duplex_down / duplex_up, 2),
         table::cell::none(), table::cell::none(), ""});
  t.add({copies_kind + " upload alone", table::cell(upload, -1), table::cell(upload / duplex_up, 2), table::cell::none(),
         table::cell::none(),
         "reference of the reductions"});
  t.add({"seed's way, " + copies_kind, table::cell(gbs(bytes, seed_ms), -1), table::cell(gbs(bytes, seed_ms) / duplex_up, 2),
         table::cell::none(), table::cell::none(), "pieces of " + detail::format_bytes(double(seed_piece * sizeof(float))) + ", no overlap"});

  bool ok = true;
  stream_summary used{};
  double hand_gbs = 0;  // the hand-written chunked pipeline's rate, once measured
  auto streamed = [&](const char* what, const char* key, const float* in, float* out_buf, double target) {
    std::fill(out_buf, out_buf + n, -1234.5f);
    scoped_ledger l(d);
    reset_pool_peak(d);
    const std::span<const float> is(in, n);
    const std::span<float> os(out_buf, n);
    used = stream_pipeline(seed, is, os, opts);
    const ledger_counts per_call = l.delta();
    const double err = seed_error(in, out_buf, n);
    ok = ok && err <= tolerance && per_call.peak_bytes <= limit;
    const auto [ms, slowest] = wall_spread_ms(reps, [&] { stream_pipeline(seed, is, os, opts); }, 0);
    t.add({std::string("streamed, ") + what, table::cell(gbs(bytes, ms), -1), table::cell(gbs(bytes, ms) / duplex_up, 2),
           table::cell(gbs(bytes, slowest) / duplex_up, 2), table::cell(target, 2),
           format_number(gbs(bytes, ms) / gbs(bytes, seed_ms), -1) + "x seed's way, " +
               (hand_gbs > 0 && std::string(key) == "pinned"
                    ? format_number(gbs(bytes, ms) / hand_gbs, 2) + "x hand-written, "
                    : std::string()) +
               detail::format_bytes(double(used.chunk_elements * sizeof(float))) + " x " + std::to_string(used.depth) +
               (used.host_threads ? ", " + std::to_string(used.host_threads) + " host threads" : std::string())});
    extra[std::string("ledger_streamed_") + key] = nlohmann::json::parse(per_call.json());
    extra[std::string("summary_streamed_") + key] = {{"chunk_elements", used.chunk_elements},
                                                     {"depth", used.depth},
                                                     {"host_threads", used.host_threads},
                                                     {"pinned_input", used.pinned_input},
                                                     {"pinned_output", used.pinned_output}};
  };
  if (hand_written) {
    // Chunks as the stream's default (64 MiB), three streams each uploading, mapping and downloading
    // its chunk: how CUDA's samples overlap copies and kernels by hand.
    bar.step("hand-written chunked pipeline, pinned");
    const std::size_t hand_chunk = detail::streaming_tuning::chunk_bytes / sizeof(float);
    std::fill(pin_out.data(), pin_out.data() + n, -1234.5f);
    const std::vector<double> ms = hand_chunked_pipeline_ms(pin_in.data(), pin_out.data(), n, hand_chunk, 3, d.index(), reps);
    if (seed_error(pin_in.data(), pin_out.data(), n) > tolerance)
      throw error("bench stream: the hand-written chunked pipeline gave a wrong result");
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    hand_gbs = gbs(bytes, sorted[sorted.size() / 2]);
    const double slowest = gbs(bytes, sorted.back());
    t.add({"hand-written chunked, pinned", table::cell(hand_gbs, -1), table::cell(hand_gbs / duplex_up, 2),
           table::cell(slowest / duplex_up, 2), table::cell::none(),
           detail::format_bytes(double(hand_chunk * sizeof(float))) + " x 3 streams, copy / map / copy each"});
    extra["hand_written_pinned"] = {{"chunk_bytes", hand_chunk * sizeof(float)}, {"streams", 3}, {"gbs", hand_gbs},
                                    {"ratio", hand_gbs / duplex_up}, {"slowest_ratio", slowest / duplex_up}};
  }
  if (pinned) {
    bar.step("streamed, pinned in/out");
    streamed("pinned in/out", "pinned", pin_in.data(), pin_out.data(), 0.97);
  }
  if (pageable) {
    bar.step("streamed, pageable in/out");
    streamed("pageable in/out", "pageable", page_in.data(), page_out.data(), 0.80);
  }
  const float* red_in = pinned ? pin_in.data() : page_in.data();
  const float* red_ref = pinned ? pin_out.data() : page_out.data();
  bar.step(std::string("streamed reduction, ") + (pinned ? "pinned" : "pageable"));
  {
    const std::span<const float> is(red_in, n);
    const double value = stream_pipeline(sum, is, opts);
    double ref = 0;
#pragma omp parallel for reduction(+ : ref)
    for (long i = 0; i < long(n); ++i) ref += red_ref[i];
    ok = ok && std::fabs(value - ref) <= 1e-6 * (std::fabs(ref) + double(n));
    const auto [ms, slowest] = wall_spread_ms(reps, [&] { (void)stream_pipeline(sum, is, opts); }, 0);
    t.add({std::string("streamed reduction, ") + (pinned ? "pinned" : "pageable"), table::cell(gbs(bytes, ms), -1),
           table::cell(gbs(bytes, ms) / upload, 2), table::cell(gbs(bytes, slowest) / upload, 2), table::cell(0.90, 2),
           "sum of f3(f2(f1(x)))"});
  }
  if (pageable && pinned) {  // with --pageable alone, measured above
    bar.step("streamed reduction, pageable");
    const std::span<const float> is(page_in.data(), n);
    const auto [ms, slowest] = wall_spread_ms(reps, [&] { (void)stream_pipeline(sum, is, opts); }, 0);
    t.add({"streamed reduction, pageable", table::cell(gbs(bytes, ms), -1), table::cell(gbs(bytes, ms) / upload, 2),
           table::cell(gbs(bytes, slowest) / upload, 2), table::cell::none(), ""});
  }

  // Pageable in and out against the number of host copy threads (GPU only: the CPU stages nothing).
  nlohmann::json thread_sweep = nlohmann::json::array();
  if (pageable && gpu) {
    for (std::size_t cb : thread_sweep_chunks)
      for (int threads : host_thread_counts) {
        const bool skip = std::size_t(opts.depth ? opts.depth : 4) * cb + MiB > limit;  // more than the limit
        bar.step("pageable, " + detail::format_bytes(double(cb)) + " chunks, " + std::to_string(threads) + " host threads" +
                 (skip ? " (skipped: over the pool's limit)" : ""));
        if (skip) continue;
        stream_options so = opts;
        so.host_threads = threads;
        so.chunk_elements = std::min(cb / sizeof(float), n);
        const std::span<const float> is(page_in.data(), n);
        const std::span<float> os(page_out.data(), n);
        const stream_summary s = stream_pipeline(seed, is, os, so);
        const double ms = wall_ms(reps, [&] { stream_pipeline(seed, is, os, so); }, 0);
        thread_sweep.push_back({{"host_threads", threads}, {"chunk_bytes", s.chunk_elements * sizeof(float)},
                                {"depth", s.depth}, {"gbs", gbs(bytes, ms)}, {"ratio", gbs(bytes, ms) / duplex_up}});
      }
    ok = ok && seed_error(page_in.data(), page_out.data(), n) <= tolerance;
  }

  // Throughput against chunk size: pinned in and out, the depth as above.
  nlohmann::json sweep = nlohmann::json::array();
  if (pinned) {
    for (std::size_t k = 0; k < sweep_count; ++k) {
      const std::size_t cb = (std::size_t(4) << k) * MiB;  // 4 MiB to 256 MiB
      const int depth = o.depth ? o.depth : 3;
      const bool skip = cb / sizeof(float) > n || std::size_t(depth) * cb + MiB > limit;  // more than the data or the limit
      bar.step("chunk sweep, " + detail::format_bytes(double(cb)) +
               (skip ? " (skipped: over the data or the pool's limit)" : ""));
      if (skip) continue;
      stream_options so = opts;
      so.chunk_elements = cb / sizeof(float);
      so.depth = depth;
      const std::span<const float> is(pin_in.data(), n);
      const std::span<float> os(pin_out.data(), n);
      stream_pipeline(seed, is, os, so);
      const double ms = wall_ms(reps, [&] { stream_pipeline(seed, is, os, so); }, 0);
      sweep.push_back({{"chunk_bytes", cb}, {"depth", depth}, {"gbs", gbs(bytes, ms)}, {"ratio", gbs(bytes, ms) / duplex_up}});
    }
  }
  bar.finish();
  t.print(out());
  out() << wrap("ratio: to the " + copies_kind + " upload measured with both directions at once (duplex) (the reductions: to the "
                "upload alone), of the median of " + std::to_string(reps) + " repetitions; slowest rep: the slowest "
                "repetition's; target: the streaming layer's goal on a GPU; GB/s: input bytes per second",
                100, "  ")
        << "\n";
  if (sweep.size()) {
    std::string line = "chunk sweep (pinned in and out):";
    for (const auto& s : sweep)
      line += " " + detail::format_bytes(double(s["chunk_bytes"].get<std::size_t>())) + " " +
              format_number(s["gbs"].get<double>(), -1) + " GB/s;";
    out() << wrap(line, 100, "  ") << "\n";
  }
  if (thread_sweep.size()) {
    std::string line = "host thread sweep (pageable in and out):";
    for (const auto& s : thread_sweep)
      line += " " + detail::format_bytes(double(s["chunk_bytes"].get<std::size_t>())) + " x " +
              std::to_string(s["host_threads"].get<int>()) + " threads " + format_number(s["gbs"].get<double>(), -1) +
              " GB/s;";
    out() << wrap(line, 100, "  ") << "\n";
  }
  if (!gpu) out() << "  (on the CPU backend the chunks are read and written in place: no bus, no overlap)\n";
  if (!ok) out() << "ERROR: a streamed result differs from the FP64 reference or the pool went past its limit\n";
  if (!o.json.empty()) {
    nlohmann::json j = bench_json("stream", d.name(), properties(d).name, t);
    j["size_bytes"] = bytes;
    j["pool_limit_bytes"] = limit;
    j["reps"] = reps;
    j["chunk_elements"] = used.chunk_elements;
    j["depth"] = used.depth;
    j["seed_piece_bytes"] = seed_piece * sizeof(float);
    j["duplex_upload_gbs"] = duplex_up;
    j["duplex_download_gbs"] = duplex_down;
    j["upload_gbs"] = upload;
    j["sweep"] = sweep;
    j["host_thread_sweep"] = thread_sweep;
    j["ok"] = ok;
    for (auto& [k, v] : extra.items()) j[k] = v;
    write_json(j, o.json);
  }
  return ok ? 0 : 1;
}

}  // namespace resident::cli
