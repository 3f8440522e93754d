// The soak: N host threads, each with streams of its own, drive every layer at once for a set time,
// with data of their own, and every value is checked against a reference the thread computes on the
// host in double precision (or bit for bit, where the library promises exact values). At the end the
// ledger's totals must equal the sum of what each thread counted itself, and the pool's bytes in use
// must be back where they started. A transfer that staged another thread's bytes, a kernel run on
// another thread's stream, a count lost or given to the wrong thread: each shows as a failure here.
//
// Environment (every variable optional):
//   SOAK_SECONDS  how long the threads run (default 60)
//   SOAK_THREADS  host threads (default 2)
//   SOAK_DEVICE   cpu, cuda (every GPU) or all (every GPU and the CPU); default: cuda when a GPU
//                 answers, else cpu. The threads take the devices in turn.
//   SOAK_MAX_N    the largest element count of one round's arrays (default 6Mi on a GPU: several
//                 16 MiB staging chunks; 256Ki on the CPU)
// Exit status: 0 every value right, 1 a wrong value, an error or a count that disagrees, 77 SOAK_DEVICE
// names a GPU where none answers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

namespace {

RESIDENT_HD float affine(float v) { return 1.5f * v + 0.5f; }
RESIDENT_HD float hypot1(float v) { return sqrtf(v * v + 1.f); }
RESIDENT_HD float square(float v) { return v * v; }
RESIDENT_HD float twice_plus_one(float v) { return 2.f * v + 1.f; }
RESIDENT_HD float add2(float a, float b) { return a + b; }

const char* const jit_f = "float soak_f(float v) { return 2.0f * v - 1.0f; }";
const char* const jit_g = "float soak_g(float v) { return v * v + 0.25f; }";

std::size_t env_size(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (*end || x == 0) {
    std::fprintf(stderr, "soak: %s is '%s': give a whole number above 0\n", name, v);
    std::exit(2);
  }
  return std::size_t(x);
}

// What one thread did and found. Filled by its thread alone; read after the join.
struct tally {
  std::uint64_t rounds = 0, checked = 0, wrong = 0, errors = 0, bytes = 0;
  rs::ledger_counts own;  // the thread's own ledger counts over its whole run
  std::string first;      // the first failure, said once
  void fail(const std::string& what) {
    if (first.empty()) first = what;
  }
};

// Element-wise: got[i] within tol of the double reference (relative, or absolute near 0).
template <class V>
bool close(tally& t, const char* what, const std::vector<float>& got, const V& want, double tol) {
  std::size_t bad = 0, at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = double(want[i]);
    if (!(std::abs(double(got[i]) - w) <= tol * std::max(1.0, std::abs(w))) && bad++ == 0) at = i;
  }
  t.checked += got.size();
  if (!bad) return true;
  ++t.wrong;
  t.fail(std::string(what) + ": " + std::to_string(bad) + " of " + std::to_string(got.size()) +
         " elements wrong, the first at " + std::to_string(at) + " (" + std::to_string(got[at]) + ", want " +
         std::to_string(double(want[at])) + ")");
  return false;
}
bool same_value(tally& t, const char* what, double got, double want, double tol) {
  ++t.checked;
  if (std::abs(got - want) <= tol * std::max(1.0, std::abs(want))) return true;
  ++t.wrong;
  t.fail(std::string(what) + ": " + std::to_string(got) + ", want " + std::to_string(want));
  return false;
}

