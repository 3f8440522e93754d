#include "resident/streaming/detail/host_copy_pool.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

#include "resident/error.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace resident::detail {
namespace {

// Below this, a plain memcpy: the lines it writes are few, and streaming stores need a fence.
constexpr std::size_t streaming_from = std::size_t(64) << 10;

}  // namespace

void copy_streaming(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes == 0) return;  // dst and src may then be null
#if defined(__SSE2__)  // every x86-64; elsewhere memcpy
  if (bytes >= streaming_from) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    // Up to the destination's next cache line with memcpy, then whole lines of 4 x 16 bytes stored
    // around the caches (no read of the destination's lines before they are written), then the tail.
    const std::size_t head = (64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    const std::size_t lines = (bytes - head) / 64;
    for (std::size_t i = 0; i < lines; ++i, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    std::memcpy(d, s, bytes - head - lines * 64);
    _mm_sfence();  // streaming stores are weakly ordered: make them visible before the caller says "done"
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

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
  // About pieces_per_thread pieces per thread for a large copy, so a thread the OS put aside is
  // overtaken by the others; page-aligned cuts, so no two threads write the same cache line.
  const std::size_t most = std::size_t(threads()) * std::size_t(pieces_per_thread_);
  for (const host_copy& c : copies) {
    if (c.bytes == 0) continue;
    const std::size_t n = std::clamp<std::size_t>(c.bytes / min_piece_, 1, most);
    const std::size_t piece = ((c.bytes + n - 1) / n + 4095) / 4096 * 4096;
    for (std::size_t off = 0; off < c.bytes; off += piece)
      s->pieces.push_back({static_cast<unsigned char*>(c.dst) + off, static_cast<const unsigned char*>(c.src) + off,
                           std::min(piece, c.bytes - off)});
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
      copy_streaming(p.dst, p.src, p.bytes);
      lock.lock();
      --j->left;
    }
    --running_;
    done_cv_.notify_all();
  }
}

}  // namespace resident::detail
