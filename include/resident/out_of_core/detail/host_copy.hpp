#pragma once
/// @file host_copy.hpp
/// Host-to-host copies for staging pageable memory (src/out_of_core/host_copy.cpp): stores that bypass
/// the caches, and the cut of a copy into pieces of whole pages for several threads.

#include <cstddef>
#include <vector>

namespace resident::detail {

/// One copy between host buffers: bytes from src to dst.
struct host_copy {
  void* dst = nullptr;        ///< where the bytes go
  const void* src = nullptr;  ///< where they come from (not overlapping dst)
  std::size_t bytes = 0;      ///< how many
  /// Plain stores (memcpy), for bytes read again soon from the cache (a staging slot the copy engine
  /// uploads next); else streaming stores from 64 KiB (copy_streaming).
  bool plain = false;
};

/// The stores copy_nontemporal uses.
enum class nontemporal_stores {
  best,    ///< the widest this processor has
  bytes16, ///< 16-byte SSE2 streaming stores (every x86-64)
  bytes32, ///< 32-byte AVX streaming stores (when the processor has AVX)
};

/// Whether this processor (and build) can use the stores: `best` always; on other than x86-64 only
/// `best` (which is then memcpy).
bool has_nontemporal_stores(nontemporal_stores s) noexcept;

/// Copies bytes from src to dst (not overlapping) with streaming stores on x86-64: whole 64-byte lines
/// of dst are written around the caches (no read of dst's lines first, the data does not evict the
/// caches' contents); the bytes before dst's first line boundary and after its last go through memcpy.
/// Fenced (`sfence`): the stores are visible to other threads and to DMA once it returns. 16-byte
/// stores where s is not available here, memcpy on other processors. Any alignment and size (0: dst and src may be
/// null).
void copy_nontemporal(void* dst, const void* src, std::size_t bytes,
                      nontemporal_stores s = nontemporal_stores::best) noexcept;

/// Copies bytes from src to dst (not overlapping) for data read next by a DMA engine or by the user
/// much later, not by this core: copy_nontemporal from 64 KiB, memcpy below (a few lines gain nothing
/// and the streaming stores need a fence). The stores are visible to other threads once it returns.
void copy_streaming(void* dst, const void* src, std::size_t bytes) noexcept;

/// The page size the cuts of split_in_pages fall on.
inline constexpr std::size_t copy_page_bytes = 4096;

/// Cuts c into at most `pieces` (at least 1) copies that together copy c, each of whole 4 KiB pages
/// of the destination (the first also takes the bytes before dst's first page boundary, the last
/// those after its last): no two write the same page or cache line, and their page counts differ by at
/// most one. Fewer pieces when c has fewer pages; none when c.bytes is 0.
std::vector<host_copy> split_in_pages(const host_copy& c, std::size_t pieces);

}  // namespace resident::detail
