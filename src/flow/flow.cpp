#include "resident/flow/flow.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <iomanip>
#include <sstream>

#include "resident/detail/cuda_runtime.hpp"
#include <nvtx_ranges.hpp>
#include "resident/device/event.hpp"

namespace resident {
namespace cuda = detail::cuda;

bool access::range::overlaps(const range& o) const noexcept {
  auto a = reinterpret_cast<std::uintptr_t>(begin), b = reinterpret_cast<std::uintptr_t>(o.begin);
  return bytes && o.bytes && a < b + o.bytes && b < a + bytes;
}

namespace {
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

}  // namespace

struct flow::impl {
  // A stage's work is shared, so that a graph captured on the CPU holds the functions it calls rather
  // than the flow.
  using work_fn = std::shared_ptr<const std::function<void(stream_ref)>>;
  struct stage {
    std::string name;
    work_fn work;
    access acc;
    std::vector<stage_id> preds;
  };
  device dev;
  std::vector<resident::stream> streams;  // empty on the CPU
  std::vector<stage> stages;
  // Per stage, from the last run.
  std::vector<event> done, t0, t1;
  std::vector<int> stream_of;
  std::vector<ledger_counts> issued;
  std::vector<double> cpu_ms;
  bool timed = false;

  void ensure_events() {
    while (done.size() < stages.size()) {
      done.emplace_back(dev);
      t0.emplace_back(dev);
      t1.emplace_back(dev);
    }
    stream_of.assign(stages.size(), 0);
    issued.assign(stages.size(), {});
    cpu_ms.assign(stages.size(), 0.0);
  }

  void run_stage(stage_id i, stream_ref s, bool time_it) {
    auto& st = stages[i];
    if (time_it && dev.is_cuda()) t0[i].record(s);
    const auto start = std::chrono::steady_clock::now();
    scoped_ledger l(dev);
    run_named(st.name, *st.work, s);
    issued[i] = l.delta();
    cpu_ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (time_it && dev.is_cuda()) t1[i].record(s);
  }

  // Issues every stage on the streams: forked from streams[0], joined back into it.
  void issue_cuda(const std::vector<stage_id>& order, bool capturing) {
    ensure_events();
    const int ns = int(streams.size());
    std::vector<stage_id> tail(std::size_t(ns), stage_id(-1));  // last stage issued on each stream
    std::vector<bool> joined(std::size_t(ns), false);
    // Eager runs follow whatever was queued on the legacy default stream (uploads, allocations), which
    // the flow's non-blocking streams would not wait for; a capture cannot wait on outside work.
    if (!capturing) cuda::stream_after(streams[0].ref().native(), nullptr);
    event fork(dev);
    fork.record(streams[0]);
    int next = 0;
    for (stage_id i : order) {
      // Continue on a predecessor's stream when it was that stream's last stage: no event needed.
      int k = -1;
      for (stage_id p : stages[i].preds)
        if (tail[std::size_t(stream_of[p])] == p) {
          k = stream_of[p];
          break;
        }
      if (k < 0) {
        k = next;
        next = (next + 1) % ns;
      }
      stream_ref s = streams[std::size_t(k)].ref();
      if (!joined[std::size_t(k)]) {
        if (k != 0) fork.wait_on(s);  // after whatever preceded the flow on streams[0]
        joined[std::size_t(k)] = true;
      }
      for (stage_id p : stages[i].preds)
        if (stream_of[p] != k) done[p].wait_on(s);
      stream_of[i] = k;
      run_stage(i, s, !capturing);
      done[i].record(s);
      tail[std::size_t(k)] = i;
    }
    for (int k = 1; k < ns; ++k)
      if (tail[std::size_t(k)] != stage_id(-1)) done[tail[std::size_t(k)]].wait_on(streams[0]);
    timed = !capturing;
  }

