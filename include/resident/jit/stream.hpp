#pragma once
/// @file stream.hpp
/// Run-time chains (jit::pipeline, and programs of built-in operations) streamed over host data of
/// any size, as stream_pipeline streams compile-time pipelines: the data is cut into chunks, each
/// chunk goes up, through the chain (one kernel per chunk, on the loop's kernel stream) and back
/// down, with the uploads, kernels and downloads of different chunks overlapped; only depth chunks
/// are on the device at once. The same chunk and depth rules, pool limits, ledger counts and errors
/// as stream_pipeline (streaming/options.hpp). Built by g++ alone: the kernels are the chain's.
///
///   auto seed = rs::jit::map(f1) | rs::jit::map(f2) | rs::jit::map(f3);
///   rs::jit::stream(seed, {rs::jit::host_operand_of(in)}, rs::jit::host_operand_of(out));
///   double s = 0;
///   rs::jit::stream_reduce(seed | rs::jit::sum(), {rs::jit::host_operand_of(in)}, rs::jit::element::f64, &s);
///
/// Streams: each call runs on streams of its own on options.target and synchronizes before it returns.

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "resident/fuse/program.hpp"
#include "resident/jit/jit.hpp"
#include "resident/streaming/options.hpp"

namespace resident::jit {

/// One host array a streamed chain reads or writes (pageable or page-locked host memory).
struct host_operand {
  const void* data = nullptr;   ///< the first element
  std::size_t size = 0;         ///< elements
  element type = element::f32;  ///< their type
};

/// The host operand of a contiguous host range.
template <class T>
host_operand host_operand_of(std::span<T> s) {
  return {static_cast<const void*>(s.data()), s.size(), element_of<T>()};
}
/// A contiguous host range (vector, array, pinned buffer) as a host operand.
template <class R>
host_operand host_operand_of(R& r) {
  return host_operand_of(std::span(r));
}

/// Called on the calling thread after each chunk's kernel is queued: the elements queued so far and
/// the total. An exception it throws ends the call (after its streams are drained).
using stream_progress = std::function<void(std::size_t done, std::size_t total)>;

/// out[i] = chain(in_0[i], in_1[i], ...), streamed in chunks; out may be the single input itself (in
/// place) or separate memory. Synchronizes: returns when out is written. The chain's types are
/// checked (and its kernel compiled or loaded) before any data moves.
/// @throws shape_mismatch (sizes), invalid_argument (a chain with a generator or a reduction, element
/// types that do not fit it, options, overlapping host arrays, a null array with elements),
/// compile_error, transfer_forbidden (under transfer_policy::forbid), out_of_memory (the staging does
/// not fit under the pool's limit), device_unavailable.
stream_summary stream(const pipeline& chain, const std::vector<host_operand>& in, const host_operand& out,
                      const stream_options& o = {}, const stream_progress& progress = {});

/// The chain's reduction (it ends in sum, min or max) over the inputs streamed in chunks: each chunk's
/// partial is reduced on the device, downloaded, and the partials combined on the host in the
/// result's type (as stream_pipeline does). r is the chain's value type; result receives one value of
/// it. Synchronizes. @throws as stream; invalid_argument for a chain without a reduction, or with
/// reduce() (whose init would join once per chunk: stream the maps into a host array and reduce that).
stream_summary stream_reduce(const pipeline& chain, const std::vector<host_operand>& in, element r, void* result,
                             const stream_options& o = {}, const stream_progress& progress = {});

/// out[i] = p(in[i]) for float or double host arrays (of one type), streamed in chunks as above.
/// @throws as stream; invalid_argument for other element types.
stream_summary stream(const program& p, const host_operand& in, const host_operand& out, const stream_options& o = {},
                      const stream_progress& progress = {});

}  // namespace resident::jit
