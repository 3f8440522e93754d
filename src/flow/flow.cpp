#include "resident/flow/flow.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <iomanip>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <thread>

#include "backend/runtime.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/detail/thread_context.hpp"
#include <nvtx_ranges.hpp>
#include "resident/device/event.hpp"
#include "resident/flow/detail/plan.hpp"

namespace resident {
namespace plan = detail::flow_plan;

bool access::range::overlaps(const range& o) const noexcept {
  auto a = reinterpret_cast<std::uintptr_t>(begin), b = reinterpret_cast<std::uintptr_t>(o.begin);
  return bytes && o.bytes && a < b + o.bytes && b < a + bytes;
}

// The flows whose stages this thread is running (a flow's run or a replay of its graph), innermost
// last: a stage may run other flows, not call back into its own. A CPU loop's team threads take their
// caller's (detail/thread_context.hpp).
std::vector<const void*>& detail::flows_running_here() noexcept {
  thread_local std::vector<const void*> running;
  return running;
}

namespace {
struct running_scope {
  explicit running_scope(const void* flow) { detail::flows_running_here().push_back(flow); }
  ~running_scope() { detail::flows_running_here().pop_back(); }
  running_scope(const running_scope&) = delete;
  running_scope& operator=(const running_scope&) = delete;
};

std::atomic<bool (*)() noexcept> turn_abandoned{nullptr};

// A lock taken in the order callers arrive. A thread running a flow in a loop hands it over to a thread
// waiting to add a stage or read the report: std::mutex may give it straight back to the thread that
// released it, and on a machine of many cores the waiter waited for minutes. A waiter asks
// turn_abandoned every 20 ms; a ticket given up is skipped when its turn comes.
class turn_mutex {
 public:
  void lock() {
    std::unique_lock l(m_);
    const std::uint64_t mine = next_++;
    while (!turn_.wait_for(l, std::chrono::milliseconds(20), [&] { return serving_ == mine; })) {
      bool (*check)() noexcept = turn_abandoned.load();
      if (check && check()) {
        given_up_.push_back(mine);
        RESIDENT_FAIL("flow: the thread whose turn this is will not hand it on (the interpreter stopped it at "
                      "exit inside a stage); the flow does not run after that", flow_error);
      }
    }
  }
  void unlock() {
    {
      std::lock_guard l(m_);
      ++serving_;
      for (auto g = std::find(given_up_.begin(), given_up_.end(), serving_); g != given_up_.end();
           g = std::find(given_up_.begin(), given_up_.end(), serving_)) {
        given_up_.erase(g);
        ++serving_;
      }
    }
    turn_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable turn_;
  std::uint64_t next_ = 0, serving_ = 0;
  std::vector<std::uint64_t> given_up_;  // tickets whose waiters left
};

bool running_on_this_thread(const void* flow) {
  const auto& running = detail::flows_running_here();
  return std::find(running.begin(), running.end(), flow) != running.end();
}

bool any_overlap(const std::vector<access::range>& x, const std::vector<access::range>& y) {
  for (auto& a : x)
    for (auto& b : y)
      if (a.overlaps(b)) return true;
  return false;
}

// Runs one stage's work on s; a throw comes out as a stage_error naming the stage.
void run_named(const std::string& name, const std::function<void(stream_ref)>& work, stream_ref s) {
  detail::nvtx::range range(name.c_str());
  try {
    work(s);
  } catch (...) {
    std::string what;
    try {
      throw;
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
      what = "an exception not derived from std::exception";
    }
    std::throw_with_nested(stage_error(name, "stage '" + name + "' failed: " + what));
  }
}

// The stage's ranges with the device of each raw range a GPU flow can learn from the driver (a
// view's pointer, say); the CPU's ranges and host memory stay unplaced.
access locate(access acc, device home) {
  detail::runtime& rt = detail::backend_of(home);
  if (rt.host_memory()) return acc;
  auto placed = [&rt](access::range r) {
    if (!r.where && r.bytes)
      if (const auto d = rt.owner(r.begin, true)) r.where = *d;
    return r;
  };
  access out;
  for (const auto& r : acc.read_ranges()) out.reads(placed(r));
  for (const auto& r : acc.write_ranges()) out.writes(placed(r));
  if (acc.named_device()) out.on(*acc.named_device());
  return out;
}

}  // namespace

void detail::set_turn_abandoned(bool (*check)() noexcept) noexcept { turn_abandoned.store(check); }

struct flow::impl {
  // A stage's work is shared, so that a graph captured on the CPU holds the functions it calls rather
  // than the flow.
  using work_fn = std::shared_ptr<const std::function<void(stream_ref)>>;
  struct stage {
    std::string name;
    work_fn work;
    access acc;
    std::vector<stage_id> preds;
    device dev;  // where it runs: see flow_plan::stage_device
  };
  device dev;           // home: stream() is streams[dev][0]
  int lanes = 1;        // streams per device (1 on the CPU: its work runs as it is issued)
  detail::per_device<std::vector<resident::stream>> streams;  // CUDA: made when a stage first names the device
  std::vector<stage> stages;
  // Per stage, on its device, from the last run.
  std::vector<event> done, t0, t1;
  std::vector<int> stream_of;
  std::vector<ledger_counts> issued;
  std::vector<double> cpu_ms;
  bool timed = false;
  // One call at a time: runs from several threads take turns (as CUDA orders launches of one graph),
  // and stages added meanwhile wait.
  turn_mutex m;
  // The stages' list and order, for calls that only read them (validate, predecessors, device_of):
  // changed only under m as well, so a run (holding m) reads them unlocked, and a reader takes this
  // alone. A thread working for a running stage (an OpenMP worker, a helper the stage waits for) may
  // read them without waiting for the run it is part of.
  mutable std::shared_mutex shape;
  // The flow's identity while its stages run (running_here), shared with the graphs it captures (which
  // outlive it): a stage calling back into its own flow is refused rather than deadlocking on m or
  // changing the flow under the run.
  std::shared_ptr<const char> identity = std::make_shared<const char>('f');

