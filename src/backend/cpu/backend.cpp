// The CPU backend: host memory, work done when it is issued (streams and events are null handles
// that only order nothing and mark time), a caching host pool, memcpy for every copy.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <sanitizer/asan_interface.h>
#include <unistd.h>

#include "backend/runtime.hpp"
#include "resident/detail/fork.hpp"
#include "resident/error.hpp"
#include "resident/memory/pool.hpp"
#include "resident/memory/transfer.hpp"

namespace resident::detail {
namespace {

// Under AddressSanitizer the pool poisons what its blocks hold beyond the request and whole cached
// blocks, so an access past an array's end or into a freed array is reported even inside a pooled block
// (tests/sanitizer/planted_oob.cpp proves it). Without ASan the macros are no-ops.
void mark_live(void* p, std::size_t bytes, std::size_t r) {
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(p) + bytes, r - bytes);
}

// The CPU pool caches freed blocks by their rounded size and hands them out again for the same size.
// It keeps at most host_pool_release_threshold bytes cached: past that, the blocks freed longest ago go
// back to the system first (the block just freed always stays, so one large array freed and made
// again in a loop is still a hit). trim() returns everything.
class host_pool {
 public:
  host_pool() = default;
  ~host_pool() { trim(); }  // cached blocks go back at exit; live ones belong to their arrays
  // bytes <= largest_request, so rounding up cannot wrap.
  static std::size_t rounded(std::size_t bytes) {
    std::size_t g = bytes <= (1u << 20) ? pool_alignment : 4096;
    return (bytes + g - 1) / g * g;
  }
  void* allocate(std::size_t bytes, bool* hit) {
    std::size_t r = rounded(bytes);
    {
      std::lock_guard lock(m_);
      auto it = free_.find(r);
      if (it != free_.end() && !it->second.empty()) {
        const auto block = it->second.back();  // the most recently freed of this size
        it->second.pop_back();
        void* p = block->second;
        age_.erase(block);
        cached_ -= r;
        *hit = true;
        mark_live(p, bytes, r);
        return p;
      }
    }
    *hit = false;
    void* p = std::aligned_alloc(pool_alignment, r);
    if (p) {
      reserved_ += r;
      mark_live(p, bytes, r);
    }
    return p;
  }
  void deallocate(void* p, std::size_t bytes, bool caching) {
    std::size_t r = rounded(bytes);
    ASAN_UNPOISON_MEMORY_REGION(p, r);
    if (!caching) {
      std::free(p);
      reserved_ -= r;
      return;
    }
    std::lock_guard lock(m_);
    ASAN_POISON_MEMORY_REGION(p, r);
    free_[r].push_back(age_.insert(age_.end(), {r, p}));
    cached_ += r;
    // Past the threshold, the oldest cached blocks go back. Within one size, blocks are cached and
    // taken from the back, so the oldest of a size is its list's front.
    while (cached_ > host_pool_release_threshold && age_.size() > 1) {
      const auto [size, old] = age_.front();
      auto& same = free_[size];
      same.pop_front();
      if (same.empty()) free_.erase(size);
      age_.pop_front();
      ASAN_UNPOISON_MEMORY_REGION(old, size);
      std::free(old);
      cached_ -= size;
      reserved_ -= size;
    }
  }
  void trim() {
    std::lock_guard lock(m_);
    for (const auto& [r, p] : age_) {
      ASAN_UNPOISON_MEMORY_REGION(p, r);
      std::free(p);
      reserved_ -= r;
    }
    age_.clear();
    free_.clear();
    cached_ = 0;
  }
  std::size_t reserved() const { return reserved_; }
  /// The largest block the pool caches (what it can hand out without asking the system).
  std::size_t largest_cached() {
    std::lock_guard lock(m_);
    for (auto it = free_.rbegin(); it != free_.rend(); ++it)
      if (!it->second.empty()) return it->first;
    return 0;
  }
  std::mutex& lock_for_fork() { return m_; }

 private:
  using block_list = std::list<std::pair<std::size_t, void*>>;  // (rounded size, block), oldest first
  std::mutex m_;
  block_list age_;
  std::map<std::size_t, std::deque<block_list::iterator>> free_;  // per size, oldest first
  std::size_t cached_ = 0;
  std::atomic<std::size_t> reserved_{0};
};

host_pool& cpu_pool() {
  static auto* p = new host_pool;  // never destroyed: arrays freed at exit still reach it
  return *p;
}
// Held only around its own lists (no other lock taken under it): a leaf across fork().
const int pool_guarded = detail::guard_across_fork(cpu_pool().lock_for_fork(), nullptr, true);

device_properties cpu_properties() {
  device_properties p;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) p.name = line.substr(c + 2);
      break;
    }
  }
  if (p.name.empty()) p.name = "host CPU";
  p.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) p.memory_bytes = static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  return p;
}