std::vector<float> random_floats(std::mt19937_64& g, std::size_t n, float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

constexpr float poison = -12345.678f;

// Explicit transfers of pageable and pinned memory, staged and unstaged, both ways; a slice mapped in
// place; a fused map; a fused map + reduction. The bytes these transfers move are counted here and
// must be exactly the calling thread's ledger delta.
void transfers_and_pipelines(tally& t, rs::device d, rs::stream_ref s, std::mt19937_64& g, std::size_t n) {
  const std::vector<float> h = random_floats(g, n), h2 = random_floats(g, n);
  rs::scoped_ledger mine(d, rs::ledger_scope::this_thread);
  std::uint64_t up = 0, down = 0;
  // Pageable, staged through the pinned chunk buffers, both ways.
  rs::array<float> a = rs::to_device(std::span<const float>(h), s, rs::staging::chunked);
  std::vector<float> back(n, poison);
  a.to_host(std::span<float>(back), rs::staging::chunked);
  up += n * 4, down += n * 4;
  close(t, "pageable staged round trip", back, h, 0.0);
  // Pageable, one plain copy each way.
  rs::copy(std::span<const float>(h2), a, rs::staging::none);
  std::fill(back.begin(), back.end(), poison);
  a.to_host(std::span<float>(back), rs::staging::none);
  up += n * 4, down += n * 4;
  close(t, "pageable unstaged round trip", back, h2, 0.0);
  // Page-locked, asynchronous both ways.
  rs::pinned_buffer<float> p(n), q(n);
  std::copy(h.begin(), h.end(), p.begin());
  std::fill(q.begin(), q.end(), poison);
  rs::copy_async(std::span<const float>(p.span()), a);
  a.to_host_async(q);
  s.synchronize();
  up += n * 4, down += n * 4;
  close(t, "pinned round trip", std::vector<float>(q.begin(), q.end()), h, 0.0);
  const rs::ledger_counts moved = mine.delta();
  ++t.checked;
  if (moved.h2d_bytes != up || moved.d2h_bytes != down || moved.h2d_copies != 3 || moved.d2h_copies != 3) {
    ++t.wrong;
    t.fail("this thread's ledger: H2D " + std::to_string(moved.h2d_bytes) + " bytes in " +
           std::to_string(moved.h2d_copies) + " copies, D2H " + std::to_string(moved.d2h_bytes) + " in " +
           std::to_string(moved.d2h_copies) + "; it moved " + std::to_string(up) + " and " + std::to_string(down) +
           " in 3 copies each");
  }
  t.bytes += up + down;

  // a holds h: a slice mapped in place, then a fused map over the whole, then map + reduction.
  const std::size_t off = n / 3, cnt = n - off - n / 5;
  rs::map<affine>()(a.slice(off, cnt));
  (rs::map<affine>() | rs::map<hypot1>())(a);
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    double v = h[i];
    if (i >= off && i < off + cnt) v = double(float(1.5 * v + 0.5));
    v = 1.5 * v + 0.5;
    ref[i] = std::sqrt(v * v + 1.0);
  }
  std::fill(back.begin(), back.end(), poison);
  a.to_host(std::span<float>(back));
  t.bytes += n * 4;
  close(t, "slice map, then fused maps", back, ref, 1e-5);
  double want = 0;
  for (std::size_t i = 0; i < n; ++i) want += double(back[i]) * double(back[i]);
  const double got = (rs::map<square>() | rs::reduce(rs::plus{}, 0.0))(a);
  same_value(t, "fused map + sum", got, want, 1e-5);
}