  // Locks the flow for `what`. @throws flow_error when called from one of this flow's stages.
  std::unique_lock<turn_mutex> lock(const char* what) {
    if (running_on_this_thread(identity.get()))
      RESIDENT_FAIL(std::string("flow::") + what + " called from a stage of the flow it runs in (or of a graph "
                        "captured from it); a stage may run or change other flows, not its own: call it outside "
                        "the stage", flow_error);
    return std::unique_lock<turn_mutex>(m);
  }
  std::shared_lock<std::shared_mutex> read_lock() const { return std::shared_lock<std::shared_mutex>(shape); }
  std::vector<stage_id> check() const;

  stream_ref lane_stream(const plan::lane& l) {
    if (!detail::backend_of(l.dev).queued()) return default_stream(l.dev);  // one stream: the default
    auto& v = streams[l.dev];
    while (v.size() < std::size_t(lanes)) v.emplace_back(l.dev);
    return v[std::size_t(l.index)].ref();
  }

  void ensure_events() {
    while (done.size() < stages.size()) {
      const device d = stages[done.size()].dev;
      done.emplace_back(d);
      t0.emplace_back(d);
      t1.emplace_back(d);
    }
    stream_of.assign(stages.size(), 0);
    issued.assign(stages.size(), {});
    cpu_ms.assign(stages.size(), 0.0);
  }

  void run_stage(stage_id i, stream_ref s, bool time_it) {
    auto& st = stages[i];
    const bool queued = detail::backend_of(s.device()).queued();  // else timed on the host clock
    if (time_it && queued) t0[i].record(s);
    const auto start = std::chrono::steady_clock::now();
    scoped_ledger l(st.dev, ledger_scope::this_thread);  // the stage's work alone, not other threads'
    run_named(st.name, *st.work, s);
    issued[i] = l.delta();
    cpu_ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (time_it && queued) t1[i].record(s);
  }

