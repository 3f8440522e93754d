#include "resident/memory/transfer.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/error.hpp"
#include "resident/device/event.hpp"
#include "resident/memory/ledger.hpp"
#include "resident/memory/pinned.hpp"
#include "resident/memory/pool.hpp"
#include <nvtx_ranges.hpp>
#include <omp.h>

namespace resident::detail {
namespace cu = detail::cuda;

namespace {
// Host copies in progress (parallel_memcpy calls of more than one piece). Each takes an equal share of
// the cores: OpenMP teams of all the cores from each of several host threads at once oversubscribe the
// machine, and the staged transfers of two threads then ran slower together than one alone.
std::atomic<int> copies_now{0};
}  // namespace

void parallel_memcpy(void* dst, const void* src, std::size_t bytes) noexcept {
  constexpr std::size_t piece = std::size_t(1) << 20;
  if (bytes <= 4 * piece) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  const long n = static_cast<long>(bytes / piece + (bytes % piece != 0));
  const int sharing = copies_now.fetch_add(1, std::memory_order_relaxed) + 1;
  const int team = std::max(1, omp_get_max_threads() / sharing);
#pragma omp parallel for schedule(static) num_threads(team)
  for (long i = 0; i < n; ++i) {
    std::size_t off = static_cast<std::size_t>(i) * piece;
    std::memcpy(d + off, s + off, std::min(piece, bytes - off));
  }
  copies_now.fetch_sub(1, std::memory_order_relaxed);
}

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
          return std::make_unique<stage_slot>(device_);
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

stage_slots& slots_of(device d) {
  static std::mutex m;
  static detail::per_device<std::unique_ptr<stage_slots>> all;
  std::lock_guard lock(m);
  auto& s = all[d];
  if (!s) s = std::make_unique<stage_slots>(d);
  return *s;
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

// Host memory partly over the array's own (possible on the CPU, where both are host memory) would be
// overwritten while it is read. The same memory is no copy at all and returns before this.
void refuse_partial_overlap(const void* dst, const void* src, std::size_t bytes, const char* what) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  if (d < s + bytes && s < d + bytes)
    RESIDENT_FAIL(std::string(what) + ": the host memory and the array's overlap (" + std::to_string(bytes) +
                  " bytes, " + std::to_string(d > s ? d - s : s - d) +
                  " apart); copy through separate host memory");
}

}  // namespace

void check_host_memory(const void* p, std::size_t n, const char* call) {
  if (!p && n > 0)
    RESIDENT_FAIL(std::string(call) + ": the host memory is a null pointer with " + std::to_string(n) +
                  " elements; give host memory of the array's size");
}

void copy_host_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s, staging how) {
  if (bytes == 0 || dst == src) return;  // nothing moves: nothing to count or forbid
  refuse_partial_overlap(dst, src, bytes, "host-to-device copy");
  device d = s.device();
  require(d);  // a copy that cannot be made is refused before it is counted
  record_transfer(d, direction::h2d, bytes);
  nvtx::named_range<"host-to-device"> range(bytes);
  if (d.is_cpu()) {
    parallel_memcpy(dst, src, bytes);
    return;
  }
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

void copy_device_to_host(void* dst, const void* src, std::size_t bytes, stream_ref s, sync mode, staging how) {
  if (bytes == 0 || dst == src) return;  // nothing moves: nothing to count or forbid
  refuse_partial_overlap(dst, src, bytes, "device-to-host copy");
  device d = s.device();
  require(d);  // a copy that cannot be made is refused before it is counted
  record_transfer(d, direction::d2h, bytes);
  nvtx::named_range<"device-to-host"> range(bytes);
  if (d.is_cpu()) {
    parallel_memcpy(dst, src, bytes);
    return;
  }
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

void copy_device_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s) {
  if (bytes == 0 || dst == src) return;  // nothing moves: nothing to count
  device d = s.device();
  require(d);  // a copy that cannot be made is refused before it is counted
  record_transfer(d, direction::d2d, bytes);
  nvtx::named_range<"device-to-device"> range(bytes);
  if (d.is_cpu())
    parallel_memcpy(dst, src, bytes);
  else
    cu::memcpy_async(d.index(), dst, src, bytes, cu::copy_kind::device_to_device, s.native());
}

void copy_peer(void* dst, stream_ref dst_s, const void* src, stream_ref src_s, std::size_t bytes) {
  if (bytes == 0) return;  // nothing moves: nothing to count
  const device d = dst_s.device(), s = src_s.device();
  RESIDENT_EXPECTS(d.is_cuda() && s.is_cuda() && !(d == s),
                   "copy_peer: from " + s.name() + " to " + d.name() + ": a peer copy joins two different GPUs");
  require(d);  // a copy that cannot be made is refused before it is counted
  require(s);
  cu::enable_peer_access(d.index(), s.index());
  record_transfer(d, direction::peer, bytes);
  cu::stream_after_peer(dst_s.native(), d.index(), src_s.native(), s.index());
  cu::memcpy_peer_async(dst, d.index(), src, s.index(), bytes, dst_s.native());
  // The source's stream waits for the copy, so that the source may be rewritten or freed there at
  // once. Inside a stream capture only when the source's stream is in it too: a stream outside must
  // not wait on captured work (the graph's replays are ordered by the stream they are launched on).
  if (cu::stream_is_capturing(src_s.native()) == cu::stream_is_capturing(dst_s.native()))
    cu::stream_after_peer(src_s.native(), s.index(), dst_s.native(), d.index());
}

}  // namespace resident::detail
