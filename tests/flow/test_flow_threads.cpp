// A flow called from its own stages, run from several threads at once, and grown while it runs; ranges
// that cannot be ordered.
#include "busy.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/flow/detail/plan.hpp"
#include "resident/flow/flow.hpp"
#include "resident/fuse/pipeline.hpp"
#include "flow/flow_support.hpp"
#include "support.hpp"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

namespace rs = resident;
using rs::test::backend;

namespace {

// Counts how many callers are inside at once: the most seen, and the calls.
struct overlap_probe {
  std::atomic<int> inside{0}, most{0};
  int calls = 0;  // not atomic: calls that overlap would lose counts
  void enter() {
    const int now = ++inside;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    const int before = calls;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    calls = before + 1;
    --inside;
  }
};

// A stage that calls back into the flow running it (add, order, run, capture, validate, report) is
// refused with a flow_error, nested in the stage's stage_error; the flow is unchanged and runs again.
// Reading it (validate, predecessors, device_of) is not refused.
TEST(flow_reentry, a_stage_calling_its_own_flow_is_refused_and_the_flow_stays_usable) {
  rs::flow f(rs::device::cpu());
  int ran = 0;
  std::function<void()> inner;
  f.add("first", [&](rs::stream_ref) { ++ran; });
  f.add("calls back", [&](rs::stream_ref) {
    ++ran;
    if (inner) inner();
  });
  const std::pair<const char*, std::function<void()>> calls[] = {
      {"add", [&] { f.add("added inside", [](rs::stream_ref) {}); }},
      {"order", [&] { f.order(0, 1); }},
      {"run", [&] { f.run(); }},
      {"run_async", [&] { f.run_async(); }},
      {"capture", [&] { (void)f.capture(); }},
      {"report", [&] { (void)f.report(); }},
      {"wait", [&] { f.wait(); }},
  };
  for (const auto& [what, call] : calls) {
    SCOPED_TRACE(what);
    inner = call;
    ran = 0;
    try {
      f.run();
      ADD_FAILURE() << "a stage called " << what << " on its own flow";
    } catch (const rs::stage_error& e) {
      EXPECT_EQ(e.stage(), "calls back");
      try {
        std::rethrow_if_nested(e);
        ADD_FAILURE() << "nothing nested";
      } catch (const rs::flow_error& inner_error) {
        EXPECT_NE(std::string(inner_error.what()).find("from a stage of the flow"), std::string::npos)
            << inner_error.what();
      }
    }
    EXPECT_EQ(ran, 2);
    EXPECT_EQ(f.size(), 2u);
    EXPECT_TRUE(f.predecessors(1).empty());
    EXPECT_TRUE(f.report().empty()) << "a failed run leaves no figures";
  }
  // Reading the flow from a stage is fine.
  inner = [&] {
    EXPECT_EQ(f.validate().size(), 2u);
    EXPECT_TRUE(f.predecessors(1).empty());
    EXPECT_EQ(f.device_of(1), rs::device::cpu());
  };
  EXPECT_NO_THROW(f.run());
  // A graph's replay calls the stages too: a stage that runs its flow is refused there as well.
  inner = nullptr;
  rs::graph g = f.capture();
  inner = [&] { f.run(); };
  EXPECT_THROW(g.replay(f.stream()), rs::stage_error);
  inner = nullptr;
  ran = 0;
  EXPECT_NO_THROW(f.run());
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(f.report().size(), 2u);
  EXPECT_NO_THROW(g.replay(f.stream()));
  // Another flow run from inside a stage (nesting) is fine.
  rs::flow outer(rs::device::cpu());
  outer.add("runs f", [&](rs::stream_ref) { f.run(); });
  ran = 0;
  EXPECT_NO_THROW(outer.run());
  EXPECT_EQ(ran, 2);
}

// The threads a stage waits for work for it: its CPU loop's team threads and a helper it joins may
// read the flow (they waited for the run's lock for good before), and a change or a run of it from a
// team thread is refused as from the stage itself.
TEST(flow_reentry, the_threads_a_stage_waits_for_read_its_flow_and_may_not_change_it) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs two OpenMP threads";
  rs::flow f(rs::device::cpu());
  f.add("first", [](rs::stream_ref) {});
  std::atomic<int> worker_checks{0};
  std::atomic<bool> refused{false};
  f.add("loops", [&](rs::stream_ref s) {
    std::thread helper([&] {
      EXPECT_EQ(f.validate().size(), 2u);
      EXPECT_TRUE(f.predecessors(1).empty());
    });
    helper.join();
    rs::for_each_index(s, std::size_t(1) << 20, [&](std::size_t i) {
      if (omp_get_thread_num() == 0 && i == 0) {  // holds the first piece until a team thread has looked
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (worker_checks.load() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::yield();
      }
      if (omp_get_thread_num() != 0 && worker_checks.load() == 0) {
        EXPECT_EQ(f.validate().size(), 2u);
        EXPECT_EQ(f.device_of(0), rs::device::cpu());
        EXPECT_EQ(f.size(), 2u);
        try {
          f.add("from a team thread", [](rs::stream_ref) {});
        } catch (const rs::flow_error&) {
          refused = true;
        }
        ++worker_checks;
      }
    });
  });
  f.run();
  if (worker_checks.load() == 0) GTEST_SKIP() << "the loop ran on the calling thread alone";
  EXPECT_TRUE(refused.load()) << "a team thread added a stage to the flow its stage runs in";
  EXPECT_EQ(f.size(), 2u);
}

// A stage that replaces or destroys the flow running it: the run ends on what it started with (it read
// freed memory before), and the flow holds what was put there.
TEST(flow_reentry, a_stage_that_replaces_or_destroys_its_flow_ends_the_run_whole) {
  for (const bool destroy : {false, true}) {
    auto f = std::make_unique<rs::flow>(rs::device::cpu());
    int ran = 0;
    f->add("first", [&](rs::stream_ref) { ++ran; });
    f->add("replaces", [&](rs::stream_ref) {
      ++ran;
      if (destroy)
        f.reset();
      else
        *f = rs::flow(rs::device::cpu());
    });
    f->add("last", [&](rs::stream_ref) { ++ran; }, rs::access(), {1});
    rs::flow* raw = f.get();
    raw->run();
    EXPECT_EQ(ran, 3) << (destroy ? "destroyed" : "replaced");
    if (!destroy) {
      EXPECT_EQ(f->size(), 0u);
      f->add("again", [&](rs::stream_ref) { ++ran; });
      f->run();
      EXPECT_EQ(ran, 4);
    }
  }
}

// After a run whose stage failed, report() has no figures (not the stages before the failure mixed
// with an earlier run's); the next good run reports every stage.
TEST(flow_reentry, a_failed_run_leaves_no_stale_report) {
  rs::flow f(rs::device::cpu());
  bool fail = false;
  f.add("a", [](rs::stream_ref) {});
  f.add("b", [&](rs::stream_ref) {
    if (fail) throw std::runtime_error("planted");
  });
  f.run();
  EXPECT_EQ(f.report().size(), 2u);
  fail = true;
  EXPECT_THROW(f.run(), rs::stage_error);
  EXPECT_TRUE(f.report().empty());
  fail = false;
  f.run();
  EXPECT_EQ(f.report().size(), 2u);
}

// One flow run from several threads at once: the runs take turns (each run's stages in order, no two
// runs' stages at once), as CUDA orders launches of one graph; so do replays of one captured graph.
TEST(flow_threads, runs_and_replays_of_one_flow_from_several_threads_take_turns) {
  rs::flow f(rs::device::cpu());
  overlap_probe probe;
  f.add("one", [&](rs::stream_ref) { probe.enter(); });
  f.add("two", [&](rs::stream_ref) { probe.enter(); });
  const int threads = 4, runs = 25;
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (int r = 0; r < runs; ++r) {
          f.run();
          (void)f.report();
        }
      });
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(probe.most.load(), 1) << "two runs' stages ran at once";
  EXPECT_EQ(probe.calls, 2 * threads * runs);
  rs::graph g = f.capture();
  probe.most = 0;
  probe.calls = 0;
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&] {
        for (int r = 0; r < runs; ++r) g.replay(f.stream());
      });
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(probe.most.load(), 1) << "two replays of one graph ran at once";
  EXPECT_EQ(probe.calls, 2 * threads * runs);
  EXPECT_EQ(g.kernels(), 0u);
}

