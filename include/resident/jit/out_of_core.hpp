#pragma once
/// @file jit/out_of_core.hpp
/// Run-time chains (jit::pipeline, and programs of built-in operations) run out of core over host
/// data of any size, as out_of_core runs compile-time pipelines: the data is cut into chunks, each
/// chunk goes up, through the chain (one kernel per chunk, on the loop's kernel stream) and back
/// down, with the uploads, kernels and downloads of different chunks overlapped; only depth chunks
/// are on the device at once. The same chunk and depth rules, pool limits, ledger counts and errors
/// as out_of_core (out_of_core/options.hpp). Built by g++ alone: the kernels are the chain's.
///
///   auto seed = rs::jit::map(f1) | rs::jit::map(f2) | rs::jit::map(f3);
///   rs::jit::out_of_core(seed, {rs::jit::host_operand_of(in)}, rs::jit::host_operand_of(out));
///   double s = 0;
///   rs::jit::out_of_core_reduce(seed | rs::jit::sum(), {rs::jit::host_operand_of(in)}, rs::jit::element::f64, &s);
///
/// Streams: each call runs on streams of its own on options.target and synchronizes before it returns.

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "resident/fuse/program.hpp"
#include "resident/jit/jit.hpp"
#include "resident/out_of_core/options.hpp"

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
using out_of_core_progress = std::function<void(std::size_t done, std::size_t total)>;

/// out[i] = chain(in_0[i], in_1[i], ...), streamed in chunks; out may be the single input itself (in
/// place) or separate memory. Synchronizes: returns when out is written. The chain's types are
/// checked (and its kernel compiled or loaded) before any data moves.
/// @throws shape_mismatch (sizes), invalid_argument (a chain with a generator or a reduction, element
/// types that do not fit it, options, overlapping host arrays, a null array with elements),
/// compile_error, transfer_forbidden (under transfer_policy::forbid), out_of_memory (the staging does
/// not fit under the pool's limit), device_unavailable.
out_of_core_summary out_of_core(const pipeline& chain, const std::vector<host_operand>& in, const host_operand& out,
                      const out_of_core_options& o = {}, const out_of_core_progress& progress = {});

/// The chain's reduction (it ends in sum, min or max) over the inputs streamed in chunks: each chunk's
/// partial is reduced on the device, downloaded, and the partials combined on the host in the
/// result's type (as out_of_core does). r is the chain's value type; result receives one value of
/// it. Synchronizes. @throws as out_of_core; invalid_argument for a chain without a reduction, or with
/// reduce() (whose init would join once per chunk: stream the maps into a host array and reduce that).
out_of_core_summary out_of_core_reduce(const pipeline& chain, const std::vector<host_operand>& in, element r, void* result,
                             const out_of_core_options& o = {}, const out_of_core_progress& progress = {});

/// out[i] = p(in[i]) for float or double host arrays (of one type), streamed in chunks as above.
/// @throws as out_of_core; invalid_argument for other element types.
out_of_core_summary out_of_core(const program& p, const host_operand& in, const host_operand& out, const out_of_core_options& o = {},
                      const out_of_core_progress& progress = {});

}  // namespace resident::jit
