// Box-Muller pairs for the CPU backend. Compiled with -ffp-contract=off (CMakeLists.txt): every fma
// here is one written in detail/normal_math.hpp, so the bits are the device's.
#include "resident/random/detail/normal_math.hpp"

// On x86-64 without -mfma the functions come in two versions, picked once when the library is loaded:
// one with the fma instruction (fmaf and fma inline to it) and one calling libm's exact fma.
#if defined(__x86_64__) && !defined(__FMA__) && defined(__GNUC__)
#define RESIDENT_FMA_VERSIONS [[gnu::target_clones("fma", "default")]]
#else
#define RESIDENT_FMA_VERSIONS
#endif

namespace resident::random::detail {

RESIDENT_FMA_VERSIONS cos_sin<float> host_normal_pair(std::uint32_t a, std::uint32_t b, float mean, float sd) {
  return normal_pair(a, b, mean, sd);
}

RESIDENT_FMA_VERSIONS cos_sin<double> host_normal_pair(std::uint32_t w0, std::uint32_t w1, std::uint32_t w2,
                                                       std::uint32_t w3, double mean, double sd) {
  return normal_pair(w0, w1, w2, w3, mean, sd);
}

}  // namespace resident::random::detail