  // CPU: stages one after another in dependency order. Each pipeline already spreads over the cores
  // (OpenMP), and one at a time keeps each stage's ledger its own.
  void run_cpu(const std::vector<stage_id>& order) {
    ensure_events();
    for (stage_id i : order) run_stage(i, default_stream(device::cpu()), true);
    timed = true;
  }
};

flow::impl& flow::live() const {
  if (!p_) RESIDENT_FAIL("use of a moved-from flow: it no longer holds stages; use the flow it was moved to");
  return *p_;
}

flow::flow(device d, int streams) : p_(std::make_unique<impl>()) {
  require(d);
  if (streams < 1) RESIDENT_FAIL("flow: needs at least one stream, got " + std::to_string(streams));
  p_->dev = d;
  if (d.is_cuda())
    for (int i = 0; i < streams; ++i) p_->streams.emplace_back(d);
}
flow::~flow() = default;
flow::flow(flow&&) noexcept = default;
flow& flow::operator=(flow&&) noexcept = default;

flow::stage_id flow::add(std::string name, std::function<void(stream_ref)> work, access acc,
                         std::vector<stage_id> after, inference infer) {
  impl& f = live();
  const stage_id id = f.stages.size();
  for (stage_id a : after)
    if (a >= id)
      RESIDENT_FAIL("flow: stage '" + name + "' is to run after stage " + std::to_string(a) +
                       ", which does not exist yet (stages are numbered from 0 as they are added)", flow_error);
  if (!work) RESIDENT_FAIL("flow: stage '" + name + "' has no work");
  impl::stage st{std::move(name), std::make_shared<const std::function<void(stream_ref)>>(std::move(work)),
                  std::move(acc), std::move(after)};
  if (infer == inference::on)
    for (stage_id e = 0; e < id; ++e) {
      const auto& prev = f.stages[e].acc;
      const bool hazard = any_overlap(st.acc.read_ranges(), prev.write_ranges()) ||   // read after write
                          any_overlap(st.acc.write_ranges(), prev.write_ranges()) ||  // write after write
                          any_overlap(st.acc.write_ranges(), prev.read_ranges());     // write after read
      if (hazard && std::find(st.preds.begin(), st.preds.end(), e) == st.preds.end()) st.preds.push_back(e);
    }
  f.stages.push_back(std::move(st));
  return id;
}

void flow::order(stage_id earlier, stage_id later) {
  impl& f = live();
  const std::size_t n = f.stages.size();
  if (earlier >= n || later >= n || earlier == later)
    RESIDENT_FAIL("flow::order: stages " + std::to_string(earlier) + " and " + std::to_string(later) +
                     " are not two stages of this flow (it has " + std::to_string(n) + ")", flow_error);
  auto& preds = f.stages[later].preds;
  if (std::find(preds.begin(), preds.end(), earlier) == preds.end()) preds.push_back(earlier);
}

std::vector<flow::stage_id> flow::validate() const {
  const auto& st = live().stages;
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
  impl& f = live();
  const auto order = validate();
  if (f.dev.is_cuda())
    f.issue_cuda(order, false);
  else
    f.run_cpu(order);
}

void flow::wait() {
  impl& f = live();
  if (f.dev.is_cuda()) f.streams[0].synchronize();
}

graph flow::capture() {
  impl& f = live();
  const auto order = validate();
  if (f.dev.is_cuda()) return graph::capture(stream(), [&] { f.issue_cuda(order, true); });
  // The graph keeps the stages' names and work in dependency order, and nothing of the flow.
  struct step {
    std::string name;
    impl::work_fn work;
  };
  auto steps = std::make_shared<std::vector<step>>();
  for (stage_id i : order) steps->push_back({f.stages[i].name, f.stages[i].work});
  return graph::capture(stream(), [steps] {
    for (const step& s : *steps) run_named(s.name, *s.work, default_stream(device::cpu()));
  });
}

stream_ref flow::stream() const {
  impl& f = live();
  return f.dev.is_cuda() ? f.streams[0].ref() : default_stream(device::cpu());
}

const std::vector<flow::stage_id>& flow::predecessors(stage_id s) const {
  impl& f = live();
  if (s >= f.stages.size()) RESIDENT_FAIL("flow: no stage " + std::to_string(s), flow_error);
  return f.stages[s].preds;
}

std::size_t flow::size() const noexcept { return p_ ? p_->stages.size() : 0; }

std::vector<stage_report> flow::report() const {
  impl& f = live();
  std::vector<stage_report> r;
  if (!f.timed) return r;
  if (f.dev.is_cuda()) f.streams[0].synchronize();
  for (stage_id i = 0; i < f.stages.size() && i < f.issued.size(); ++i) {
    double ms = f.dev.is_cuda() ? elapsed_ms(f.t0[i], f.t1[i]) : f.cpu_ms[i];
    r.push_back({f.stages[i].name, f.stream_of[i], ms, f.issued[i]});
  }
  return r;
}

std::string flow::report_table() const {
  auto rows = report();
  std::size_t w = 5;
  for (auto& r : rows) w = std::max(w, r.name.size());
  std::ostringstream os;
  os << std::left << std::setw(int(w)) << "stage" << "  stream  time (ms)  kernels  H2D        D2H\n";
  for (auto& r : rows)
    os << std::left << std::setw(int(w)) << r.name << "  " << std::right << std::setw(6) << r.stream_index << "  "
       << std::setw(9) << std::fixed << std::setprecision(3) << r.ms << "  " << std::setw(7) << r.issued.kernels
       << "  " << std::left << std::setw(9) << detail::format_bytes(double(r.issued.h2d_bytes)) << "  "
       << detail::format_bytes(double(r.issued.d2h_bytes)) << "\n";
  return os.str();
}

}  // namespace resident
