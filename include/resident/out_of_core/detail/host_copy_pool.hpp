#pragma once
/// @file host_copy_pool.hpp
/// Worker threads that copy between host buffers in parallel pieces (src/out_of_core/host_copy_pool.cpp).
/// An out-of-core pipeline over pageable host memory stages every chunk through page-locked buffers: these
/// threads fill and drain them while the calling thread keeps the copy engines and the kernels fed.
///
/// Thread safety: each streamed call makes a pool of its own, so no pool is shared between callers. A
/// pool's queue, counts and jobs are under its one lock (workers copy with it released, each its own
/// pieces); its submitter is one thread, which the order of jobs assumes.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "resident/out_of_core/detail/host_copy.hpp"

namespace resident::detail {

/// A fixed team of threads that runs copy jobs: each job's copies are cut into pieces that several
/// threads take at once, jobs are served in the order they were submitted, and a job may have a gate
/// (a function run once, on a worker, before its first piece: e.g. waiting for the event after which
/// its buffer is free). Move-less; one thread submits and waits (the pool is not for concurrent
/// submitters). The destructor cancels what has not started and joins every thread.
class host_copy_pool {
  struct job_state;

 public:
  /// A submitted job, to wait for. A default one is done.
  class job {
   public:
    job() = default;

   private:
    friend class host_copy_pool;
    std::shared_ptr<job_state> state_;
  };

  /// Starts `threads` workers (at least 1); a copy is cut into pieces of whole pages of its
  /// destination (split_in_pages), of at least min_piece bytes (one piece when smaller) and, when there
  /// are more than threads, a whole number per thread, at most pieces_per_thread. @throws invalid_argument for threads < 1 or min_piece 0,
  /// error when the system refuses a thread (the ones started are joined first).
  host_copy_pool(int threads, std::size_t min_piece, int pieces_per_thread);
  /// Cancels the jobs not started, waits for the pieces and gates running, joins the threads.
  ~host_copy_pool();
  host_copy_pool(const host_copy_pool&) = delete;
  host_copy_pool& operator=(const host_copy_pool&) = delete;

  /// The number of worker threads.
  int threads() const noexcept { return int(workers_.size()); }

  /// Queues the copies (their buffers must stay valid until wait() returns for the job, or the pool
  /// is cancelled or destroyed), behind gate when one is given. Asynchronous: returns at once.
  /// @throws invalid_argument after cancel().
  job submit(std::span<const host_copy> copies, std::function<void()> gate = {});
  /// Blocks until every piece of j has been copied. @throws what its gate threw (the job's pieces are
  /// then not copied), error when the pool was cancelled before the job finished.
  void wait(const job& j);
  /// Whether j has ended (copied, failed or cancelled): wait() on it then returns or throws at once.
  bool ended(const job& j);
  /// Blocks until one of the jobs has ended (returns at once when none is given).
  void wait_any(std::span<const job* const> jobs);
  /// Drops every piece not started (their jobs end as cancelled), waits for the pieces and gates that
  /// are running; later submits are refused. When it returns, no thread touches any job's buffers.
  void cancel() noexcept;

 private:
  struct job_state {
    std::function<void()> gate;
    std::vector<host_copy> pieces;
    std::size_t next = 0;      // the next piece to take
    std::size_t left = 0;      // pieces not finished
    bool opened = false;       // the gate has run (or there is none)
    bool cancelled = false;
    std::exception_ptr error;  // what the gate threw
    std::uint64_t seq = 0;     // submission order
  };
  void work(std::stop_token stop);

  std::size_t min_piece_;
  int pieces_per_thread_;
  std::mutex m_;
  std::condition_variable_any work_cv_;  // a worker: a job or a piece is ready, or stop
  std::condition_variable done_cv_;      // the submitter: a job ended; cancel(): nothing is running
  std::deque<std::shared_ptr<job_state>> queue_;  // jobs with pieces not taken, oldest first
  std::size_t running_ = 0;                       // gates and pieces running now
  bool cancelled_ = false;
  std::uint64_t next_seq_ = 0;
  std::vector<std::jthread> workers_;  // last: stopped and joined before the rest is destroyed
};

}  // namespace resident::detail
