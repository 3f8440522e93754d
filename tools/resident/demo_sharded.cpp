// resident demo --gpus N: the seed pipeline over an array sharded over N devices against one device;
// --beyond-one: one array larger than a GPU's memory, filled with random numbers, mapped in place and
// summed where it lives. Compiled by nvcc in CUDA builds.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>

#include "commands.hpp"
#include "commands/memory_budget.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/dist/dist.hpp"
#include "resident/resident.hpp"
#include "common/seed.hpp"
#include "commands/wall_timing.hpp"
#include "commands/table.hpp"

namespace resident::cli {
namespace {

constexpr double tolerance = 1e-5;  // float32 math against the FP64 reference, relative to max |ref|

// Outputs are poisoned with a value the seed pipeline never produces (its values lie in [0.39, 0.5]).
struct poison_value {
  RESIDENT_HD float operator()(std::size_t) const { return -1234.5f; }
};

// The shards' devices and one stream per shard.
struct shard_set {
  std::vector<device> devices;   // shard i's device
  std::vector<device> distinct;  // each device once: the CPU's shards share one
  std::vector<stream> owned;
  std::vector<stream_ref> streams;

  std::string names() const {
    std::string s;
    for (auto d : devices) {
      if (!s.empty()) s += ',';
      s += d.name();
    }
    return s;
  }
  // For people: "cpu x64", "cuda:0..cuda:7", else the names with spaces (a long list wraps).
  std::string text() const {
    const auto same = [&](auto pred) {
      for (std::size_t i = 1; i < devices.size(); ++i)
        if (!pred(devices[i - 1], devices[i])) return false;
      return true;
    };
    if (devices.size() > 2 && same([](device a, device b) { return a == b; }))
      return devices[0].name() + " x" + std::to_string(devices.size());
    if (devices.size() > 2 && devices[0].kind() == device_kind::cuda &&
        same([](device a, device b) { return b.kind() == device_kind::cuda && b.index() == a.index() + 1; }))
      return devices.front().name() + ".." + devices.back().name();
    std::string s;
    for (auto d : devices) s += (s.empty() ? "" : ", ") + d.name();
    return s;
  }
  void synchronize() const {
    for (auto s : streams) s.synchronize();
  }
};

// --gpus N over cuda:K .. cuda:K+N-1 (K from --device cuda:K), or N devices on the CPU. Refuses N
// larger than the GPUs present before anything is allocated.
shard_set make_shards(const demo_options& o) {
  const std::size_t count = std::size_t(o.gpus ? o.gpus : 2);
  const device asked = o.device.empty() ? device::cuda(0) : parse_device(o.device);
  shard_set sh;
  if (asked.is_cuda()) {
    const int present = cuda_device_count();
    const std::size_t first = std::size_t(asked.index());
    if (first + count > std::size_t(present))
      throw invalid_argument(
          "--gpus " + std::to_string(count) + (first ? " from cuda:" + std::to_string(first) : std::string()) +
          ": this host has " + std::to_string(present) + " GPU" + (present == 1 ? "" : "s") +
          (present > 0 ? " (cuda:0 to cuda:" + std::to_string(present - 1) + ")" : std::string()) +
          (std::size_t(present) > first ? "; give --gpus " + std::to_string(std::size_t(present) - first)
                                        : "; run it on a host with " + std::to_string(first + count) + " GPUs") +
          ", or --device cpu --gpus " + std::to_string(count) +
          " to shard over " + std::to_string(count) + " devices on the CPU");
    for (std::size_t i = 0; i < count; ++i) sh.devices.push_back(device::cuda(int(first + i)));
  } else {
    sh.devices.assign(count, device::cpu());
  }
  for (auto d : sh.devices)
    if (std::find(sh.distinct.begin(), sh.distinct.end(), d) == sh.distinct.end()) sh.distinct.push_back(d);
  for (auto d : sh.distinct) require(d);
  for (auto d : sh.devices) {
    device_scope on(d);
    sh.owned.emplace_back(d);
    sh.streams.push_back(sh.owned.back().ref());
  }
  return sh;
}

// The ledgers of several devices, summed.
class ledgers {
 public:
  explicit ledgers(const std::vector<device>& ds) {
    for (auto d : ds) l_.emplace_back(d);
  }
  ledger_counts delta() const {
    ledger_counts t{};
    for (auto& l : l_) {
      const ledger_counts c = l.delta();
      t.h2d_bytes += c.h2d_bytes;
      t.h2d_copies += c.h2d_copies;
      t.d2h_bytes += c.d2h_bytes;
      t.d2h_copies += c.d2h_copies;
      t.d2d_bytes += c.d2d_bytes;
      t.peer_bytes += c.peer_bytes;
      t.peer_copies += c.peer_copies;
      t.kernels += c.kernels;
    }
    return t;
  }

