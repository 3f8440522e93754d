#pragma once
// Internal to src/jit: what the chain's builders (pipeline.cpp) and the kernel-text generator
// (generate.cpp, behind backend.hpp's generate()) both ask of a part.

#include "resident/jit/jit.hpp"

namespace resident::jit::detail {

/// Whether a part of kind k is a generator source (it starts a chain).
inline bool is_generator(part::kind k) { return k == part::kind::uniform || k == part::kind::normal; }

/// Whether a part of kind k is a reduction terminal (it ends a chain).
inline bool is_reduction(part::kind k) {
  return k == part::kind::sum || k == part::kind::min || k == part::kind::max || k == part::kind::reduce;
}

}  // namespace resident::jit::detail
