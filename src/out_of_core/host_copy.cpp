#include "resident/out_of_core/detail/host_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace resident::detail {
namespace {

// Below this, copy_streaming uses memcpy: the lines it writes are few, and streaming stores need a fence.
constexpr std::size_t streaming_from = std::size_t(64) << 10;

}  // namespace

#if defined(__x86_64__)
namespace {

// Whole 64-byte lines from s (any alignment) to d (64-byte aligned), around the caches.
void stream_lines_16(unsigned char* d, const unsigned char* s, std::size_t lines) noexcept {
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
}

// The same with AVX, compiled for it whatever the build's target; called only where the processor has it.
__attribute__((target("avx"))) void stream_lines_32(unsigned char* d, const unsigned char* s,
                                                     std::size_t lines) noexcept {
  for (std::size_t i = 0; i < lines; ++i, d += 64, s += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
  }
}

bool processor_has_avx() noexcept {
  static const bool avx = __builtin_cpu_supports("avx");  // also asks whether the OS saves its registers
  return avx;
}

}  // namespace

bool has_nontemporal_stores(nontemporal_stores s) noexcept {
  return s != nontemporal_stores::bytes32 || processor_has_avx();
}

void copy_nontemporal(void* dst, const void* src, std::size_t bytes, nontemporal_stores s) noexcept {
  if (bytes == 0) return;  // dst and src may then be null
  auto* d = static_cast<unsigned char*>(dst);
  const auto* from = static_cast<const unsigned char*>(src);
  // Up to dst's next line boundary with memcpy, whole lines streamed, the tail with memcpy.
  const std::size_t head = std::min(bytes, (64 - (reinterpret_cast<std::uintptr_t>(d) & 63)) & 63);
  std::memcpy(d, from, head);
  d += head;
  from += head;
  const std::size_t lines = (bytes - head) / 64;
  if (s != nontemporal_stores::bytes16 && processor_has_avx())
    stream_lines_32(d, from, lines);
  else
    stream_lines_16(d, from, lines);
  std::memcpy(d + lines * 64, from + lines * 64, bytes - head - lines * 64);
  _mm_sfence();  // streaming stores are weakly ordered: visible before the caller says "done"
}

#else  // other processors: their memcpy

bool has_nontemporal_stores(nontemporal_stores s) noexcept { return s == nontemporal_stores::best; }

void copy_nontemporal(void* dst, const void* src, std::size_t bytes, nontemporal_stores) noexcept {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

#endif

void copy_streaming(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes >= streaming_from)
    copy_nontemporal(dst, src, bytes);
  else if (bytes != 0)  // dst and src may then be null
    std::memcpy(dst, src, bytes);
}

std::vector<host_copy> split_in_pages(const host_copy& c, std::size_t pieces) {
  std::vector<host_copy> out;
  if (c.bytes == 0) return out;
  auto* d = static_cast<unsigned char*>(c.dst);
  const auto* s = static_cast<const unsigned char*>(c.src);
  // Bytes before dst's first page boundary, then pages (the last one possibly partial).
  const std::size_t head =
      std::min(c.bytes, (copy_page_bytes - (reinterpret_cast<std::uintptr_t>(d) % copy_page_bytes)) % copy_page_bytes);
  const std::size_t pages = (c.bytes - head + copy_page_bytes - 1) / copy_page_bytes;
  const std::size_t n = std::clamp<std::size_t>(pieces, 1, std::max<std::size_t>(pages, 1));
  const std::size_t base = pages / n, extra = pages % n;  // the first `extra` pieces take one page more
  out.reserve(n);
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t first_page = i * base + std::min(i, extra);
    const std::size_t end = i + 1 == n ? c.bytes : head + (first_page + base + (i < extra ? 1 : 0)) * copy_page_bytes;
    out.push_back({d + at, s + at, end - at, c.plain});
    at = end;
  }
  return out;
}

}  // namespace resident::detail
