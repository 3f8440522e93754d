#pragma once
/// @file error.hpp
/// The one error idiom: exceptions derived from resident::error, and three macros.

#include <cstddef>
#include <stdexcept>
#include <string>

namespace resident {

/// Base of every exception resident throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A CUDA runtime call failed. Carries the error code and name.
class cuda_error : public error {
 public:
  /// Wraps a failed CUDA runtime call: its error code, its name (e.g. "cudaErrorInvalidValue") and a
  /// message with the call and file:line.
  cuda_error(int code, std::string name, const std::string& what)
      : error(what), code_(code), name_(std::move(name)) {}
  /// The cudaError_t value of the failed call.
  int code() const noexcept { return code_; }
  /// The CUDA error's name, e.g. "cudaErrorMemoryAllocation".
  const std::string& name() const noexcept { return name_; }

 private:
  int code_;
  std::string name_;
};

/// The device hit a fault that poisons its context (illegal address, trap, launch failure). The
/// process must be restarted to use the device again.
class device_lost : public cuda_error {
 public:
  /// Same arguments as cuda_error.
  using cuda_error::cuda_error;
};

/// An allocation failed after the pool was trimmed and the allocation retried once.
class out_of_memory : public error {
 public:
  /// The message and the figures at the time of the failure, all in bytes.
  out_of_memory(const std::string& what, std::size_t requested, std::size_t free_bytes,
                std::size_t pool_reserved, std::size_t pool_in_use)
      : error(what),
        requested_(requested),
        free_(free_bytes),
        pool_reserved_(pool_reserved),
        pool_in_use_(pool_in_use) {}
  /// Bytes the failed allocation asked for.
  std::size_t requested() const noexcept { return requested_; }
  /// Free device (or host) memory when it failed.
  std::size_t free_bytes() const noexcept { return free_; }
  /// Bytes the pool held reserved when it failed.
  std::size_t pool_reserved() const noexcept { return pool_reserved_; }
  /// Bytes of the pool in use by live allocations when it failed.
  std::size_t pool_in_use() const noexcept { return pool_in_use_; }

 private:
  std::size_t requested_, free_, pool_reserved_, pool_in_use_;
};

/// An argument is invalid (bad value, moved-from array, unknown name).
class invalid_argument : public error {
 public:
  using error::error;
};

/// A launch configuration exceeds the device's limits or is empty.
class invalid_launch : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// Array extents do not fit together.
class shape_mismatch : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// Arrays that must live on one device live on different ones.
class device_mismatch : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// A device was asked for that this build or machine cannot provide (no driver, no GPU, bad index).
class device_unavailable : public error {
 public:
  using error::error;
};

/// A transfer between host and device happened inside a scope whose transfer policy is forbid.
class transfer_forbidden : public error {
 public:
  using error::error;
};

namespace detail {
[[noreturn]] void throw_expects(const char* cond, const std::string& msg, const char* file, int line);
}  // namespace detail

}  // namespace resident

/// Throws resident::invalid_argument (or the given error type) with file:line when cond is false.
#define RESIDENT_EXPECTS(cond, msg)                                         \
  do {                                                                      \
    if (!(cond)) ::resident::detail::throw_expects(#cond, msg, __FILE__, __LINE__); \
  } while (0)
