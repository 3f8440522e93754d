// libFuzzer target: the input is a program of public API calls on the CPU backend (arrays of odd and
// huge sizes, slices, moves and moved-from objects, pipelines, launches, random fills, copies and
// transfers under each policy, flows, graphs, matmul, 2-D arrays). Every array has a host mirror
// computed in plain C++; after each call the arrays must equal their mirrors and the pool must hold
// exactly the live arrays; an exception must be a resident::error of the expected kind (or the user's
// own) and leave everything as it was; nothing may be left in the pool at the end.
//
// Probes of the defects it found (all fixed) are switchable: RESIDENT_FUZZ_KNOWN unset or 1 runs them all, 0
// none, a comma list (e.g. "size,nan") only those named (scripts/fuzz.sh and fuzz_ci.sh pass 0 unless
// told otherwise). Names: size (huge sizes), moved (moved-from array set_stream,
// flow/graph/stream/event/pinned_buffer/array2d), capture (a flow's graph replayed after the flow),
// throw (user functors throwing inside OpenMP loops), policy (transfer-policy scopes across threads),
// wrap (RNG offsets that wrap 2^64), range (uniform/normal parameters at the edges: results must stay in
// [low, high)), nan (NaN in min/max reductions), ledger (copies of 0 bytes and self-copies count
// nothing), padded (flow edges for 2-D arrays with ld > cols), unrecorded (elapsed_ms of an event never
// recorded), foreign (events and streams ordered against a stream of another device; a failed copy
// counted in the ledger), update_empty (graph::update of a graph holding nothing).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

namespace {

// ---- switches and failure reports ----------------------------------------------------------------

bool probe(const char* name) {
  static const std::string list = [] {
    const char* v = std::getenv("RESIDENT_FUZZ_KNOWN");
    return std::string(v ? v : "1");
  }();
  if (list == "1") return true;
  if (list == "0") return false;
  const std::string key = std::string(",") + name + ",";
  return ("," + list + ",").find(key) != std::string::npos;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_api: %s\n", what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

struct user_error {};  // what user functors throw: not a std::exception, not a resident::error

// maybe: either outcome is right (a value, or a refusal with any resident::error).
enum class expect { ok, invalid, shape, device, forbidden, flow, stage, resident_error, user, maybe };

const char* name_of(expect e) {
  switch (e) {
    case expect::ok: return "no error";
    case expect::invalid: return "invalid_argument";
    case expect::shape: return "shape_mismatch";
    case expect::device: return "device_mismatch";
    case expect::forbidden: return "transfer_forbidden";
    case expect::flow: return "flow_error";
    case expect::stage: return "stage_error";
    case expect::resident_error: return "a resident::error";
    case expect::user: return "the user's exception";
    case expect::maybe: return "a value or a resident::error";
  }
  return "?";
}

// Runs f; returns true when it returned. Any outcome other than `e` is a failure named by `what`.
template <class F>
bool attempt(const std::string& what, expect e, F&& f) {
  auto wrong = [&](const std::string& got) { fail(what + ": expected " + name_of(e) + ", got " + got); };
  try {
    f();
  } catch (const rs::stage_error& x) {
    if (e != expect::stage && e != expect::resident_error && e != expect::maybe)
      wrong(std::string("stage_error: ") + x.what());
    return false;
  } catch (const rs::flow_error& x) {
    if (e != expect::flow && e != expect::invalid && e != expect::resident_error && e != expect::maybe)
      wrong(std::string("flow_error: ") + x.what());
    return false;
  } catch (const rs::shape_mismatch& x) {
    if (e != expect::shape && e != expect::invalid && e != expect::resident_error && e != expect::maybe)
      wrong(std::string("shape_mismatch: ") + x.what());
    return false;
  } catch (const rs::device_mismatch& x) {
    if (e != expect::device && e != expect::invalid && e != expect::resident_error && e != expect::maybe)
      wrong(std::string("device_mismatch: ") + x.what());
    return false;
  } catch (const rs::invalid_argument& x) {
    if (e != expect::invalid && e != expect::resident_error && e != expect::maybe)
      wrong(std::string("invalid_argument: ") + x.what());
    return false;
  } catch (const rs::transfer_forbidden& x) {
    if (e != expect::forbidden && e != expect::resident_error && e != expect::maybe)
      wrong(std::string("transfer_forbidden: ") + x.what());
    return false;
  } catch (const rs::error& x) {
    if (e != expect::resident_error && e != expect::maybe) wrong(std::string("resident::error: ") + x.what());
    return false;
  } catch (const user_error&) {
    if (e != expect::user) wrong("the user's exception");
    return false;
  } catch (const std::exception& x) {
    wrong(std::string("a std::exception that is not a resident::error: ") + x.what());
  } catch (...) {
    wrong("an unknown exception");
  }
  if (e != expect::ok && e != expect::maybe) wrong("no error");
  return true;
}

// ---- plain references ----------------------------------------------------------------------------

template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b)) return true;
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else {
    return a == b;
  }
}

std::string show(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

// Philox4x32-10 written from the paper (not the library's code): the RNG oracle.
struct philox_ref {
  static std::array<std::uint32_t, 4> block(std::uint64_t seed, std::uint64_t c, std::uint32_t attempt = 0) {
    std::array<std::uint32_t, 4> x{std::uint32_t(c), std::uint32_t(c >> 32), attempt, 0};
    std::uint32_t k0 = std::uint32_t(seed), k1 = std::uint32_t(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      const std::uint64_t p0 = std::uint64_t(0xD2511F53u) * x[0], p1 = std::uint64_t(0xCD9E8D57u) * x[2];
      x = {std::uint32_t(p1 >> 32) ^ x[1] ^ k0, std::uint32_t(p1), std::uint32_t(p0 >> 32) ^ x[3] ^ k1,
           std::uint32_t(p0)};
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return x;
  }
  // Value i of stream (seed, offset): p = offset + i mod 2^64, block p / per, lane p % per.
  static std::uint32_t bits(std::uint64_t seed, std::uint64_t offset, std::size_t i) {
    const std::uint64_t p = offset + i;
    return block(seed, p / 4)[p % 4];
  }
  template <class T>
  static T unit(std::uint64_t seed, std::uint64_t offset, std::size_t i) {
    const std::uint64_t p = offset + i;
    if constexpr (sizeof(T) == 4) {
      return float(block(seed, p / 4)[p % 4] >> 8) * 0x1.0p-24f;
    } else {
      const auto w = block(seed, p / 2);
      const int l = int(p % 2);
      return double((std::uint64_t(w[2 * l]) << 21) ^ (w[2 * l + 1] >> 11)) * 0x1.0p-53;
    }
  }
  template <class T>
  static T normal(std::uint64_t seed, std::uint64_t offset, std::size_t i, T mean, T sd) {
    const std::uint64_t p = offset + i;
    if constexpr (sizeof(T) == 4) {
      const auto w = block(seed, p / 4);
      const int lane = int(p % 4), j = lane & ~1;
      const double u1 = (double(w[j] >> 8) + 1.0) * 0x1.0p-24, u2 = double(w[j + 1] >> 8) * 0x1.0p-24;
      const double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586 * u2;
      return T(double(mean) + double(sd) * ((lane & 1) ? r * std::sin(t) : r * std::cos(t)));
    } else {
      const auto w = block(seed, p / 2);
      const double u1 = 1.0 - double((std::uint64_t(w[0]) << 21) ^ (w[1] >> 11)) * 0x1.0p-53;
      const double u2 = double((std::uint64_t(w[2]) << 21) ^ (w[3] >> 11)) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586 * u2;
      return mean + sd * ((p % 2) ? r * std::sin(t) : r * std::cos(t));
    }
  }
  // Lemire's multiply-shift with rejection, a rejected word redrawn at the next attempt index.
  static std::uint32_t integer(std::uint64_t seed, std::uint64_t offset, std::size_t i, std::uint32_t low,
                               std::uint32_t range) {
    const std::uint64_t p = offset + i, c = p / 4;
    const int lane = int(p % 4);
    std::uint64_t m = std::uint64_t(block(seed, c)[lane]) * range;
    const std::uint32_t threshold = std::uint32_t(-range) % range;
    for (std::uint32_t a = 1; std::uint32_t(m) < threshold; ++a) m = std::uint64_t(block(seed, c, a)[lane]) * range;
    return low + std::uint32_t(m >> 32);
  }
};

// ---- the functors the pipelines run (the same object computes the reference on the host) ------------

struct affine {
  double a, b;
  template <class T>
  T operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>)
      return v * T(a) + T(b);
    else
      return T(v * T(std::int64_t(a)) + T(std::int64_t(b)));
  }
};
struct square {
  template <class T>
  T operator()(T v) const {
    return T(v * v);
  }
};
template <class T>
T negate_if_odd(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::fmod(v, T(2)) == T(1) ? -v : v;
  else
    return (v & 1u) ? T(~v) : v;
}
struct zip_mix {
  double k;
  template <class A, class B>
  auto operator()(A a, B b) const {
    return a + b * static_cast<B>(k);
  }
};
struct throw_at {
  std::size_t at;
  float operator()(std::size_t i) const {
    if (i == at) throw user_error{};
    return float(i);
  }
};

// Global linear indices of a thread and its block, whatever the launch's shape.
std::size_t block_id(const rs::thread_index& t) {
  return (std::size_t(t.block.z) * t.grid_dim.y + t.block.y) * t.grid_dim.x + t.block.x;
}
std::size_t thread_id(const rs::thread_index& t) {
  return (std::size_t(t.thread.z) * t.block_dim.y + t.thread.y) * t.block_dim.x + t.thread.x;
}
struct write_ids {
  float k;
  void operator()(rs::thread_index t, rs::array_view<float> out) const {
    const std::size_t id = block_id(t) * t.block_dim.count() + thread_id(t);
    if (id < out.size()) out[id] = float(id) * k;
  }
};
// Two phases: each thread leaves its value in shared memory, then takes its right neighbour's.
struct leave_id {
  float k;
  void operator()(rs::thread_index t, rs::block_shared sh) const {
    sh.as<float>()[thread_id(t)] = float(block_id(t) * t.block_dim.count() + thread_id(t)) * k;
  }
};
struct take_neighbour {
  rs::array_view<float> out;
  void operator()(rs::thread_index t, rs::block_shared sh) const {
    const std::size_t bc = t.block_dim.count(), id = block_id(t) * bc + thread_id(t);
    if (id < out.size()) out[id] = sh.as<float>()[(thread_id(t) + 1) % bc];
  }
};
struct write_index {
  rs::array_view<float> out;
  float k;
  void operator()(std::size_t i) const { out[i] = float(i) * k; }
};

