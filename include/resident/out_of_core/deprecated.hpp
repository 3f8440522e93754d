#pragma once
/// @file deprecated.hpp
/// The names out-of-core pipelines had before "stream" was kept for CUDA streams alone: aliases that
/// still compile, with a deprecation warning that names the new one. Included by out_of_core.hpp and
/// by the old headers (resident/streaming/*.hpp). The forwarders find out_of_core through its
/// options argument (argument-dependent lookup), so this header needs only the options.

#include <ranges>
#include <type_traits>
#include <utility>

#include "resident/out_of_core/options.hpp"

namespace resident {

/// @deprecated use out_of_core_options.
using stream_options [[deprecated("use out_of_core_options")]] = out_of_core_options;

/// @deprecated use out_of_core_summary.
using stream_summary [[deprecated("use out_of_core_summary")]] = out_of_core_summary;

/// @deprecated use out_of_core(stages, input, out, options), which this calls.
template <class P, class In, std::ranges::contiguous_range Out>
[[deprecated("use out_of_core")]] out_of_core_summary stream_pipeline(const P& stages, const In& input, Out&& out,
                                                                      const out_of_core_options& o = {})
  requires(!std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<Out>>>)
{
  return out_of_core(stages, input, std::forward<Out>(out), o);
}

/// @deprecated use out_of_core(stages, input, options, summary), which this calls.
template <class P, class In>
[[deprecated("use out_of_core")]] auto stream_pipeline(const P& stages, const In& input, const out_of_core_options& o = {},
                                                       out_of_core_summary* summary = nullptr) {
  return out_of_core(stages, input, o, summary);
}

}  // namespace resident
