#pragma once
/// @file library_check.hpp
/// One wrapper per vendor library besides the CUDA runtime (that one is RESIDENT_CUDA_TRY in
/// cuda_check.hpp). Each throws resident::library_error with the library's name, its status code and
/// name, the call's text and the raising file:line. Include the vendor's header before using its macro.

#include <string>

#include "resident/error.hpp"

namespace resident::detail {
/// Throws library_error(library, code, name, "<call> failed at <file:line>: <name> (<description>)").
[[noreturn]] void throw_library(const char* library, int code, const std::string& name,
                                const std::string& description, const char* call, const char* file,
                                int line);
/// The CUDA driver's name and description of status s (a CUresult); "status N" where the driver
/// cannot be asked. Defined where the CUDA backend is built.
std::string driver_status_name(int s);
std::string driver_status_text(int s);
}  // namespace resident::detail

/// Evaluates call once; when its status is not ok, throws with name_of(status) and text_of(status).
#define RESIDENT_LIBRARY_TRY(library, call, ok, name_of, text_of)                                   \
  do {                                                                                             \
    auto resident_s_ = (call);                                                                     \
    if (resident_s_ != (ok))                                                                       \
      ::resident::detail::throw_library(library, static_cast<int>(resident_s_), name_of(resident_s_), \
                                        text_of(resident_s_), #call, __FILE__, __LINE__);          \
  } while (0)

#define RESIDENT_DETAIL_STATUS_CODE(s) ("status " + std::to_string(static_cast<int>(s)))
#define RESIDENT_DETAIL_NO_TEXT(s) std::string()

/// A cuBLAS call (cublas_v2.h).
#define RESIDENT_CUBLAS_TRY(call) \
  RESIDENT_LIBRARY_TRY("cuBLAS", call, CUBLAS_STATUS_SUCCESS, cublasGetStatusName, cublasGetStatusString)
/// A cuRAND call (curand.h), which names its statuses by number only.
#define RESIDENT_CURAND_TRY(call) \
  RESIDENT_LIBRARY_TRY("cuRAND", call, CURAND_STATUS_SUCCESS, RESIDENT_DETAIL_STATUS_CODE, RESIDENT_DETAIL_NO_TEXT)
/// An NVRTC call (nvrtc.h).
#define RESIDENT_NVRTC_TRY(call) \
  RESIDENT_LIBRARY_TRY("NVRTC", call, NVRTC_SUCCESS, nvrtcGetErrorString, RESIDENT_DETAIL_NO_TEXT)
/// An nvJitLink call (nvJitLink.h), which names its results by number only.
#define RESIDENT_NVJITLINK_TRY(call) \
  RESIDENT_LIBRARY_TRY("nvJitLink", call, NVJITLINK_SUCCESS, RESIDENT_DETAIL_STATUS_CODE, RESIDENT_DETAIL_NO_TEXT)
/// A CUDA driver API call (cuda.h), whose statuses are named by cuGetErrorName / cuGetErrorString
/// through resident::detail::driver_status_name / driver_status_text (src/jit/cuda.cpp).
#define RESIDENT_CU_TRY(call)                                                                          \
  RESIDENT_LIBRARY_TRY("CUDA driver", call, CUDA_SUCCESS, ::resident::detail::driver_status_name, \
                       ::resident::detail::driver_status_text)
/// An NCCL call (nccl.h).
#define RESIDENT_NCCL_TRY(call) \
  RESIDENT_LIBRARY_TRY("NCCL", call, ncclSuccess, RESIDENT_DETAIL_STATUS_CODE, ncclGetErrorString)
