// The CUDA backend: the CUDA runtime through detail/cuda_runtime.hpp (src/backend/cuda/cuda_runtime.cpp,
// or src/backend/none/cuda_runtime.cpp in a build without CUDA, where every call that needs a GPU says
// how to get one). Pageable host memory crosses the bus staged through pinned double buffers.
#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include "backend/runtime.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/device/event.hpp"
#include "resident/error.hpp"
#include "resident/memory/pinned.hpp"

namespace resident::detail {
namespace cu = detail::cuda;
namespace {

constexpr std::size_t stage_bytes = transfer_tuning::stage_bytes;
constexpr std::size_t direct_below = transfer_tuning::direct_below;

// Pinned staging for pageable transfers. A slot is two chunk buffers, so the CPU copies one chunk while
// the DMA engine moves the other, with the events of the copies that last used each buffer. A call holds
// one slot for its whole transfer; calls from several host threads take slots of their own (made on
// demand, at most transfer_tuning::staging_slots per device; more callers wait for one to come back).
// A slot's events outlive its holder: an upload returns while its last chunks are still being read by
// the DMA engine, so the next holder, whatever its direction, waits for a buffer's event before the host
// writes it (upload) or the copy engine fills it (download).
struct stage_slot {
  std::array<pinned_buffer<char>, 2> buf;
  std::array<event, 2> done;
  std::array<bool, 2> recorded{false, false};
  explicit stage_slot(device d)
      : buf{pinned_buffer<char>(stage_bytes), pinned_buffer<char>(stage_bytes)}, done{event(d), event(d)} {}
  // The copy that last used buffer k, by any holder, has finished.
  void wait_free(int k) const {
    if (recorded[k]) done[k].synchronize();
  }
  void used(int k, stream_ref s) {
    done[k].record(s);
    recorded[k] = true;
  }
};

void release_slots_at_exit() noexcept;

class stage_slots {
 public:
  explicit stage_slots(device d) : device_(d) {}
  std::unique_ptr<stage_slot> take() {
    std::unique_lock lock(m_);
    for (;;) {
      if (!free_.empty()) {
        auto s = std::move(free_.back());
        free_.pop_back();
        return s;
      }
      if (made_ < transfer_tuning::staging_slots) {
        ++made_;
        lock.unlock();
        try {
          auto s = std::make_unique<stage_slot>(device_);
          release_slots_at_exit();
          return s;
        } catch (...) {
          std::lock_guard relock(m_);
          --made_;
          returned_.notify_one();
          throw;
        }
      }
      returned_.wait(lock);
    }
  }
  // The slots no call holds, freed (a call at exit still makes one anew); slots held by a thread still
  // transferring stay theirs, and one whose last copies cannot be waited for (a GPU in error) is left.
  void release_free() noexcept {
    std::lock_guard lock(m_);
    for (auto& s : free_) {
      try {
        s->wait_free(0);
        s->wait_free(1);
      } catch (...) {
        (void)s.release();
      }
    }
    made_ -= int(free_.size());
    free_.clear();
  }
  void give_back(std::unique_ptr<stage_slot> s) noexcept {
    {
      std::lock_guard lock(m_);
      free_.push_back(std::move(s));
    }
    returned_.notify_one();
  }

 private:
  device device_;
  std::mutex m_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<stage_slot>> free_;
  int made_ = 0;
};

struct slot_table {
  std::mutex m;
  detail::per_device<std::unique_ptr<stage_slots>> all;
};
slot_table& slot_table_of_process() {
  static auto* t = new slot_table;  // never destroyed: transfers at exit still reach it
  return *t;
}

stage_slots& slots_of(device d) {
  auto& t = slot_table_of_process();
  std::lock_guard lock(t.m);
  auto& s = t.all[d];
  if (!s) s = std::make_unique<stage_slots>(d);
  return *s;
}

// The pinned buffers of the slots no call holds go back at exit, so a leak check (compute-sanitizer's)
// sees none of resident's. Registered after the first slot's cudaMallocHost, that is after the CUDA
// runtime's own exit handler, so it runs before the runtime is torn down; a forked child, whose CUDA
// state is not its own, frees nothing.
void release_slots_at_exit() noexcept {
  static const pid_t parent = getpid();
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit([] {
      if (getpid() != parent) return;
      auto& t = slot_table_of_process();
      std::lock_guard lock(t.m);
      for (auto& s : t.all.all())
        if (s) s->release_free();
    });
  });
}

// One slot held for the length of a transfer, given back on every path out (a failed copy included:
// its events still describe the work queued, so the next holder waits for it).
class slot_lease {
 public:
  explicit slot_lease(device d) : slots_(slots_of(d)), slot_(slots_.take()) {}
  ~slot_lease() { slots_.give_back(std::move(slot_)); }
  slot_lease(const slot_lease&) = delete;
  slot_lease& operator=(const slot_lease&) = delete;
  stage_slot* operator->() const noexcept { return slot_.get(); }

 private:
  stage_slots& slots_;
  std::unique_ptr<stage_slot> slot_;
};

