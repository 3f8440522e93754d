// Collection: call scopes, per-site figures, timing events, the copy rate per device, the profile
// scope and RESIDENT_PROFILE's report at exit.
#include "resident/insight/profile.hpp"

#include <nvtx_ranges.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend/runtime.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/detail/fork.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/device/event.hpp"
#include "resident/error.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/memory/transfer.hpp"

namespace resident {
namespace {

struct site_key {
  std::string file;
  unsigned line = 0;
  std::string name;
  bool transfer = false;
  int dev = -1;  // -1: the CPU, else the CUDA index
  auto operator<=>(const site_key&) const = default;
};
int dev_code(device d) { return d.is_cpu() ? -1 : d.index(); }
device dev_of(int code) { return code < 0 ? device::cpu() : device::cuda(code); }

// Two events around one call on a GPU, reused once their time has been read.
struct timer {
  event start, end;
  site_key key;
  std::uint64_t weight = 1;  // the calls its time counts for (detail::profile_tuning)
  explicit timer(device d) : start(d), end(d) {}
};

using site_table = std::map<site_key, profile_site>;

// What an open profile subtracts and what it cannot: the figures when it began, and per site the fewest
// and most bytes one call moved since (a least or greatest value does not subtract).
struct snapshot {
  site_table before;
  std::map<site_key, std::pair<std::uint64_t, std::uint64_t>> call_bytes;
};

// Everything collected, for the whole process. Never destroyed: the report at exit and calls made
// from static destructors may still use it.
struct collector {
  std::mutex m;
  site_table sites;
  std::deque<timer> timers;      // stable addresses; indices handed to scopes
  std::vector<int> free_timers;  // indices of timers not in use
  std::vector<int> pending;      // recorded, time not read yet, oldest first
  std::map<std::uint64_t, snapshot> snapshots;  // per open profile
  std::uint64_t next_snapshot = 1;
  bool at_exit_registered = false;
  std::set<std::string> files;  // the call sites' file names, interned: t_last points into it
};
collector& the() {
  static auto* c = new collector;
  return *c;
}
// Held around the tables and events only (no other lock of the library taken under it): a leaf.
const int collector_guarded = detail::guard_across_fork(the().m, nullptr, true);
// NVTX's first use initializes it under a static's guard: done when the library loads, so that a
// fork() can never come while another thread holds that guard (the child would wait on it for good).
const bool nvtx_ready = detail::nvtx::listening();

// Whether calls are collected, in one word that every call reads once: bit 0, RESIDENT_PROFILE has
// been read; bit 1, it asks for a profile; the bits above, the number of open rs::profile scopes. The
// common case, nothing collecting, is the value `env_read` alone. Constant-initialized: calls made
// from other static initializers see it.
constexpr unsigned env_read = 1, env_on = 2, one_profile = 4;
std::atomic<unsigned> g_collecting{0};

// RESIDENT_PROFILE as a switch: "off" or "false" must not turn profiling on, as any value but "0" once
// did. A value that reads as neither profiles (whoever set it most likely wanted a report: nothing is
// lost) and is named on stderr, once, since no call can throw for it.
bool profile_requested(const char* v) {
  if (!v || !*v) return false;
  std::string s(v);
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "0" || s == "off" || s == "false" || s == "no") return false;
  if (s == "1" || s == "on" || s == "true" || s == "yes") return true;
  std::fprintf(stderr,
               "resident: RESIDENT_PROFILE is '%s': use 1 to profile the whole program or 0 not to (also on/off, "
               "true/false, yes/no); profiling as for 1\n",
               v);
  return true;
}

unsigned read_environment() {
  static const bool on = profile_requested(std::getenv("RESIDENT_PROFILE"));
  return g_collecting.fetch_or(env_read | (on ? env_on : 0u), std::memory_order_relaxed) | env_read |
         (on ? env_on : 0u);
}

bool from_environment() {
  unsigned v = g_collecting.load(std::memory_order_relaxed);
  if (!(v & env_read)) v = read_environment();
  return v & env_on;
}

thread_local detail::call_scope* t_innermost = nullptr;
thread_local const detail::foreign_site* t_foreign = nullptr;

// The last single-map call closed on this thread, for the "could fuse" advice.
struct last_map {
  const char* file = nullptr;  // interned in the collector (a foreign site's file lives only as long as its
                               // call), so this thread_local needs no destructor
  unsigned line = 0;
  const void* output = nullptr;
  int dev = 0;
};
thread_local last_map t_last{};

profile_site& row(site_table& t, const site_key& k) {
  auto [it, fresh] = t.try_emplace(k);
  if (fresh) {
    it->second.file = k.file;
    it->second.line = k.line;
    it->second.name = k.name;
    it->second.transfer = k.transfer;
    it->second.dev = dev_of(k.dev);
  }
  return it->second;
}

// Reads the time of the oldest `count` pending timers (synchronizing with their end events) into
// their sites. Called with the lock held.
void resolve(collector& c, std::size_t count) {
  count = std::min(count, c.pending.size());
  for (std::size_t i = 0; i < count; ++i) {
    timer& t = c.timers[std::size_t(c.pending[i])];
    try {
      profile_site& r = row(c.sites, t.key);
      r.seconds += elapsed_ms(t.start, t.end) / 1e3 * double(t.weight);
      r.timed_calls += t.weight;
    } catch (...) {
      // The device is gone (a fault, or the runtime shut down at exit): the call stays untimed.
    }
    c.free_timers.push_back(c.pending[i]);
  }
  c.pending.erase(c.pending.begin(), c.pending.begin() + std::ptrdiff_t(count));
}

void write_report_at_exit();

const site_key outside_key(device d) { return {"", 0, "(outside any call)", false, dev_code(d)}; }

}  // namespace