class cpu_backend final : public runtime {
 public:
  // The pool is made first, so that it outlives the backend (arrays freed at exit still find it).
  cpu_backend() { (void)cpu_pool(); }

  bool host_memory() const noexcept override { return true; }
  bool queued() const noexcept override { return false; }

  void require(device) const override {}
  device_properties properties(device) override {
    static const device_properties p = cpu_properties();
    return p;
  }
  void synchronize(device) override {}
  int make_current(device) override { return -1; }
  memory_figures memory(device) override {
    memory_figures m;
    const long page = sysconf(_SC_PAGE_SIZE), avail = sysconf(_SC_AVPHYS_PAGES), all = sysconf(_SC_PHYS_PAGES);
    if (page > 0 && avail > 0) m.free = std::size_t(avail) * std::size_t(page);
    if (page > 0 && all > 0) m.total = std::size_t(all) * std::size_t(page);
    return m;
  }
  double measure_copy_rate(device) override {
    constexpr std::size_t bytes = std::size_t(64) << 20;
    std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
    std::memset(a.get(), 1, bytes);
    std::memset(b.get(), 2, bytes);
    double best = 0;
    for (int rep = 0; rep < 4; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      parallel_memcpy(b.get(), a.get(), bytes);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0 && s > 0) best = std::max(best, 2.0 * double(bytes) / s / 1e9);
    }
    return best;
  }

  cuda_stream_t stream_create(device) override { return nullptr; }
  void stream_destroy(cuda_stream_t) noexcept override {}
  void stream_synchronize(stream_ref) override {}
  void stream_after(stream_ref, stream_ref) override {}
  bool capturing(stream_ref) override { return false; }
  cuda_event_t event_create(device) override { return nullptr; }
  void event_destroy(cuda_event_t) noexcept override {}
  void event_record(cuda_event_t, stream_ref) override {}
  void event_synchronize(cuda_event_t) override {}
  void event_wait(cuda_event_t, stream_ref) override {}
  double event_elapsed_ms(cuda_event_t, cuda_event_t) override {
    RESIDENT_FAIL("elapsed_ms: CPU events are timed on the host clock, not through the backend");
  }

  pool_block allocate(std::size_t bytes, stream_ref, bool trim_first) override {
    host_pool& pool = cpu_pool();
    if (trim_first) pool.trim();
    bool hit = false;
    void* p = pool.allocate(bytes, &hit);
    if (!p) {
      pool.trim();
      p = pool.allocate(bytes, &hit);
    }
    return {p, hit};
  }
  void deallocate(void* p, std::size_t bytes, stream_ref, bool caching) override {
    cpu_pool().deallocate(p, bytes, caching);
  }
  std::size_t pool_reserved(device) override { return cpu_pool().reserved(); }
  std::optional<std::size_t> largest_cached(device) override { return cpu_pool().largest_cached(); }
  void pool_trim(stream_ref) override { cpu_pool().trim(); }

  void copy_to_device(void* dst, const void* src, std::size_t bytes, stream_ref, staging) override {
    parallel_memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, stream_ref, sync, staging) override {
    parallel_memcpy(dst, src, bytes);
  }
  void copy_on_device(void* dst, const void* src, std::size_t bytes, stream_ref) override {
    parallel_memcpy(dst, src, bytes);
  }
  void enable_peer_access(device, device) override { no_peers(); }
  void copy_peer(void*, stream_ref, const void*, stream_ref, std::size_t) override { no_peers(); }
  bool copies_directly(const void*) noexcept override { return true; }
  std::optional<device> owner(const void*, bool) noexcept override { return std::nullopt; }

  bool matmul_supported(matmul_algo a, std::size_t) const noexcept override {
    return a == matmul_algo::naive || a == matmul_algo::blocked;
  }
  // naive and blocked index with size_t; BLAS counts in int.
  bool matmul_int_extents(matmul_algo a) const noexcept override {
    return a == matmul_algo::vendor || a == matmul_algo::vendor_tf32;
  }
  void matmul(const gemm_args& g, matmul_algo a) override { matmul_cpu(g, a); }

 private:
  [[noreturn]] static void no_peers() {
    RESIDENT_FAIL("peer copies join two GPUs; the CPU has one memory, copy within it");
  }
};

}  // namespace

runtime& cpu_runtime() noexcept {
  static auto* b = new cpu_backend;  // never destroyed: arrays freed at exit still reach it
  return *b;
}
// Made when the library loads, not by the first thread to use it: a fork() while another thread made
// it would leave the child waiting on the static's guard for good.
namespace {
const bool cpu_runtime_made = (cpu_runtime(), true);
}

}  // namespace resident::detail
