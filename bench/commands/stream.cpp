// resident bench stream: the seed pipeline streamed over host data larger than the pool's limit,
// against the seed's way (upload, run, download in pieces that fit, one after another) and against
// pinned copies alone, all measured in the same run. Compiled by nvcc in CUDA builds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>

#include "bench.hpp"
#include "common/seed.hpp"
#include "memory_budget.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/resident.hpp"
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

auto seed_pipeline() { return map<func1>() | map<func2>() | map<func3>(); }

// What the run measures: the device, the pool's limit, the data and the chunks.
struct stream_plan {
  device d;
  bool gpu = false;
  int reps = 3;
  std::optional<std::size_t> in_force;  ///< the pool's limit before the run, restored after it
  std::size_t limit = 0;
  bool pinned = true, pageable = true;
  std::size_t bytes = 0, n = 0, chunk = 0;
};

// Checks the --chunk against the limit in force and the data, before any work (on a GPU: the chunks in
// flight and the MiB the sweeps keep free).
void check_chunk(const stream_bench_options& o, const stream_plan& p, const std::string& limit_text) {
  const int depth = o.depth      ? o.depth
                    : p.pageable ? detail::out_of_core_tuning::staged_depth
                                 : detail::out_of_core_tuning::depth;
  const auto b = [](std::size_t x) { return detail::format_bytes(double(x)); };  // as the user wrote them
  if (!p.gpu && o.chunk > p.limit)
    throw invalid_argument("--chunk: " + b(o.chunk) + " does not fit under " + limit_text +
                           "; give a smaller chunk or a larger limit");
  if (p.gpu && std::size_t(depth) * o.chunk + MiB > p.limit)
    throw invalid_argument("--chunk: " + std::to_string(depth) + " chunks in flight of " + b(o.chunk) +
                           ", and 1 MiB kept free, do not fit under " + limit_text +
                           "; give a smaller chunk or --depth, or a larger limit");
  // A chunk larger than the data would stream it as one short chunk, not the chunk asked for. Without
  // --size the data is 4x the limit, which the checks above keep the chunk under.
  if (o.size && o.chunk > o.size)
    throw invalid_argument("--chunk: " + b(o.chunk) + " is more than --size " + b(o.size) +
                           ", so the data would be one chunk of its own size; give a --chunk of at most " + b(o.size) +
                           ", or a --size of at least " + b(o.chunk));
}

// The plan of o, refused before any work: --pool-limit's own floor holds for RESIDENT_POOL_LIMIT too (the
// copies' and the seed's buffers, and a GPU's staging, need room), and the chunk must fit.
stream_plan plan_of(const stream_bench_options& o) {
  stream_plan p;
  p.d = o.device.empty() ? default_device() : parse_device(o.device);
  require(p.d);
  p.gpu = p.d.is_cuda();
  p.reps = o.reps ? o.reps : 3;
  // The pool's limit: given, else the one in force, else 2 GiB on a GPU and 64 MiB on the CPU.
  p.in_force = pool_limit(p.d);
  p.limit = o.pool_limit ? o.pool_limit : p.in_force ? *p.in_force : p.gpu ? std::size_t(2) << 30 : 64 * MiB;
  p.pinned = o.pinned || !o.pageable;
  p.pageable = o.pageable || !o.pinned;
  const std::string limit_text =
      o.pool_limit ? "--pool-limit " + detail::format_bytes(double(p.limit))
                   : "the pool's limit of " + detail::format_bytes(double(p.limit)) + " (" +
                         (p.in_force ? "RESIDENT_POOL_LIMIT" : "the default; --pool-limit sets it") + ")";
  if (p.limit < MiB)
    throw invalid_argument("bench stream: " + limit_text + " leaves no room for the benchmark's buffers; give "
                           "--pool-limit 1MiB or more");
  if (o.chunk) check_chunk(o, p, limit_text);
  p.bytes = (o.size ? o.size : 4 * p.limit) / sizeof(float) * sizeof(float);
  p.n = p.bytes / sizeof(float);
  p.chunk = o.chunk / sizeof(float);
  return p;
}

