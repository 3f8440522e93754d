#pragma once
/// @file jit/stream.hpp
/// Deprecated: include resident/jit/out_of_core.hpp. This header includes it and keeps the names of
/// earlier releases (jit::stream, jit::stream_reduce, jit::stream_progress, and the core's
/// stream_options and stream_summary) as deprecated aliases of the out-of-core ones.

#include <cstddef>
#include <vector>

#include "resident/jit/out_of_core.hpp"
#include "resident/out_of_core/deprecated.hpp"

namespace resident::jit {

/// @deprecated use jit::out_of_core_progress.
using stream_progress [[deprecated("use jit::out_of_core_progress")]] = out_of_core_progress;

/// @deprecated use jit::out_of_core(chain, in, out, options, progress), which this calls.
[[deprecated("use jit::out_of_core")]] inline out_of_core_summary stream(const pipeline& chain,
                                                                         const std::vector<host_operand>& in,
                                                                         const host_operand& out,
                                                                         const out_of_core_options& o = {},
                                                                         const out_of_core_progress& progress = {}) {
  return out_of_core(chain, in, out, o, progress);
}

/// @deprecated use jit::out_of_core_reduce, which this calls.
[[deprecated("use jit::out_of_core_reduce")]] inline out_of_core_summary stream_reduce(
    const pipeline& chain, const std::vector<host_operand>& in, element r, void* result,
    const out_of_core_options& o = {}, const out_of_core_progress& progress = {}) {
  return out_of_core_reduce(chain, in, r, result, o, progress);
}

/// @deprecated use jit::out_of_core(program, in, out, options, progress), which this calls.
[[deprecated("use jit::out_of_core")]] inline out_of_core_summary stream(const program& p, const host_operand& in,
                                                                         const host_operand& out,
                                                                         const out_of_core_options& o = {},
                                                                         const out_of_core_progress& progress = {}) {
  return out_of_core(p, in, out, o, progress);
}

}  // namespace resident::jit