// ---- the interpreter's state: arrays with their mirrors -----------------------------------------

template <class T>
struct slot {
  rs::array<T> a;
  std::vector<T> ref;
  bool moved = false;
};

struct fuzz_state {
  FuzzedDataProvider& in;
  rs::stream side{rs::device::cpu()};  // a created stream besides the default one
  slot<float> f[4];
  slot<double> d[2];
  slot<std::uint32_t> u[2];
  const rs::pool_statistics pool0 = rs::pool_stats(rs::device::cpu());

  explicit fuzz_state(FuzzedDataProvider& p) : in(p) {}

  template <class T>
  slot<T>& pick() {
    if constexpr (std::is_same_v<T, float>)
      return f[in.ConsumeIntegralInRange<int>(0, 3)];
    else if constexpr (std::is_same_v<T, double>)
      return d[in.ConsumeIntegralInRange<int>(0, 1)];
    else
      return u[in.ConsumeIntegralInRange<int>(0, 1)];
  }
  rs::stream_ref pick_stream() { return in.ConsumeBool() ? side.ref() : rs::default_stream(rs::device::cpu()); }

  std::size_t pick_size() {
    static constexpr std::size_t edges[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257};
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0: return 0;
      case 6:
      case 7: return in.ConsumeIntegralInRange<std::size_t>(41, 300);
      case 8: return in.ConsumeIntegralInRange<std::size_t>(301, 4100);
      case 9: return edges[in.ConsumeIntegralInRange<std::size_t>(0, std::size(edges) - 1)];
      default: return in.ConsumeIntegralInRange<std::size_t>(1, 40);
    }
  }

  template <class T>
  T pick_value() {
    if constexpr (std::is_floating_point_v<T>) {
      switch (in.ConsumeIntegralInRange<int>(0, 15)) {
        case 0: return std::numeric_limits<T>::quiet_NaN();
        case 1: return std::numeric_limits<T>::infinity();
        case 2: return -std::numeric_limits<T>::infinity();
        case 3: return -T(0);
        case 4: return std::numeric_limits<T>::denorm_min();
        case 5: return std::numeric_limits<T>::max();
        default: return T(in.ConsumeIntegralInRange<int>(-1000, 1000)) / T(8);
      }
    } else {
      return in.ConsumeIntegral<T>();
    }
  }
  // Host data: a few chosen values, the rest a cheap pattern so inputs stay short.
  template <class T>
  std::vector<T> host_data(std::size_t n, bool specials = true) {
    std::vector<T> h(n);
    const std::uint32_t seed = in.ConsumeIntegral<std::uint32_t>();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t x = (seed + std::uint32_t(i)) * 2654435761u;
      if constexpr (std::is_floating_point_v<T>)
        h[i] = T(int(x >> 20) - 2048) / T(16);
      else
        h[i] = x;
    }
    const int k = specials ? in.ConsumeIntegralInRange<int>(0, 3) : 0;
    for (int j = 0; j < k && n; ++j) h[in.ConsumeIntegralInRange<std::size_t>(0, n - 1)] = pick_value<T>();
    return h;
  }
  template <class T>
  static T poison() {
    if constexpr (std::is_floating_point_v<T>)
      return T(-7777.25);
    else
      return 0xDEADBEEFu;
  }

  // Allocates n elements into s and poisons them through an explicit copy (so the mirror is known).
  template <class T>
  void allocate(slot<T>& s, std::size_t n) {
    rs::array<T> a;
    if (!attempt("array(" + std::to_string(n) + ")", expect::ok,
                 [&] { a = in.ConsumeBool() ? rs::array<T>(n, rs::device::cpu()) : rs::array<T>(n, pick_stream()); }))
      return;
    if (a.size() != n) fail("array(n) has size " + std::to_string(a.size()));
    std::vector<T> p(n, poison<T>());
    rs::copy(std::span<const T>(p), a);
    s.a = std::move(a);
    s.ref = std::move(p);
    s.moved = false;
  }

  template <class T>
  void check(const slot<T>& s, const char* what) const {
    if (s.moved) {
      attempt(std::string(what) + ": to_host of a moved-from array", expect::invalid, [&] { (void)s.a.to_host(); });
      if (s.a.size() != 0 || s.a.data() != nullptr) fail(std::string(what) + ": a moved-from array is not empty");
      return;
    }
    if (s.a.size() != s.ref.size())
      fail(std::string(what) + ": size " + std::to_string(s.a.size()) + ", mirror " + std::to_string(s.ref.size()));
    const std::vector<T> h = s.a.to_host();
    for (std::size_t i = 0; i < h.size(); ++i)
      if (!same(h[i], s.ref[i]))
        fail(std::string(what) + ": element " + std::to_string(i) + " of " + std::to_string(h.size()) + " is " +
             show(double(h[i])) + ", the reference " + show(double(s.ref[i])));
  }
  void check_all(const char* what) const {
    for (auto& s : f) check(s, what);
    for (auto& s : d) check(s, what);
    for (auto& s : u) check(s, what);
    // The pool holds exactly the live arrays (empty ones hold nothing).
    std::size_t live = 0, bytes = 0;
    auto count = [&](const auto& s) {
      live += s.a.size() ? 1 : 0;
      bytes += s.a.bytes();
    };
    for (auto& s : f) count(s);
    for (auto& s : d) count(s);
    for (auto& s : u) count(s);
    const auto now = rs::pool_stats(rs::device::cpu());
    if (now.outstanding - pool0.outstanding != live || now.bytes_in_use - pool0.bytes_in_use != bytes)
      fail(std::string(what) + ": the pool counts " + std::to_string(now.outstanding - pool0.outstanding) +
           " allocations of " + std::to_string(now.bytes_in_use - pool0.bytes_in_use) + " bytes, the live arrays " +
           std::to_string(live) + " of " + std::to_string(bytes));
  }
  // After an operation whose effect is allowed to be partial: the mirror takes what the array holds.
  template <class T>
  void resync(slot<T>& s) {
    if (!s.moved) s.ref = s.a.to_host();
  }
};

// A launch configuration, mostly small and valid; `valid` says whether the CPU device accepts it.
rs::launch_config pick_config(fuzz_state& st, bool& valid) {
  static const rs::device_properties p = rs::properties(rs::device::cpu());
  auto extent = [&](unsigned small, unsigned limit) {
    switch (st.in.ConsumeIntegralInRange<int>(0, 15)) {
      case 0: return 0u;
      case 1: return limit + 1;
      case 2: return ~0u;
      default: return st.in.ConsumeIntegralInRange<unsigned>(1, small);
    }
  };
  rs::launch_config c;
  c.grid = rs::dims(extent(6, unsigned(p.max_grid_dim[0])),
                    st.in.ConsumeBool() ? 1u : extent(3, unsigned(p.max_grid_dim[1])),
                    st.in.ConsumeBool() ? 1u : extent(2, unsigned(p.max_grid_dim[2])));
  c.block = rs::dims(extent(9, unsigned(p.max_block_dim[0])),
                     st.in.ConsumeBool() ? 1u : extent(3, unsigned(p.max_block_dim[1])),
                     st.in.ConsumeBool() ? 1u : extent(2, unsigned(p.max_block_dim[2])));
  c.shared_bytes = c.block.count() * sizeof(float) + st.in.ConsumeIntegralInRange<std::size_t>(0, 64);
  if (st.in.ConsumeIntegralInRange<int>(0, 15) == 0) c.shared_bytes = p.shared_per_block_optin + 1;
  const unsigned g[] = {c.grid.x, c.grid.y, c.grid.z}, b[] = {c.block.x, c.block.y, c.block.z};
  valid = c.block.count() <= std::size_t(p.max_threads_per_block) && c.shared_bytes <= p.shared_per_block_optin;
  for (int i = 0; i < 3; ++i)
    valid =
        valid && g[i] >= 1 && b[i] >= 1 && g[i] <= unsigned(p.max_grid_dim[i]) && b[i] <= unsigned(p.max_block_dim[i]);
  return c;
}

// A slice of a live slot picked by the input, or the whole array; returns the offset too.
template <class T>
std::optional<std::pair<std::size_t, std::size_t>> pick_range(fuzz_state& st, slot<T>& s) {
  const std::size_t n = s.ref.size();
  if (st.in.ConsumeBool()) return std::pair<std::size_t, std::size_t>{0, n};
  std::size_t off = st.in.ConsumeIntegralInRange<std::size_t>(0, n + 2),
              cnt = st.in.ConsumeIntegralInRange<std::size_t>(0, n + 2);
  if (st.in.ConsumeIntegralInRange<int>(0, 7) == 0)
    off = std::numeric_limits<std::size_t>::max() - st.in.ConsumeIntegralInRange<std::size_t>(0, 3);
  if (st.in.ConsumeIntegralInRange<int>(0, 7) == 0)
    cnt = std::numeric_limits<std::size_t>::max() - st.in.ConsumeIntegralInRange<std::size_t>(0, 3);
  const bool inside = !s.moved && off <= n && cnt <= n - off;
  std::optional<rs::array_ref<T>> r;
  attempt("slice(" + std::to_string(off) + ", " + std::to_string(cnt) + ") of " + std::to_string(n),
          inside ? expect::ok : expect::invalid, [&] { r = s.a.slice(off, cnt); });
  if (!r) return std::nullopt;
  if (r->size() != cnt || r->data() != s.a.data() + off) fail("slice: wrong window");
  return std::pair<std::size_t, std::size_t>{off, cnt};
}

// ---- operations -----------------------------------------------------------------------------------

template <class T>
void op_allocate(fuzz_state& st) {
  auto& s = st.pick<T>();
  st.allocate(s, st.pick_size());
}