  // Issues every stage on its device's streams: forked from the home stream, joined back into it, an
  // event on every edge between two streams (of one device or of two). The CPU runs the same plan on
  // its one stream, where the events only mark time.
  void issue(const std::vector<stage_id>& order, bool capturing) {
    timed = false;  // a run that fails part-way leaves no figures
    ensure_events();
    std::vector<device> device_of;
    std::vector<std::vector<stage_id>> preds;
    for (const auto& st : stages) {
      device_of.push_back(st.dev);
      preds.push_back(st.preds);
    }
    const plan::plan p = plan::make(dev, lanes, device_of, preds, order);
    const stream_ref home = lane_stream({dev, 0});
    // Eager runs follow whatever was queued on each device's legacy default stream (uploads,
    // allocations), which the flow's non-blocking streams would not wait for; a capture cannot wait on
    // outside work.
    if (!capturing) home.wait_for(default_stream(dev));
    event fork(dev);
    fork.record(home);
    const running_scope running(identity.get());
    std::vector<plan::lane> used;  // the streams given work so far
    try {
      for (const plan::step& step : p.steps) {
        const stream_ref s = lane_stream(step.on);
        if (step.first_on_lane) {
          fork.wait_on(s);  // after whatever preceded the flow on the home stream
          if (!capturing && !(step.on.dev == dev)) s.wait_for(default_stream(step.on.dev));
        }
        if (std::find(used.begin(), used.end(), step.on) == used.end()) used.push_back(step.on);
        for (stage_id q : step.waits) done[q].wait_on(s);
        stream_of[step.stage] = step.on.index;
        {
          device_scope on(step.on.dev);  // launches need their stream's device current
          run_stage(step.stage, s, !capturing);
        }
        done[step.stage].record(s);
      }
    } catch (...) {
      join_after_failure(used, home);
      throw;
    }
    for (const auto& [lane, last] : p.tails) done[last].wait_on(home);
    timed = !capturing;
  }