 private:
  std::vector<scoped_ledger> l_;
};

// "1 shard", "2 shards".
std::string count_of(std::size_t k, const std::string& noun) {
  return std::to_string(k) + " " + noun + (k == 1 ? "" : "s");
}

double gbs(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

std::string log2_text(std::size_t n) {
  return (n & (n - 1)) == 0 ? "2^" + std::to_string(std::countr_zero(n)) : std::to_string(n);
}

struct mode_row {
  std::string key, name;
  double ms = 0, bytes = 0, error = 0, speedup = 1;
  ledger_counts per_call{};
};

// The sum of seed_reference over the n inputs, in FP64 (in parallel).
double reference_sum(const std::vector<float>& x) {
  double s = 0;
#pragma omp parallel for reduction(+ : s)
  for (long i = 0; i < long(x.size()); ++i) s += seed_reference(double(x[std::size_t(i)]));
  return s;
}

int demo_gpus(const demo_options& o, shard_set& sh) {
  const device d0 = sh.devices[0];
  const bool gpu = d0.is_cuda();
  const std::size_t shards = sh.devices.size();
  const std::size_t n = o.n ? o.n : (gpu ? std::size_t(1) << 30 : std::size_t(1) << 22);
  const int reps = o.reps ? o.reps : (gpu ? 20 : 5);

  // x and y on the first device alone, x and y sharded; on the host the inputs and one output gathered.
  for (auto d : sh.distinct) {
    double on_d = d == d0 ? 8.0 * double(n) : 0;
    for (std::size_t i = 0; i < shards; ++i)
      if (sh.devices[i] == d) on_d += 8.0 * double(dist::extent_of(n, shards, i).count);
    require_memory(d, "demo --gpus " + std::to_string(shards) + " --n " + std::to_string(n), on_d, 8.0 * double(n),
                   "Choose a smaller --n (8 bytes per element on " + d0.name() + " alone, 8 per element over the shards, "
                   "8 on the host to check every element)");
  }

  out() << wrap("The seed pipeline func1 -> func2 -> func3 on n = " + log2_text(n) + " float32 (" +
                    detail::format_bytes(double(n) * 4) + ") sharded over " + count_of(shards, "device") + " (" +
                    sh.text() + (gpu ? ", " + properties(d0).name : std::string(", sharing the host's cores")) +
                    ") against " + d0.name() + " alone. Inputs from Philox: one device and the shards hold the same "
                    "values (the counter is global); every element and each sum checked against FP64." +
                    (gpu || o.n ? "" : " The CPU uses a smaller default n than GPUs (2^30)."),
                100, "")
        << "\n\n";

  progress bar("demo --gpus", 6);
  const auto master = map<func1>() | map<func2>() | map<func3>();
  const auto sum = master | reduce(plus{}, 0.0);
  const auto poison = generate(poison_value{});
  const std::uint64_t seed = std::random_device{}();

  bar.step("random inputs");
  array<float> x1(n, sh.streams[0]), y1(n, sh.streams[0]);
  random::fill_uniform(x1, seed);
  dist::sharded_array<float> x(n, sh.streams), y(n, sh.streams);
  dist::random::fill_uniform(x, seed);
  const std::vector<float> hx = x.to_host();
  std::vector<float> hy(n);
  const double ref_sum = reference_sum(hx);
  sh.synchronize();

  // One call under the ledgers of every device, after the outputs are poisoned.
  auto counted = [&](auto&& before, auto&& call) {
    before();
    sh.synchronize();
    ledgers l(sh.distinct);
    call();
    sh.synchronize();
    return l.delta();
  };
  std::vector<mode_row> rows;
  {
    bar.step(d0.name() + " alone: fused map");
    mode_row r{"one_device_map", "(1) " + d0.name() + ", map"};
    r.per_call = counted([&] { poison(y1); }, [&] { master(x1, y1); });
    y1.to_host(std::span<float>(hy));
    r.error = seed_error(hx, hy);
    r.ms = events_ms({sh.streams[0]}, reps, [&] { master(x1, y1); });
    r.bytes = 8.0 * double(n);
    rows.push_back(r);
  }
  {
    bar.step("sharded: fused map");
    mode_row r{"sharded_map", "(2) " + count_of(shards, "shard") + ", map"};
    r.per_call = counted([&] { dist::apply(poison, y); }, [&] { dist::apply(master, x, y); });
    y.to_host(std::span<float>(hy));
    r.error = seed_error(hx, hy);
    r.ms = events_ms(sh.streams, reps, [&] { dist::apply(master, x, y); });
    r.bytes = 8.0 * double(n);
    r.speedup = rows[0].ms / r.ms;
    rows.push_back(r);
  }
  auto sum_error = [&](double v) { return std::isfinite(v) ? std::abs(v - ref_sum) / std::abs(ref_sum) : INFINITY; };
  double one_sum = 0, sharded_sum = 0;
  {
    bar.step(d0.name() + " alone: map + sum");
    mode_row r{"one_device_sum", "(3) " + d0.name() + ", map + sum"};
    r.per_call = counted([] {}, [&] { one_sum = sum(x1); });
    r.error = sum_error(one_sum);
    r.ms = wall_ms(reps, [&] { (void)sum(x1); });
    r.bytes = 4.0 * double(n);
    rows.push_back(r);
  }
  {
    bar.step("sharded: map + sum");
    mode_row r{"sharded_sum", "(4) " + count_of(shards, "shard") + ", map + sum"};
    r.per_call = counted([] {}, [&] { sharded_sum = dist::reduce(sum, x); });
    r.error = sum_error(sharded_sum);
    r.ms = wall_ms(reps, [&] { (void)dist::reduce(sum, x); });
    r.bytes = 4.0 * double(n);
    r.speedup = rows[2].ms / r.ms;
    rows.push_back(r);
  }
  bar.step("done");
  bar.finish();

  // The sharded map crosses no host bus; the sharded sum only its shards' partial values (8 bytes each).
  const ledger_counts& map_counts = rows[1].per_call;
  const ledger_counts& sum_counts = rows[3].per_call;
  const bool map_resident = map_counts.h2d_bytes == 0 && map_counts.d2h_bytes == 0;
  const bool sum_resident = sum_counts.h2d_bytes == 0 && sum_counts.d2h_bytes <= shards * sizeof(double);
  bool ok = map_resident && sum_resident;
  for (auto& r : rows) ok = ok && r.error <= tolerance;

  table t({{"mode", "mode", false},
           {"median (ms)", "median_ms"},
           {"H2D", "h2d_bytes", true},
           {"D2H", "d2h_bytes", true},
           {"peer", "peer_bytes", true},
           {"kernels", "kernels"},
           {"GB/s", "gb_per_s"},
           {"speedup", "speedup"},
           {"rel. err", "max_rel_error"}});
  for (auto& r : rows)
    t.add({r.name, table::cell(r.ms, -1), table::cell::bytes(r.per_call.h2d_bytes), table::cell::bytes(r.per_call.d2h_bytes),
           table::cell::bytes(r.per_call.peer_bytes), table::cell::count(r.per_call.kernels),
           table::cell(gbs(r.bytes, r.ms), -1), table::cell(r.speedup, 3), table::cell::scientific(r.error, 1)});
  t.print(out());
  out() << wrap("(1), (2): y = f3(f2(f1(x))) on one device and on the shards, one fused kernel per shard, timed with events on every shard's stream "
                "(the slowest); H2D, D2H, peer, kernels: one call's, from the ledgers of all devices; (3), (4): "
                "the same map summed in FP64 accumulators, host wall time with the value "
                "returned (the sharded sum adds the shards' partial values on the host). GB/s: bytes read + written "
                "per second; speedup: " + d0.name() + " alone's time over the mode's; rel. error: the map's largest "
                "difference from FP64 over its largest value, the sum's relative difference from the FP64 sum of "
                "all n.",
                100, "  ")
        << "\n";
  std::ostringstream totals;
  totals << ledger();
  out() << "\n" << wrap(totals.str(), 100, "") << "\n";
  out() << "\nAnswer: sharded over " << count_of(shards, gpu ? "GPU" : "CPU device") << ",\n"
        << wrap("the fused map ran " + format_number(rows[1].speedup, 3) + "x and the map + sum " +
                    format_number(rows[3].speedup, 3) + "x as fast as on " + d0.name() + " alone; the sharded map moved " + std::to_string(map_counts.h2d_bytes + map_counts.d2h_bytes) +
                    " bytes over the host bus, the sharded sum " + std::to_string(sum_counts.h2d_bytes + sum_counts.d2h_bytes) +
                    " (the shards' partial values)" + (gpu ? "" : "; on the CPU the devices share one set of cores, so no "
                                                               "speed-up is expected") + ".",
                100, "  ")
        << "\n";
  out().flush();
  if (!ok)
    std::cerr << "resident: error: "
              << (map_resident && sum_resident
                      ? "a mode differs from the FP64 reference by more than " + format_number(tolerance, -1)
                      : std::string("the sharded run crossed the host bus"))
              << "\n";

  if (!o.json.empty()) {
    nlohmann::json j;
    j["command"] = "demo";
    j["device"] = sh.names();
    j["device_name"] = properties(d0).name;
    j["n"] = n;
    j["reps"] = reps;
    j["gpus"] = shards;
    j["devices"] = nlohmann::json::array();
    for (auto d : sh.devices) j["devices"].push_back(d.name());
    j["modes"] = t.json();
    for (std::size_t i = 0; i < rows.size(); ++i) j["modes"][i]["key"] = rows[i].key;
    j["sum_fp64"] = ref_sum;
    j["ledger"] = nlohmann::json::parse(ledger().json());
    j["checked"] = ok;
    write_json(j, o.json);
  }
  return ok ? 0 : 1;
}

// The mean and standard deviation of seed_reference over the 2^24 values a Philox uniform float takes
// (k 2^-24, k = 0 .. 2^24 - 1, equally likely), in FP64.
std::pair<double, double> seed_moments() {
  constexpr long values = long(1) << 24;
  double s = 0, s2 = 0;
#pragma omp parallel for reduction(+ : s, s2)
  for (long k = 0; k < values; ++k) {
    const double f = seed_reference(double(k) * 0x1.0p-24);
    s += f;
    s2 += f * f;
  }
  const double mean = s / double(values);
  return {mean, std::sqrt(std::max(0.0, s2 / double(values) - mean * mean))};
}

int demo_beyond_one(const demo_options& o, shard_set& sh) {
  const device d0 = sh.devices[0];
  const bool gpu = d0.is_cuda();
  const std::size_t shards = sh.devices.size();
  // Each device keeps room for the reductions' scratch and the sample's arrays.
  const std::size_t reserve = gpu ? std::size_t(1) << 30 : std::size_t(1) << 20;
  std::vector<std::size_t> free_b, total_b;
  for (auto d : sh.distinct) {
    std::size_t f = 0, t = 0;
    if (gpu) {
      trim_pool(d);
      detail::cuda::mem_info(d.index(), &f, &t);
    } else {
      f = t = host_available_bytes();
    }
    // A pool limit (set_pool_limit, RESIDENT_POOL_LIMIT) caps what the shards may take as well.
    const pool_statistics p = pool_stats(d);
    if (p.limit) f = std::min(f, *p.limit > p.bytes_in_use ? *p.limit - p.bytes_in_use : 0);
    free_b.push_back(f);
    total_b.push_back(t);
  }
  const std::size_t bytes = o.size ? o.size : (gpu ? std::size_t(1.25 * double(free_b[0])) : std::size_t(64) << 20);
  const std::size_t n = bytes / sizeof(float);
  // The largest array that fits: shards are equal, so the fullest device bounds it.
  std::size_t fits = SIZE_MAX;
  for (std::size_t j = 0; j < sh.distinct.size(); ++j) {
    const std::size_t on_j = std::size_t(std::count(sh.devices.begin(), sh.devices.end(), sh.distinct[j]));
    const std::size_t room = free_b[j] > reserve ? free_b[j] - reserve : 0;
    fits = std::min(fits, room / on_j * shards);
  }
  double combined = 0;
  for (auto f : free_b) combined += double(f);
  for (std::size_t j = 0; j < sh.distinct.size(); ++j) {
    std::size_t need = reserve;
    for (std::size_t i = 0; i < shards; ++i)
      if (sh.devices[i] == sh.distinct[j]) need += dist::extent_of(n, shards, i).count * sizeof(float);
    if (need > free_b[j]) {
      const pool_statistics p = pool_stats(sh.distinct[j]);
      throw out_of_memory(
          "out of memory: --beyond-one with " + detail::format_bytes(double(bytes)) + " of float32 over " +
              count_of(shards, "device") + " needs " + detail::format_bytes(double(need)) + " on " +
              sh.distinct[j].name() + " (its shards and " + detail::format_bytes(double(reserve)) +
              " kept for the reduction), which has " + detail::format_bytes(double(free_b[j])) +
              " free (under its pool's limit, if one is set); the devices' combined free memory is " + detail::format_bytes(combined) +
              ". Nothing was allocated. " +
              (fits >= sizeof(float) ? "Give a smaller --size (at most about " + detail::format_bytes(double(fits)) + ")" +
                                           (gpu ? " or more --gpus" : "")
                                     : std::string("Free memory on the devices (or raise the pool's limit) first")),
          need, free_b[j], p.bytes_reserved, p.bytes_in_use);
    }
  }

  const bool beyond = double(bytes) > double(total_b[0]);
  out() << wrap("One array of n = " + std::to_string(n) + " float32 (" + detail::format_bytes(double(n) * 4) +
                    ") over " + count_of(shards, "device") + " (" + sh.text() +
                    (gpu ? ", " + properties(d0).name : std::string(", sharing the host")) + "), " +
                    detail::format_bytes(double(dist::extent_of(n, shards, 0).count) * 4) + " per shard; " +
                    (gpu ? std::string(beyond ? "larger than " : "not larger than ") + d0.name() + "'s " +
                               detail::format_bytes(double(total_b[0])) + " of memory"
                         : std::string("on the CPU a small array runs the same code")) +
                    ". Filled with Philox uniforms in [0, 1), mapped in place by the seed pipeline, summed, "
                    "each shard where it lives; nothing but the sum crosses the host bus.",
                100, "")
        << "\n\n";

  progress bar("demo --beyond-one", 5);
  const auto master = map<func1>() | map<func2>() | map<func3>();
  const std::uint64_t seed = std::random_device{}();
  struct phase {
    std::string key, name;
    double ms = 0, bytes = 0;
    ledger_counts counts{};
  };
  std::vector<phase> phases;
  ledgers whole(sh.distinct);
  auto timed = [&](phase p, auto&& work) {
    bar.step(p.name);
    ledgers l(sh.distinct);
    const auto a = std::chrono::steady_clock::now();
    work();
    sh.synchronize();
    p.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    p.counts = l.delta();
    phases.push_back(p);
  };
  std::optional<dist::sharded_array<float>> x;
  double total = 0;
  timed({"allocate", "allocate the shards", 0, 0}, [&] { x.emplace(n, sh.streams); });
  timed({"fill", "fill with random numbers", 0, 4.0 * double(n)}, [&] { dist::random::fill_uniform(*x, seed); });
  timed({"map", "map in place (seed pipeline)", 0, 8.0 * double(n)}, [&] { dist::apply(master, *x); });
  timed({"sum", "sum", 0, 4.0 * double(n)}, [&] { total = dist::reduce(reduce(plus{}, 0.0), *x); });
  const ledger_counts run = whole.delta();

  // Checks. The sum against n times the FP64 mean of the seed map over the uniform floats, within six
  // standard deviations of a sum of n draws plus 1e-6 per element for float32 rounding; windows of
  // elements (each shard's first, middle and last, and random ones) against FP64 of the same Philox
  // values made by a one-device fill at the window's offset.
  bar.step("check against FP64");
  const auto [mean, sd] = seed_moments();
  const double expected = double(n) * mean;
  const double sum_tol = 6.0 * sd * std::sqrt(double(n)) + 1e-6 * double(n);
  const bool sum_ok = std::isfinite(total) && std::abs(total - expected) <= sum_tol;
  std::vector<std::size_t> starts;
  std::size_t sampled = 0;
  double sample_error = 0;
  {
    std::mt19937_64 g(seed);
    for (std::size_t r = 0; r < shards; ++r) {
      const auto e = dist::extent_of(n, shards, r);
      if (e.count == 0) continue;
      const std::size_t w = std::min<std::size_t>(1024, e.count);
      for (std::size_t at : {std::size_t(0), (e.count - w) / 2, e.count - w, std::size_t(g() % (e.count - w + 1))})
        starts.push_back(e.offset + at);
    }
    for (std::size_t at : starts) {
      std::size_t r = 0;
      while (r + 1 < shards && at >= dist::extent_of(n, shards, r + 1).offset) ++r;
      const auto e = dist::extent_of(n, shards, r);
      const std::size_t w = std::min<std::size_t>(1024, e.offset + e.count - at);
      array<float> u(w, sh.streams[0]);
      random::fill_uniform(u, seed, at);
      const std::vector<float> hu = u.to_host();
      std::vector<float> got(w);
      const array_ref<float> part = x->slice(at, w);
      {
        device_scope on(part.device());
        copy_async(part, std::span<float>(got));
        part.stream().synchronize();
      }
      sample_error = std::max(sample_error, seed_error(hu, got));
      sampled += w;
    }
  }
  x.reset();
  bar.finish();
  const bool resident_run = run.h2d_bytes == 0 && run.d2h_bytes <= shards * sizeof(double) && run.peer_bytes == 0;
  const bool ok = sum_ok && sample_error <= tolerance && resident_run;

  table t({{"phase", "phase", false},
           {"time (ms)", "ms"},
           {"H2D", "h2d_bytes", true},
           {"D2H", "d2h_bytes", true},
           {"peer", "peer_bytes", true},
           {"kernels", "kernels"},
           {"GB/s", "gb_per_s"}});
  for (auto& p : phases)
    t.add({p.name, table::cell(p.ms, -1), table::cell::bytes(p.counts.h2d_bytes), table::cell::bytes(p.counts.d2h_bytes),
           table::cell::bytes(p.counts.peer_bytes), table::cell::count(p.counts.kernels),
           p.bytes > 0 ? table::cell(gbs(p.bytes, p.ms), -1) : table::cell::none()});
  t.print(out());
  out() << wrap("Host wall time per phase, every shard's stream synchronized; GB/s: bytes written (fill), read + "
                "written (map), read (sum) per second over all devices; H2D, D2H, peer: the ledgers of all devices "
                "during the phase.",
                100, "  ")
        << "\n\n";
  auto precise = [](double v) {
    std::ostringstream os;
    os.precision(12);
    os << v;
    return os.str();
  };
  out() << "  sum          " << precise(total) << "\n"
        << "  expected     " << precise(expected) << " (n x the FP64 mean of the seed map over uniform floats)\n"
        << "  difference   " << format_number(std::abs(total - expected), -1) << ", tolerance "
        << format_number(sum_tol, -1) << " (6 sd of a sum of n draws + 1e-6 per element)\n"
        << "  sample       " << sampled << " elements in " << starts.size() << " windows, rel. error "
        << format_number(sample_error, -1) << " (FP64 of the same Philox values)\n"
        << "  host bus     " << run.h2d_bytes << " bytes up, " << run.d2h_bytes << " bytes down during the run (the "
        << shards << " partial sums: at most " << shards * sizeof(double) << ")\n";
  out() << "\nAnswer: " << detail::format_bytes(double(n) * 4) << " of float32 over "
        << count_of(shards, gpu ? "GPU" : "CPU device") << " filled, mapped and summed\n"
        << wrap("in " + format_number(phases[1].ms + phases[2].ms + phases[3].ms, -1) + " ms" +
                    (resident_run ? ", with no host round trip" : "; ERROR: the run crossed the host bus") + ".",
                100, "  ")
        << "\n";
  out().flush();
  if (!ok && resident_run)
    std::cerr << "resident: error: the sum or a sampled element differs from FP64 beyond the tolerance\n";

  if (!o.json.empty()) {
    nlohmann::json j;
    j["command"] = "demo";
    j["device"] = sh.names();
    j["device_name"] = properties(d0).name;
    j["n"] = n;
    j["reps"] = 1;
    j["gpus"] = shards;
    j["devices"] = nlohmann::json::array();
    for (auto d : sh.devices) j["devices"].push_back(d.name());
    nlohmann::json b;
    b["size_bytes"] = std::uint64_t(n) * 4;
    b["shard_bytes"] = std::uint64_t(dist::extent_of(n, shards, 0).count) * 4;
    b["free_bytes"] = free_b;
    b["larger_than_one_device"] = beyond;
    b["phases"] = t.json();
    for (std::size_t i = 0; i < phases.size(); ++i) b["phases"][i]["key"] = phases[i].key;
    b["sum"] = total;
    b["expected_sum"] = expected;
    b["sum_tolerance"] = sum_tol;
    b["sample_elements"] = sampled;
    b["sample_max_rel_error"] = sample_error;
    b["run_h2d_bytes"] = run.h2d_bytes;
    b["run_d2h_bytes"] = run.d2h_bytes;
    j["beyond_one"] = b;
    j["ledger"] = nlohmann::json::parse(ledger().json());
    j["checked"] = ok;
    write_json(j, o.json);
  }
  return ok ? 0 : 1;
}

}  // namespace

int run_demo_sharded(const demo_options& o) {
  shard_set sh = make_shards(o);
  return o.beyond_one ? demo_beyond_one(o, sh) : demo_gpus(o, sh);
}

}  // namespace resident::cli