template <class T>
void op_upload(fuzz_state& st) {
  auto& s = st.pick<T>();
  const std::size_t n = st.pick_size();
  std::vector<T> h = st.host_data<T>(n);
  const int how = st.in.ConsumeIntegralInRange<int>(0, 4);
  const auto before = rs::ledger(rs::device::cpu());
  std::optional<rs::array<T>> a;
  attempt("to_device", expect::ok, [&] {
    switch (how) {
      case 0: a = rs::to_device(h, rs::device::cpu()); break;
      case 1: a = rs::to_device(std::span<const T>(h), st.pick_stream(), rs::staging::none); break;
      case 2: a = rs::to_device(h, st.pick_stream(), rs::staging::chunked); break;
      case 3: {
        rs::pinned_buffer<T> p(n);
        if (p.size() != n) fail("pinned_buffer(n) has another size");
        std::copy(h.begin(), h.end(), p.begin());
        a = rs::to_device(p, st.pick_stream());
        a->stream().synchronize();
        break;
      }
      default: a = rs::to_device(std::span<const T>(h), rs::device::cpu());
    }
  });
  const auto delta = rs::ledger(rs::device::cpu()) - before;
  if (delta.h2d_bytes != n * sizeof(T))
    fail("to_device of " + std::to_string(n * sizeof(T)) + " bytes counted " + std::to_string(delta.h2d_bytes));
  if (probe("ledger") && delta.h2d_copies != (n ? 1u : 0u))
    fail("to_device of " + std::to_string(n) + " elements counted " + std::to_string(delta.h2d_copies) + " copies");
  s.a = std::move(*a);
  s.ref = std::move(h);
  s.moved = false;
}

template <class T>
void op_download(fuzz_state& st) {
  auto& s = st.pick<T>();
  const std::size_t n = s.ref.size();
  const int how = st.in.ConsumeIntegralInRange<int>(0, 3);
  const std::size_t m = how != 3 && st.in.ConsumeIntegralInRange<int>(0, 3) == 0 ? st.pick_size() : n;
  const expect e = s.moved ? expect::invalid : (m != n ? expect::shape : expect::ok);
  std::vector<T> out(m, fuzz_state::poison<T>());
  const std::vector<T> untouched = out;
  const auto before = rs::ledger(rs::device::cpu());
  const bool ok = attempt("to_host", e, [&] {
    if (how == 0) {
      s.a.to_host(std::span<T>(out), st.in.ConsumeBool() ? rs::staging::chunked : rs::staging::none);
    } else if (how == 1) {
      rs::pinned_buffer<T> p(m);
      std::copy(out.begin(), out.end(), p.begin());
      s.a.to_host_async(p);
      s.a.stream().synchronize();
      std::copy(p.begin(), p.end(), out.begin());
    } else if (how == 2) {
      rs::copy_async(s.a, std::span<T>(out));
      s.a.stream().synchronize();
    } else {
      out = s.a.to_host();
    }
  });
  const std::vector<T>& want = e == expect::ok ? s.ref : untouched;
  for (std::size_t i = 0; i < m; ++i)
    if (!same(out[i], want[i])) fail("to_host: element " + std::to_string(i) + " is " + show(double(out[i])));
  const auto delta = rs::ledger(rs::device::cpu()) - before;
  if (ok && delta.d2h_bytes != n * sizeof(T))
    fail("to_host of " + std::to_string(n * sizeof(T)) + " bytes counted " + std::to_string(delta.d2h_bytes));
  if (!ok && (delta.d2h_bytes || delta.d2h_copies)) fail("a refused to_host counted a transfer");
}

template <class T>
void op_copy_in(fuzz_state& st) {
  auto& s = st.pick<T>();
  auto r = pick_range(st, s);
  if (!r) return;
  const std::size_t m = st.in.ConsumeIntegralInRange<int>(0, 3) == 0 ? st.pick_size() : r->second;
  std::vector<T> h = st.host_data<T>(m);
  const bool whole = r->first == 0 && r->second == s.ref.size();
  const bool as_array = whole && st.in.ConsumeBool();
  const expect e = s.moved ? expect::invalid : (m != r->second ? expect::shape : expect::ok);
  const bool ok = attempt("copy into an array", e, [&] {
    if (as_array)
      rs::copy(std::span<const T>(h), s.a, st.in.ConsumeBool() ? rs::staging::chunked : rs::staging::none);
    else
      rs::copy_async(std::span<const T>(h), s.a.slice(r->first, r->second));
  });
  if (ok) std::copy(h.begin(), h.end(), s.ref.begin() + std::ptrdiff_t(r->first));
}

template <class T>
void op_copy_between(fuzz_state& st) {
  auto& a = st.pick<T>();
  auto& b = st.pick<T>();
  const auto before = rs::ledger(rs::device::cpu());
  if (st.in.ConsumeBool()) {
    const expect e =
        (a.moved || b.moved) ? expect::invalid : (a.ref.size() != b.ref.size() ? expect::shape : expect::ok);
    if (attempt("copy(array, array)", e, [&] { rs::copy(a.a, b.a); })) {
      b.ref = a.ref;
      const auto delta = rs::ledger(rs::device::cpu()) - before;
      if (probe("ledger") && (&a == &b || a.ref.empty()) && (delta.d2d_bytes || delta.d2d_copies))
        fail("copy(a, a) or a copy of 0 bytes counted " + std::to_string(delta.d2d_copies) + " copies of " +
             std::to_string(delta.d2d_bytes) + " bytes");
    }
  } else {
    std::optional<rs::array<T>> c;
    if (attempt("copy_to", a.moved ? expect::invalid : expect::ok, [&] { c = rs::copy_to(a.a, rs::device::cpu()); })) {
      b.a = std::move(*c);
      b.ref = a.ref;
      b.moved = false;
    }
  }
}

template <class T>
void op_move(fuzz_state& st) {
  auto& a = st.pick<T>();
  auto& b = st.pick<T>();
  if (&a == &b) {
    auto& alias = b;
    a.a = std::move(alias.a);  // self-move: a no-op
    return;
  }
  if (st.in.ConsumeBool()) {
    b.a = std::move(a.a);
  } else {
    rs::array<T> t(std::move(a.a));
    b.a = std::move(t);
  }
  b.ref = std::move(a.ref);
  b.moved = a.moved;
  a.ref.clear();
  a.moved = true;
  // Every use of the moved-from array is a clear error.
  attempt("view of a moved-from array", expect::invalid, [&] { (void)a.a.view(); });
  attempt("slice of a moved-from array", expect::invalid, [&] { (void)a.a.slice(0, 0); });
  attempt("map on a moved-from array", expect::invalid, [&] { rs::map(square{})(a.a); });
  attempt("reduce of a moved-from array", expect::invalid, [&] { (void)(rs::reduce(rs::plus{}, T(0)))(a.a); });
  attempt("copy from a moved-from array", expect::invalid, [&] {
    rs::array<T> c(0, rs::device::cpu());
    rs::copy(a.a, c);
  });
  if (probe("moved")) attempt("set_stream of a moved-from array", expect::invalid, [&] { a.a.set_stream(st.side); });
}

template <class T>
void apply_map(int which, std::vector<T>& ref, std::size_t off, std::size_t cnt, const affine& af) {
  for (std::size_t i = off; i < off + cnt; ++i) {
    if (which == 0)
      ref[i] = af(ref[i]);
    else if (which == 1)
      ref[i] = square{}(ref[i]);
    else if (which == 2)
      ref[i] = negate_if_odd(ref[i]);
    else
      ref[i] = square{}(af(ref[i]));
  }
}

template <class T, class A>
void run_map(int which, A&& x, const affine& af) {
  if (which == 0)
    rs::map(af)(x);
  else if (which == 1)
    rs::map(square{})(x);
  else if (which == 2)
    rs::map<negate_if_odd<T>>()(x);
  else
    (rs::map(af) | rs::map(square{}))(x);
}

template <class T>
affine pick_affine(fuzz_state& st) {
  return {double(st.in.ConsumeIntegralInRange<int>(-9, 9)) / 4, double(st.in.ConsumeIntegralInRange<int>(-9, 9))};
}

template <class T>
void op_map_in_place(fuzz_state& st) {
  auto& s = st.pick<T>();
  auto r = pick_range(st, s);
  if (!r) return;
  const int which = st.in.ConsumeIntegralInRange<int>(0, 3);
  const affine af = pick_affine<T>(st);
  const bool whole = r->first == 0 && r->second == s.ref.size() && st.in.ConsumeBool();
  bool valid = true;
  const bool configured = st.in.ConsumeIntegralInRange<int>(0, 3) == 0;
  const rs::launch_config cfg = configured ? pick_config(st, valid) : rs::launch_config{};
  // A call with nothing to do may skip the configuration's check.
  const expect e = s.moved ? expect::invalid : valid ? expect::ok : r->second == 0 ? expect::maybe : expect::invalid;
  const auto before = rs::ledger(rs::device::cpu());
  if (!attempt("map in place" + (configured ? " with " + cfg.str() : std::string()), e, [&] {
        if (configured)
          rs::map(af).with_config(cfg)(s.a.slice(r->first, r->second));
        else if (whole)
          run_map<T>(which, s.a, af);
        else
          run_map<T>(which, s.a.slice(r->first, r->second), af);
      }))
    return;
  apply_map(configured ? 0 : which, s.ref, r->first, r->second, af);
  const auto kernels = (rs::ledger(rs::device::cpu()) - before).kernels;
  if (kernels != (r->second ? 1u : 0u))
    fail("a fused map over " + std::to_string(r->second) + " elements counted " + std::to_string(kernels) + " kernels");
}

template <class T, class U>
void op_map_out_of_place(fuzz_state& st) {
  auto& x = st.pick<T>();
  auto& y = st.pick<U>();
  const affine af = pick_affine<T>(st);
  const bool chained = st.in.ConsumeBool();
  const expect e = (x.moved || y.moved) ? expect::invalid : (x.ref.size() != y.ref.size() ? expect::shape : expect::ok);
  const std::vector<T> in = x.ref;  // x and y may be one array
  if (attempt("map out of place", e, [&] {
        if (chained)
          (rs::map(af) | rs::map(square{}))(x.a, y.a);
        else
          rs::map(af)(x.a, y.a);
      }))
    for (std::size_t i = 0; i < in.size(); ++i) y.ref[i] = static_cast<U>(chained ? square{}(af(in[i])) : af(in[i]));
}