  // After a stage threw: the home stream waits for everything already issued on the other streams, so
  // that synchronizing it (wait()) covers the partial run, and a capture ends joined. Best effort: the
  // stage's error is the one reported.
  void join_after_failure(const std::vector<plan::lane>& used, stream_ref home) noexcept {
    for (const plan::lane& l : used) {
      if (l == plan::lane{dev, 0}) continue;
      try {
        event joined(l.dev);
        joined.record(lane_stream(l));
        joined.wait_on(home);
      } catch (...) {  // a device fault: the stage's error says more
      }
    }
  }
};
flow::impl& flow::live() const {
  if (!p_) RESIDENT_FAIL("use of a moved-from flow: it no longer holds stages; use the flow it was moved to");
  return *p_;
}

flow::flow(device d, int streams) : p_(std::make_shared<impl>()) {
  require(d);
  // Streams beyond the hardware's queues add nothing; a count in the millions would exhaust the driver.
  if (streams < 1 || streams > max_streams)
    RESIDENT_FAIL("flow: needs 1 to " + std::to_string(max_streams) + " streams per device, got " +
                  std::to_string(streams));
  p_->dev = d;
  p_->lanes = detail::backend_of(d).queued() ? streams : 1;
  p_->lane_stream({d, 0});
}
flow::~flow() = default;
flow::flow(flow&&) noexcept = default;
flow& flow::operator=(flow&&) noexcept = default;

flow::stage_id flow::add(std::string name, std::function<void(stream_ref)> work, access acc,
                         std::vector<stage_id> after, inference infer) {
  impl& f = live();
  const auto held = f.lock("add");
  const stage_id id = f.stages.size();
  for (stage_id a : after)
    if (a >= id)
      RESIDENT_FAIL("flow: stage '" + name + "' is to run after stage " + std::to_string(a) +
                       ", which does not exist yet (stages are numbered from 0 as they are added)", flow_error);
  if (!work) RESIDENT_FAIL("flow: stage '" + name + "' has no work");
  const device d = plan::stage_device(name, locate(acc, f.dev), f.dev);
  require(d);
  f.lane_stream({d, 0});  // the device's streams now, not inside a later capture
  impl::stage st{std::move(name), std::make_shared<const std::function<void(stream_ref)>>(std::move(work)),
                  std::move(acc), std::move(after), d};
  if (infer == inference::on)
    for (stage_id e = 0; e < id; ++e) {
      const auto& prev = f.stages[e].acc;
      const bool hazard = any_overlap(st.acc.read_ranges(), prev.write_ranges()) ||   // read after write
                          any_overlap(st.acc.write_ranges(), prev.write_ranges()) ||  // write after write
                          any_overlap(st.acc.write_ranges(), prev.read_ranges());     // write after read
      if (hazard && std::find(st.preds.begin(), st.preds.end(), e) == st.preds.end()) st.preds.push_back(e);
    }
  const std::unique_lock<std::shared_mutex> changing(f.shape);
  f.stages.push_back(std::move(st));
  return id;
}

void flow::order(stage_id earlier, stage_id later) {
  impl& f = live();
  const auto held = f.lock("order");
  const std::size_t n = f.stages.size();
  if (earlier == later && earlier < n)
    RESIDENT_FAIL("flow::order: stage " + std::to_string(earlier) + " cannot run after itself; order two "
                  "different stages", flow_error);
  if (earlier >= n || later >= n)
    RESIDENT_FAIL("flow::order: stages " + std::to_string(earlier) + " and " + std::to_string(later) +
                     " are not two stages of this flow (it has " + std::to_string(n) + ")", flow_error);
  const std::unique_lock<std::shared_mutex> changing(f.shape);
  auto& preds = f.stages[later].preds;
  if (std::find(preds.begin(), preds.end(), earlier) == preds.end()) preds.push_back(earlier);
}

std::vector<flow::stage_id> flow::validate() const {
  impl& f = live();
  const auto held = f.read_lock();
  return f.check();
}

std::vector<flow::stage_id> flow::impl::check() const {
  const auto& st = stages;
  const std::size_t n = st.size();
  std::vector<std::size_t> indegree(n, 0);
  std::vector<std::vector<stage_id>> succ(n);
  for (stage_id i = 0; i < n; ++i)
    for (stage_id p : st[i].preds) {
      succ[p].push_back(i);
      ++indegree[i];
    }
  std::vector<stage_id> order, ready;
  for (stage_id i = 0; i < n; ++i)
    if (!indegree[i]) ready.push_back(i);
  while (!ready.empty()) {
    std::sort(ready.begin(), ready.end(), std::greater<>());  // lowest id first: insertion order
    stage_id i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (stage_id s : succ[i])
      if (--indegree[s] == 0) ready.push_back(s);
  }
  if (order.size() != n) {
    std::string names;
    for (stage_id i = 0; i < n; ++i)
      if (indegree[i]) names += (names.empty() ? "'" : ", '") + st[i].name + "'";
    RESIDENT_FAIL("flow: the dependencies form a cycle through stages " + names +
                     "; remove one of the explicit orders", flow_error);
  }
  // Reachability, to find writers of one array that nothing orders.
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (stage_id i : order)
    for (stage_id p : st[i].preds) {
      reach[i][p] = true;
      for (stage_id q = 0; q < n; ++q)
        if (reach[p][q]) reach[i][q] = true;
    }
  for (stage_id i = 0; i < n; ++i)
    for (stage_id j = i + 1; j < n; ++j)
      if (any_overlap(st[i].acc.write_ranges(), st[j].acc.write_ranges()) && !reach[i][j] && !reach[j][i])
        RESIDENT_FAIL("flow: stages '" + st[i].name + "' and '" + st[j].name +
                         "' both write the same array and nothing orders them; add an order or let the flow "
                         "infer one", flow_error);
  return order;
}

void flow::run_async() {
  live();
  const std::shared_ptr<impl> keep = p_;  // a stage may replace or destroy the flow it runs in
  const auto held = keep->lock("run");
  keep->issue(keep->check(), false);
}

void flow::run() {
  live();
  const std::shared_ptr<impl> keep = p_;  // `this` may be gone once the stages have run
  {
    const auto held = keep->lock("run");
    keep->issue(keep->check(), false);
  }
  keep->lane_stream({keep->dev, 0}).synchronize();
}

void flow::wait() {
  impl& f = live();
  // Inside a capture, synchronizing would break it; in a run it would wait on the run's own lanes.
  if (running_on_this_thread(f.identity.get()))
    RESIDENT_FAIL("flow::wait called from a stage of the flow it waits for; call it after run_async returns",
                  flow_error);
  stream().synchronize();
}

graph flow::capture() {
  live();
  const std::shared_ptr<impl> keep = p_;  // a stage may replace or destroy the flow during the capture
  impl& f = *keep;
  const auto held = f.lock("capture");
  const auto order = f.check();
  if (detail::backend_of(f.dev).queued()) return graph::capture(stream(), [&] { f.issue(order, true); });
  // The graph keeps the stages' names and work in dependency order, and nothing of the flow.
  struct step {
    std::string name;
    impl::work_fn work;
  };
  auto steps = std::make_shared<std::vector<step>>();
  for (stage_id i : order) steps->push_back({f.stages[i].name, f.stages[i].work});
  return graph::capture(f.lane_stream({f.dev, 0}), [steps, identity = f.identity] {
    const running_scope running(identity.get());  // its stages may not call back into the flow either
    for (const step& s : *steps) run_named(s.name, *s.work, default_stream(device::cpu()));
  });
}

stream_ref flow::stream() const {
  impl& f = live();
  return f.lane_stream({f.dev, 0});
}

const std::vector<flow::stage_id>& flow::predecessors(stage_id s) const {
  impl& f = live();
  const auto held = f.read_lock();
  if (s >= f.stages.size()) RESIDENT_FAIL("flow: no stage " + std::to_string(s), flow_error);
  return f.stages[s].preds;
}

device flow::device_of(stage_id s) const {
  impl& f = live();
  const auto held = f.read_lock();
  if (s >= f.stages.size()) RESIDENT_FAIL("flow: no stage " + std::to_string(s), flow_error);
  return f.stages[s].dev;
}

std::size_t flow::size() const noexcept {
  if (!p_) return 0;
  const auto held = p_->read_lock();
  return p_->stages.size();
}

std::vector<stage_report> flow::report() const {
  impl& f = live();
  const auto held = f.lock("report");
  std::vector<stage_report> r;
  if (!f.timed) return r;
  f.lane_stream({f.dev, 0}).synchronize();  // the home stream joins every other
  for (stage_id i = 0; i < f.stages.size() && i < f.issued.size(); ++i) {
    double ms = detail::backend_of(f.stages[i].dev).queued() ? elapsed_ms(f.t0[i], f.t1[i]) : f.cpu_ms[i];
    r.push_back({f.stages[i].name, f.stream_of[i], ms, f.issued[i], f.stages[i].dev});
  }
  return r;
}

std::string flow::report_table() const {
  auto rows = report();
  std::size_t w = 5;
  for (auto& r : rows) w = std::max(w, r.name.size());
  std::ostringstream os;
  os << std::left << std::setw(int(w)) << "stage" << "  device   stream  time (ms)  kernels  H2D        D2H\n";
  for (auto& r : rows)
    os << std::left << std::setw(int(w)) << r.name << "  " << std::setw(7) << r.device.name() << "  " << std::right
       << std::setw(6) << r.stream_index << "  "
       << std::setw(9) << std::fixed << std::setprecision(3) << r.ms << "  " << std::setw(7) << r.issued.kernels
       << "  " << std::left << std::setw(9) << detail::format_bytes(double(r.issued.h2d_bytes)) << "  "
       << detail::format_bytes(double(r.issued.d2h_bytes)) << "\n";
  return os.str();
}

}  // namespace resident
