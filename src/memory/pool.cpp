#include "resident/memory/pool.hpp"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include "backend/runtime.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/error.hpp"
#include "resident/memory/ledger.hpp"
#include <nvtx_ranges.hpp>

namespace resident {
namespace {

// RESIDENT_POOL_CACHING=0 starts every pool with caching off (debugging leaks and out-of-bounds
// accesses that reuse would hide).
bool caching_from_environment() {
  static const bool on = detail::environment_switch("RESIDENT_POOL_CACHING", true);  // read (and said) once
  return on;
}

// A limit that set_pool_limit has not set: the environment's (RESIDENT_POOL_LIMIT) applies.
constexpr std::size_t limit_from_environment = 0;
// An explicitly lifted limit.
constexpr std::size_t no_limit = std::numeric_limits<std::size_t>::max();

struct environment_limit {
  std::optional<std::size_t> bytes;
  std::string error;  ///< the message when the variable holds no byte count
};

// RESIDENT_POOL_LIMIT, read once: every pool's starting limit.
const environment_limit& pool_limit_from_environment() {
  static const environment_limit e = [] {
    environment_limit r;
    const char* v = std::getenv("RESIDENT_POOL_LIMIT");
    if (!v || !*v || std::string(v) == "none") return r;
    r.bytes = detail::parse_bytes(v);
    if (!r.bytes || *r.bytes == 0) {
      r.bytes.reset();
      r.error = std::string("RESIDENT_POOL_LIMIT is '") + v +
                "': give a byte count above 0 such as 2GiB, 512MiB or 1000000 (or unset it for no limit)" +
                (std::string(v).find('.') != std::string::npos ? "; counts are whole: 1536MiB, not 1.5GiB" : "");
    }
    return r;
  }();
  return e;
}

struct pool_state {
  std::atomic<std::size_t> in_use{0}, peak{0};
  std::atomic<std::uint64_t> allocations{0}, hits{0}, outstanding{0};
  std::atomic<bool> caching{caching_from_environment()};
  std::atomic<std::size_t> last_reserved{0};  ///< the device pool's reservation after the last allocation
  std::atomic<std::size_t> limit{limit_from_environment};  ///< set_pool_limit's value, or the two markers

