#include "resident/memory/ledger.hpp"

#include <array>
#include <charconv>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "resident/detail/per_device.hpp"
#include "resident/detail/thread_context.hpp"
#include "resident/error.hpp"
#include "resident/insight/detail/call_scope.hpp"

namespace resident {
namespace {

struct atomic_counts {
  std::atomic<std::uint64_t> h2d_bytes{0}, h2d_copies{0}, d2h_bytes{0}, d2h_copies{0};
  std::atomic<std::uint64_t> d2d_bytes{0}, d2d_copies{0}, peer_bytes{0}, peer_copies{0};
  std::atomic<std::uint64_t> kernels{0}, allocations{0}, pool_hits{0};
  std::atomic<std::uint64_t> peak_bytes{0};
  std::atomic<std::uint64_t> streamed_h2d_bytes{0}, streamed_d2h_bytes{0}, stream_chunks{0};
  std::atomic<bool> used{false};
};

detail::per_device<atomic_counts>& table() {
  static detail::per_device<atomic_counts> t;
  return t;
}
atomic_counts& slot(device d) {
  auto& c = table()[d];
  c.used.store(true, std::memory_order_relaxed);
  return c;
}
// The calling thread's own counts (ledger_scope::this_thread): written and read by that thread alone.
// Trivially destructible, so counts made while the thread exits are still safe.
ledger_counts& mine(device d) {
  thread_local detail::per_device<ledger_counts> t;
  return t[d];
}
ledger_counts read(const atomic_counts& a) {
  ledger_counts c;
  c.h2d_bytes = a.h2d_bytes;
  c.h2d_copies = a.h2d_copies;
  c.d2h_bytes = a.d2h_bytes;
  c.d2h_copies = a.d2h_copies;
  c.d2d_bytes = a.d2d_bytes;
  c.d2d_copies = a.d2d_copies;
  c.peer_bytes = a.peer_bytes;
  c.peer_copies = a.peer_copies;
  c.kernels = a.kernels;
  c.allocations = a.allocations;
  c.pool_hits = a.pool_hits;
  c.peak_bytes = a.peak_bytes;
  c.streamed_h2d_bytes = a.streamed_h2d_bytes;
  c.streamed_d2h_bytes = a.streamed_d2h_bytes;
  c.stream_chunks = a.stream_chunks;
  return c;
}


const char* plural(std::uint64_t n, const char* one, const char* many) { return n == 1 ? one : many; }

}  // namespace

ledger_counts ledger_counts::operator-(const ledger_counts& b) const {
  ledger_counts r;
  r.h2d_bytes = h2d_bytes - b.h2d_bytes;
  r.h2d_copies = h2d_copies - b.h2d_copies;
  r.d2h_bytes = d2h_bytes - b.d2h_bytes;
  r.d2h_copies = d2h_copies - b.d2h_copies;
  r.d2d_bytes = d2d_bytes - b.d2d_bytes;
  r.d2d_copies = d2d_copies - b.d2d_copies;
  r.peer_bytes = peer_bytes - b.peer_bytes;
  r.peer_copies = peer_copies - b.peer_copies;
  r.kernels = kernels - b.kernels;
  r.allocations = allocations - b.allocations;
  r.pool_hits = pool_hits - b.pool_hits;
  r.peak_bytes = peak_bytes;  // a level: the later value stands
  r.streamed_h2d_bytes = streamed_h2d_bytes - b.streamed_h2d_bytes;
  r.streamed_d2h_bytes = streamed_d2h_bytes - b.streamed_d2h_bytes;
  r.stream_chunks = stream_chunks - b.stream_chunks;
  return r;
}

std::string ledger_counts::summary() const {
  std::ostringstream os;
  os << "H2D " << h2d_copies << plural(h2d_copies, " copy ", " copies ") << detail::format_bytes(double(h2d_bytes))
     << ", D2H " << d2h_copies << plural(d2h_copies, " copy ", " copies ") << detail::format_bytes(double(d2h_bytes))
     << ", D2D " << d2d_copies << plural(d2d_copies, " copy ", " copies ") << detail::format_bytes(double(d2d_bytes));
  if (peer_copies)
    os << ", peer " << peer_copies << plural(peer_copies, " copy ", " copies ") << detail::format_bytes(double(peer_bytes));
  os << ", kernels " << kernels << ", allocations " << allocations << " (" << pool_hits
     << " from the pool), peak " << detail::format_bytes(double(peak_bytes));
  if (stream_chunks > 0)
    os << ", streamed " << stream_chunks << plural(stream_chunks, " chunk (H2D ", " chunks (H2D ")
       << detail::format_bytes(double(streamed_h2d_bytes)) << ", D2H " << detail::format_bytes(double(streamed_d2h_bytes))
       << ")";
  return os.str();
}

std::string ledger_counts::json() const {
  std::ostringstream os;
  os << "{\"h2d_bytes\":" << h2d_bytes << ",\"h2d_copies\":" << h2d_copies << ",\"d2h_bytes\":" << d2h_bytes
     << ",\"d2h_copies\":" << d2h_copies << ",\"d2d_bytes\":" << d2d_bytes << ",\"d2d_copies\":" << d2d_copies
     << ",\"peer_bytes\":" << peer_bytes << ",\"peer_copies\":" << peer_copies
     << ",\"kernels\":" << kernels << ",\"allocations\":" << allocations << ",\"pool_hits\":" << pool_hits
     << ",\"peak_bytes\":" << peak_bytes << ",\"streamed_h2d_bytes\":" << streamed_h2d_bytes
     << ",\"streamed_d2h_bytes\":" << streamed_d2h_bytes << ",\"stream_chunks\":" << stream_chunks << "}";
  return os.str();
}

const ledger_counts& ledger_snapshot::of(device d) const {
  static const ledger_counts zero{};
  for (auto& [dev, c] : devices)
    if (dev == d) return c;
  return zero;
}

std::string ledger_snapshot::json() const {
  std::string s = "{";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ",";
    s += "\"" + devices[i].first.name() + "\":" + devices[i].second.json();
  }
  return s + "}";
}

