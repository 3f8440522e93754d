#pragma once
/// @file call_scope.hpp
/// The hook every user-facing call opens around its work: an NVTX range named after the call, and,
/// while a profile is collecting (rs::profile or RESIDENT_PROFILE=1), the call's counts and time
/// under the user's file and line. Kernels, transfers and pool allocations recorded in the ledger
/// while a scope is open on the thread are counted to its innermost scope.

#include <chrono>
#include <concepts>
#include <cstdint>
#include "resident/detail/source_location.hpp"
#include <string>
#include <string_view>
#include <type_traits>

#include "resident/device/stream.hpp"

namespace resident::detail {

/// What kind of work a call_scope wraps: a computation on the device (a pipeline, a launch) or an
/// explicit transfer (its bytes cross between host and device, or within one device).
enum class call_kind { compute, transfer };

/// What a call reads and writes, as the caller knows it before the work starts.
struct call_facts {
  std::uint64_t bytes_read = 0;     ///< bytes read from memory (a transfer: the bytes it moves)
  std::uint64_t bytes_written = 0;  ///< bytes written to memory (a transfer: the bytes it moves)
  std::uint64_t elements = 0;       ///< elements the call visits
  int stages = 0;                   ///< element-wise stages fused into one pass (0: not a pipeline)
  const void* input = nullptr;      ///< the array read (nullptr: none, or a zip/generator)
  const void* output = nullptr;     ///< the array written (nullptr: a value returned to the host)
};

/// The facts of a transfer of `bytes`: read on one side, written on the other.
inline call_facts transfer_facts(std::uint64_t bytes) noexcept { return {bytes, bytes, 0, 0, nullptr, nullptr}; }

/// The shape of one kernel (on the CPU, one parallel loop) a call launched: the profile's launch shape
/// and occupancy columns.
struct launch_shape {
  std::uint64_t grid_blocks = 0;    ///< blocks in the grid (the CPU: pieces the loop was cut into)
  std::uint64_t block_threads = 0;  ///< threads per block (the CPU: 0, each piece runs on one thread)
  int blocks_per_sm = 0;  ///< blocks of this kernel and block size one SM holds at once
                          ///< (cudaOccupancyMaxActiveBlocksPerMultiprocessor); 0 on the CPU
  std::uint64_t workers = 0;  ///< threads running at once: resident GPU threads (capped by the grid), or
                              ///< the OpenMP threads that took pieces
  double occupancy = 0;  ///< the share of the device the shape keeps busy: active warps per SM over the
                         ///< SM's most (a GPU), workers over the OpenMP team's size (the CPU)
};

/// The shape of a CUDA launch of `grid_blocks` x `block_threads` on d, whose kernel fits `blocks_per_sm`
/// blocks in one SM: the resident threads and the occupancy, from d's SM count and threads per SM.
launch_shape gpu_launch_shape(device d, std::uint64_t grid_blocks, std::uint64_t block_threads,
                              int blocks_per_sm) noexcept;

/// Opens an NVTX range (domain "resident", message `name`, payload the bytes moved) and, while a
/// profile collects, accounts the call to `where`: calls, kernels, bytes, host<->device transfers,
/// pool allocations, and its time (device events on a CUDA stream, not while the stream is being
/// captured into a graph; the host clock on the CPU). Adds no synchronization: event times are read
/// when a report is made. A scope opened inside one from the same source location (copy_to calling
/// copy) adds its NVTX range only and counts into the outer one. `name` must outlive the scope. Open
/// and close it on one thread.
class call_scope {
 public:
  /// Opens the scope on s's device (see the class comment). Does not throw for profiling reasons:
  /// a failure to time the call leaves it untimed.
  call_scope(std::string_view name, stream_ref s, const call_facts& facts, call_kind kind = call_kind::compute,
             resident::source_location where = resident::source_location::current()) noexcept;
  ~call_scope();
  call_scope(const call_scope&) = delete;
  call_scope& operator=(const call_scope&) = delete;

  /// The innermost scope open on the calling thread, or nullptr.
  static const call_scope* current() noexcept;
  /// The C++ line that opened this scope.
  const resident::source_location& where() const noexcept { return where_; }
  /// The file of the call site this scope accounts to: a foreign_site's (the outermost scope while one
  /// lives on this thread), else where()'s.
  const char* site_file() const noexcept;
  /// The line of the call site this scope accounts to (see site_file).
  unsigned site_line() const noexcept;
  /// The call's name.
  std::string_view name() const noexcept { return name_; }

