// The fuzz_api target's operations on ordering: transfer policies (scoped, across threads), flows of
// stages with declared accesses, captured graphs, flows over padded 2-D arrays.
#include "fuzz_api.hpp"

namespace fuzz_api {

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

// The instances the interpreter calls.
template void op_policy<float>(fuzz_state&);
template void op_policy<std::uint32_t>(fuzz_state&);

}  // namespace fuzz_api
