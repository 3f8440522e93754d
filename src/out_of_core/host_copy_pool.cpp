#include "resident/out_of_core/detail/host_copy_pool.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>

#include "resident/error.hpp"

namespace resident::detail {

host_copy_pool::host_copy_pool(int threads, std::size_t min_piece, int pieces_per_thread)
    : min_piece_(min_piece), pieces_per_thread_(pieces_per_thread) {
  RESIDENT_EXPECTS(threads >= 1, "host_copy_pool: " + std::to_string(threads) + " threads; give at least 1");
  RESIDENT_EXPECTS(min_piece > 0 && pieces_per_thread >= 1,
                   "host_copy_pool: pieces of at least 1 byte, at least 1 per thread");
  try {
    workers_.reserve(std::size_t(threads));
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this](std::stop_token st) { work(st); });
  } catch (const std::system_error& e) {
    workers_.clear();  // stops and joins the ones started
    RESIDENT_FAIL("host_copy_pool: the system refused thread " + std::to_string(workers_.size() + 1) + " of " +
                      std::to_string(threads) + " (" + e.what() + "); ask for fewer host copy threads",
                  error);
  }
}

host_copy_pool::~host_copy_pool() {
  cancel();
  workers_.clear();  // each jthread is asked to stop and joined
}

host_copy_pool::job host_copy_pool::submit(std::span<const host_copy> copies, std::function<void()> gate) {
  auto s = std::make_shared<job_state>();
  // Pieces of at least min_piece bytes, a whole number per thread (up to pieces_per_thread, so a
  // thread the OS put aside is overtaken by the others) and none left for a second round of only some
  // threads; cut at the destination's page boundaries, so no two threads write the same page.
  const std::size_t t = std::size_t(threads());
  const std::size_t most = t * std::size_t(pieces_per_thread_);
  for (const host_copy& c : copies) {
    std::size_t n = std::clamp<std::size_t>(c.bytes / min_piece_, 1, most);
    if (n > t) n = n / t * t;
    for (const host_copy& p : split_in_pages(c, n)) s->pieces.push_back(p);
  }
  s->left = s->pieces.size();
  s->gate = std::move(gate);
  s->opened = !s->gate;
  job j;
  j.state_ = s;
  std::lock_guard lock(m_);
  RESIDENT_EXPECTS(!cancelled_, "host_copy_pool: a copy submitted after the pool was cancelled");
  if (s->opened && s->left == 0) return j;  // nothing to do
  s->seq = next_seq_++;
  queue_.push_back(std::move(s));
  work_cv_.notify_all();
  return j;
}

void host_copy_pool::wait(const job& j) {
  if (!j.state_) return;
  job_state& s = *j.state_;
  std::unique_lock lock(m_);
  done_cv_.wait(lock, [&] { return s.left == 0 && s.opened; });
  if (s.error) std::rethrow_exception(s.error);
  if (s.cancelled) RESIDENT_FAIL("host_copy_pool: the copy was cancelled before it finished", error);
}

bool host_copy_pool::ended(const job& j) {
  if (!j.state_) return true;
  std::lock_guard lock(m_);
  return j.state_->left == 0 && j.state_->opened;
}

void host_copy_pool::wait_any(std::span<const job* const> jobs) {
  if (jobs.empty()) return;
  std::unique_lock lock(m_);
  done_cv_.wait(lock, [&] {
    return std::any_of(jobs.begin(), jobs.end(),
                       [](const job* j) { return !j->state_ || (j->state_->left == 0 && j->state_->opened); });
  });
}

void host_copy_pool::cancel() noexcept {
  std::unique_lock lock(m_);
  cancelled_ = true;
  for (auto& j : queue_) {
    j->cancelled = true;
    j->opened = true;
    j->left -= j->pieces.size() - j->next;
    j->next = j->pieces.size();
  }
  queue_.clear();
  done_cv_.wait(lock, [&] { return running_ == 0; });
  done_cv_.notify_all();
}

void host_copy_pool::work(std::stop_token stop) {
  std::unique_lock lock(m_);
  for (;;) {
    if (!work_cv_.wait(lock, stop, [&] { return !queue_.empty(); })) return;  // asked to stop
    std::shared_ptr<job_state> j = queue_.front();
    ++running_;
    if (!j->opened) {
      // The gate runs once, here, with the job out of the queue; the job then goes back in its turn.
      queue_.pop_front();
      lock.unlock();
      std::exception_ptr e;
      try {
        j->gate();
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      j->opened = true;
      if (e || cancelled_) {
        j->error = e;
        j->cancelled = !e;
        j->left -= j->pieces.size() - j->next;
        j->next = j->pieces.size();
      } else if (j->next < j->pieces.size()) {
        auto at = std::find_if(queue_.begin(), queue_.end(), [&](const auto& q) { return q->seq > j->seq; });
        queue_.insert(at, j);
        work_cv_.notify_all();
      }
    } else {
      const host_copy p = j->pieces[j->next++];
      if (j->next == j->pieces.size()) queue_.pop_front();  // its last piece is taken
      lock.unlock();
      if (!p.plain)
        copy_streaming(p.dst, p.src, p.bytes);
      else if (p.bytes)
        std::memcpy(p.dst, p.src, p.bytes);
      lock.lock();
      --j->left;
    }
    --running_;
    done_cv_.notify_all();
  }
}

}  // namespace resident::detail
