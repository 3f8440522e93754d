#pragma once
/// @file error.hpp
/// The one error idiom. Everything resident throws derives from resident::error. Library code raises
/// errors through the macros below, which record the raising file and line in the message:
///
///   RESIDENT_EXPECTS(n >= 0, "n must be >= 0");                    // invalid_argument
///   RESIDENT_EXPECTS(a.size() == b.size(), "sizes differ", shape_mismatch);
///   RESIDENT_FAIL("unknown name '" + s + "'");                     // invalid_argument
///   RESIDENT_FAIL("no CUDA backend", device_unavailable);
///
/// A failed call into a vendor library (CUDA runtime, cuBLAS, cuRAND, NVRTC, nvJitLink, NCCL) is a
/// library_error carrying that library's name and status code, raised by the library's own wrapper
/// (RESIDENT_CUDA_TRY in detail/cuda_check.hpp, the others in detail/library_check.hpp). Errors that
/// carry figures (out_of_memory) take their message as a detail::sited, which appends the file:line of
/// the code that made it.
///
/// RESIDENT_ERRORS below is the one list of error kinds: the C++ classes of shape `plain` are defined
/// from it here, the others are written out (they carry figures) where the table says; the Python
/// package makes its exception classes and their translation from the same list (python/src/errors.cpp).

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

#include "resident/detail/source_location.hpp"

/// X(shape, C++ name, C++ base, Python name, Python built-in base or `none`, one-line description).
/// shape: `plain` (defined from this table) or `own` (written out: in this file unless the name says
/// otherwise). A base comes before the kinds derived from it.
#define RESIDENT_ERRORS(X)                                                                                          \
  X(own, error, std::runtime_error, Error, RuntimeError, "Base of every error resident raises.")                    \
  X(plain, invalid_argument, error, InvalidArgument, ValueError,                                                    \
    "A bad value: a moved or unusable array, an unknown name, a range that cannot be honoured.")                    \
  X(plain, invalid_type, invalid_argument, InvalidType, TypeError,                                                  \
    "A value of a type resident does not take: an element type, a function it cannot compile, a callable of the "    \
    "wrong arity.")                                                                                                 \
  X(plain, invalid_launch, invalid_argument, InvalidLaunch, none, "A launch configuration beyond the device's limits.") \
  X(plain, shape_mismatch, invalid_argument, ShapeMismatch, none, "Array extents that do not fit together.")        \
  X(plain, device_mismatch, invalid_argument, DeviceMismatch, none,                                                 \
    "Arrays or streams that must be on one device are on different ones.")                                          \
  X(plain, flow_error, invalid_argument, FlowError, none,                                                           \
    "A flow that cannot run: a cycle, two unordered writers, an unknown stage.")                                    \
  X(own, jit::compile_error, invalid_argument, CompileError, none,                                                  \
    "A run-time stage did not compile; the message holds the compiler's log (lines of the stage's text).")          \
  X(own, out_of_memory, error, OutOfMemory, MemoryError,                                                            \
    "An allocation failed after the pool was trimmed and the allocation retried.")                                  \
  X(plain, device_unavailable, error, DeviceUnavailable, none,                                                      \
    "A device was asked for that this build or machine cannot provide.")                                            \
  X(plain, transfer_forbidden, error, TransferForbidden, none,                                                      \
    "A host<->device transfer inside transfer_policy(\"forbid\").")                                                 \
  X(own, stage_error, error, StageError, none, "A stage (of a flow, or a Python stage of a chain) raised.")         \
  X(own, library_error, error, LibraryError, none,                                                                  \
    "A call into a vendor library (CUDA, cuBLAS, cuRAND, NVRTC, nvJitLink, NCCL) failed.")                          \
  X(own, cuda_error, library_error, CudaError, none, "A CUDA runtime call failed.")                                 \
  X(own, device_lost, cuda_error, DeviceLost, none, "The device faulted; restart the process to use it again.")

namespace resident {

namespace detail {
/// " [src/memory/pool.cpp:42]": the raising site, relative to the source tree.
std::string site(const char* file, int line);

/// A message with the file:line of the code that made it appended: the parameter type of the errors
/// that carry figures, so that `throw out_of_memory(msg, figures...)` keeps its site as the macros do.
struct sited {
  std::string text;
  // NOLINTNEXTLINE(google-explicit-constructor): made from the message where the error is made
  sited(std::string msg, resident::source_location where = resident::source_location::current())
      : text(std::move(msg) + site(where.file_name(), int(where.line()))) {}
};
}  // namespace detail

/// Base of every exception resident throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The kinds of shape `plain`: a name and a place in the hierarchy, no figures (described in the table).
#define RESIDENT_DETAIL_ERROR_own(name, base)
/// A plain kind: the class takes its base's constructors.
#define RESIDENT_DETAIL_ERROR_plain(name, base) \
  class name : public base {                    \
   public:                                      \
    using base::base;                           \
  };
/// One row of RESIDENT_ERRORS as C++: the class of its shape (the Python columns are the bindings').
#define RESIDENT_DETAIL_ERROR(shape, name, base, py, builtin, doc) RESIDENT_DETAIL_ERROR_##shape(name, base)
RESIDENT_ERRORS(RESIDENT_DETAIL_ERROR)
#undef RESIDENT_DETAIL_ERROR
#undef RESIDENT_DETAIL_ERROR_plain
#undef RESIDENT_DETAIL_ERROR_own

/// A call into a vendor library failed: which library, its status code and the status's name.
class library_error : public error {
 public:
  /// library: "CUDA", "cuBLAS", "cuRAND", "NVRTC", "nvJitLink", "NCCL"; code: the library's status
  /// value; name: its symbolic name; what: the message with the call and file:line.
  library_error(std::string library, int code, std::string name, const std::string& what)
      : error(what), library_(std::move(library)), code_(code), name_(std::move(name)) {}
  /// The library whose call failed.
  const std::string& library() const noexcept { return library_; }
  /// The library's status code of the failed call (never its success value).
  int code() const noexcept { return code_; }
  /// The status's name, e.g. "cudaErrorMemoryAllocation" or "CUBLAS_STATUS_NOT_INITIALIZED".
  const std::string& name() const noexcept { return name_; }