// The host buffers the plan asks for: pinned and pageable input (the seed's random input) and output.
struct host_data {
  pinned_buffer<float> pin_in, pin_out;
  std::vector<float> page_in, page_out;
  explicit host_data(const stream_plan& p) : pin_in(p.pinned ? p.n : 0), pin_out(p.pinned ? p.n : 0) {
    {
      const std::vector<float> hx = seed_input(p.n);
      if (p.pinned) detail::parallel_memcpy(pin_in.data(), hx.data(), p.bytes);
      if (p.pageable) page_in = hx;
    }
    if (p.pageable) page_out.assign(p.n, -1234.5f);
  }
};

// The rates every ratio is taken against.
struct copy_rates {
  double duplex_up, duplex_down, upload;
};

// Copies alone: both directions at once on two streams, and the upload alone, in pieces of at most 64 MiB
// through device buffers that fit the limit.
copy_rates measure_copies(const stream_plan& p, const float* host_in, float* host_out, const std::string& kind,
                          progress& bar) {
  const std::size_t n = p.n;
  const std::size_t piece =
      std::min<std::size_t>(std::max<std::size_t>(p.limit / 4 / sizeof(float), 1), std::min(n, 16 * MiB));
  stream up(p.d), down(p.d);
  array<float> up_buf(piece, up.ref()), down_buf(piece, down.ref());
  event start(p.d), up_end(p.d), down_end(p.d);
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
  bar.step(kind + " copies, both directions at once");
  copies(true);  // warm-up
  std::vector<double> up_ms, down_ms, solo_ms;
  for (int r = 0; r < p.reps; ++r) {
    copies(true);
    up_ms.push_back(elapsed_ms(start, up_end));
    down_ms.push_back(elapsed_ms(start, down_end));
  }
  bar.step(kind + " upload alone");
  for (int r = 0; r < p.reps; ++r) {
    copies(false);
    solo_ms.push_back(elapsed_ms(start, up_end));
  }
  return {gbs(p.bytes, median(up_ms)), gbs(p.bytes, median(down_ms)), gbs(p.bytes, median(solo_ms))};
}

// The seed's way: upload a piece, run, download it, one after another, in pieces that fit. Returns the
// wall milliseconds and the piece's elements.
std::pair<double, std::size_t> seeds_way(const stream_plan& p, const float* host_in, float* host_out) {
  synchronize(p.d);
  const std::size_t n = p.n;
  const std::size_t piece =
      std::max<std::size_t>(std::min(n, (p.limit - pool_stats(p.d).bytes_in_use) / 2 / sizeof(float)), 1);
  stream s(p.d);
  array<float> x(piece, s.ref());
  const auto seed = seed_pipeline();
  auto run = [&] {
    for (std::size_t first = 0; first < n; first += piece) {
      const std::size_t c = std::min(piece, n - first);
      auto xs = x.slice(0, c);
      copy_async(std::span<const float>(host_in + first, c), xs);
      seed(xs);
      copy_async(xs, std::span<float>(host_out + first, c));
      s.synchronize();
    }
  };
  run();
  const double ms = wall_ms(p.reps, run, 0);
  if (seed_error(host_in, host_out, n) > tolerance) throw error("bench stream: the seed's way gave a wrong result");
  return {ms, piece};
}

// The streamed measures, each a row of the table against the copy rates (and their sweeps as JSON).
class stream_measures {
 public:
  // depth: the chunks in flight asked for (0 = chosen by the call).
  stream_measures(const stream_plan& p, host_data& h, const copy_rates& rates, double seed_ms, int depth)
      : p_(p), h_(h), rates_(rates), seed_ms_(seed_ms), opts_{.chunk_elements = p.chunk, .depth = depth, .target = p.d} {}
  table& rows() { return t_; }
  nlohmann::json& extra() { return extra_; }
  bool ok() const { return ok_; }
  const out_of_core_summary& used() const { return used_; }