  std::optional<std::size_t> current_limit() const {
    const std::size_t l = limit;
    if (l == no_limit) return std::nullopt;
    if (l != limit_from_environment) return l;
    const environment_limit& e = pool_limit_from_environment();
    if (!e.error.empty()) RESIDENT_FAIL(e.error);
    return e.bytes;
  }
  // Adds bytes to the bytes in use unless that would cross the limit; returns the new figure, or 0
  // when refused. Claimed before allocating, so two threads cannot both pass the limit.
  std::size_t claim(std::size_t bytes, std::optional<std::size_t> cap) {
    std::size_t cur = in_use.load();
    do {
      if (cap && (bytes > *cap || cur > *cap - bytes)) return 0;
    } while (!in_use.compare_exchange_weak(cur, cur + bytes));
    // The limit read again after the claim, as set_pool_limit reads the bytes in use after storing it:
    // of a claim and a new limit made at once, one sees the other (both sequentially consistent).
    const std::optional<std::size_t> now = current_limit();
    if (now && cur + bytes > *now) {
      in_use -= bytes;
      return 0;
    }
    return cur + bytes;
  }
  void count(std::size_t now, std::size_t bytes, bool hit, device d) {
    std::size_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    ++allocations;
    if (hit) ++hits;
    ++outstanding;
    detail::record_allocation(d, hit, now, bytes);
  }
  void uncount(std::size_t bytes) {
    in_use -= bytes;
    --outstanding;
  }
};

pool_state& state(device d) {
  static auto* s = new detail::per_device<pool_state>;  // never destroyed
  return (*s)[d];
}

// No allocator hands out more than PTRDIFF_MAX bytes; a request above it is refused before any
// size arithmetic (rounding it up to the pool's granularity would wrap).
constexpr std::size_t largest_request = std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / 4096 * 4096;

enum class oom_reason { retried, beyond_any_allocation, limit };

[[noreturn]] void throw_oom(device d, std::size_t bytes, oom_reason why = oom_reason::retried,
                            std::optional<std::size_t> limit = std::nullopt) {
  std::size_t free_b = 0, total = 0, reserved = 0;
  std::optional<std::size_t> largest;
  {
    detail::runtime& rt = detail::backend_of(d);
    const detail::memory_figures m = rt.memory(d);
    free_b = m.free;
    total = m.total;
    reserved = rt.pool_reserved(d);
    largest = rt.largest_cached(d);
  }
  std::size_t used = state(d).in_use;
  auto figure = [](std::size_t b) { return detail::format_bytes(double(b)) + " (" + std::to_string(b) + " bytes)"; };
  std::string what;
  switch (why) {
    case oom_reason::retried:
      what = ". The pool was trimmed and the allocation retried once; free arrays or use smaller ones";
      break;
    case oom_reason::beyond_any_allocation:
      what = ". No allocation can exceed " + std::to_string(largest_request) +
             " bytes, so nothing was allocated; check the element count";
      break;
    case oom_reason::limit:
      what = ". It would take the pool past its limit of " + figure(*limit) +
             " (set_pool_limit or RESIDENT_POOL_LIMIT); the pool's cache was returned and the limit checked "
             "again. Free arrays, use smaller ones or raise the limit";
      break;
  }
  throw out_of_memory(
      "out of memory on " + d.name() + ": asked for " + figure(bytes) + "; the device has " +
          detail::format_bytes(double(free_b)) + " free of " + detail::format_bytes(double(total)) +
          "; the pool has " + figure(used) + " in use and " + figure(reserved) + " reserved" +
          (limit ? ", limit " + figure(*limit) : std::string(", no limit")) + ", largest free block " +
          (largest ? figure(*largest) : std::string("unknown (the CUDA pool does not say)")) + what,
      bytes, free_b, reserved, used, limit, largest);
}

std::size_t reserved_bytes(device d) {
  return detail::backend_of(d).pool_reserved(d);
}

}  // namespace

pool_statistics pool_stats(device d) {
  require(d);  // a device that cannot be used is named as such, not as the driver's failure to answer
  auto& s = state(d);
  pool_statistics r;
  r.bytes_in_use = s.in_use;
  r.peak_bytes = s.peak;
  r.allocations = s.allocations;
  r.pool_hits = s.hits;
  r.outstanding = s.outstanding;
  r.bytes_reserved = reserved_bytes(d);
  r.limit = s.current_limit();
  return r;
}

void set_pool_limit(device d, std::size_t bytes) {
  require(d);  // before the limit changes: a trim on a device that cannot be used would fail after it
  auto& s = state(d);
  RESIDENT_EXPECTS(bytes > 0, "set_pool_limit: a limit of 0 bytes would refuse every allocation; use "
                              "clear_pool_limit to lift the limit");
  const std::size_t before = s.limit.exchange(bytes);  // in force before the bytes in use are read (claim)
  const std::size_t used = s.in_use;
  if (used > bytes) {
    std::size_t mine = bytes;
    s.limit.compare_exchange_strong(mine, before);  // the limit before, unless another thread set one since
  }
  RESIDENT_EXPECTS(bytes >= used, "set_pool_limit: the pool on " + d.name() + " has " +
                                      detail::format_bytes(double(used)) + " (" + std::to_string(used) +
                                      " bytes) in use, above the limit of " + std::to_string(bytes) +
                                      " bytes; free arrays first or choose a limit of at least that");
  if (reserved_bytes(d) > bytes) trim_pool(d);
}

void clear_pool_limit(device d) { state(d).limit = no_limit; }

std::optional<std::size_t> pool_limit(device d) { return state(d).current_limit(); }

void reset_pool_peak(device d) {
  auto& s = state(d);
  const std::size_t now = s.in_use;
  s.peak = now;
  detail::reset_ledger_peak(d, now);
}

void trim_pool(device d) {
  require(d);
  detail::runtime& rt = detail::backend_of(d);
  rt.pool_trim(default_stream(d));
  // The next allocation that takes memory again is growth, not a hit.
  state(d).last_reserved = rt.pool_reserved(d);
}

bool pool_caching(device d) { return state(d).caching; }

void set_pool_caching(device d, bool enabled) {
  require(d);  // before the switch: its trim would fail after it
  state(d).caching = enabled;
  if (!enabled) trim_pool(d);
}

namespace detail {

std::optional<std::size_t> parse_bytes(std::string_view t) {
  std::size_t i = 0, v = 0;
  if (t.empty() || t[0] < '0' || t[0] > '9') return std::nullopt;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
    const std::size_t digit = std::size_t(t[i] - '0');
    if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i < t.size() && t[i] == ' ') ++i;
  const std::string_view unit = t.substr(i);
  static constexpr std::pair<std::string_view, std::size_t> units[] = {
      {"", 1},         {"B", 1},
      {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
      {"PiB", 1ull << 50}, {"kB", 1000ull},     {"KB", 1000ull},     {"MB", 1000000ull},
      {"GB", 1000000000ull}, {"TB", 1000000000000ull}, {"PB", 1000000000000000ull}};
  for (auto [name, scale] : units) {
    if (unit != name) continue;
    if (v > std::numeric_limits<std::size_t>::max() / scale) return std::nullopt;
    return v * scale;
  }
  return std::nullopt;
}

void* pool_allocate(std::size_t bytes, stream_ref s) {
  if (bytes == 0) return nullptr;
  nvtx::named_range<"pool allocate"> range(bytes);
  device d = s.device();
  runtime& rt = backend_of(d);
  auto& st = state(d);
  const std::optional<std::size_t> limit = st.current_limit();
  // With the limit in force, which the message names.
  if (bytes > largest_request) throw_oom(d, bytes, oom_reason::beyond_any_allocation, limit);
  std::size_t now = st.claim(bytes, limit);
  if (now == 0) {
    // Return the cache, then look again: frees made meanwhile count.
    rt.pool_trim(s);
    now = st.claim(bytes, limit);
    if (now == 0) throw_oom(d, bytes, oom_reason::limit, limit);
  }
  // The bytes are claimed: give them back on every way out but success.
  auto refuse = [&](oom_reason why) {
    st.in_use -= bytes;
    throw_oom(d, bytes, why, limit);
  };
  // Under a limit, the pool returns its cache before growing past it.
  const bool over = limit && reserved_bytes(d) > *limit - bytes;
  pool_block b;
  try {
    b = rt.allocate(bytes, s, over);
  } catch (...) {
    st.in_use -= bytes;
    throw;
  }
  if (!b.p) refuse(oom_reason::retried);
  // A pool that does not say whether it had the block: a hit when it did not have to grow past what it
  // held after the last allocation (frees keep memory in the pool, so only growth or a trim moves the
  // figure). One query per allocation; none while s is being captured into a graph, where the query
  // is refused (the graph's replays allocate).
  bool hit = true;
  if (b.cached)
    hit = *b.cached;
  else if (!rt.capturing(s)) {
    const std::size_t reserved = rt.pool_reserved(d);
    hit = reserved <= st.last_reserved.exchange(reserved);
  }
  st.count(now, bytes, hit, d);
  return b.p;
}

void pool_keepalive() noexcept {
  (void)state(device::cpu());
  (void)backend_of(device::cpu());  // and with it the CPU's pool
}

void pool_deallocate(void* p, std::size_t bytes, stream_ref s) noexcept {
  if (!p) return;
  device d = s.device();
  auto& st = state(d);
  st.uncount(bytes);
  try {
    backend_of(d).deallocate(p, bytes, s, st.caching);
  } catch (const std::exception& e) {
    // Destructors must not throw; a failure here means the context is already gone (driver shutdown
    // or a lost device), and the memory goes with it.
    std::cerr << "resident: freeing " << format_bytes(double(bytes)) << " on " << d.name()
              << " failed: " << e.what() << "\n";
  }
}

}  // namespace detail
}  // namespace resident