template <class T, class U>
void op_zip(fuzz_state& st) {
  auto& a = st.pick<T>();
  auto& b = st.pick<U>();
  auto& y = st.pick<U>();
  const zip_mix z{double(st.in.ConsumeIntegralInRange<int>(-4, 4))};
  const bool sizes = a.ref.size() == b.ref.size() && b.ref.size() == y.ref.size();
  const expect e = (a.moved || b.moved || y.moved) ? expect::invalid : (!sizes ? expect::shape : expect::ok);
  const std::vector<T> ra = a.ref;
  const std::vector<U> rb = b.ref;
  if (attempt("zip", e, [&] { (rs::zip(a.a, b.a) | rs::map(z))(y.a); }))
    for (std::size_t i = 0; i < ra.size(); ++i) y.ref[i] = static_cast<U>(z(ra[i], rb[i]));
}

// Reductions: plus to a tolerance (the order differs), min and max exactly.
template <class T>
void op_reduce(fuzz_state& st) {
  auto& s = st.pick<T>();
  auto r = pick_range(st, s);
  if (!r) return;
  const int op = st.in.ConsumeIntegralInRange<int>(0, 2);
  T init = st.pick_value<T>();
  std::vector<T> v(s.ref.begin() + std::ptrdiff_t(r->first), s.ref.begin() + std::ptrdiff_t(r->first + r->second));
  bool has_nan = false;
  if constexpr (std::is_floating_point_v<T>) {
    if (op != 0 && !probe("nan")) {
      if (std::isnan(init)) init = T(1);
      for (T& x : v)
        if (std::isnan(x)) x = T(0);
      if (v != std::vector<T>(s.ref.begin() + std::ptrdiff_t(r->first),
                              s.ref.begin() + std::ptrdiff_t(r->first + r->second))) {
        std::copy(v.begin(), v.end(), s.ref.begin() + std::ptrdiff_t(r->first));
        rs::copy_async(std::span<const T>(v), s.a.slice(r->first, r->second));
      }
    }
    has_nan = std::isnan(init);
    for (T x : v) has_nan |= std::isnan(x);
  }
  T got{};
  const int into = st.in.ConsumeIntegralInRange<int>(0, 2);
  slot<T>* out = into == 2 ? &st.pick<T>() : nullptr;
  expect e = s.moved ? expect::invalid : expect::ok;
  if (out && e == expect::ok && (out->moved || out->ref.size() != 1)) e = out->moved ? expect::invalid : expect::shape;
  const bool whole = r->first == 0 && r->second == s.ref.size();
  auto call = [&](auto red) {
    if (out) {
      if (whole)
        red(s.a, out->a);
      else
        red(s.a.slice(r->first, r->second), out->a);
      got = out->a.to_host()[0];
    } else if (into == 1) {
      got = (rs::zip(s.a.slice(r->first, r->second)) | red)();
    } else {
      got = whole ? red(s.a) : red(s.a.slice(r->first, r->second));
    }
  };
  if (!attempt("reduce", e, [&] {
        if (op == 0)
          call(rs::reduce(rs::plus{}, init));
        else if (op == 1)
          call(rs::reduce(rs::minimum{}, init));
        else
          call(rs::reduce(rs::maximum{}, init));
      }))
    return;
  if (out) out->ref[0] = got;
  const std::string what = std::string(op == 0   ? "plus"
                                       : op == 1 ? "minimum"
                                                 : "maximum") +
                           " over " + std::to_string(v.size()) + " elements";
  if constexpr (std::is_floating_point_v<T>) {
    if (op == 0) {
      constexpr T inf = std::numeric_limits<T>::infinity();
      double sum = 0, mag = 0;  // of the finite values
      bool pinf = false, ninf = false;
      for (T x : v) {
        pinf |= x == inf;
        ninf |= x == -inf;
        if (std::isfinite(x)) sum += double(x), mag += std::fabs(double(x));
      }
      pinf |= init == inf;
      ninf |= init == -inf;
      if (std::isfinite(init)) sum += double(init), mag += std::fabs(double(init));
      // Finite values that can overflow to an infinity in some order of summation decide nothing exactly.
      const bool may_overflow = mag >= double(std::numeric_limits<T>::max()) / 4;
      if (has_nan || (pinf && ninf)) {
        if (!std::isnan(got)) fail(what + ": NaN expected, got " + show(double(got)));
      } else if (pinf || ninf) {
        if (got != (pinf ? inf : -inf) && !(may_overflow && std::isnan(got)))
          fail(what + ": infinity expected, got " + show(double(got)));
      } else if (!may_overflow) {
        const double tol = double(v.size() + 2) * double(std::numeric_limits<T>::epsilon()) * mag;
        if (!(std::fabs(double(got) - sum) <= tol)) fail(what + ": " + show(double(got)) + ", reference " + show(sum));
      }
      return;
    }
    if (has_nan) {
      if (!std::isnan(got)) fail(what + " with a NaN: NaN expected, got " + show(double(got)));
      return;
    }
  }
  T want = init;
  for (T x : v) want = op == 0 ? T(want + x) : op == 1 ? std::min(want, x) : std::max(want, x);
  if (!(got == want)) fail(what + ": " + show(double(got)) + ", reference " + show(double(want)));
}

// Random fills: every value against the oracle.
std::uint64_t pick_offset(fuzz_state& st, std::size_t n) {
  switch (st.in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return st.in.ConsumeIntegralInRange<std::uint64_t>(0, 64);
    case 1: {
      std::uint64_t o = ~std::uint64_t(0) - st.in.ConsumeIntegralInRange<std::uint64_t>(0, 80);
      if (!probe("wrap") && o + n < o) o = ~std::uint64_t(0) - n;  // keep offset + n - 1 below 2^64
      return o;
    }
    case 2:
      return (std::uint64_t(1) << st.in.ConsumeIntegralInRange<int>(30, 63)) +
             st.in.ConsumeIntegralInRange<std::uint64_t>(0, 9);
    default: {
      std::uint64_t o = st.in.ConsumeIntegral<std::uint64_t>();
      if (!probe("wrap") && o + n < o) o = ~std::uint64_t(0) - n;
      return o;
    }
  }
}

template <class T>
void op_fill_real(fuzz_state& st) {
  auto& s = st.pick<T>();
  auto r = pick_range(st, s);
  if (!r) return;
  const std::size_t n = r->second;
  const std::uint64_t seed = st.in.ConsumeIntegral<std::uint64_t>(), offset = pick_offset(st, n);
  const int kind = st.in.ConsumeIntegralInRange<int>(0, 2);
  T lo = 0, hi = 1;
  if (kind != 0) {
    switch (st.in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        lo = st.pick_value<T>();
        hi = st.pick_value<T>();
        break;
      case 1:
        lo = st.pick_value<T>();
        hi = std::nextafter(lo, std::numeric_limits<T>::infinity());
        break;  // one ulp
      case 2:
        lo = -std::numeric_limits<T>::max();
        hi = std::numeric_limits<T>::max();
        break;
      case 3:
        lo = T(st.in.ConsumeIntegralInRange<int>(1, 64));
        hi = T(2) * lo;
        break;
      default:
        lo = T(st.in.ConsumeIntegralInRange<int>(-50, 50)) / 4;
        hi = lo + T(st.in.ConsumeIntegralInRange<int>(-2, 80)) / 8;
    }
  }
  const bool edges = probe("range");
  const bool finite = std::isfinite(lo) && std::isfinite(hi) && std::isfinite(hi - lo);
  expect e = s.moved ? expect::invalid : expect::ok;
  if (kind == 2) {  // normal(mean lo, sd hi)
    // Without the probe: a positive, moderate sd and mean, or a negative sd (always refused).
    if (!edges && !(hi > 0 && finite && std::fabs(lo) < 1e6 && hi < 1e6) && !(hi < 0)) return;
    if (e == expect::ok && !(hi >= T(0)))
      e = expect::invalid;
    else if (e == expect::ok && !finite)
      e = expect::maybe;  // refusing non-finite parameters is right too
    else if (e == expect::ok &&
             std::fabs(double(lo)) + (sizeof(T) == 4 ? 6.0 : 9.0) * double(hi) > double(std::numeric_limits<T>::max()))
      e = expect::invalid;  // values could overflow: refused before any work (random.hpp states the bound)
  } else {
    if (!edges && lo < hi && !finite) return;
    if (e == expect::ok && !(lo < hi))
      e = expect::invalid;
    else if (e == expect::ok && !finite)
      e = expect::maybe;
  }
  if (!attempt("random fill", e, [&] {
        auto x = s.a.slice(r->first, n);
        if (kind == 2)
          rs::random::fill_normal(x, seed, offset, lo, hi);
        else if (kind == 1 && st.in.ConsumeBool())
          rs::random::uniform<T>(seed, offset, lo, hi)(x);
        else
          rs::random::fill_uniform(x, seed, offset, lo, hi);
      }))
    return;  // refused: the array must be as it was (checked after the call)
  if (e == expect::maybe && kind == 2) {
    st.resync(s);
    return;
  }
  const std::vector<T> got = s.a.to_host();
  for (std::size_t i = 0; i < n; ++i) {
    const T v = got[r->first + i];
    T want;
    const std::string where = std::string(kind == 2 ? "normal" : "uniform") + " seed " + std::to_string(seed) +
                              " offset " + std::to_string(offset) + " [" + show(double(lo)) + ", " + show(double(hi)) +
                              ") value " + std::to_string(i) + " = " + show(double(v));
    if (kind == 2) {
      want = philox_ref::normal<T>(seed, offset, i, lo, hi);
      const double tol = 1e-5 * (std::fabs(double(lo)) + 8 * double(hi)) + 1e-30;
      if (!(std::fabs(double(v) - double(want)) <= tol) && !(std::isnan(v) && std::isnan(want)) && v != want)
        fail(where + ", reference " + show(double(want)));
      continue;
    }
    const T u = philox_ref::unit<T>(seed, offset, i);
    if (lo == T(0) && hi == T(1))
      want = u;
    else if constexpr (sizeof(T) == 4)
      want = float(double(lo) + double(T(hi - lo)) * double(u));
    else
      want = std::fma(T(hi - lo), u, lo);
    if (edges && !(v >= lo && v < hi)) fail(where + ": outside [low, high)");
    if (want < hi && !same(v, want)) {
      // A fix that keeps values below high may round differently by an ulp or two of the width.
      const double tol =
          4 * double(std::numeric_limits<T>::epsilon()) * (std::fabs(double(hi)) + std::fabs(double(lo)));
      if (!(std::fabs(double(v) - double(want)) <= tol)) fail(where + ", reference " + show(double(want)));
    }
  }
  std::copy(got.begin() + std::ptrdiff_t(r->first), got.begin() + std::ptrdiff_t(r->first + n),
            s.ref.begin() + std::ptrdiff_t(r->first));
}