  // The bar of the pinned stream, written by hand in CUDA: chunks as the stream's default (64 MiB), three
  // streams each uploading, mapping and downloading its chunk, as CUDA's samples overlap copies and kernels.
  void hand_written() {
    const std::size_t n = p_.n, hand_chunk = detail::out_of_core_tuning::chunk_bytes / sizeof(float);
    std::fill(h_.pin_out.data(), h_.pin_out.data() + n, -1234.5f);
    const std::vector<double> ms =
        hand_chunked_pipeline_ms(h_.pin_in.data(), h_.pin_out.data(), n, hand_chunk, 3, p_.d.index(), p_.reps);
    if (seed_error(h_.pin_in.data(), h_.pin_out.data(), n) > tolerance)
      throw error("bench stream: the hand-written chunked pipeline gave a wrong result");
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    hand_gbs_ = gbs(p_.bytes, sorted[sorted.size() / 2]);
    const double slowest = gbs(p_.bytes, sorted.back()), up = rates_.duplex_up;
    t_.add({"hand-written chunked, pinned", table::cell(hand_gbs_, -1), table::cell(hand_gbs_ / up, 2),
            table::cell(slowest / up, 2), table::cell::none(),
            detail::format_bytes(double(hand_chunk * sizeof(float))) + " x 3 streams, copy / map / copy each"});
    extra_["hand_written_pinned"] = {{"chunk_bytes", hand_chunk * sizeof(float)}, {"streams", 3}, {"gbs", hand_gbs_},
                                     {"ratio", hand_gbs_ / up}, {"slowest_ratio", slowest / up}};
  }

  // The seed pipeline streamed from in to out, checked, its ledger and summary kept for the JSON.
  void streamed(const char* what, const char* key, const float* in, float* out_buf, double target) {
    const std::size_t n = p_.n, bytes = p_.bytes;
    std::fill(out_buf, out_buf + n, -1234.5f);
    scoped_ledger l(p_.d);
    reset_pool_peak(p_.d);
    const std::span<const float> is(in, n);
    const std::span<float> os(out_buf, n);
    used_ = out_of_core(seed_, is, os, opts_);
    const ledger_counts per_call = l.delta();
    const double err = seed_error(in, out_buf, n);
    ok_ = ok_ && err <= tolerance && per_call.peak_bytes <= p_.limit;
    const auto [ms, slowest] = wall_spread_ms(p_.reps, [&] { out_of_core(seed_, is, os, opts_); }, 0);
    const double up = rates_.duplex_up;
    t_.add({std::string("streamed, ") + what, table::cell(gbs(bytes, ms), -1), table::cell(gbs(bytes, ms) / up, 2),
            table::cell(gbs(bytes, slowest) / up, 2), table::cell(target, 2),
            format_number(gbs(bytes, ms) / gbs(bytes, seed_ms_), -1) + "x seed's way, " +
                (hand_gbs_ > 0 && std::string(key) == "pinned"
                     ? format_number(gbs(bytes, ms) / hand_gbs_, 2) + "x hand-written, "
                     : std::string()) +
                detail::format_bytes(double(used_.chunk_elements * sizeof(float))) + " x " +
                std::to_string(used_.depth) +
                (used_.host_threads ? ", " + std::to_string(used_.host_threads) + " host threads" : std::string())});
    extra_[std::string("ledger_streamed_") + key] = nlohmann::json::parse(per_call.json());
    extra_[std::string("summary_streamed_") + key] = {{"chunk_elements", used_.chunk_elements},
                                                      {"depth", used_.depth},
                                                      {"host_threads", used_.host_threads},
                                                      {"pinned_input", used_.pinned_input},
                                                      {"pinned_output", used_.pinned_output}};
  }

  // The streamed sum of the seed over in, against the upload alone; `reference` (the seed's outputs)
  // checks it when given.
  void reduction(const char* what, const float* in, const float* reference, double target) {
    const std::size_t n = p_.n;
    const std::span<const float> is(in, n);
    if (reference) {
      const double value = out_of_core(sum_, is, opts_);
      double ref = 0;
#pragma omp parallel for reduction(+ : ref)
      for (long i = 0; i < long(n); ++i) ref += reference[i];
      ok_ = ok_ && std::fabs(value - ref) <= 1e-6 * (std::fabs(ref) + double(n));
    }
    const auto [ms, slowest] = wall_spread_ms(p_.reps, [&] { (void)out_of_core(sum_, is, opts_); }, 0);
    const double up = rates_.upload;
    t_.add({std::string("streamed reduction, ") + what, table::cell(gbs(p_.bytes, ms), -1),
            table::cell(gbs(p_.bytes, ms) / up, 2), table::cell(gbs(p_.bytes, slowest) / up, 2),
            target > 0 ? table::cell(target, 2) : table::cell::none(), reference ? "sum of f3(f2(f1(x)))" : ""});
  }

