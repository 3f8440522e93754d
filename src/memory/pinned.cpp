#include "resident/memory/pinned.hpp"

#include <cstddef>
#include <cstdlib>
#include <limits>
#include <string>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/error.hpp"
#include "resident/memory/ledger.hpp"
#include "resident/memory/pool.hpp"

namespace resident::detail {
namespace cu = detail::cuda;

void* pinned_allocate(std::size_t bytes, bool* page_locked) {
  *page_locked = false;
  if (bytes == 0) return nullptr;
  auto fail = [bytes](const char* why) {
    return out_of_memory("pinned_buffer: a host allocation of " + format_bytes(double(bytes)) + " (" +
                             std::to_string(bytes) + " bytes) failed: " + why + "; use a smaller buffer",
                         bytes, 0, 0, 0);
  };
  // No allocator hands out more than PTRDIFF_MAX bytes, and rounding a larger count up would wrap.
  if (bytes > std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) - pool_alignment)
    throw fail("no allocation can be that large");
  void* p = nullptr;
  if (cuda_device_count() > 0) {
    p = cu::host_pinned_allocate(bytes);
    *page_locked = p != nullptr;
  } else {
    p = std::aligned_alloc(pool_alignment, (bytes + pool_alignment - 1) / pool_alignment * pool_alignment);
  }
  if (!p) throw fail("the system has not that much memory to give");
  return p;
}

void pinned_free(void* p, bool page_locked) noexcept {
  if (!p) return;
  if (page_locked)
    cu::host_pinned_free(p);
  else
    std::free(p);
}

}  // namespace resident::detail