// Philox fills: bit for bit the host's evaluation of the same stream (seed, offset), then summed.
void random_fill(tally& t, rs::stream_ref s, std::uint64_t seed, std::uint64_t offset, std::size_t n) {
  rs::array<float> r(n, s);
  rs::random::fill_uniform(r, seed, offset);
  const std::vector<float> got = r.to_host();
  t.bytes += n * 4;
  const rs::random::unit_distribution<float> ref{{}, seed, offset};
  std::vector<double> want(n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += want[i] = ref(i);
  close(t, "uniform fill", got, want, 0.0);
  same_value(t, "sum of a uniform fill", (rs::map<hypot1>() | rs::reduce(rs::plus{}, 0.0))(r), [&] {
    double w = 0;
    for (float v : got) w += double(hypot1(v));
    return w;
  }(), 1e-5);
}

// A flow of three stages (two independent, one joining them) run, then captured and replayed twice.
void flows(tally& t, rs::device d, rs::stream_ref s, std::mt19937_64& g, std::size_t n) {
  const std::vector<float> hx = random_floats(g, n, -1.f, 1.f), hy = random_floats(g, n, -1.f, 1.f);
  rs::flow f(d, 2);  // before the arrays: their streams are the flow's while it runs, and must outlive them
  rs::array<float> x = rs::to_device(std::span<const float>(hx), s), y = rs::to_device(std::span<const float>(hy), s);
  s.synchronize();
  t.bytes += 2 * n * 4;
  f.add("x = 2x + 1", [&](rs::stream_ref fs) { x.set_stream(fs); rs::map<twice_plus_one>()(x); },
        rs::access{}.reads(x).writes(x));
  f.add("y = y * y", [&](rs::stream_ref fs) { y.set_stream(fs); rs::map<square>()(y); },
        rs::access{}.reads(y).writes(y));
  f.add("y = x + y", [&](rs::stream_ref fs) { y.set_stream(fs); (rs::zip(x, y) | rs::map<add2>())(y); },
        rs::access{}.reads(x, y).writes(y));
  std::vector<double> rx(hx.begin(), hx.end()), ry(hy.begin(), hy.end());
  auto round = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      rx[i] = double(float(2.0 * rx[i] + 1.0));
      ry[i] = rx[i] + double(float(ry[i] * ry[i]));
    }
  };
  auto check = [&](const char* what) {
    x.set_stream(f.stream());
    y.set_stream(f.stream());
    close(t, what, x.to_host(), rx, 1e-6);
    close(t, what, y.to_host(), ry, 1e-6);
    t.bytes += 2 * n * 4;
  };
  f.run();
  round();
  check("flow run");
  rs::graph gr = f.capture();
  f.stream().wait_for(s);
  for (int r = 0; r < 2; ++r) {
    gr.replay(f.stream());
    round();
  }
  f.stream().synchronize();
  check("flow captured and replayed");
  x.set_stream(s);
  y.set_stream(s);
}

// A run-time chain (compiled once per process, every thread racing for the same cache entry).
void runtime_stages(tally& t, rs::stream_ref s, std::mt19937_64& g, std::size_t n) {
  static const rs::jit::pipeline chain = rs::jit::map(jit_f) | rs::jit::map(jit_g);
  const std::vector<float> h = random_floats(g, n);
  rs::array<float> x = rs::to_device(std::span<const float>(h), s), y(n, s);
  chain(x, y);
  std::vector<double> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = double(float(2.0 * h[i] - 1.0));
    want[i] = v * v + 0.25;
  }
  close(t, "run-time chain", y.to_host(), want, 1e-6);
  t.bytes += 2 * n * 4;
}

// Host data streamed through a pipeline in chunks (out of place, then a reduction).
void streamed(tally& t, rs::device d, std::mt19937_64& g, std::size_t n) {
  const std::vector<float> h = random_floats(g, n);
  std::vector<float> out(n, poison);
  rs::out_of_core_options o;
  o.target = d;
  o.chunk_elements = n / 3 + 1;
  o.host_threads = 2;
  rs::out_of_core(rs::map<affine>() | rs::map<hypot1>(), h, out, o);
  std::vector<double> want(n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = double(float(1.5 * h[i] + 0.5));
    want[i] = std::sqrt(v * v + 1.0);
    sum += double(h[i]) * double(h[i]);
  }
  close(t, "streamed map", out, want, 1e-5);
  same_value(t, "streamed sum", rs::out_of_core(rs::map<square>() | rs::reduce(rs::plus{}, 0.0), h, o), sum, 1e-5);
  t.bytes += 3 * n * 4;
}