void op_fill_integers(fuzz_state& st) {
  auto& s = st.pick<std::uint32_t>();
  auto r = pick_range(st, s);
  if (!r) return;
  const std::size_t n = r->second;
  const std::uint64_t seed = st.in.ConsumeIntegral<std::uint64_t>(), offset = pick_offset(st, n);
  const int kind = st.in.ConsumeIntegralInRange<int>(0, 2);
  std::uint32_t lo = st.in.ConsumeIntegral<std::uint32_t>(), hi = st.in.ConsumeIntegral<std::uint32_t>();
  if (st.in.ConsumeBool()) hi = lo + st.in.ConsumeIntegralInRange<std::uint32_t>(0, 9);
  if (kind == 2 && st.in.ConsumeBool()) lo = 0, hi = ~0u;
  const expect e = s.moved ? expect::invalid : (kind != 0 && !(lo < hi)) ? expect::invalid : expect::ok;
  if (!attempt("fill_integers / fill_bits", e, [&] {
        auto x = s.a.slice(r->first, n);
        if (kind == 0)
          rs::random::fill_bits(x, seed, offset);
        else
          rs::random::fill_integers(x, seed, offset, lo, hi);
      }))
    return;
  for (std::size_t i = 0; i < n; ++i)
    s.ref[r->first + i] =
        kind == 0 ? philox_ref::bits(seed, offset, i) : philox_ref::integer(seed, offset, i, lo, hi - lo);
}

// fill_integers on int32 arrays: signed ranges, the full range of the type.
void op_fill_int32(fuzz_state& st) {
  const std::size_t n = st.pick_size();
  const std::uint64_t seed = st.in.ConsumeIntegral<std::uint64_t>(), offset = pick_offset(st, n);
  std::int32_t lo = st.in.ConsumeIntegral<std::int32_t>(), hi = st.in.ConsumeIntegral<std::int32_t>();
  if (st.in.ConsumeBool()) lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  rs::array<std::int32_t> a(n, rs::device::cpu());
  std::vector<std::int32_t> want(n, 0x5A5A5A5A);
  rs::copy(std::span<const std::int32_t>(want), a);
  if (attempt("fill_integers<int32>", lo < hi ? expect::ok : expect::invalid,
              [&] { rs::random::fill_integers(a, seed, offset, lo, hi); }))
    for (std::size_t i = 0; i < n; ++i)
      want[i] = std::int32_t(
          philox_ref::integer(seed, offset, i, std::uint32_t(lo), std::uint32_t(std::int64_t(hi) - std::int64_t(lo))));
  if (a.to_host() != want) fail("fill_integers<int32> in [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
}

// The pool's controls between calls: trimming and caching must not disturb live arrays.
void op_pool(fuzz_state& st) {
  const rs::device cpu = rs::device::cpu();
  if (st.in.ConsumeBool()) {
    rs::trim_pool(cpu);
  } else {
    const bool on = st.in.ConsumeBool();
    rs::set_pool_caching(cpu, on);
    if (rs::pool_caching(cpu) != on) fail("pool_caching does not say what set_pool_caching set");
  }
}

// A generator source reduced without memory: the sum of n uniforms, against the oracle's sum.
void op_generate_reduce(fuzz_state& st) {
  const std::size_t n = st.pick_size();
  const std::uint64_t seed = st.in.ConsumeIntegral<std::uint64_t>(), offset = pick_offset(st, n);
  const bool use_double = st.in.ConsumeBool();
  double got = 0, want = 0;
  attempt("generate | reduce", expect::ok, [&] {
    if (use_double)
      got = (rs::random::uniform<double>(seed, offset) | rs::reduce(rs::plus{}, 0.0))(n);
    else
      got = (rs::random::uniform<float>(seed, offset) | rs::map(affine{1, 0}) | rs::reduce(rs::plus{}, 0.0))(n);
  });
  for (std::size_t i = 0; i < n; ++i)
    want += use_double ? philox_ref::unit<double>(seed, offset, i) : double(philox_ref::unit<float>(seed, offset, i));
  if (!(std::fabs(got - want) <= 1e-9 * double(n + 1)))
    fail("sum of " + std::to_string(n) + " uniforms at offset " + std::to_string(offset) + ": " + show(got) +
         ", reference " + show(want));
}

// Transfers under each policy: forbid refuses host<->device copies and changes nothing.
template <class T>
void op_policy(fuzz_state& st) {
  auto& s = st.pick<T>();
  const auto p = static_cast<rs::transfer_policy>(st.in.ConsumeIntegralInRange<int>(0, 2));
  const int what = st.in.ConsumeIntegralInRange<int>(0, 4);
  const std::size_t n = s.ref.size();
  std::vector<T> h = st.host_data<T>(n);
  // 0 bytes move nothing, so nothing is refused (probe "ledger"); without the probe either is right.
  const expect empty_forbidden = probe("ledger") ? expect::ok : expect::maybe;
  {
    rs::scoped_transfer_policy scope(p);
    if (rs::current_transfer_policy() != p) fail("scoped_transfer_policy did not set the policy");
    const bool forbid = p == rs::transfer_policy::forbid;
    auto e = [&](bool crosses) {
      if (s.moved) return expect::invalid;
      if (!forbid || !crosses) return expect::ok;
      return n == 0 ? empty_forbidden : expect::forbidden;
    };
    if (what == 0) {
      std::optional<rs::array<T>> a;
      const expect x = !forbid ? expect::ok : n == 0 ? empty_forbidden : expect::forbidden;
      if (attempt("to_device under a policy", x, [&] { a = rs::to_device(h, rs::device::cpu()); })) {
        s.a = std::move(*a);
        s.ref = h;
        s.moved = false;
      }
    } else if (what == 1) {
      std::vector<T> out(n, fuzz_state::poison<T>());
      const auto before = out;
      const bool ok = attempt("to_host under a policy", e(true), [&] { s.a.to_host(std::span<T>(out)); });
      const std::vector<T>& want = ok ? s.ref : before;
      for (std::size_t i = 0; i < n; ++i)
        if (!same(out[i], want[i]))
          fail(ok ? "to_host under a policy: wrong values" : "a refused to_host wrote to the host buffer");
    } else if (what == 2) {
      if (attempt("copy into an array under a policy", e(true), [&] { rs::copy(std::span<const T>(h), s.a); }))
        s.ref = h;
    } else if (what == 3) {
      rs::array<T> c;
      if (attempt("device-to-device copy under a policy", s.moved ? expect::invalid : expect::ok, [&] {
            c = rs::array<T>(n, rs::device::cpu());
            rs::copy(s.a, c);
          }))
        if (st.in.ConsumeBool()) {
          s.a = std::move(c);
        }
    } else {
      // Pipelines are not transfers.
      if (attempt("map under a policy", s.moved ? expect::invalid : expect::ok, [&] { rs::map(square{})(s.a); }))
        for (T& v : s.ref) v = square{}(v);
    }
  }
  if (rs::current_transfer_policy() != rs::transfer_policy::allow) fail("the policy stayed set after its scope");
}

// Scopes on two threads: each thread's scope is its own (known defect: the policy is process-wide).
void op_policy_threads(fuzz_state& st) {
  if (!probe("policy")) return;
  const bool interleave = st.in.ConsumeBool();
  std::promise<void> opened, release;
  std::thread t([&] {
    rs::scoped_transfer_policy scope(rs::transfer_policy::forbid);
    opened.set_value();
    release.get_future().wait();
  });
  opened.get_future().wait();
  std::vector<float> h(3, 1.f);
  std::optional<rs::scoped_transfer_policy> mine;
  if (interleave) mine.emplace(rs::transfer_policy::allow);
  const bool ok = attempt("to_device on a thread without a forbid scope", expect::ok,
                          [&] { (void)rs::to_device(h, rs::device::cpu()); });
  release.set_value();
  t.join();
  mine.reset();
  if (!ok) return;
  if (rs::current_transfer_policy() != rs::transfer_policy::allow)
    fail("after two threads' scopes closed the policy is not allow");
}

// Flows: stages with declared accesses and explicit edges; the order they run in must respect every
// edge the model infers, and the results must match the stages run in that order.
void op_flow(fuzz_state& st) {
  auto& in = st.in;
  const int streams = in.ConsumeIntegralInRange<int>(-1, 5);
  std::optional<rs::flow> fl;
  if (!attempt("flow(cpu, " + std::to_string(streams) + ")", streams < 1 ? expect::invalid : expect::ok,
               [&] { fl.emplace(rs::device::cpu(), streams); }))
    return;
  struct stage_model {
    std::vector<rs::access::range> reads, writes;
    std::vector<std::size_t> preds;
    bool throws = false;
  };
  std::vector<stage_model> model;
  std::vector<std::size_t> log;
  // One or two rounds: stages added, the flow run; the second round adds stages to the flow that ran.
  const int rounds = in.ConsumeIntegralInRange<int>(1, 2);
  for (int round = 0; round < rounds; ++round) {
    const int count = in.ConsumeIntegralInRange<int>(0, 7);
    auto range_of = [](const float* p, std::size_t n) { return rs::access::range{p, n * sizeof(float)}; };
    auto overlaps = [](const std::vector<rs::access::range>& x, const std::vector<rs::access::range>& y) {
      for (auto& a : x)
        for (auto& b : y)
          if (a.overlaps(b)) return true;
      return false;
    };
    for (int k = 0; k < count; ++k) {
      const std::size_t id = model.size();
      int kind = in.ConsumeIntegralInRange<int>(0, 6);
      if (kind > 4) kind = 0;
      const int ia = in.ConsumeIntegralInRange<int>(0, 3), ib = in.ConsumeIntegralInRange<int>(0, 3);
      auto& A = st.f[ia];
      auto& B = st.f[ib];
      if (A.moved || B.moved) continue;
      std::size_t off = 0, cnt = A.ref.size();
      if (in.ConsumeBool() && cnt) {
        off = in.ConsumeIntegralInRange<std::size_t>(0, cnt - 1);
        cnt = in.ConsumeIntegralInRange<std::size_t>(0, cnt - off);
      }
      const affine af = pick_affine<float>(st);
      stage_model m;
      rs::access acc;
      std::function<void(rs::stream_ref)> work;
      const float* pa = A.a.data() + off;
      if (kind == 0 || kind == 4) {  // in place on a window of A
        acc.writes(A.a.slice(off, cnt));
        if (kind == 4) acc.reads(A.a.slice(off, cnt));
        m.writes.push_back(range_of(pa, cnt));
        if (kind == 4) m.reads.push_back(range_of(pa, cnt));
        work = [&st, ia, off, cnt, af, id, &log](rs::stream_ref) {
          log.push_back(id);
          rs::map(af)(st.f[ia].a.slice(off, cnt));
          for (std::size_t i = off; i < off + cnt; ++i) st.f[ia].ref[i] = af(st.f[ia].ref[i]);
        };
      } else if (kind == 1) {  // B = af(A)
        acc.reads(A.a).writes(B.a);
        m.reads.push_back(range_of(A.a.data(), A.ref.size()));
        m.writes.push_back(range_of(B.a.data(), B.ref.size()));
        m.throws = A.ref.size() != B.ref.size();  // shape_mismatch inside the stage
        work = [&st, ia, ib, af, id, &log](rs::stream_ref) {
          log.push_back(id);
          rs::map(af)(st.f[ia].a, st.f[ib].a);
          const std::vector<float> src = st.f[ia].ref;
          for (std::size_t i = 0; i < src.size(); ++i) st.f[ib].ref[i] = af(src[i]);
        };
      } else if (kind == 2) {  // reads A only
        acc.reads(A.a);
        m.reads.push_back(range_of(A.a.data(), A.ref.size()));
        work = [&st, ia, id, &log](rs::stream_ref) {
          log.push_back(id);
          (void)(rs::reduce(rs::plus{}, 0.0))(st.f[ia].a);
        };
      } else {  // a stage that fails
        m.throws = true;
        work = [id, &log](rs::stream_ref) {
          log.push_back(id);
          throw user_error{};
        };
      }
      std::vector<std::size_t> after;
      const int na = in.ConsumeIntegralInRange<int>(0, 2);
      for (int j = 0; j < na; ++j)
        after.push_back(in.ConsumeIntegralInRange<std::size_t>(0, id + (in.ConsumeIntegralInRange<int>(0, 9) == 0)));
      const bool infer = in.ConsumeIntegralInRange<int>(0, 4) != 0;
      bool bad_after = false;
      for (auto a : after) bad_after |= a >= id;
      if (!attempt("flow::add", bad_after ? expect::flow : expect::ok, [&] {
            fl->add(in.ConsumeRandomLengthString(12) + std::to_string(id), std::move(work), std::move(acc), after,
                    infer ? rs::inference::on : rs::inference::off);
          }))
        continue;
      m.preds = after;
      if (infer)
        for (std::size_t e = 0; e < id; ++e)
          if (overlaps(m.reads, model[e].writes) || overlaps(m.writes, model[e].writes) ||
              overlaps(m.writes, model[e].reads))
            m.preds.push_back(e);
      model.push_back(std::move(m));
      if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
        const std::size_t e = in.ConsumeIntegralInRange<std::size_t>(0, model.size()),
                          l = in.ConsumeIntegralInRange<std::size_t>(0, model.size());
        const bool good = e < model.size() && l < model.size() && e != l;
        if (attempt("flow::order", good ? expect::ok : expect::flow, [&] { fl->order(e, l); }))
          model[l].preds.push_back(e);
      }
    }
    const std::size_t n = model.size();
    if (fl->size() != n) fail("flow::size is " + std::to_string(fl->size()) + ", stages added " + std::to_string(n));
    attempt("predecessors of a stage not in the flow", expect::flow, [&] { (void)fl->predecessors(n); });
    for (std::size_t i = 0; i < n; ++i) {
      auto want = model[i].preds, got = fl->predecessors(i);
      for (auto* v : {&want, &got}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
      }
      if (want != got)
        fail("flow: stage " + std::to_string(i) + " has other predecessors than the declared accesses give");
    }
    // The model's verdict: a cycle, or two overlapping writers with no path between them.
    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (int pass = 0; pass < int(n) + 1; ++pass)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t p : model[i].preds) {
          reach[i][p] = true;
          for (std::size_t q = 0; q < n; ++q)
            if (reach[p][q]) reach[i][q] = true;
        }
    bool invalid = false;
    for (std::size_t i = 0; i < n; ++i) invalid |= reach[i][i];
    for (std::size_t i = 0; i < n && !invalid; ++i)
      for (std::size_t j = i + 1; j < n; ++j)
        if (overlaps(model[i].writes, model[j].writes) && !reach[i][j] && !reach[j][i]) invalid = true;
    auto check_log = [&](std::size_t from, const char* what) {
      std::vector<bool> seen(n, false);
      for (std::size_t k = from; k < log.size(); ++k) {
        const std::size_t s = log[k];
        if (seen[s]) fail(std::string(what) + ": a stage ran twice");
        for (std::size_t p : model[s].preds)
          if (!seen[p])
            fail(std::string(what) + ": stage " + std::to_string(s) + " ran before its predecessor " +
                 std::to_string(p));
        seen[s] = true;
      }
    };
    // Which stage of a valid flow fails first, in the order it ran.
    const auto expected_run = [&](std::size_t from) {
      for (std::size_t k = from; k < log.size(); ++k)
        if (model[log[k]].throws) return expect::stage;
      return expect::ok;
    };
    attempt("flow::validate", invalid ? expect::flow : expect::ok, [&] { (void)fl->validate(); });
    const std::size_t start = log.size();
    bool ran_ok = false;
    try {
      fl->run();
      ran_ok = true;
    } catch (const rs::flow_error&) {
      if (!invalid) fail("flow::run: a flow_error for a valid flow");
    } catch (const rs::stage_error& x) {
      if (invalid) fail("flow::run: stages ran in an invalid flow");
      try {
        std::rethrow_if_nested(x);
        fail("stage_error without the original exception nested");
      } catch (const user_error&) {
      } catch (const rs::shape_mismatch&) {
      } catch (...) {
        fail("stage_error nests an exception the stage did not throw");
      }
    } catch (...) {
      fail("flow::run: an exception other than flow_error / stage_error");
    }
    if (invalid && log.size() != start) fail("flow::run: an invalid flow ran stages");
    if (!invalid) {
      check_log(start, "flow::run");
      if (ran_ok != (expected_run(start) == expect::ok)) fail("flow::run: a failing stage went unreported");
      if (ran_ok && log.size() - start != n) fail("flow::run: not every stage ran");
      (void)fl->report_table();
    }
    st.check_all("after flow::run");
    if (invalid || !ran_ok) return;
    if (round + 1 < rounds) continue;
    if (!in.ConsumeBool()) return;
    // Capture once, replay a few times.
    std::optional<rs::graph> g;
    attempt("flow::capture", expect::ok, [&] { g.emplace(fl->capture()); });
    const int replays = in.ConsumeIntegralInRange<int>(0, 3);
    const bool gone = probe("capture") && in.ConsumeBool();
    if (gone) fl.reset();  // the graph must not depend on the flow it came from
    for (int r = 0; r < replays; ++r) {
      const std::size_t from = log.size();
      attempt("graph::replay of a flow", expect::ok, [&] { g->replay(rs::default_stream(rs::device::cpu())); });
      check_log(from, "graph::replay");
      if (log.size() - from != n) fail("graph::replay: not every stage ran");
    }
    st.check_all("after graph::replay");
  }
}

