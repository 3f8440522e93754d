#pragma once
/// @file options.hpp
/// What an out-of-core pipeline is told (how to cut its data) and what it reports (how it cut it, and
/// when each chunk crossed each stage).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "resident/device/device.hpp"

namespace resident {

/// When one chunk of an out-of-core pipeline crossed each of its three stages, in milliseconds since the
/// call started (GPU: events on the upload, kernel and download streams; CPU: the host clock, where
/// the stages run one after another). A stage a chunk does not have (no host input to upload, no host
/// output to download) begins and ends at the same time.
struct chunk_timing {
  std::size_t index = 0;  ///< the chunk's number, from 0
  std::size_t first = 0;  ///< its first element
  std::size_t count = 0;  ///< its elements
  ///@{
  /// The upload of its inputs (host to device) on the upload stream.
  double upload_begin_ms = 0, upload_end_ms = 0;
  ///@}
  ///@{
  /// Its fused kernel on the kernel stream.
  double kernel_begin_ms = 0, kernel_end_ms = 0;
  ///@}
  ///@{
  /// The download of its output (device to host) on the download stream.
  double download_begin_ms = 0, download_end_ms = 0;
  ///@}
};

/// How an out-of-core pipeline cuts host data into chunks. Zero means "choose": a chunk of 64 MiB of
/// input, 3 chunks in flight (4 when a host array is pageable), both made smaller until the device
/// staging fits in half the device's free memory and under the pool's limit (set_pool_limit,
/// RESIDENT_POOL_LIMIT). The device staging (depth chunks of every input, and of the output unless it
/// is staged in place of the single input) comes from the pool; pageable host arrays also need depth
/// chunks of page-locked host staging each, which the library keeps per device for later calls, and
/// host_threads worker threads that copy between them and the user's memory during the call.
struct out_of_core_options {
  std::size_t chunk_elements = 0;  ///< elements per chunk (the last one may hold fewer); 0: chosen
  int depth = 0;                   ///< chunks in flight, 1 to 16 (buffer sets), at most the chunks; 0: chosen
  device target = default_device();  ///< where the pipeline runs
  /// When set, filled with one entry per chunk (the call records events per chunk to do so).
  std::vector<chunk_timing>* timeline = nullptr;
  /// Threads that copy pageable host memory to and from the pinned staging on a GPU, 1 to 256; 0:
  /// chosen (12, at most the host's cores less two). Unused when every host array is page-locked and
  /// on the CPU backend.
  int host_threads = 0;
};

/// How an out-of-core pipeline ran.
struct out_of_core_summary {
  std::size_t elements = 0;        ///< elements processed
  std::size_t chunks = 0;          ///< chunks processed
  std::size_t chunk_elements = 0;  ///< elements per chunk (the last one may hold fewer)
  int depth = 0;                   ///< chunks in flight (buffer sets allocated): never more than chunks
  std::uint64_t h2d_bytes = 0;     ///< bytes streamed host to device
  std::uint64_t d2h_bytes = 0;     ///< bytes streamed device to host
  std::size_t device_bytes = 0;    ///< device staging the call held (0 on the CPU)
  bool pinned_input = false;       ///< every host input was page-locked (copied without staging)
  bool pinned_output = false;      ///< the host output was page-locked (copied without staging)
  int host_threads = 0;            ///< threads that staged pageable host memory (0: none was staged)
  double seconds = 0;              ///< wall time of the call
};

}  // namespace resident
