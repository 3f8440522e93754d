#pragma once
/// @file philox.hpp
/// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC'11),
/// the counter-based generator behind cuRAND's and Random123's Philox: four 32-bit words from a 128-bit
/// counter and a 64-bit key, the same bits on the CPU and the GPU.

#include <cstdint>

#include "resident/config.hpp"

namespace resident::random {

/// A Philox counter or result: four 32-bit words.
struct words4 {
  /// The words, w[0] first.
  std::uint32_t w[4];
};

namespace detail {
/// The 64-bit product of a and b: low word returned, high word in *hi. On the device __umulhi and a
/// 32-bit multiply: the 64-bit product there leaves ptxas adding a zero upper half to every high word
/// (19 extra adds per Philox block, measured in the SASS of a fill loop).
RESIDENT_HD inline std::uint32_t mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  return a * b;
#else
  const std::uint64_t p = std::uint64_t(a) * b;
  *hi = std::uint32_t(p >> 32);
  return std::uint32_t(p);
#endif
}
}  // namespace detail

/// Philox4x32 with 10 rounds. Matches Random123's philox4x32_10 bit for bit.
RESIDENT_HD inline words4 philox4x32_10(words4 ctr, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;  // multipliers
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;  // Weyl key increments
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    std::uint32_t hi0, hi1;
    const std::uint32_t lo0 = detail::mulhilo(m0, ctr.w[0], &hi0);
    const std::uint32_t lo1 = detail::mulhilo(m1, ctr.w[2], &hi1);
    ctr = words4{{hi1 ^ ctr.w[1] ^ k0, lo1, hi0 ^ ctr.w[3] ^ k1, lo0}};
    k0 += w0;
    k1 += w1;
  }
  return ctr;
}

/// The four words of block c (a 64-bit block index) of stream `seed`; `attempt` selects a further,
/// independent draw for rejection sampling (counter word 2).
RESIDENT_HD inline words4 philox_block(std::uint64_t seed, std::uint64_t c, std::uint32_t attempt = 0) {
  return philox4x32_10(words4{{std::uint32_t(c), std::uint32_t(c >> 32), attempt, 0u}}, std::uint32_t(seed),
                       std::uint32_t(seed >> 32));
}

/// Word `lane` of w without indexing the array at run time (a run-time index would move w from
/// registers to local memory on the GPU).
RESIDENT_HD inline std::uint32_t word(const words4& w, int lane) {
  return lane == 0 ? w.w[0] : lane == 1 ? w.w[1] : lane == 2 ? w.w[2] : w.w[3];
}

/// A float in [0, 1) from the top 24 bits of a word (every value a multiple of 2^-24).
RESIDENT_HD inline float unit_float(std::uint32_t w) { return float(w >> 8) * 0x1.0p-24f; }
/// A double in [0, 1) from 53 bits of two words.
RESIDENT_HD inline double unit_double(std::uint32_t hi, std::uint32_t lo) {
  return double((std::uint64_t(hi) << 21) ^ (lo >> 11)) * 0x1.0p-53;
}

}  // namespace resident::random