// Graphs on a stream: capture a pipeline, replay it, update it, moved-from and foreign-device replays.
void op_graph(fuzz_state& st) {
  auto& s = st.pick<float>();
  if (s.moved) return;
  const affine af = pick_affine<float>(st);
  const rs::stream_ref on = st.pick_stream();
  rs::graph g;
  attempt("replay of an empty graph", expect::invalid, [&] { g.replay(on); });
  if (probe("update_empty")) {  // CUDA refuses to update a graph that holds nothing: the CPU must agree
    rs::graph empty;
    attempt("graph::update of an empty graph", expect::invalid, [&] { empty.update(on, [] {}); });
  }
  attempt("graph::capture", expect::ok, [&] {
    g = rs::graph::capture(on, [&s, af] {
      rs::map(af)(s.a);
      for (float& v : s.ref) v = af(v);
    });
  });
  st.check(s, "graph::capture ran the work");  // capture records, it does not run
  const int replays = st.in.ConsumeIntegralInRange<int>(0, 3);
  for (int r = 0; r < replays; ++r) attempt("graph::replay", expect::ok, [&] { g.replay(on); });
  if (replays && !s.ref.empty() && g.kernels() != 1)
    fail("graph::kernels is " + std::to_string(g.kernels()) + " for one map");
  st.check(s, "after graph::replay");
  attempt("replay on another device", expect::device, [&] { g.replay(rs::stream_ref(rs::device::cuda(0), nullptr)); });
  if (st.in.ConsumeBool()) {
    attempt("graph::update", expect::ok, [&] {
      g.update(on, [&s] {
        rs::map(square{})(s.a);
        for (float& v : s.ref) v = square{}(v);
      });
    });
    attempt("graph::replay after update", expect::ok, [&] { g.replay(on); });
    st.check(s, "after graph::update");
  }
  if (st.in.ConsumeBool()) {
    rs::graph h(std::move(g));
    if (probe("moved")) attempt("replay of a moved-from graph", expect::invalid, [&] { g.replay(on); });
    g = std::move(h);
  }
}

