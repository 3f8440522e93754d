#pragma once
// What the parts of the fuzz_api target share (private to it): the switches and failure reports,
// the expected outcome of a call, plain references, the interpreter's state (arrays with their host
// mirrors), the choices of ranges and maps, and the operations the input program picks from.
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

namespace fuzz_api {

// ---- switches and failure reports ----------------------------------------------------------------

inline bool probe(const char* name) {
  static const std::string list = [] {
    const char* v = std::getenv("RESIDENT_FUZZ_KNOWN");
    return std::string(v ? v : "1");
  }();
  if (list == "1") return true;
  if (list == "0") return false;
  const std::string key = std::string(",") + name + ",";
  return ("," + list + ",").find(key) != std::string::npos;
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_api: %s\n", what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

struct user_error {};  // what user functors throw: not a std::exception, not a resident::error

// maybe: either outcome is right (a value, or a refusal with any resident::error).
enum class expect { ok, invalid, shape, device, forbidden, flow, stage, resident_error, user, maybe };

inline const char* name_of(expect e) {
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

inline std::string show(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

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

// ---- the operations, each defined in the file of its area -----------------------------------------

// Arrays, copies and transfers, 2-D arrays, handles, huge sizes, the pool (fuzz_api_arrays.cpp).
template <class T> void op_allocate(fuzz_state& st);
template <class T> void op_upload(fuzz_state& st);
template <class T> void op_download(fuzz_state& st);
template <class T> void op_copy_in(fuzz_state& st);
template <class T> void op_copy_between(fuzz_state& st);
template <class T> void op_move(fuzz_state& st);
void op_pool(fuzz_state& st);
void op_array2d(fuzz_state& st);
void op_handles(fuzz_state& st);
void op_huge(fuzz_state& st);
// Pipelines, random fills, matmul, launches, throwing functors (fuzz_api_compute.cpp).
template <class T> void op_map_in_place(fuzz_state& st);
template <class T, class U> void op_map_out_of_place(fuzz_state& st);
template <class T, class U> void op_zip(fuzz_state& st);
template <class T> void op_reduce(fuzz_state& st);
template <class T> void op_fill_real(fuzz_state& st);
void op_fill_integers(fuzz_state& st);
void op_fill_int32(fuzz_state& st);
void op_generate_reduce(fuzz_state& st);
template <class T> void op_matmul(fuzz_state& st);
void op_launch(fuzz_state& st);
void op_throw(fuzz_state& st);
// Transfer policies, flows and graphs (fuzz_api_flow.cpp).
template <class T> void op_policy(fuzz_state& st);
void op_policy_threads(fuzz_state& st);
void op_flow(fuzz_state& st);
void op_graph(fuzz_state& st);
void op_flow_padded(fuzz_state& st);

}  // namespace fuzz_api
