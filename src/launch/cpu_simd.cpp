#include "resident/launch/detail/cpu_simd.hpp"

#include <cstdlib>
#include <string>

#include "resident/error.hpp"

namespace resident::detail {
namespace {

// The widest path the CPU runs and the C library backs (libmvec has AVX-512 and AVX2 variants).
cpu_simd widest() {
#if RESIDENT_CPU_SIMD_COPIES
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return cpu_simd::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return cpu_simd::avx2;
#endif
  return cpu_simd::baseline;
}

}  // namespace

const char* cpu_simd_name(cpu_simd path) {
  switch (path) {
    case cpu_simd::avx512: return "avx512";
    case cpu_simd::avx2: return "avx2";
    default: return "baseline";
  }
}

cpu_simd cpu_simd_path() {
  static const cpu_simd path = [] {
    const cpu_simd best = widest();
    const char* e = std::getenv("RESIDENT_CPU_SIMD");
    if (!e || !*e) return best;
    const std::string want = e;
    for (cpu_simd p : {cpu_simd::baseline, cpu_simd::avx2, cpu_simd::avx512})
      if (want == cpu_simd_name(p)) return p < best ? p : best;  // a cap: never beyond the CPU
    RESIDENT_FAIL("RESIDENT_CPU_SIMD='" + want + "' names no SIMD path; use baseline, avx2 or avx512 (or unset it "
                  "for the widest the CPU has)");
  }();
  return path;
}

}  // namespace resident::detail