 private:
  std::string library_;
  int code_;
  std::string name_;
};

/// A CUDA runtime call failed. Carries the cudaError_t code and name.
class cuda_error : public library_error {
 public:
  /// Wraps a failed CUDA runtime call: its error code, its name (e.g. "cudaErrorInvalidValue") and a
  /// message with the call and file:line.
  cuda_error(int code, std::string name, const std::string& what)
      : library_error("CUDA", code, std::move(name), what) {}
};

/// The device hit a fault that poisons its context (illegal address, trap, launch failure). The
/// process must be restarted to use the device again.
class device_lost : public cuda_error {
 public:
  /// Same arguments as cuda_error.
  using cuda_error::cuda_error;
};

/// An allocation failed after the pool was trimmed and the allocation retried once, or would have
/// taken the pool past its limit.
class out_of_memory : public error {
 public:
  /// The message and the figures at the time of the failure, all in bytes.
  out_of_memory(const detail::sited& what, std::size_t requested, std::size_t free_bytes,
                std::size_t pool_reserved, std::size_t pool_in_use)
      : error(what.text),
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
  /// The pool's limit when the allocation was refused for crossing it (set_pool_limit,
  /// RESIDENT_POOL_LIMIT); empty when no limit was in force.
  std::optional<std::size_t> pool_limit() const noexcept { return limit_; }
  /// The largest block the pool could have handed out without growing, where the backend can know
  /// it (the host pool's largest cached block); empty when it cannot (CUDA memory pools do not say).
  std::optional<std::size_t> largest_free_block() const noexcept { return largest_free_; }

  /// The same figures plus the pool's limit and its largest free block (empty: none / unknown).
  out_of_memory(const detail::sited& what, std::size_t requested, std::size_t free_bytes,
                std::size_t pool_reserved, std::size_t pool_in_use, std::optional<std::size_t> limit,
                std::optional<std::size_t> largest_free_block)
      : out_of_memory(what, requested, free_bytes, pool_reserved, pool_in_use) {
    limit_ = limit;
    largest_free_ = largest_free_block;
  }

 private:
  std::size_t requested_, free_, pool_reserved_, pool_in_use_;
  std::optional<std::size_t> limit_, largest_free_;
};

namespace detail {
/// Throws E(msg + site(file, line)).
template <class E>
[[noreturn]] void fail(const std::string& msg, const char* file, int line) {
  throw E(msg + site(file, line));
}
}  // namespace detail

}  // namespace resident

/// Picks the macro named by the argument count (an implementation detail of the two below).
#define RESIDENT_DETAIL_PICK3(a, b, c, name, ...) name
/// RESIDENT_FAIL(msg).
#define RESIDENT_DETAIL_FAIL1(msg) ::resident::detail::fail<::resident::invalid_argument>(msg, __FILE__, __LINE__)
/// RESIDENT_FAIL(msg, type).
#define RESIDENT_DETAIL_FAIL2(msg, type) ::resident::detail::fail<::resident::type>(msg, __FILE__, __LINE__)
/// RESIDENT_EXPECTS(cond, msg).
#define RESIDENT_DETAIL_EXPECTS2(cond, msg) \
  do {                                      \
    if (!(cond)) RESIDENT_DETAIL_FAIL1(msg); \
  } while (0)
/// RESIDENT_EXPECTS(cond, msg, type).
#define RESIDENT_DETAIL_EXPECTS3(cond, msg, type) \
  do {                                            \
    if (!(cond)) RESIDENT_DETAIL_FAIL2(msg, type); \
  } while (0)

/// RESIDENT_FAIL(msg [, type]): throws resident::type (default invalid_argument) with msg and the
/// raising file:line.
#define RESIDENT_FAIL(...) RESIDENT_DETAIL_PICK3(__VA_ARGS__, _, RESIDENT_DETAIL_FAIL2, RESIDENT_DETAIL_FAIL1, _)(__VA_ARGS__)
/// RESIDENT_EXPECTS(cond, msg [, type]): RESIDENT_FAIL(msg [, type]) when cond is false.
#define RESIDENT_EXPECTS(...) \
  RESIDENT_DETAIL_PICK3(__VA_ARGS__, RESIDENT_DETAIL_EXPECTS3, RESIDENT_DETAIL_EXPECTS2, _, _)(__VA_ARGS__)
