// What a thread's calls carry that the threads working for it must see too: the transfer policies it
// has open (scoped_transfer_policy) and the flows whose stages it runs. The CPU loop's team threads
// take the calling thread's context for the loop's length, so a for_each_index body is held to the
// caller's forbid, and a stage's loop cannot call back into its own flow unnoticed.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace resident::detail {

struct policy_scope;  // src/memory/ledger.cpp

/// This thread's open transfer-policy scopes, innermost last (src/memory/ledger.cpp).
std::vector<std::shared_ptr<policy_scope>>& policy_scopes_here() noexcept;
/// The flows whose stages this thread runs, innermost last (src/flow/flow.cpp).
std::vector<const void*>& flows_running_here() noexcept;

struct thread_context {
  std::vector<std::shared_ptr<policy_scope>> policies;
  std::vector<const void*> flows;
  bool empty() const noexcept { return policies.empty() && flows.empty(); }
};

/// The calling thread's context, to hand to the threads working for it.
inline thread_context this_thread_context() { return {policy_scopes_here(), flows_running_here()}; }

/// Makes *c this thread's context until the end of the scope, then restores the thread's own (a
/// pooled team thread goes back to its pool as it was). Nothing when c is null or empty. A copy that
/// fails (bad_alloc) throws before anything changed.
class adopted_context {
 public:
  explicit adopted_context(const thread_context* c) {
    if (!c || c->empty()) return;
    saved_ = *c;  // copied first: the swaps below cannot throw
    std::swap(policy_scopes_here(), saved_.policies);
    std::swap(flows_running_here(), saved_.flows);
    active_ = true;
  }
  ~adopted_context() {
    if (!active_) return;
    std::swap(policy_scopes_here(), saved_.policies);
    std::swap(flows_running_here(), saved_.flows);
  }
  adopted_context(const adopted_context&) = delete;
  adopted_context& operator=(const adopted_context&) = delete;

 private:
  bool active_ = false;
  thread_context saved_;  // the thread's own while the caller's is adopted
};

}  // namespace resident::detail
