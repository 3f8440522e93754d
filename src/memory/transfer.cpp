#include "resident/memory/transfer.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "backend/runtime.hpp"
#include "resident/error.hpp"
#include "resident/launch/detail/launch_cpu.hpp"
#include "resident/memory/ledger.hpp"
#include <nvtx_ranges.hpp>
#include <omp.h>

namespace resident::detail {
namespace {
// Host copies in progress (parallel_memcpy calls of more than one piece). Each takes an equal share of
// the cores: OpenMP teams of all the cores from each of several host threads at once oversubscribe the
// machine, and the staged transfers of two threads then ran slower together than one alone.
std::atomic<int> copies_now{0};
}  // namespace

void parallel_memcpy(void* dst, const void* src, std::size_t bytes) noexcept {
  constexpr std::size_t piece = std::size_t(1) << 20;
  if (bytes <= 4 * piece || in_forked_child()) {  // a fork child has no OpenMP team (src/io/fork.cpp)
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
  backend_of(d).copy_to_device(dst, src, bytes, s, how);
}

void copy_device_to_host(void* dst, const void* src, std::size_t bytes, stream_ref s, sync mode, staging how) {
  if (bytes == 0 || dst == src) return;  // nothing moves: nothing to count or forbid
  refuse_partial_overlap(dst, src, bytes, "device-to-host copy");
  device d = s.device();
  require(d);  // a copy that cannot be made is refused before it is counted
  record_transfer(d, direction::d2h, bytes);
  nvtx::named_range<"device-to-host"> range(bytes);
  backend_of(d).copy_to_host(dst, src, bytes, s, mode, how);
}

void copy_device_to_device(void* dst, const void* src, std::size_t bytes, stream_ref s) {
  if (bytes == 0 || dst == src) return;  // nothing moves: nothing to count
  device d = s.device();
  require(d);  // a copy that cannot be made is refused before it is counted
  record_transfer(d, direction::d2d, bytes);
  nvtx::named_range<"device-to-device"> range(bytes);
  backend_of(d).copy_on_device(dst, src, bytes, s);
}

void copy_peer(void* dst, stream_ref dst_s, const void* src, stream_ref src_s, std::size_t bytes) {
  if (bytes == 0) return;  // nothing moves: nothing to count
  const device d = dst_s.device(), s = src_s.device();
  runtime& rt = backend_of(d);
  // Devices with memory of their own, of one kind (one backend's peers).
  RESIDENT_EXPECTS(!rt.host_memory() && &backend_of(s) == &rt && !(d == s),
                   "copy_peer: from " + s.name() + " to " + d.name() + ": a peer copy joins two different GPUs");
  require(d);  // a copy that cannot be made is refused before it is counted
  require(s);
  rt.enable_peer_access(d, s);
  record_transfer(d, direction::peer, bytes);
  rt.copy_peer(dst, dst_s, src, src_s, bytes);
}

}  // namespace resident::detail