  // Pageable in and out against the number of host copy threads, for three chunk sizes.
  nlohmann::json host_thread_sweep(progress& bar);
  // Pinned in and out against the chunk size, 4 MiB to 256 MiB.
  nlohmann::json chunk_sweep(progress& bar, int depth_given);

  static constexpr int host_thread_counts[] = {2, 4, 8, 12, 16};
  static constexpr std::size_t thread_sweep_chunks[] = {4 * MiB, 16 * MiB, 64 * MiB};
  static constexpr std::size_t chunk_sweep_count = 7;

 private:
  const stream_plan& p_;
  host_data& h_;
  copy_rates rates_;
  double seed_ms_;
  out_of_core_options opts_;
  decltype(seed_pipeline()) seed_ = seed_pipeline();
  decltype(seed_pipeline() | reduce(plus{}, 0.0)) sum_ = seed_pipeline() | reduce(plus{}, 0.0);
  table t_{{{"measure", "measure", false}, {"GB/s", "gbs", true}, {"ratio", "ratio", true},
            {"slowest rep", "slowest_ratio", true}, {"target", "target", true}, {"note", "note", false}}};
  nlohmann::json extra_;
  bool ok_ = true;
  out_of_core_summary used_{};
  double hand_gbs_ = 0;  // the hand-written chunked pipeline's rate, once measured
};

nlohmann::json stream_measures::host_thread_sweep(progress& bar) {
  nlohmann::json sweep = nlohmann::json::array();
  const std::size_t n = p_.n;
  for (std::size_t cb : thread_sweep_chunks)
    for (int threads : host_thread_counts) {
      const bool skip = std::size_t(opts_.depth ? opts_.depth : 4) * cb + MiB > p_.limit;  // more than the limit
      bar.step("pageable, " + detail::format_bytes(double(cb)) + " chunks, " + std::to_string(threads) +
               " host threads" + (skip ? " (skipped: over the pool's limit)" : ""));
      if (skip) continue;
      out_of_core_options so = opts_;
      so.host_threads = threads;
      so.chunk_elements = std::min(cb / sizeof(float), n);
      const std::span<const float> is(h_.page_in.data(), n);
      const std::span<float> os(h_.page_out.data(), n);
      const out_of_core_summary s = out_of_core(seed_, is, os, so);
      const double ms = wall_ms(p_.reps, [&] { out_of_core(seed_, is, os, so); }, 0);
      sweep.push_back({{"host_threads", threads}, {"chunk_bytes", s.chunk_elements * sizeof(float)},
                       {"depth", s.depth}, {"gbs", gbs(p_.bytes, ms)}, {"ratio", gbs(p_.bytes, ms) / rates_.duplex_up}});
    }
  ok_ = ok_ && seed_error(h_.page_in.data(), h_.page_out.data(), n) <= tolerance;
  return sweep;
}

nlohmann::json stream_measures::chunk_sweep(progress& bar, int depth_given) {
  nlohmann::json sweep = nlohmann::json::array();
  const std::size_t n = p_.n;
  for (std::size_t k = 0; k < chunk_sweep_count; ++k) {
    const std::size_t cb = (std::size_t(4) << k) * MiB;  // 4 MiB to 256 MiB
    const int depth = depth_given ? depth_given : 3;
    const bool skip = cb / sizeof(float) > n || std::size_t(depth) * cb + MiB > p_.limit;  // over the data or limit
    bar.step("chunk sweep, " + detail::format_bytes(double(cb)) +
             (skip ? " (skipped: over the data or the pool's limit)" : ""));
    if (skip) continue;
    out_of_core_options so = opts_;
    so.chunk_elements = cb / sizeof(float);
    so.depth = depth;
    const std::span<const float> is(h_.pin_in.data(), n);
    const std::span<float> os(h_.pin_out.data(), n);
    out_of_core(seed_, is, os, so);
    const double ms = wall_ms(p_.reps, [&] { out_of_core(seed_, is, os, so); }, 0);
    sweep.push_back({{"chunk_bytes", cb}, {"depth", depth}, {"gbs", gbs(p_.bytes, ms)},
                     {"ratio", gbs(p_.bytes, ms) / rates_.duplex_up}});
  }
  return sweep;
}