std::ostream& operator<<(std::ostream& os, const ledger_counts& c) { return os << c.summary() << "\n"; }

std::ostream& operator<<(std::ostream& os, const ledger_snapshot& s) {
  if (s.devices.empty()) return os << "ledger: nothing recorded\n";
  for (auto& [d, c] : s.devices) os << "ledger " << d.name() << ": " << c.summary() << "\n";
  return os;
}

// Read without slot(): reading a device's counts does not make it a used device of the snapshot.
ledger_counts ledger(device d, ledger_scope who) {
  auto& counts = table()[d];  // an index beyond the table first: invalid_argument
  require(d);                 // then a device this machine lacks: device_unavailable, never zeros
  ledger_counts c = read(counts);
  if (who == ledger_scope::process) return c;
  ledger_counts t = mine(d);
  t.peak_bytes = c.peak_bytes;
  return t;
}

ledger_snapshot ledger() {
  ledger_snapshot s;
  auto& t = table().all();
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!t[i].used.load(std::memory_order_relaxed)) continue;
    device d = i == 0 ? device::cpu() : device::cuda(static_cast<int>(i - 1));
    s.devices.emplace_back(d, read(t[i]));
  }
  return s;
}

scoped_ledger::scoped_ledger(device d, ledger_scope who)
    : device_(d), who_(who), start_(ledger(d, who)), owner_(std::this_thread::get_id()) {}
ledger_counts scoped_ledger::delta() const {
  if (who_ == ledger_scope::this_thread && owner_ != std::this_thread::get_id())
    RESIDENT_FAIL("scoped_ledger: a ledger of ledger_scope::this_thread counts the thread that made it; read "
                  "delta() on that thread, or make it with ledger_scope::process to count every thread");
  return ledger(device_, who_) - start_;
}

namespace detail {
struct policy_scope {
  explicit policy_scope(transfer_policy p) : policy(p) {}
  const transfer_policy policy;
  std::atomic<bool> closed{false};
};
}  // namespace detail

// The calling thread's open scopes, innermost last; closed ones are dropped on the next look. A CPU
// loop's team threads take their caller's (detail/thread_context.hpp).
std::vector<std::shared_ptr<detail::policy_scope>>& detail::policy_scopes_here() noexcept {
  thread_local std::vector<std::shared_ptr<detail::policy_scope>> scopes;
  return scopes;
}

namespace {
std::vector<std::shared_ptr<detail::policy_scope>>& open_scopes() { return detail::policy_scopes_here(); }
const detail::policy_scope* innermost_scope() {
  auto& v = open_scopes();
  std::erase_if(v, [](const auto& s) { return s->closed.load(std::memory_order_acquire); });
  return v.empty() ? nullptr : v.back().get();
}

// A value cast from an int that is none of the three would let every transfer through unseen.
transfer_policy checked(transfer_policy p) {
  RESIDENT_EXPECTS(p == transfer_policy::allow || p == transfer_policy::log || p == transfer_policy::forbid,
                   "scoped_transfer_policy: policy " + std::to_string(static_cast<int>(p)) +
                       " is none of allow, log or forbid");
  return p;
}
}  // namespace

// A refused policy throws before the scope is opened.
scoped_transfer_policy::scoped_transfer_policy(transfer_policy p)
    : scope_(std::make_shared<detail::policy_scope>(checked(p))) {
  innermost_scope();  // drops the closed ones, so the list holds the open scopes only
  open_scopes().push_back(scope_);
}
// Only marked closed: restoring a saved "previous" policy instead would leave the thread in a closed
// scope's policy when scopes close out of order, and another thread cannot touch this thread's list.
scoped_transfer_policy::~scoped_transfer_policy() { scope_->closed.store(true, std::memory_order_release); }