// C = A B with each algorithm the device runs for float (TF32 aside: fewer digits than checked here).
void matmuls(tally& t, rs::device d, rs::stream_ref s, std::mt19937_64& g, int round) {
  const rs::matmul_algo algos[] = {rs::matmul_algo::naive, rs::matmul_algo::blocked, rs::matmul_algo::shared,
                                   rs::matmul_algo::tuned, rs::matmul_algo::vendor};
  std::vector<rs::matmul_algo> usable;
  for (auto a : algos)
    if (rs::matmul_supported(a, d, sizeof(float))) usable.push_back(a);
  const rs::matmul_algo algo = usable[std::size_t(round) % usable.size()];
  std::uniform_int_distribution<std::size_t> dim(1, 96);
  const std::size_t m = dim(g), k = dim(g), n = dim(g);
  const std::vector<float> ha = random_floats(g, m * k, -1.f, 1.f), hb = random_floats(g, k * n, -1.f, 1.f);
  rs::array2d<float> A = rs::to_device(ha, m, k, s), B = rs::to_device(hb, k, n, s);
  const std::vector<float> hc(m * n, poison);
  rs::array2d<float> C = rs::to_device(hc, m, n, s);
  rs::matmul(A, B, C, algo);
  std::vector<double> want(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double c = 0;
      for (std::size_t l = 0; l < k; ++l) c += double(ha[i * k + l]) * double(hb[l * n + j]);
      want[i * n + j] = c;
    }
  close(t, ("matmul " + rs::to_string(algo)).c_str(), C.storage().to_host(), want, 1e-5 * double(k));
  t.bytes += 4 * (m * k + k * n + 2 * m * n);
}

void run_thread(int id, rs::device d, std::chrono::steady_clock::time_point end, std::size_t max_n, tally& t) {
  rs::stream own(d);
  const rs::stream_ref s = own.ref();
  const rs::ledger_counts start = rs::ledger(d, rs::ledger_scope::this_thread);
  std::mt19937_64 g(0x5eed0000ull + std::uint64_t(id) * 0x9E3779B97F4A7C15ull);
  std::uniform_int_distribution<std::size_t> size(1, max_n);
  for (int round = 0; std::chrono::steady_clock::now() < end && t.errors < 10; ++round) {
    try {
      // Every fourth round at the largest size, so that staged transfers cross several chunks.
      const std::size_t n = round % 4 == 3 ? max_n : size(g);
      transfers_and_pipelines(t, d, s, g, n);
      random_fill(t, s, g(), g() >> 1, std::min(n, max_n / 2 + 1));
      if (round % 2 == 0) flows(t, d, s, g, std::min(n, std::size_t(1) << 16));
      runtime_stages(t, s, g, std::min(n, std::size_t(1) << 18));
      if (round % 2 == 1) streamed(t, d, g, n);
      matmuls(t, d, s, g, round);
      ++t.rounds;
    } catch (const std::exception& e) {
      ++t.errors;
      t.fail(std::string("error: ") + e.what());
    }
  }
  own.synchronize();
  t.own = rs::ledger(d, rs::ledger_scope::this_thread) - start;
}

std::vector<rs::device> devices_to_soak(const char* want) {
  const int gpus = rs::cuda_device_count();
  const std::string w = want && *want ? want : (gpus > 0 ? "cuda" : "cpu");
  std::vector<rs::device> out;
  if (w == "cuda" || w == "all")
    for (int i = 0; i < gpus; ++i) out.push_back(rs::device::cuda(i));
  if (w == "cpu" || w == "all") out.push_back(rs::device::cpu());
  if (w != "cpu" && w != "cuda" && w != "all") {
    std::fprintf(stderr, "soak: SOAK_DEVICE is '%s': use cpu, cuda or all\n", w.c_str());
    std::exit(2);
  }
  return out;
}

// The process's counts against the sum of the threads' own, field by field.
bool ledgers_agree(rs::device d, const rs::ledger_counts& process, const rs::ledger_counts& threads) {
  const std::pair<const char*, std::uint64_t> fields[][2] = {
      {{"h2d_bytes", process.h2d_bytes}, {"", threads.h2d_bytes}},
      {{"h2d_copies", process.h2d_copies}, {"", threads.h2d_copies}},
      {{"d2h_bytes", process.d2h_bytes}, {"", threads.d2h_bytes}},
      {{"d2h_copies", process.d2h_copies}, {"", threads.d2h_copies}},
      {{"d2d_bytes", process.d2d_bytes}, {"", threads.d2d_bytes}},
      {{"kernels", process.kernels}, {"", threads.kernels}},
      {{"allocations", process.allocations}, {"", threads.allocations}},
      {{"stream_chunks", process.stream_chunks}, {"", threads.stream_chunks}}};
  bool ok = true;
  for (auto& f : fields)
    if (f[0].second != f[1].second) {
      std::printf("soak: %s: the ledger's %s is %llu, the threads' own counts add to %llu\n", d.name().c_str(),
                  f[0].first, static_cast<unsigned long long>(f[0].second), static_cast<unsigned long long>(f[1].second));
      ok = false;
    }
  return ok;
}

}  // namespace

