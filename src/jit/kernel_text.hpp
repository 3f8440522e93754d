#pragma once
// Internal to src/jit: what generate.cpp (the checks, the text before the loop, the host flavor) hands
// generate_cuda.cpp (the CUDA flavor's loops, folds and kernel) to write a chain's kernel text from.

#include <string>
#include <vector>

#include "jit/backend.hpp"

namespace resident::jit::detail {

// What the kernel text is written from: the chain's parts and types, checked.
struct chain {
  const std::vector<part>& parts;
  const signature& sig;
  bool cuda;          // the flavor
  const part* gen;    // the generator source, if any
  const part* red;    // the reduction terminal, if any
  element value;      // what the last stage makes (and the reduction folds)
  std::size_t nin;    // the chain's inputs: the arrays, or the generator's one value
  std::string O;      // the output's type, spelled
  bool wide;          // a float32 sum: folded in double (reduction_ops)
};

// The pieces both flavors' loops are made of.
struct loop_text {
  std::string use;       // what each element does: written (map) or folded (reduction), up to its value
  std::string loads;     // the typed input pointers (and output pointer of a map)
  std::string call;      // the chain's arguments at element i
  std::string P;         // values per Philox block (a generator), else 1
  std::string gen_loop;  // a generator's set-up: the lead, first block, block count, mask, parameters
  std::string gen_body;  // one Philox block b's values through the chain
};

/// The CUDA flavor's kernel: a grid-stride loop over the generator's blocks or the arrays' elements,
/// one kernel a call; a reduction ends in the block fold (generate_cuda.cpp).
std::string cuda_kernel(const chain& c, const loop_text& t);

}  // namespace resident::jit::detail
