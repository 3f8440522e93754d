#pragma once
/// @file chunk_loop.hpp
/// The untyped engine behind out-of-core pipelines (src/out_of_core/chunk_loop.cpp): it cuts n elements
/// into chunks, moves each chunk's inputs up and its output down on streams of their own with pinned
/// staging, and calls back for each chunk's kernel. streaming.hpp types the callback.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "resident/device/stream.hpp"
#include "resident/out_of_core/options.hpp"

namespace resident::detail {

/// One host array an out-of-core pipeline reads (data: its first element) or writes.
struct host_side {
  const void* data = nullptr;
  std::size_t element_bytes = 0;
};

/// Where the kernel of one chunk reads and writes: device memory on CUDA, the host arrays themselves on
/// the CPU. inputs[i]: chunk of input i; output: chunk of the output (== inputs[0] when the output
/// is staged in place of the single input); result: the slot's one-element partial, or null.
struct chunk_view {
  std::size_t index = 0, first = 0, count = 0;
  int slot = 0;
  const std::vector<void*>* inputs = nullptr;
  void* output = nullptr;
};

class chunk_loop {
 public:
  /// Checks the transfer policy and the options, chooses the chunk and depth and allocates the staging,
  /// all before any data moves. output {nullptr, 0}: no host output (a null input, or a null output of
  /// an element size, with n > 0 is refused). in_place: the output may be
  /// staged in the single input's device buffer (same element type). result_bytes > 0: every chunk's
  /// kernel writes a partial of that size into result memory given to run(), copied to the host.
  /// @throws transfer_forbidden, invalid_argument, out_of_memory, device_unavailable.
  chunk_loop(std::size_t n, std::vector<host_side> inputs, host_side output, bool in_place, std::size_t result_bytes,
             const out_of_core_options& o);
  /// Waits for every stream of the loop (also after an error), then frees its staging.
  ~chunk_loop();
  chunk_loop(const chunk_loop&) = delete;
  chunk_loop& operator=(const chunk_loop&) = delete;

  /// The stream the kernels run on (the CPU's default stream on the CPU).
  stream_ref kernel_stream() const;
  /// Chunks in flight: the number of result slots run() needs.
  int depth() const noexcept { return depth_; }

  /// Runs every chunk: upload, kernel(view), download, overlapped across chunks; returns when the
  /// last output is in host memory. results: depth() pointers to result_bytes of memory on the
  /// device (written by the kernel of the slot's chunk); their copies land in host_results().
  /// landed(count): after each chunk's download is queued (and counted), in chunk order; should it
  /// throw, what was queued still lands before the loop's destructor returns.
  void run(const std::function<void(const chunk_view&)>& kernel, const std::vector<void*>& results,
           const std::function<void(std::size_t)>& landed = {});
  /// The partials, result_bytes each, in chunk order (after run()).
  const void* host_results() const noexcept;
  /// How the call ran (after run()).
  out_of_core_summary summary() const { return summary_; }

 private:
  struct cuda_state;
  void run_cpu(const std::function<void(const chunk_view&)>& kernel, const std::vector<void*>& results,
               const std::function<void(std::size_t)>& landed);
  void run_cuda(const std::function<void(const chunk_view&)>& kernel, const std::vector<void*>& results,
                const std::function<void(std::size_t)>& landed);

  device device_;
  std::size_t n_ = 0, chunk_ = 0, chunks_ = 0, result_bytes_ = 0;
  int depth_ = 1;
  std::vector<host_side> inputs_;
  host_side output_;
  bool in_place_ = false;
  std::vector<chunk_timing>* timeline_ = nullptr;
  std::vector<unsigned char> results_;
  out_of_core_summary summary_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<cuda_state> cuda_;
};

}  // namespace resident::detail
