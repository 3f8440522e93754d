// The fuzz_api target's operations that compute: fused maps, zips and reductions, random fills
// against a Philox reference, matmul, launches of every shape, functors that throw.
#include "fuzz_api.hpp"

namespace fuzz_api {

namespace {

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
    if (range == 0) return low + block(seed, c)[lane];  // 2^32 values: the word itself
    std::uint64_t m = std::uint64_t(block(seed, c)[lane]) * range;
    const std::uint32_t threshold = std::uint32_t(-range) % range;
    for (std::uint32_t a = 1; std::uint32_t(m) < threshold; ++a) m = std::uint64_t(block(seed, c, a)[lane]) * range;
    return low + std::uint32_t(m >> 32);
  }
};

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

}  // namespace

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
  std::uint32_t lo = st.in.ConsumeIntegral<std::uint32_t>();
  std::uint64_t hi = st.in.ConsumeIntegral<std::uint32_t>();
  if (st.in.ConsumeBool()) hi = lo + st.in.ConsumeIntegralInRange<std::uint32_t>(0, 9);
  if (kind == 2 && st.in.ConsumeBool()) lo = 0, hi = st.in.ConsumeBool() ? ~0u : 1ull << 32;  // one past the largest
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
        kind == 0 ? philox_ref::bits(seed, offset, i) : philox_ref::integer(seed, offset, i, lo, std::uint32_t(hi - lo));
}

// fill_integers on int32 arrays: signed ranges, the full range of the type.
void op_fill_int32(fuzz_state& st) {
  const std::size_t n = st.pick_size();
  const std::uint64_t seed = st.in.ConsumeIntegral<std::uint64_t>(), offset = pick_offset(st, n);
  std::int32_t lo = st.in.ConsumeIntegral<std::int32_t>();
  std::int64_t hi = st.in.ConsumeIntegral<std::int32_t>();
  if (st.in.ConsumeBool()) lo = std::numeric_limits<std::int32_t>::min(), hi = std::numeric_limits<std::int32_t>::max();
  if (st.in.ConsumeBool()) hi = std::int64_t(1) << 31;  // one past the largest
  rs::array<std::int32_t> a(n, rs::device::cpu());
  std::vector<std::int32_t> want(n, 0x5A5A5A5A);
  rs::copy(std::span<const std::int32_t>(want), a);
  if (attempt("fill_integers<int32>", lo < hi ? expect::ok : expect::invalid,
              [&] { rs::random::fill_integers(a, seed, offset, lo, hi); }))
    for (std::size_t i = 0; i < n; ++i)
      want[i] = std::int32_t(
          philox_ref::integer(seed, offset, i, std::uint32_t(lo), std::uint32_t(hi - std::int64_t(lo))));
  if (a.to_host() != want) fail("fill_integers<int32> in [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
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

// The instances the interpreter calls.
template void op_map_in_place<float>(fuzz_state&);
template void op_map_in_place<std::uint32_t>(fuzz_state&);
template void op_map_out_of_place<float, float>(fuzz_state&);
template void op_map_out_of_place<float, double>(fuzz_state&);
template void op_zip<float, float>(fuzz_state&);
template void op_zip<float, double>(fuzz_state&);
template void op_reduce<float>(fuzz_state&);
template void op_reduce<std::uint32_t>(fuzz_state&);
template void op_fill_real<float>(fuzz_state&);
template void op_fill_real<double>(fuzz_state&);
template void op_matmul<float>(fuzz_state&);
template void op_matmul<double>(fuzz_state&);

}  // namespace fuzz_api