// A CPU graph whose work replays the same graph is refused (it would wait for itself); replaying it
// again afterwards works.
TEST(flow_threads, a_graph_replayed_from_its_own_work_is_refused) {
  const auto s = rs::default_stream(rs::device::cpu());
  rs::graph g;
  bool again = true;
  int ran = 0;
  g = rs::graph::capture(s, [&] {
    ++ran;
    if (again) g.replay(s);
  });
  try {
    g.replay(s);
    ADD_FAILURE() << "a graph replayed itself";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("from inside the same graph's replay"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran, 1);
  again = false;
  EXPECT_NO_THROW(g.replay(s));
  EXPECT_EQ(ran, 2);
}

// Stages added from one thread while another runs the flow: each run sees a whole flow.
TEST(flow_threads, stages_added_while_another_thread_runs_the_flow) {
  rs::flow f(rs::device::cpu());
  std::atomic<int> ran{0};
  f.add("first", [&](rs::stream_ref) { ++ran; });
  std::thread runner([&] {
    for (int r = 0; r < 200; ++r) f.run();
  });
  for (int i = 0; i < 200; ++i) f.add("added " + std::to_string(i), [&](rs::stream_ref) { ++ran; });
  runner.join();
  EXPECT_EQ(f.size(), 201u);
  ran = 0;
  f.run();
  EXPECT_EQ(ran.load(), 201);
}

// A wait for a flow's turn gives up (flow_error) once the check set_turn_abandoned installs says so
// (the Python package's: a thread parked at exit inside a stage holds its turn for good); the ticket
// given up is skipped, so the turns after it still come.
std::atomic<bool> abandon_turns{false};
TEST(flow_threads, a_wait_for_a_turn_that_never_comes_gives_up_when_told) {
  rs::flow f(rs::device::cpu());
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  f.add("hold", [&](rs::stream_ref) {
    if (ran++ == 0) {
      entered.set_value();
      released.wait();
    }
  });
  std::thread holder([&] { f.run(); });
  entered.get_future().wait();
  rs::detail::set_turn_abandoned([]() noexcept { return abandon_turns.load(); });
  std::atomic<bool> refused{false};
  std::thread waiter([&] {
    try {
      f.run();
    } catch (const rs::flow_error&) {
      refused = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // waiting, and asking, meanwhile
  EXPECT_FALSE(refused.load());
  abandon_turns = true;
  waiter.join();
  EXPECT_TRUE(refused.load());
  abandon_turns = false;
  release.set_value();
  holder.join();
  f.run();  // hangs if the given-up ticket were still waited for
  EXPECT_EQ(ran.load(), 2);
  rs::detail::set_turn_abandoned(nullptr);
}

// A raw range whose end passes the top of the address space cannot be ordered: refused when declared.
TEST(flow_access, a_range_past_the_end_of_memory_is_refused) {
  int x = 0;
  const rs::access::range wraps{&x, std::size_t(-1)};
  EXPECT_THROW(rs::access{}.reads(wraps), rs::invalid_argument);
  EXPECT_THROW(rs::access{}.writes(wraps), rs::invalid_argument);
  const rs::access::range fine{&x, sizeof x};
  EXPECT_NO_THROW(rs::access{}.reads(fine).writes(fine));
}

}  // namespace