void staged_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s, staging how) {
  const device d = s.device();
  if (bytes < direct_below || how == staging::none || cu::is_pinned(src)) {
    cu::memcpy_async(d.index(), dst, src, bytes, cu::copy_kind::host_to_device, s.native());
    return;
  }
  slot_lease st(d);
  auto* out = static_cast<char*>(dst);
  auto* in = static_cast<const char*>(src);
  int k = 0;
  for (std::size_t off = 0, n = 0; off < bytes; off += n, k ^= 1) {
    n = std::min(stage_bytes, bytes - off);
    st->wait_free(k);  // the DMA that last used this buffer, in this call or an earlier one, has finished
    parallel_memcpy(st->buf[k].data(), in + off, n);
    cu::memcpy_async(d.index(), out + off, st->buf[k].data(), n, cu::copy_kind::host_to_device, s.native());
    st->used(k, s);
  }
}

void staged_to_host(void* dst, const void* src, std::size_t bytes, stream_ref s, sync mode, staging how) {
  const device d = s.device();
  if (bytes < direct_below || how == staging::none || cu::is_pinned(dst)) {
    cu::memcpy_async(d.index(), dst, src, bytes, cu::copy_kind::device_to_host, s.native());
    if (mode == sync::blocking || !cu::is_pinned(dst)) cu::stream_synchronize(d.index(), s.native());
    return;
  }
  slot_lease st(d);
  auto* out = static_cast<char*>(dst);
  auto* in = static_cast<const char*>(src);
  // Chunk i goes device -> buffer i%2 while the CPU drains chunk i-1 from the other buffer. Before the
  // first fill of a buffer, the upload that last read it (another call's, on another stream) must end.
  std::size_t prev_off = 0, prev_n = 0;
  int k = 0;
  for (std::size_t off = 0, n = 0; off < bytes; off += n, k ^= 1) {
    n = std::min(stage_bytes, bytes - off);
    st->wait_free(k);
    cu::memcpy_async(d.index(), st->buf[k].data(), in + off, n, cu::copy_kind::device_to_host, s.native());
    st->used(k, s);
    if (prev_n) {
      st->done[k ^ 1].synchronize();
      parallel_memcpy(out + prev_off, st->buf[k ^ 1].data(), prev_n);
    }
    prev_off = off;
    prev_n = n;
  }
  st->done[k ^ 1].synchronize();
  parallel_memcpy(out + prev_off, st->buf[k ^ 1].data(), prev_n);
}

// A device-to-device copy of 256 MiB through the driver's own allocations and a stream of its own:
// nothing of it enters the ledger or the pool.
double measure_device_copy(int dev) {
  constexpr std::size_t bytes = std::size_t(256) << 20;
  void* a = cu::raw_malloc(dev, bytes);
  void* b = nullptr;
  cuda_stream_t s = nullptr;
  cuda_event_t e0 = nullptr, e1 = nullptr;
  double best = 0;
  try {
    b = cu::raw_malloc(dev, bytes);
    s = cu::stream_create(dev);
    e0 = cu::event_create(dev);
    e1 = cu::event_create(dev);
    for (int rep = 0; rep < 6; ++rep) {
      cu::event_record(dev, e0, s);
      cu::memcpy_async(dev, b, a, bytes, cu::copy_kind::device_to_device, s);
      cu::event_record(dev, e1, s);
      const double ms = cu::event_elapsed_ms(e0, e1);
      if (rep > 0 && ms > 0) best = std::max(best, 2.0 * double(bytes) / (ms / 1e3) / 1e9);
    }
  } catch (...) {
    cu::event_destroy(e0);
    cu::event_destroy(e1);
    if (s) cu::stream_destroy(s);
    if (b) cu::raw_free(b);
    cu::raw_free(a);
    throw;
  }
  cu::event_destroy(e0);
  cu::event_destroy(e1);
  cu::stream_destroy(s);
  cu::raw_free(b);
  cu::raw_free(a);
  return best;
}

class cuda_backend final : public runtime {
 public:
  bool host_memory() const noexcept override { return false; }
  bool queued() const noexcept override { return true; }

  void require(device d) const override {
    if (d.index() < 0)
      RESIDENT_FAIL("device " + d.name() + " does not exist: CUDA device indices start at 0", device_unavailable);
    int n = cuda_device_count();
    if (n == 0)
      RESIDENT_FAIL("device " + d.name() + " is not available: " + cuda_unavailable_reason() +
                        ". Use the cpu device (RESIDENT_DEVICE=cpu or --device cpu)", device_unavailable);
    if (d.index() >= n)
      RESIDENT_FAIL("device " + d.name() + " does not exist: this machine has " + std::to_string(n) +
                        " CUDA device" + (n == 1 ? "" : "s") + " (cuda:0 .. cuda:" + std::to_string(n - 1) + ")",
                    device_unavailable);
  }
  device_properties properties(device d) override {
    // Cached: cudaGetDeviceProperties is too slow for every launch's validation.
    std::lock_guard lock(properties_m_);
    auto it = properties_.find(d.index());
    if (it == properties_.end()) it = properties_.emplace(d.index(), cu::properties(d.index())).first;
    return it->second;
  }
  void synchronize(device d) override { cu::synchronize_device(d.index()); }
  int make_current(device d) override {
    const int now = cu::current_device();
    if (now == d.index()) return -1;
    cu::set_device(d.index());
    return now;
  }
  memory_figures memory(device d) override {
    memory_figures m;
    cu::mem_info(d.index(), &m.free, &m.total);
    return m;
  }
  double measure_copy_rate(device d) override { return measure_device_copy(d.index()); }

