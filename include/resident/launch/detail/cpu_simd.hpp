#pragma once
/// @file cpu_simd.hpp
/// How the CPU backend's loops reach SIMD (docs/cpu.md). A loop body runs through cpu_simd_run, which
/// calls it from one of three copies compiled for the widest vectors the CPU has, chosen once at run
/// time: AVX-512, AVX2 + FMA, or the build's baseline. Each copy is `flatten`ed, so the loop and the
/// user's element functions inline into it and GCC vectorizes them for that copy's registers; calls to
/// sinf, expf, ... become calls to glibc's vector math library (libmvec, _ZGV* functions, up to 4 ULP
/// as glibc states; docs/cpu.md has the measured bounds), declared below as SIMD functions. GCC turns
/// a math call into a vector call only where errno need not be set: the library's targets carry
/// -fno-math-errno (RESIDENT_VECTOR_MATH in CMake). Elsewhere (other compilers, nvcc's host pass, other
/// C libraries) the same loops run as ordinary code, vectorized where the compiler manages.

#include <cmath>

namespace resident::detail {

/// The SIMD path the CPU backend's loops run: the widest the CPU has, capped by RESIDENT_CPU_SIMD
/// (baseline | avx2 | avx512) when set.
enum class cpu_simd { baseline, avx2, avx512 };

/// The path chosen for this process (read once). @throws invalid_argument when RESIDENT_CPU_SIMD
/// names no path.
cpu_simd cpu_simd_path();
/// "baseline", "avx2" or "avx512".
const char* cpu_simd_name(cpu_simd path);

}  // namespace resident::detail

/// glibc's vector math functions (libmvec), from the version that has them: X(name) for name and
/// name##f of one argument, X2(name) of two. One list for the declarations below and the run-time
/// kernels' text (src/jit/host.cpp).
#define RESIDENT_LIBMVEC_2_22(X, X2) X(sin) X(cos) X(exp) X(log) X2(pow)
#define RESIDENT_LIBMVEC_2_35(X, X2)                                                                   \
  X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(tanh) X(asinh) X(acosh) X(atanh) X(exp2) X(expm1) \
  X(log2) X(log10) X(log1p) X(cbrt) X(erf) X(erfc) X2(atan2) X2(hypot)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define RESIDENT_CPU_SIMD_COPIES 1
// glibc declares these as SIMD functions only under -ffast-math; the same declarations, without it.
#if defined(__GLIBC__) && !defined(__FAST_MATH__)
#define RESIDENT_SIMD_DECLARE(name)                                                  \
  extern "C" float name##f(float) noexcept __attribute__((__simd__("notinbranch"))); \
  extern "C" double name(double) noexcept __attribute__((__simd__("notinbranch")));
#define RESIDENT_SIMD_DECLARE2(name)                                                        \
  extern "C" float name##f(float, float) noexcept __attribute__((__simd__("notinbranch"))); \
  extern "C" double name(double, double) noexcept __attribute__((__simd__("notinbranch")));
#if __GLIBC_PREREQ(2, 22)
RESIDENT_LIBMVEC_2_22(RESIDENT_SIMD_DECLARE, RESIDENT_SIMD_DECLARE2)
#endif
#if __GLIBC_PREREQ(2, 35)
RESIDENT_LIBMVEC_2_35(RESIDENT_SIMD_DECLARE, RESIDENT_SIMD_DECLARE2)
#endif
#undef RESIDENT_SIMD_DECLARE
#undef RESIDENT_SIMD_DECLARE2
#endif
#else
#define RESIDENT_CPU_SIMD_COPIES 0
#endif

namespace resident::detail {

/// Whether cpu_simd_run has the copies (GCC on x86-64, not nvcc's host pass).
constexpr bool cpu_simd_copies = RESIDENT_CPU_SIMD_COPIES;  // internal: nvcc's units see false

#if RESIDENT_CPU_SIMD_COPIES
// The copies: everything body calls inlines into them (flatten), compiled for their target.
template <class Body>
[[gnu::target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"), gnu::flatten]] void cpu_simd_avx512(Body& body) {
  body();
}
template <class Body>
[[gnu::target("avx2,fma"), gnu::flatten]] void cpu_simd_avx2(Body& body) {
  body();
}
template <class Body>
[[gnu::flatten]] void cpu_simd_baseline(Body& body) {
  body();
}
#endif

/// Runs body() in the copy compiled for the process's SIMD path (cpu_simd_path()).
template <class Body>
void cpu_simd_run(Body&& body) {
#if RESIDENT_CPU_SIMD_COPIES
  switch (cpu_simd_path()) {
    case cpu_simd::avx512: return cpu_simd_avx512(body);
    case cpu_simd::avx2: return cpu_simd_avx2(body);
    default: return cpu_simd_baseline(body);
  }
#else
  body();
#endif
}

}  // namespace resident::detail