bool profiling() {
  unsigned v = g_collecting.load(std::memory_order_relaxed);
  if (v == env_read) return false;  // the path of every call while nothing collects: one relaxed load
  if (!(v & env_read)) v = read_environment();
  return v != env_read;
}

namespace detail {

call_scope::call_scope(std::string_view name, stream_ref s, const call_facts& facts, call_kind kind,
                       resident::source_location where) noexcept
    : name_(name), where_(where), kind_(kind), facts_(facts), device_(s.device()), stream_(s.native()),
      outer_(t_innermost), foreign_(t_innermost ? nullptr : t_foreign) {
  // The payload: the bytes a transfer moves, or those a computation reads and writes. Without a tool
  // attached this is one load and a branch (nvtx::push tests NVTX's entry point first).
  nvtx::push(name, kind == call_kind::transfer ? facts.bytes_read : facts.bytes_read + facts.bytes_written);
  if (outer_ && outer_->where_.line() == where.line() && outer_->where_.column() == where.column() &&
      std::strcmp(outer_->where_.file_name(), where.file_name()) == 0) {
    merged_ = true;
    return;
  }
  t_innermost = this;
  if (!profiling()) return;
  collecting_ = true;
  unwinding_ = std::uncaught_exceptions();
  collector& c = the();
  // Queued work is timed by two events on its stream; the rest, done when issued, on the host clock.
  if (runtime& rt = backend_of(device_); rt.queued()) {
    try {
      capturing_ = rt.capturing(s);
      if (!capturing_) {
        std::lock_guard lock(c.m);
        if (!c.at_exit_registered && from_environment()) {
          // Registered after the CUDA runtime started, so it runs before the runtime's own teardown.
          std::atexit(write_report_at_exit);
          c.at_exit_registered = true;
        }
        // Sampled past the site's first calls (profile_tuning): an untimed call records no events. The
        // calls count from the newest open profile's start, so each profile times a site's first calls.
        const site_key key{site_file(), site_line(), std::string(name_), kind_ == call_kind::transfer,
                           dev_code(device_)};
        const auto now = c.sites.find(key);
        std::uint64_t seen = now == c.sites.end() ? 0 : now->second.calls;
        if (!c.snapshots.empty()) {
          const site_table& before = c.snapshots.rbegin()->second.before;
          if (const auto b = before.find(key); b != before.end()) seen -= std::min(seen, b->second.calls);
        }
        weight_ = profile_tuning::weight(seen);
        if (weight_ == 0) return;  // timed_ stays false: no host clock either
        int i = -1;
        for (std::size_t k = 0; k < c.free_timers.size(); ++k)
          if (c.timers[std::size_t(c.free_timers[k])].start.native() &&
              dev_code(device_) == c.timers[std::size_t(c.free_timers[k])].key.dev) {
            i = c.free_timers[k];
            c.free_timers.erase(c.free_timers.begin() + std::ptrdiff_t(k));
            break;
          }
        if (i < 0) {
          c.timers.emplace_back(device_);
          i = int(c.timers.size() - 1);
        }
        c.timers[std::size_t(i)].key.dev = dev_code(device_);
        c.timers[std::size_t(i)].start.record(s);
        timer_ = i;
        timed_ = true;
      }
    } catch (...) {
      timed_ = false;  // untimed rather than failing the user's call
    }
  } else {
    if (from_environment()) {
      std::lock_guard lock(c.m);
      if (!c.at_exit_registered) {
        std::atexit(write_report_at_exit);
        c.at_exit_registered = true;
      }
    }
    timed_ = true;
    start_ = std::chrono::steady_clock::now();
  }
}

call_scope::~call_scope() {
  nvtx::pop();
  if (merged_) return;
  t_innermost = outer_;
  if (!collecting_) return;
  const bool failed = std::uncaught_exceptions() > unwinding_;
  collector& c = the();
  const auto cpu_end = std::chrono::steady_clock::now();
  site_key k{site_file(), site_line(), std::string(name_), kind_ == call_kind::transfer, dev_code(device_)};
  std::lock_guard lock(c.m);
  if (timer_ >= 0) {
    timer& t = c.timers[std::size_t(timer_)];
    bool recorded = false;
    if (!failed) {
      try {
        t.end.record(stream_ref(device_, stream_));
        recorded = true;
      } catch (...) {
      }
    }
    if (recorded) {
      t.key = k;
      t.weight = weight_;
      c.pending.push_back(timer_);
      if (c.pending.size() > 512) resolve(c, 256);
    } else {
      c.free_timers.push_back(timer_);
    }
  }
  if (failed) {
    t_last = {};
    return;  // a call that threw is not a measurement
  }
  profile_site& r = row(c.sites, k);
  const std::uint64_t moved = facts_.bytes_read + facts_.bytes_written;
  r.min_call_bytes = r.calls == 0 ? moved : std::min(r.min_call_bytes, moved);
  r.max_call_bytes = std::max(r.max_call_bytes, moved);
  for (auto& [id, snap] : c.snapshots) {
    auto [b, fresh] = snap.call_bytes.try_emplace(k, moved, moved);
    if (!fresh) b->second = {std::min(b->second.first, moved), std::max(b->second.second, moved)};
  }
  ++r.calls;
  r.stages = facts_.stages;
  r.kernels += kernels_;
  r.bytes_read += facts_.bytes_read;
  r.bytes_written += facts_.bytes_written;
  r.elements += facts_.elements;
  r.h2d_bytes += h2d_;
  r.d2h_bytes += d2h_;
  r.d2d_bytes += d2d_;
  r.allocations += allocations_;
  r.allocated_bytes += allocated_;
  // Memory in use rose past where this site's previous allocating call left it: what it made stays alive.
  if (allocations_ > 0) {
    if (r.bytes_in_use == 0 || in_use_ > r.bytes_in_use) ++r.calls_pool_grew;
    r.bytes_in_use = in_use_;
  }
  if (shaped_) {  // the shape of this call's lowest-occupancy launch: the site's latest
    r.shaped_launches += shaped_;
    r.grid_blocks = shape_.grid_blocks;
    r.block_threads = shape_.block_threads;
    r.blocks_per_sm = shape_.blocks_per_sm;
    r.workers = shape_.workers;
    r.occupancy = shape_.occupancy;
  }
  if (timer_ < 0 && timed_) {
    r.seconds += std::chrono::duration<double>(cpu_end - start_).count();
    ++r.timed_calls;
  }
  // Two single-map calls in a row, the second mapping what the first wrote, from the next lines.
  if (kind_ == call_kind::compute && facts_.stages == 1 && facts_.input) {
    const last_map& p = t_last;
    if (p.file && p.output == facts_.input && p.dev == k.dev && std::strcmp(p.file, site_file()) == 0 &&
        site_line() > p.line && site_line() - p.line <= 3) {
      ++r.fusable_calls;
      r.fusable_with_line = p.line;
    }
  }
  if (kind_ == call_kind::compute && facts_.stages == 1 && facts_.output)
    t_last = {c.files.insert(site_file()).first->c_str(), site_line(), facts_.output, k.dev};
  else
    t_last = {};
}

const call_scope* call_scope::current() noexcept { return t_innermost; }

const char* call_scope::site_file() const noexcept { return foreign_ ? foreign_->file.c_str() : where_.file_name(); }
unsigned call_scope::site_line() const noexcept { return foreign_ ? foreign_->line : where_.line(); }

foreign_site::foreign_site(std::string f, unsigned l) noexcept : file(std::move(f)), line(l), outer(t_foreign) {
  t_foreign = this;
}
foreign_site::~foreign_site() { t_foreign = outer; }

void call_scope::note_kernels(device d, std::uint64_t n) noexcept {
  if (call_scope* s = t_innermost) {
    if (!s->capturing_) s->kernels_ += n;  // captured kernels count when a replay runs them
    return;
  }
  if (!profiling()) return;
  collector& c = the();
  std::lock_guard lock(c.m);
  row(c.sites, outside_key(d)).kernels += n;
}

void call_scope::note_transfer(device d, int dir, std::uint64_t bytes) noexcept {
  if (call_scope* s = t_innermost) {
    (dir == 0 ? s->h2d_ : dir == 1 ? s->d2h_ : s->d2d_) += bytes;
    return;
  }
  if (!profiling()) return;
  collector& c = the();
  std::lock_guard lock(c.m);
  profile_site& r = row(c.sites, outside_key(d));
  (dir == 0 ? r.h2d_bytes : dir == 1 ? r.d2h_bytes : r.d2d_bytes) += bytes;
}

void call_scope::note_allocation(device d, std::uint64_t bytes, std::uint64_t bytes_in_use) noexcept {
  if (call_scope* s = t_innermost) {
    ++s->allocations_;
    s->allocated_ += bytes;
    s->in_use_ = bytes_in_use;
    return;
  }
  if (!profiling()) return;
  collector& c = the();
  std::lock_guard lock(c.m);
  profile_site& r = row(c.sites, outside_key(d));
  ++r.allocations;
  r.allocated_bytes += bytes;
}

void call_scope::note_launch(const launch_shape& shape) noexcept {
  call_scope* s = t_innermost;
  if (!s || !s->collecting_ || s->kind_ != call_kind::compute) return;
  if (s->shaped_ == 0 || shape.occupancy < s->shape_.occupancy) s->shape_ = shape;
  ++s->shaped_;
}

launch_shape gpu_launch_shape(device d, std::uint64_t grid_blocks, std::uint64_t block_threads,
                              int blocks_per_sm) noexcept {
  launch_shape r{grid_blocks, block_threads, blocks_per_sm, 0, 0};
  try {
    const device_properties p = properties(d);
    const std::uint64_t sms = std::uint64_t(std::max(p.multiprocessors, 1));
    const std::uint64_t warp = std::uint64_t(std::max(p.warp_size, 1));
    const std::uint64_t per_sm = std::uint64_t(std::max(blocks_per_sm, 0));
    // The grid spreads over the SMs; each holds at most per_sm of its blocks at once.
    const std::uint64_t active = std::min(per_sm, (grid_blocks + sms - 1) / sms);
    const std::uint64_t warps = (block_threads + warp - 1) / warp;
    r.workers = std::min(grid_blocks, per_sm * sms) * block_threads;
    r.occupancy = double(active * warps * warp) / double(std::max(p.max_threads_per_multiprocessor, 1));
  } catch (...) {
    // The device does not answer: the shape without its occupancy.
  }
  return r;
}

nvtx_scope::nvtx_scope(const char* message, std::uint64_t bytes) noexcept { nvtx::push(message, bytes); }
nvtx_scope::~nvtx_scope() { nvtx::pop(); }

const char* nvtx_state() noexcept {
  if constexpr (!nvtx::enabled) return "absent";
  return nvtx::tool_attached() ? "tool attached" : "no tool attached";
}

}  // namespace detail

