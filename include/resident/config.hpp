#pragma once
/// @file config.hpp
/// Version, the one host/device macro, and which backends this build contains.

#include <cstddef>

/// Major version of this build of resident.
#define RESIDENT_VERSION_MAJOR 0
/// Minor version of this build of resident.
#define RESIDENT_VERSION_MINOR 1
/// Patch version of this build of resident.
#define RESIDENT_VERSION_PATCH 0

/// Marks a function callable from host and device code. Empty when not compiled by nvcc, so the same
/// user function serves the CPU backend (g++) and the CUDA backend (nvcc).
#if defined(__CUDACC__)
#define RESIDENT_HD __host__ __device__
#else
#define RESIDENT_HD
#endif

namespace resident {

/// True when this build contains the CUDA backend (CMake sets RESIDENT_HAS_CUDA=1 on the target).
#if defined(RESIDENT_HAS_CUDA) && RESIDENT_HAS_CUDA
inline constexpr bool cuda_compiled = true;
#else
inline constexpr bool cuda_compiled = false;
#endif

/// True in debug builds (RESIDENT_DEBUG): array_view bounds checks.
#if defined(RESIDENT_DEBUG) && RESIDENT_DEBUG
inline constexpr bool debug_checks = true;
#else
inline constexpr bool debug_checks = false;
#endif

/// True with RESIDENT_DEBUG_SYNC: every launch is followed by a synchronize and an error check, so a
/// fault is reported at the launch that caused it.
#if defined(RESIDENT_DEBUG_SYNC) && RESIDENT_DEBUG_SYNC
inline constexpr bool debug_sync = true;
#else
inline constexpr bool debug_sync = false;
#endif

/// "major.minor.patch".
const char* version() noexcept;

namespace detail {
/// An on/off environment variable: 1/0, on/off, true/false, yes/no (any case). Unset or empty gives
/// fallback; another value says so on stderr and gives fallback too (never read silently as either).
bool environment_switch(const char* name, bool fallback);
}  // namespace detail

}  // namespace resident

// Opaque CUDA handle types, declared without the CUDA headers so that .hpp files build with g++ alone.
// They are the very types cudaStream_t and cudaEvent_t name.
struct CUstream_st;
struct CUevent_st;
namespace resident {
/// CUDA stream handle (the type cudaStream_t names); null is the legacy default stream.
using cuda_stream_t = CUstream_st*;
/// CUDA event handle (the type cudaEvent_t names).
using cuda_event_t = CUevent_st*;
}  // namespace resident