// The notes under the table: what the ratios mean and the sweeps, one wrapped line each.
void print_notes(const stream_plan& p, const std::string& kind, const nlohmann::json& sweep,
                 const nlohmann::json& thread_sweep, bool ok) {
  out() << wrap("ratio: to the " + kind + " upload measured with both directions at once (duplex) (the reductions: to the "
                "upload alone), of the median of " + std::to_string(p.reps) + " repetitions; slowest rep: the slowest "
                "repetition's; target: the streaming layer's goal on a GPU; GB/s: input bytes per second",
                100, "  ")
        << "\n";
  if (sweep.size()) {
    std::string line = "chunk sweep (pinned in and out):";
    for (const auto& s : sweep)
      line += std::string(&s == &sweep.front() ? " " : "; ") +
              detail::format_bytes(double(s["chunk_bytes"].get<std::size_t>())) + " " +
              format_number(s["gbs"].get<double>(), -1) + " GB/s";
    out() << wrap(line, 100, "  ") << "\n";
  }
  if (thread_sweep.size()) {
    std::string line = "host thread sweep (pageable in and out):";
    for (const auto& s : thread_sweep)
      line += std::string(&s == &thread_sweep.front() ? " " : "; ") +
              detail::format_bytes(double(s["chunk_bytes"].get<std::size_t>())) + " x " +
              std::to_string(s["host_threads"].get<int>()) + " threads " + format_number(s["gbs"].get<double>(), -1) +
              " GB/s";
    out() << wrap(line, 100, "  ") << "\n";
  }
  if (!p.gpu) out() << "  (on the CPU backend the chunks are read and written in place: no bus, no overlap)\n";
  if (!ok)
    std::cerr << "resident: error: a streamed result differs from the FP64 reference or the pool went past its "
                 "limit\n";
}

}  // namespace