// matmul with odd shapes and padded rows, against an FP64 reference; padding must stay untouched.
template <class T>
void op_matmul(fuzz_state& st) {
  auto& in = st.in;
  auto dim = [&] {
    return in.ConsumeIntegralInRange<std::size_t>(0, 5) == 0 ? 0 : in.ConsumeIntegralInRange<std::size_t>(1, 37);
  };
  const std::size_t m = dim(), k = dim(), n = dim();
  std::size_t k2 = k, cm = m, cn = n;
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) k2 = dim();
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) cm = dim();
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) cn = dim();
  auto pad = [&](std::size_t c) { return in.ConsumeBool() ? c : c + in.ConsumeIntegralInRange<std::size_t>(1, 9); };
  const std::size_t lda = pad(k), ldb = pad(n), ldc = pad(cn);
  const rs::matmul_algo algos[] = {rs::matmul_algo::automatic,  rs::matmul_algo::naive, rs::matmul_algo::blocked,
                                   rs::matmul_algo::vendor,     rs::matmul_algo::tuned, rs::matmul_algo::shared,
                                   rs::matmul_algo::vendor_tf32};
  const auto algo = algos[in.ConsumeIntegralInRange<int>(0, 6)];
  const T alpha = T(in.ConsumeIntegralInRange<int>(-8, 8)) / 4;
  const T beta = in.ConsumeBool() ? T(0) : T(in.ConsumeIntegralInRange<int>(-8, 8)) / 4;
  auto make = [&](std::size_t r, std::size_t c, std::size_t ld, std::vector<T>& all) {
    rs::array2d<T> a(r, c, rs::device::cpu(), ld);
    all = st.host_data<T>(r * ld, false);
    for (std::size_t i = 0; i < r; ++i)  // padding: NaN, which must never reach C
      for (std::size_t j = c; j < ld; ++j) all[i * ld + j] = std::numeric_limits<T>::quiet_NaN();
    rs::copy(std::span<const T>(all), a.storage());
    return a;
  };
  std::vector<T> ha, hb, hc;
  rs::array2d<T> A = make(m, k, lda, ha), B = make(k2, n, ldb, hb), C = make(cm, cn, ldc, hc);
  if (beta == T(0))  // BLAS: with beta = 0, C is not read (NaN there must not leak)
    for (std::size_t i = 0; i < cm; ++i)
      for (std::size_t j = 0; j < cn; ++j) hc[i * ldc + j] = std::numeric_limits<T>::quiet_NaN();
  rs::copy(std::span<const T>(hc), C.storage());
  const bool supported = rs::matmul_supported(algo, rs::device::cpu(), sizeof(T));
  expect e = expect::ok;
  if (k != k2 || cm != m || cn != n)
    e = expect::shape;
  else if (!supported)
    e = expect::invalid;
  const int alias = in.ConsumeIntegralInRange<int>(0, 9);
  if (alias == 0 && e == expect::ok && m * k > 0) {  // C is A: refused
    attempt("matmul into its own input", expect::invalid, [&] { rs::matmul(A, B, A, algo, alpha, beta); });
    return;
  }
  if (!attempt("matmul " + std::to_string(m) + "x" + std::to_string(k) + " * " + std::to_string(k2) + "x" +
                   std::to_string(n) + " -> " + std::to_string(cm) + "x" + std::to_string(cn) + " algo " +
                   rs::to_string(algo),
               e, [&] { rs::matmul(A, B, C, algo, alpha, beta); })) {
    const std::vector<T> now = C.storage().to_host();
    for (std::size_t i = 0; i < hc.size(); ++i)
      if (!same(now[i], hc[i])) fail("a refused matmul wrote C");
    return;
  }
  const std::vector<T> got = C.storage().to_host();
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < ldc; ++j) {
      const T v = got[i * ldc + j];
      if (j >= n) {
        if (!same(v, hc[i * ldc + j])) fail("matmul wrote the padding of C at row " + std::to_string(i));
        continue;
      }
      double acc = 0, mag = 0;
      for (std::size_t p = 0; p < k; ++p) {
        acc += double(ha[i * lda + p]) * double(hb[p * ldb + j]);
        mag += std::fabs(double(ha[i * lda + p]) * double(hb[p * ldb + j]));
      }
      const double c0 = double(hc[i * ldc + j]);
      const double want = double(alpha) * acc + (beta == T(0) ? 0.0 : double(beta) * c0);
      const double tol = 4 * double(k + 2) * double(std::numeric_limits<T>::epsilon()) *
                             (std::fabs(double(alpha)) * mag + std::fabs(double(beta) * (beta == T(0) ? 0.0 : c0))) +
                         1e-300;
      if (!(std::fabs(double(v) - want) <= tol))
        fail("matmul " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " lda " +
             std::to_string(lda) + " ldb " + std::to_string(ldb) + " ldc " + std::to_string(ldc) + " algo " +
             rs::to_string(algo) + " alpha " + show(double(alpha)) + " beta " + show(double(beta)) + ": C(" +
             std::to_string(i) + ", " + std::to_string(j) + ") = " + show(double(v)) + ", reference " + show(want));
    }
}

// 2-D arrays: to_device, to_host with ld > cols, views, moved-from.
void op_array2d(fuzz_state& st) {
  auto& in = st.in;
  const std::size_t rows = in.ConsumeIntegralInRange<std::size_t>(0, 20),
                    cols = in.ConsumeIntegralInRange<std::size_t>(0, 20);
  std::size_t ld = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::size_t>(0, 30);
  std::optional<rs::array2d<float>> a;
  const bool bad_ld = ld != 0 && ld < cols;
  if (!attempt("array2d(" + std::to_string(rows) + ", " + std::to_string(cols) + ", ld " + std::to_string(ld) + ")",
               bad_ld ? expect::invalid : expect::ok, [&] { a.emplace(rows, cols, rs::device::cpu(), ld); }))
    return;
  const std::size_t l = ld ? ld : cols;
  if (a->ld() != l || a->rows() != rows || a->cols() != cols || a->storage().size() != rows * l)
    fail("array2d: wrong shape");
  std::vector<float> all = st.host_data<float>(rows * l);
  rs::copy(std::span<const float>(all), a->storage());
  std::vector<float> packed = a->to_host();
  if (packed.size() != rows * cols) fail("array2d::to_host: wrong size");
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      if (!same(packed[r * cols + c], all[r * l + c])) fail("array2d::to_host: wrong element");
  const auto v = a->view();
  if (v.rows() != rows || v.cols() != cols || v.ld() != l) fail("array2d::view: wrong shape");
  const std::size_t m = in.ConsumeBool() ? rows * cols : rows * cols + 1;
  std::vector<float> h(m, 2.5f);
  std::optional<rs::array2d<float>> b;
  if (attempt("to_device(span, rows, cols)", m == rows * cols ? expect::ok : expect::shape,
              [&] { b.emplace(rs::to_device(std::span<const float>(h), rows, cols, rs::device::cpu())); }))
    if (b->to_host() != h) fail("to_device(span, rows, cols): wrong values");
  if (in.ConsumeBool()) {
    rs::array2d<float> c(std::move(*a));
    if (c.rows() != rows || c.cols() != cols) fail("array2d move: the shape did not move");
    if (probe("moved")) {
      if (a->rows() != 0 || a->cols() != 0 || a->size() != 0)
        fail("a moved-from array2d still reports " + std::to_string(a->rows()) + " x " + std::to_string(a->cols()));
      attempt("view of a moved-from array2d", expect::invalid, [&] { (void)a->view(); });
      attempt("to_host of a moved-from array2d", expect::invalid, [&] { (void)a->to_host(); });
    }
  }
}

// A flow stage reading the last row of a padded 2-D array gets its edge from the stage writing it.
void op_flow_padded(fuzz_state& st) {
  if (!probe("padded")) return;
  const std::size_t rows = st.in.ConsumeIntegralInRange<std::size_t>(2, 6),
                    cols = st.in.ConsumeIntegralInRange<std::size_t>(1, 5);
  rs::array2d<float> a(rows, cols, rs::device::cpu(), cols + st.in.ConsumeIntegralInRange<std::size_t>(1, 5));
  rs::flow f(rs::device::cpu());
  f.add(
      "write a", [](rs::stream_ref) {}, rs::access{}.writes(a));
  rs::array_ref<float> last_row(a.data() + (rows - 1) * a.ld(), cols, a.stream());
  const auto id = f.add(
      "read a's last row", [](rs::stream_ref) {}, rs::access{}.reads(last_row));
  if (f.predecessors(id).empty())
    fail("flow: no edge from a stage writing a padded array2d to one reading its last row");
}