  cuda_stream_t stream_create(device d) override { return cu::stream_create(d.index()); }
  void stream_destroy(cuda_stream_t s) noexcept override { cu::stream_destroy(s); }
  void stream_synchronize(stream_ref s) override { cu::stream_synchronize(s.device().index(), s.native()); }
  void stream_after(stream_ref after, stream_ref before) override {
    if (before.device() == after.device())
      cu::stream_after(after.device().index(), after.native(), before.native());
    else
      cu::stream_after_peer(after.native(), after.device().index(), before.native(), before.device().index());
  }
  bool capturing(stream_ref s) override { return cu::stream_is_capturing(s.native()); }
  cuda_event_t event_create(device d) override { return cu::event_create(d.index()); }
  void event_destroy(cuda_event_t e) noexcept override { cu::event_destroy(e); }
  void event_record(cuda_event_t e, stream_ref s) override { cu::event_record(s.device().index(), e, s.native()); }
  void event_synchronize(cuda_event_t e) override { cu::event_synchronize(e); }
  void event_wait(cuda_event_t e, stream_ref s) override { cu::stream_wait_event(s.device().index(), s.native(), e); }
  double event_elapsed_ms(cuda_event_t a, cuda_event_t b) override { return cu::event_elapsed_ms(a, b); }

  pool_block allocate(std::size_t bytes, stream_ref s, bool trim_first) override {
    const int dev = s.device().index();
    if (trim_first) cu::pool_trim(dev, s.native());
    void* p = cu::pool_allocate(dev, bytes, s.native());
    if (!p) {
      cu::pool_trim(dev, s.native());
      p = cu::pool_allocate(dev, bytes, s.native());
    }
    return {p, std::nullopt};  // the driver's pool says only how much it reserves
  }
  void deallocate(void* p, std::size_t, stream_ref s, bool caching) override {
    cu::pool_deallocate(s.device().index(), p, s.native());
    if (!caching) cu::pool_trim(s.device().index(), s.native());
  }
  std::size_t pool_reserved(device d) override { return cu::pool_reserved(d.index()); }
  std::optional<std::size_t> largest_cached(device) override { return std::nullopt; }
  void pool_trim(stream_ref s) override { cu::pool_trim(s.device().index(), s.native()); }

  void copy_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s, staging how) override {
    staged_to_device(dst, src, bytes, s, how);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes, stream_ref s, sync mode, staging how) override {
    staged_to_host(dst, src, bytes, s, mode, how);
  }
  void copy_on_device(void* dst, const void* src, std::size_t bytes, stream_ref s) override {
    cu::memcpy_async(s.device().index(), dst, src, bytes, cu::copy_kind::device_to_device, s.native());
  }
  void enable_peer_access(device a, device b) override { cu::enable_peer_access(a.index(), b.index()); }
  void copy_peer(void* dst, stream_ref dst_s, const void* src, stream_ref src_s, std::size_t bytes) override {
    const int d = dst_s.device().index(), s = src_s.device().index();
    cu::stream_after_peer(dst_s.native(), d, src_s.native(), s);
    cu::memcpy_peer_async(dst, d, src, s, bytes, dst_s.native());
    // The source's stream waits for the copy, so that the source may be rewritten or freed there at
    // once. Inside a stream capture only when the source's stream is in it too: a stream outside must
    // not wait on captured work (the graph's replays are ordered by the stream they are launched on).
    if (cu::stream_is_capturing(src_s.native()) == cu::stream_is_capturing(dst_s.native()))
      cu::stream_after_peer(src_s.native(), s, dst_s.native(), d);
  }
  bool copies_directly(const void* host) noexcept override { return cu::is_pinned(host); }
  std::optional<device> owner(const void* p, bool with_managed) noexcept override {
    const int d = with_managed ? cu::pointer_device(p) : cu::device_only_memory(p);
    if (d < 0) return std::nullopt;
    return device::cuda(d);
  }

  bool matmul_supported(matmul_algo a, std::size_t es) const noexcept override {
    return a != matmul_algo::blocked && es == 4;  // naive, shared, tuned, vendor_tf32: float
  }
  // The kernels and cuBLAS take int extents.
  bool matmul_int_extents(matmul_algo) const noexcept override { return true; }
  void matmul(const gemm_args& g, matmul_algo a) override { matmul_cuda(g, a); }

 private:
  std::mutex properties_m_;
  std::map<int, device_properties> properties_;
};

}  // namespace

runtime& cuda_runtime() noexcept {
  static auto* b = new cuda_backend;  // never destroyed: arrays freed at exit still reach it
  return *b;
}

}  // namespace resident::detail