  /// Ledger hooks (memory/ledger.cpp): count into the innermost open scope, or, while a profile
  /// collects, into the row of work done outside any call.
  static void note_kernels(device d, std::uint64_t n) noexcept;
  /// See note_kernels. `dir`: 0 host-to-device, 1 device-to-host, 2 device-to-device.
  static void note_transfer(device d, int dir, std::uint64_t bytes) noexcept;
  /// See note_kernels. `bytes_in_use`: the bytes of d's pool in use after this allocation.
  static void note_allocation(device d, std::uint64_t bytes, std::uint64_t bytes_in_use) noexcept;
  /// Launch hooks (launch/detail): the shape of a kernel or CPU loop launched inside the innermost
  /// scope, if it is a computation and a profile collects; the site keeps its lowest occupancy.
  static void note_launch(const launch_shape& shape) noexcept;

 private:
  std::string_view name_;
  resident::source_location where_;
  call_kind kind_;
  call_facts facts_;
  device device_;
  cuda_stream_t stream_ = nullptr;
  call_scope* outer_ = nullptr;
  const struct foreign_site* foreign_ = nullptr;  ///< the outermost scope's site outside C++, if any
  bool collecting_ = false;  ///< a profile collected when the scope opened
  int unwinding_ = 0;         ///< exceptions in flight when the scope opened
  bool merged_ = false;      ///< opened inside a scope of the same location: counts into that one
  int timer_ = -1;           ///< index of the event pair timing the call, -1: host clock or untimed
  std::uint64_t weight_ = 1;  ///< the calls an event-timed call counts for (profile_tuning)
  bool timed_ = false;       ///< the call's time is measured
  bool capturing_ = false;   ///< the stream is being captured: its kernels run at the graph's replays
  std::chrono::steady_clock::time_point start_{};
  std::uint64_t kernels_ = 0, h2d_ = 0, d2h_ = 0, d2d_ = 0, allocations_ = 0, allocated_ = 0, in_use_ = 0;
  std::uint64_t shaped_ = 0;  ///< launches whose shape was noted
  launch_shape shape_{};      ///< the lowest-occupancy one
};

/// A call site outside C++, such as the line of a Python program that called a binding: while it
/// lives, the outermost call scopes opened on this thread account to it (in the profile's rows, the
/// transfer log's lines) in place of the C++ line that opened them. Nests; one per thread at a time is
/// in force, the innermost.
struct foreign_site {
  /// Puts file:line in force on this thread until destruction.
  foreign_site(std::string file, unsigned line) noexcept;
  ~foreign_site();
  foreign_site(const foreign_site&) = delete;
  foreign_site& operator=(const foreign_site&) = delete;
  std::string file;                    ///< the file (a Python module's path)
  unsigned line = 0;                   ///< the line, from 1
  const foreign_site* outer = nullptr;  ///< the one in force before this
};

/// A stream argument that remembers the caller's line, for entry points whose parameters end in a pack
/// (`launch(s, cfg, f, args...)`), where a defaulted resident::source_location cannot follow: taking
/// `located_stream s` in place of `stream_ref s`, the conversion's default argument is evaluated
/// where the user made the call. Anything convertible to stream_ref converts (a stream, a stream_ref).
struct located_stream {
  stream_ref stream;            ///< the stream the call runs on
  resident::source_location where;  ///< the caller's file and line
  /// Converts s, recording the line of the call whose argument it is.
  template <class S>
    requires std::convertible_to<const S&, stream_ref>
  located_stream(const S& s, resident::source_location w = resident::source_location::current()) noexcept(
      std::is_nothrow_convertible_v<const S&, stream_ref>)
      : stream(s), where(w) {}
};

/// An NVTX range for the lifetime of the object, for public headers (which cannot include NVTX):
/// graph capture and replay. Nothing when the build has no NVTX.
class nvtx_scope {
 public:
  /// Opens a range named `message` (a string literal), with `bytes` as its payload when not zero.
  explicit nvtx_scope(const char* message, std::uint64_t bytes = 0) noexcept;
  ~nvtx_scope();
  nvtx_scope(const nvtx_scope&) = delete;
  nvtx_scope& operator=(const nvtx_scope&) = delete;
};

/// What NVTX ranges reach in this process: "absent" (built without NVTX), "no tool attached" (each
/// range costs one load and a branch) or "tool attached" (Nsight Systems or another injection
/// receives them). Initializes NVTX on its first call.
const char* nvtx_state() noexcept;

}  // namespace resident::detail