transfer_policy default_transfer_policy() {
  const char* v = std::getenv("RESIDENT_TRANSFER_POLICY");
  if (!v || !*v) return transfer_policy::allow;
  const std::string_view s(v);
  if (s == "allow") return transfer_policy::allow;
  if (s == "log") return transfer_policy::log;
  if (s == "forbid") return transfer_policy::forbid;
  RESIDENT_FAIL("RESIDENT_TRANSFER_POLICY is '" + std::string(s) +
                         "': use allow, log or forbid (or leave it unset for allow)");
}

transfer_policy current_transfer_policy() {
  const detail::policy_scope* s = innermost_scope();
  return s ? s->policy : default_transfer_policy();
}

namespace detail {

const transfer_policy* scoped_transfer_policy_now() {
  const policy_scope* s = innermost_scope();
  return s ? &s->policy : nullptr;
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return decimal_text(b, u == 0 ? 0 : 1) + " " + units[u];
}

std::string decimal_text(double v, int digits) {
  char buf[400];  // a fixed double has up to 309 digits before the point
  const auto r = digits < 0 ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6)
                            : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, digits);
  return std::string(buf, r.ec == std::errc() ? r.ptr : buf);
}

void record_transfer(device d, direction dir, std::uint64_t bytes) {
  auto& c = slot(d);
  if (dir == direction::h2d || dir == direction::d2h) {
    const char* name = dir == direction::h2d ? "host-to-device" : "device-to-host";
    const transfer_policy p = current_transfer_policy();
    // The user's call that moved the bytes: its file and line (the innermost call scope's).
    std::string at;
    if (const call_scope* s = call_scope::current(); s && s->site_line() != 0) {
      std::string_view f = s->site_file();
      if (auto slash = f.find_last_of('/'); slash != std::string_view::npos) f.remove_prefix(slash + 1);
      at = " by " + std::string(s->name()) + " at " + std::string(f) + ":" + std::to_string(s->site_line());
    }
    if (p == transfer_policy::forbid) {
      RESIDENT_FAIL(std::string("a ") + name + " transfer of " + format_bytes(double(bytes)) +
                               " on " + d.name() + at + " was attempted while the transfer policy is forbid (" +
                               (innermost_scope() ? "set by a scoped_transfer_policy on this thread"
                                         : "the process default, from RESIDENT_TRANSFER_POLICY") +
                               "); move the transfer out of that scope or relax the policy", transfer_forbidden);
    }
    if (p == transfer_policy::log)
      std::cerr << "resident: " << name << " transfer of " << format_bytes(double(bytes)) << " on " << d.name()
                << " (" << bytes << " bytes)" << at << "\n";
  }
  call_scope::note_transfer(d, dir == direction::h2d ? 0 : dir == direction::d2h ? 1 : 2, bytes);
  ledger_counts& t = mine(d);
  switch (dir) {
    case direction::h2d:
      c.h2d_bytes += bytes;
      ++c.h2d_copies;
      t.h2d_bytes += bytes;
      ++t.h2d_copies;
      break;
    case direction::d2h:
      c.d2h_bytes += bytes;
      ++c.d2h_copies;
      t.d2h_bytes += bytes;
      ++t.d2h_copies;
      break;
    case direction::d2d:
      c.d2d_bytes += bytes;
      ++c.d2d_copies;
      t.d2d_bytes += bytes;
      ++t.d2d_copies;
      break;
    case direction::peer:
      c.peer_bytes += bytes;
      ++c.peer_copies;
      t.peer_bytes += bytes;
      ++t.peer_copies;
      break;
  }
}

void record_kernel(device d, std::uint64_t count) {
  slot(d).kernels += count;
  mine(d).kernels += count;
  call_scope::note_kernels(d, count);
}
void forget_kernels(device d, std::uint64_t count) {
  slot(d).kernels -= count;
  mine(d).kernels -= count;
}

void record_stream_chunk(device d, std::uint64_t h2d_bytes, std::uint64_t d2h_bytes) {
  auto& c = slot(d);
  c.streamed_h2d_bytes += h2d_bytes;
  c.streamed_d2h_bytes += d2h_bytes;
  ++c.stream_chunks;
  ledger_counts& t = mine(d);
  t.streamed_h2d_bytes += h2d_bytes;
  t.streamed_d2h_bytes += d2h_bytes;
  ++t.stream_chunks;
}

void reset_ledger_peak(device d, std::uint64_t bytes_in_use) { slot(d).peak_bytes = bytes_in_use; }

void record_allocation(device d, bool pool_hit, std::uint64_t bytes_in_use, std::uint64_t bytes) {
  call_scope::note_allocation(d, bytes, bytes_in_use);
  auto& c = slot(d);
  ++c.allocations;
  if (pool_hit) ++c.pool_hits;
  ledger_counts& t = mine(d);
  ++t.allocations;
  if (pool_hit) ++t.pool_hits;
  std::uint64_t peak = c.peak_bytes.load();
  while (bytes_in_use > peak && !c.peak_bytes.compare_exchange_weak(peak, bytes_in_use)) {
  }
}

}  // namespace detail
}  // namespace resident