int run_bench_stream(const stream_bench_options& o) {
  const stream_plan p = plan_of(o);
  const device d = p.d;
  const bool pinned = p.pinned, pageable = p.pageable;
  // Host: the pinned and the pageable input and output; device: the pool's limit, set first so that a
  // RESIDENT_POOL_LIMIT which --pool-limit overrides does not count.
  const double host_bytes = double(p.bytes) * 2 * (int(pinned) + int(pageable));
  trim_pool(d);
  set_pool_limit(d, p.limit);
  struct restore {
    device d;
    std::optional<std::size_t> was;
    ~restore() {
      if (was)
        set_pool_limit(d, *was);
      else
        clear_pool_limit(d);
    }
  } restored{d, p.in_force};
  require_memory(d, "bench stream --size " + std::to_string(p.bytes) + (o.size ? "" : " (the default: 4x the pool's limit)"),
                 p.gpu ? double(p.limit) : 0.0, host_bytes,
                 "Choose a smaller --size (" + std::string(pinned && pageable ? "4" : "2") +
                     " host bytes per byte of data; --pinned or --pageable alone halves it)");
  out() << wrap("The seed pipeline func1 -> func2 -> func3 streamed on " + d.name() + " (" + properties(d).name +
                ") over " + detail::format_bytes(double(p.bytes)) + " of host float32 (" + std::to_string(p.n) +
                " elements), " + format_number(double(p.bytes) / double(p.limit), -1) + "x the pool's limit of " +
                detail::format_bytes(double(p.limit)) + "; input bytes per second, median of " +
                std::to_string(p.reps) + " runs")
        << "\n\n";

  const std::size_t thread_sweep_count =
      p.gpu ? std::size(stream_measures::host_thread_counts) * std::size(stream_measures::thread_sweep_chunks) : 0;
  const bool hand_written = pinned && p.gpu;  // the bar of the pinned stream, written by hand in CUDA
  // Steps: host data, both copies, the seed's way and the first reduction; each stream's own steps.
  progress bar("bench stream", 5 + std::size_t(pinned) * (1 + stream_measures::chunk_sweep_count) +
                                   std::size_t(hand_written) + std::size_t(pageable) * (1 + thread_sweep_count) +
                                   std::size_t(pinned && pageable));
  bar.step("host data");
  host_data h(p);
  // Copies alone run between pinned memory (the pageable buffers when --pageable alone).
  float* host_in = pinned ? h.pin_in.data() : h.page_in.data();
  float* host_out = pinned ? h.pin_out.data() : h.page_out.data();
  const std::string kind = pinned ? "pinned" : "pageable";  // what the rows below name
  const copy_rates rates = measure_copies(p, host_in, host_out, kind, bar);
  bar.step("the seed's way, in pieces that fit");
  const auto [seed_ms, seed_piece] = seeds_way(p, host_in, host_out);

  stream_measures m(p, h, rates, seed_ms, o.depth);
  table& t = m.rows();
  t.add({kind + " duplex copies: upload", table::cell(rates.duplex_up, -1), table::cell(1.0, 2), table::cell::none(),
         table::cell::none(), "reference of the ratios"});
  t.add({kind + " duplex copies: download", table::cell(rates.duplex_down, -1),
         table::cell(rates.duplex_down / rates.duplex_up, 2), table::cell::none(), table::cell::none(), ""});
  t.add({kind + " upload alone", table::cell(rates.upload, -1), table::cell(rates.upload / rates.duplex_up, 2),
         table::cell::none(), table::cell::none(), "reference of the reductions"});
  t.add({"seed's way, " + kind, table::cell(gbs(p.bytes, seed_ms), -1),
         table::cell(gbs(p.bytes, seed_ms) / rates.duplex_up, 2), table::cell::none(), table::cell::none(),
         "pieces of " + detail::format_bytes(double(seed_piece * sizeof(float))) + ", no overlap"});
  if (hand_written) {
    bar.step("hand-written chunked pipeline, pinned");
    m.hand_written();
  }
  if (pinned) {
    bar.step("streamed, pinned in/out");
    m.streamed("pinned in/out", "pinned", h.pin_in.data(), h.pin_out.data(), 0.97);
  }
  if (pageable) {
    bar.step("streamed, pageable in/out");
    m.streamed("pageable in/out", "pageable", h.page_in.data(), h.page_out.data(), 0.80);
  }
  bar.step(std::string("streamed reduction, ") + kind);
  m.reduction(kind.c_str(), pinned ? h.pin_in.data() : h.page_in.data(),
              pinned ? h.pin_out.data() : h.page_out.data(), 0.90);
  if (pageable && pinned) {  // with --pageable alone, measured above
    bar.step("streamed reduction, pageable");
    m.reduction("pageable", h.page_in.data(), nullptr, 0);
  }
  // GPU only for the host threads: the CPU stages nothing.
  const nlohmann::json thread_sweep = pageable && p.gpu ? m.host_thread_sweep(bar) : nlohmann::json::array();
  const nlohmann::json sweep = pinned ? m.chunk_sweep(bar, o.depth) : nlohmann::json::array();
  bar.finish();
  t.print(out());
  print_notes(p, kind, sweep, thread_sweep, m.ok());
  if (!o.json.empty()) {
    nlohmann::json j = bench_json("stream", d.name(), properties(d).name, t);
    j["size_bytes"] = p.bytes;
    j["pool_limit_bytes"] = p.limit;
    j["reps"] = p.reps;
    j["chunk_elements"] = m.used().chunk_elements;
    j["depth"] = m.used().depth;
    j["seed_piece_bytes"] = seed_piece * sizeof(float);
    j["duplex_upload_gbs"] = rates.duplex_up;
    j["duplex_download_gbs"] = rates.duplex_down;
    j["upload_gbs"] = rates.upload;
    j["sweep"] = sweep;
    j["host_thread_sweep"] = thread_sweep;
    j["ok"] = m.ok();
    for (auto& [k, v] : m.extra().items()) j[k] = v;
    write_json(j, o.json);
  }
  return m.ok() ? 0 : 1;
}

}  // namespace resident::cli