int main() {
  const std::size_t seconds = env_size("SOAK_SECONDS", 60), threads = env_size("SOAK_THREADS", 2);
  const std::vector<rs::device> devs = devices_to_soak(std::getenv("SOAK_DEVICE"));
  if (devs.empty()) {
    std::printf("soak: SOAK_DEVICE asks for GPUs and none answers: %s\n", rs::cuda_unavailable_reason().c_str());
    return 77;
  }
  std::vector<rs::ledger_counts> ledger_before;
  std::vector<std::size_t> pool_before;
  for (rs::device d : devs) {
    rs::synchronize(d);
    ledger_before.push_back(rs::ledger(d));
    pool_before.push_back(rs::pool_stats(d).bytes_in_use);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::seconds(seconds);
  std::vector<tally> tallies(threads);
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < threads; ++i) {
    const rs::device d = devs[i % devs.size()];
    const std::size_t max_n = env_size("SOAK_MAX_N", d.is_cuda() ? std::size_t(6) << 20 : std::size_t(1) << 18);
    pool.emplace_back(run_thread, int(i), d, end, max_n, std::ref(tallies[i]));
  }
  for (auto& th : pool) th.join();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  bool ok = true;
  tally all;
  for (std::size_t i = 0; i < threads; ++i) {
    const tally& t = tallies[i];
    all.rounds += t.rounds, all.checked += t.checked, all.wrong += t.wrong, all.errors += t.errors, all.bytes += t.bytes;
    if (!t.first.empty()) std::printf("soak: thread %zu on %s: %s\n", i, devs[i % devs.size()].name().c_str(), t.first.c_str());
    if (t.rounds == 0) {
      std::printf("soak: thread %zu finished no round\n", i);
      ok = false;
    }
  }
  for (std::size_t k = 0; k < devs.size(); ++k) {
    const rs::device d = devs[k];
    rs::synchronize(d);
    rs::ledger_counts sum;
    for (std::size_t i = k; i < threads; i += devs.size()) {
      const rs::ledger_counts& o = tallies[i].own;
      sum.h2d_bytes += o.h2d_bytes, sum.h2d_copies += o.h2d_copies, sum.d2h_bytes += o.d2h_bytes;
      sum.d2h_copies += o.d2h_copies, sum.d2d_bytes += o.d2d_bytes, sum.kernels += o.kernels;
      sum.allocations += o.allocations, sum.stream_chunks += o.stream_chunks;
    }
    ok = ledgers_agree(d, rs::ledger(d) - ledger_before[k], sum) && ok;
    const std::size_t in_use = rs::pool_stats(d).bytes_in_use;
    if (in_use != pool_before[k]) {
      std::printf("soak: %s: the pool has %zu bytes in use, %zu before the threads started\n", d.name().c_str(), in_use,
                  pool_before[k]);
      ok = false;
    }
  }
  ok = ok && all.wrong == 0 && all.errors == 0;
  std::string where;
  for (rs::device d : devs) {
    if (!where.empty()) where += ",";
    where += d.name();
  }
  std::printf("soak: %zu threads x %.0f s on %s: %llu rounds, %llu values checked, %.2f GiB moved, %llu wrong, "
              "%llu errors: %s\n",
              threads, took, where.c_str(), static_cast<unsigned long long>(all.rounds),
              static_cast<unsigned long long>(all.checked), double(all.bytes) / double(1ull << 30),
              static_cast<unsigned long long>(all.wrong), static_cast<unsigned long long>(all.errors),
              ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