// Streams, events, pinned buffers: plain use and moved-from objects.
void op_handles(fuzz_state& st) {
  auto& in = st.in;
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: {
      auto& s = st.pick<float>();
      if (s.moved) return;
      attempt("set_stream to another device", expect::device,
              [&] { s.a.set_stream(rs::stream_ref(rs::device::cuda(0), nullptr)); });
      attempt("set_stream", expect::ok, [&] { s.a.set_stream(st.pick_stream()); });
      break;
    }
    case 1: {
      rs::event e0(rs::device::cpu()), e1(rs::device::cpu());
      e0.record(st.side);
      if (auto& s = st.pick<float>(); !s.moved) {
        rs::map(square{})(s.a);
        for (float& v : s.ref) v = square{}(v);
      }
      e1.record(st.side);
      e1.synchronize();
      e1.wait_on(rs::default_stream(rs::device::cpu()));
      const double ms = elapsed_ms(e0, e1);
      if (!(ms >= 0)) fail("elapsed_ms between two recorded events is " + show(ms));
      if (probe("moved") && in.ConsumeBool()) {
        rs::event e2(std::move(e0));
        attempt("record on a moved-from event", expect::invalid, [&] { e0.record(st.side); });
        attempt("elapsed_ms of a moved-from event", expect::invalid, [&] { (void)elapsed_ms(e0, e1); });
      }
      if (probe("unrecorded") && in.ConsumeBool()) {  // CUDA refuses an event never recorded
        rs::event fresh(rs::device::cpu());
        attempt("elapsed_ms from an event never recorded", expect::invalid, [&] { (void)elapsed_ms(fresh, e1); });
        attempt("elapsed_ms to an event never recorded", expect::invalid, [&] { (void)elapsed_ms(e1, fresh); });
      }
      if (probe("foreign") && in.ConsumeBool()) {  // a stream of another device cannot be ordered this way
        const rs::stream_ref gpu(rs::device::cuda(0), nullptr);
        attempt("event::record on a stream of another device", expect::resident_error, [&] { e0.record(gpu); });
        attempt("event::wait_on by a stream of another device", expect::resident_error, [&] { e1.wait_on(gpu); });
        attempt("stream_ref::wait_for a stream of another device", expect::resident_error,
                [&] { rs::default_stream(rs::device::cpu()).wait_for(gpu); });
      }
      break;
    }
    case 2: {
      rs::stream s(rs::device::cpu());
      rs::array<float> a(in.ConsumeIntegralInRange<std::size_t>(0, 50), s);
      s.synchronize();
      if (probe("moved") && in.ConsumeBool()) {
        rs::stream t(std::move(s));
        attempt("synchronize a moved-from stream", expect::invalid, [&] { s.synchronize(); });
        attempt("an array on a moved-from stream", expect::invalid, [&] { rs::array<float> b(3, s); });
        a.set_stream(t);
      }
      break;
    }
    case 3: {
      const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 50);
      rs::pinned_buffer<double> p(n);
      if (p.size() != n || (n && !p.data())) fail("pinned_buffer(n): wrong size or no memory");
      for (std::size_t i = 0; i < n; ++i) p[i] = double(i);
      rs::pinned_buffer<double> q = std::move(p);
      if (q.size() != n) fail("pinned_buffer move: the size did not move");
      if (p.size() != 0 || p.data() != nullptr) fail("a moved-from pinned_buffer is not empty");
      if (probe("moved") && in.ConsumeBool())
        attempt("to_device of a moved-from pinned_buffer", expect::maybe, [&] {
          if (rs::to_device(p, rs::default_stream(rs::device::cpu())).size() != 0)
            fail("a moved-from pinned_buffer uploaded elements");
        });
      break;
    }
    case 4: {
      // An array on a device this build cannot use.
      attempt("array on cuda:0", expect::resident_error, [&] { rs::array<float> a(4, rs::device::cuda(0)); });
      auto& s = st.pick<float>();
      if (s.moved) return;
      rs::array_ref<float> foreign(s.a.data(), s.a.size(), rs::stream_ref(rs::device::cuda(0), nullptr));
      attempt("map into an array on another device", expect::device, [&] { rs::map(square{})(s.a, foreign); });
      attempt("zip with an array on another device", expect::device, [&] { (void)rs::zip(s.a, foreign); });
      const expect refused = s.ref.empty() ? expect::maybe : expect::resident_error;  // nothing to do: either
      attempt("a pipeline on another device's array", refused, [&] { rs::map(square{})(foreign); });
      attempt("a random fill on another device's array", refused, [&] { rs::random::fill_uniform(foreign, 1); });
      if (probe("foreign")) {  // a copy this build cannot make is not counted as made
        // A device this build lacks has no ledger to read: refused, never zeros.
        attempt("the ledger of cuda:0", expect::resident_error, [&] { (void)rs::ledger(rs::device::cuda(0)); });
        const std::vector<float> h(s.ref.size(), 1.f);
        const auto before = rs::ledger(rs::device::cpu());
        attempt("copy_async to another device's array", s.ref.empty() ? expect::maybe : expect::resident_error,
                [&] { rs::copy_async(std::span<const float>(h), foreign); });
        const auto delta = rs::ledger(rs::device::cpu()) - before;
        if (delta.h2d_copies || delta.h2d_bytes || delta.d2d_copies)
          fail("a refused copy to cuda:0 counted " + std::to_string(delta.h2d_bytes) + " bytes in the ledger");
      }
      break;
    }
    default: {
      if (!probe("moved")) return;
      rs::flow f(rs::device::cpu());
      rs::flow g(std::move(f));
      attempt("add to a moved-from flow", expect::invalid, [&] { f.add("x", [](rs::stream_ref) {}); });
      attempt("run a moved-from flow", expect::invalid, [&] { f.run(); });
      attempt("size of a moved-from flow", expect::ok, [&] { (void)f.size(); });
      f = std::move(g);
      f.run();
    }
  }
}

// launch, launch_phases and for_each_index writing a float slot, against the thread arithmetic.
void op_launch(fuzz_state& st) {
  auto& s = st.pick<float>();
  if (s.moved) return;
  const float k = float(st.in.ConsumeIntegralInRange<int>(-3, 3)) / 2;
  const int kind = st.in.ConsumeIntegralInRange<int>(0, 2);
  const rs::stream_ref on = st.pick_stream();
  const std::size_t n = s.ref.size();
  if (kind == 2) {
    attempt("for_each_index", expect::ok, [&] { rs::for_each_index(on, n, write_index{s.a.view(), k}); });
    for (std::size_t i = 0; i < n; ++i) s.ref[i] = float(i) * k;
    return;
  }
  bool valid = true;
  const rs::launch_config cfg = pick_config(st, valid);
  if (!attempt((kind ? "launch_phases " : "launch ") + cfg.str(), valid ? expect::ok : expect::invalid, [&] {
        if (kind == 0)
          rs::launch(on, cfg, write_ids{k}, s.a.view());
        else
          rs::launch_phases(on, cfg, leave_id{k}, take_neighbour{s.a.view()});
      }))
    return;
  const std::size_t bc = cfg.block.count(), total = cfg.grid.count() * bc;
  for (std::size_t id = 0; id < std::min(n, total); ++id)
    s.ref[id] = kind == 0 ? float(id) * k : float((id / bc) * bc + (id % bc + 1) % bc) * k;
}

// Huge sizes: refused with a typed error, nothing allocated.
void op_huge(fuzz_state& st) {
  if (!probe("size")) return;
  const std::size_t big[] = {std::size_t(-1),         std::size_t(-1) - 255, std::size_t(-1) / 4,
                             std::size_t(-1) / 4 + 1, std::size_t(-1) / 8,   (std::size_t(1) << 61) + 1,
                             std::size_t(1) << 62,    std::size_t(1) << 50};
  const std::size_t n = big[st.in.ConsumeIntegralInRange<int>(0, 7)];
  switch (st.in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      attempt("array<uint8_t>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::array<std::uint8_t> a(n, rs::device::cpu()); });
      break;
    case 1:
      attempt("array<float>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::array<float> a(n, rs::device::cpu()); });
      break;
    case 2:
      attempt("array<double>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::array<double> a(n, st.side); });
      break;
    case 3:
      attempt("pinned_buffer<double>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::pinned_buffer<double> p(n); });
      break;
    case 4: {
      const std::size_t r = std::size_t(1) << st.in.ConsumeIntegralInRange<int>(20, 40);
      attempt("array2d(" + std::to_string(r) + ", " + std::to_string(n / r) + ")", expect::resident_error,
              [&] { rs::array2d<float> a(r, n / r + 1, rs::device::cpu()); });
      break;
    }
    default: {  // rows * cols wraps to the size of the host buffer
      const std::size_t r = std::size_t(1) << st.in.ConsumeIntegralInRange<int>(1, 63);
      const std::size_t c = (std::size_t(1) << 63) / (r / 2);
      std::vector<float> h(r * c);
      attempt(
          "to_device(span of " + std::to_string(h.size()) + ", " + std::to_string(r) + ", " + std::to_string(c) + ")",
          expect::invalid, [&] { (void)rs::to_device(std::span<const float>(h), r, c, rs::device::cpu()); });
    }
  }
}

// A user functor that throws inside a CPU loop: the exception reaches the caller.
void op_throw(fuzz_state& st) {
  if (!probe("throw")) return;
  auto& s = st.pick<float>();
  if (s.moved || s.ref.empty()) return;
  const std::size_t at = st.in.ConsumeIntegralInRange<std::size_t>(0, s.ref.size() - 1);
  if (st.in.ConsumeBool())
    attempt("generate that throws", expect::user, [&] { rs::generate(throw_at{at})(s.a); });
  else
    attempt("reduce of a generator that throws", expect::user,
            [&] { (void)(rs::generate(throw_at{at}) | rs::reduce(rs::plus{}, 0.f))(s.ref.size()); });
  st.resync(s);  // other elements may or may not have been written
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool caching = rs::pool_caching(rs::device::cpu());
  const auto pool0 = rs::pool_stats(rs::device::cpu());
  {
    fuzz_state st(in);
    for (int ops = 0; ops < 48 && in.remaining_bytes() > 0; ++ops) {
      switch (in.ConsumeIntegralInRange<int>(0, 34)) {
        case 0: op_allocate<float>(st); break;
        case 1: op_allocate<double>(st); break;
        case 2: op_allocate<std::uint32_t>(st); break;
        case 3: op_upload<float>(st); break;
        case 4: op_upload<std::uint32_t>(st); break;
        case 5: op_download<float>(st); break;
        case 6: op_download<double>(st); break;
        case 7: op_copy_in<float>(st); break;
        case 8: op_copy_between<float>(st); break;
        case 9: op_copy_between<std::uint32_t>(st); break;
        case 10: op_move<float>(st); break;
        case 11: op_move<double>(st); break;
        case 12: op_map_in_place<float>(st); break;
        case 13: op_map_in_place<std::uint32_t>(st); break;
        case 14: op_map_out_of_place<float, float>(st); break;
        case 15: op_map_out_of_place<float, double>(st); break;
        case 16: op_zip<float, float>(st); break;
        case 17: op_zip<float, double>(st); break;
        case 18: op_reduce<float>(st); break;
        case 19: op_reduce<std::uint32_t>(st); break;
        case 20: op_fill_real<float>(st); break;
        case 21: op_fill_real<double>(st); break;
        case 22: op_fill_integers(st); break;
        case 23: op_generate_reduce(st); break;
        case 24: in.ConsumeBool() ? op_policy<float>(st) : op_policy<std::uint32_t>(st); break;
        case 25: op_flow(st); break;
        case 26: op_graph(st); break;
        case 27: in.ConsumeBool() ? op_matmul<float>(st) : op_matmul<double>(st); break;
        case 28: op_array2d(st); break;
        case 29: op_handles(st); break;
        case 30: in.ConsumeBool() ? op_huge(st) : op_policy_threads(st); break;
        case 31: in.ConsumeBool() ? op_throw(st) : op_flow_padded(st); break;
        case 32: op_launch(st); break;
        case 33: op_fill_int32(st); break;
        default: op_pool(st);
      }
      st.check_all("after a call");
    }
  }
  rs::set_pool_caching(rs::device::cpu(), caching);  // each input starts alike
  const auto pool1 = rs::pool_stats(rs::device::cpu());
  if (pool1.bytes_in_use != pool0.bytes_in_use || pool1.outstanding != pool0.outstanding)
    fail("the pool holds " + std::to_string(pool1.bytes_in_use - pool0.bytes_in_use) + " more bytes in " +
         std::to_string(pool1.outstanding - pool0.outstanding) + " more allocations after the input");
  return 0;
}