namespace {

// Figures of `now` minus those of `since.before`, site by site (sites without calls since are dropped);
// the per-call byte range that of the calls since.
std::vector<profile_site> difference(const site_table& now, const snapshot& since) {
  const site_table& before = since.before;
  std::vector<profile_site> out;
  for (auto& [k, r] : now) {
    profile_site d = r;
    if (auto it = since.call_bytes.find(k); it != since.call_bytes.end())
      std::tie(d.min_call_bytes, d.max_call_bytes) = it->second;
    else if (before.count(k))
      d.min_call_bytes = d.max_call_bytes = 0;  // no call since
    if (auto it = before.find(k); it != before.end()) {
      const profile_site& b = it->second;
      d.calls -= b.calls;
      d.timed_calls -= b.timed_calls;
      d.kernels -= b.kernels;
      d.seconds -= b.seconds;
      d.bytes_read -= b.bytes_read;
      d.bytes_written -= b.bytes_written;
      d.elements -= b.elements;
      d.h2d_bytes -= b.h2d_bytes;
      d.d2h_bytes -= b.d2h_bytes;
      d.d2d_bytes -= b.d2d_bytes;
      d.allocations -= b.allocations;
      d.allocated_bytes -= b.allocated_bytes;
      d.calls_pool_grew -= b.calls_pool_grew;
      d.fusable_calls -= b.fusable_calls;
      d.shaped_launches -= b.shaped_launches;
      if (d.shaped_launches == 0) {  // no launch in this profile's time: no shape to show
        d.grid_blocks = d.block_threads = d.workers = 0;
        d.blocks_per_sm = 0;
        d.occupancy = 0;
      }
    }
    if (d.calls || d.kernels || d.h2d_bytes || d.d2h_bytes || d.d2d_bytes || d.allocations) out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(), [](const profile_site& a, const profile_site& b) {
    return a.seconds > b.seconds;
  });
  return out;
}

profile_report make_report(const snapshot& before) {
  collector& c = the();
  profile_report rep;
  {
    std::lock_guard lock(c.m);
    resolve(c, c.pending.size());
    rep.sites = difference(c.sites, before);
  }
  for (const profile_site& s : rep.sites) {
    bool known = false;
    for (auto& [d, rate] : rep.copy_rates) known |= d == s.dev;
    if (known) continue;
    double rate = 0;
    try {
      rate = copy_rate(s.dev);
    } catch (...) {
      // The device cannot be measured now (gone, or the runtime is shutting down): no rate, and no
      // advice that needs one.
    }
    rep.copy_rates.emplace_back(s.dev, rate);
  }
  rep.advice = advise(rep.sites, rep.copy_rates);
  return rep;
}

void write_report_at_exit() {
  try {
    const profile_report r = make_report({});
    std::cerr << r;
    if (const char* path = std::getenv("RESIDENT_PROFILE_JSON"); path && *path) {
      try {
        r.save_json(path);
      } catch (const std::exception& e) {
        std::cerr << "resident: " << e.what() << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "resident: the profile could not be reported: " << e.what() << "\n";
  }
}

// The rate of one device, measured once.
struct rate_cache {
  std::mutex m;
  detail::per_device<double> gbps;
};
rate_cache& rates() {
  static auto* r = new rate_cache;
  return *r;
}

}  // namespace

double copy_rate(device d) {
  require(d);
  rate_cache& r = rates();
  std::lock_guard lock(r.m);
  double& g = r.gbps[d];
  if (g == 0) g = detail::backend_of(d).measure_copy_rate(d);
  return g;
}

profile::profile(profile_output out) : out_(out) {
  collector& c = the();
  std::lock_guard lock(c.m);
  resolve(c, c.pending.size());
  start_ = c.next_snapshot++;
  c.snapshots[start_].before = c.sites;
  read_environment();
  g_collecting.fetch_add(one_profile, std::memory_order_relaxed);
}

profile::~profile() {
  collector& c = the();
  try {
    if (out_ == profile_output::table) std::cerr << report();
  } catch (const std::exception& e) {
    std::cerr << "resident: the profile could not be reported: " << e.what() << "\n";
  }
  std::lock_guard lock(c.m);
  c.snapshots.erase(start_);
  g_collecting.fetch_sub(one_profile, std::memory_order_relaxed);
}

profile_report profile::report() const {
  collector& c = the();
  snapshot since;
  {
    std::lock_guard lock(c.m);
    since = c.snapshots[start_];
  }
  return make_report(since);
}

}  // namespace resident
