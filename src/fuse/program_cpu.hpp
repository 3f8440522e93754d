#pragma once
// The CPU executor of run-time programs (resident/fuse/program.hpp): the program runs over blocks of
// values, one operation at a time over the whole block, so each operation is a plain loop the host
// compiler vectorizes (vector math included, docs/cpu.md). Compiled by the host compiler in every
// build, so CUDA builds get the same vector code for their CPU device.
#include "resident/fuse/program.hpp"

namespace resident::detail {

/// y[i] = p(x[i]) on the CPU; x and y of one size on the CPU device, same memory or apart.
template <class T>
void run_program_cpu(const program& p, array_ref<T> x, array_ref<T> y);

/// The sum of p(x[i]) on the CPU, in double (float values too), folded in 16 lanes by position per
/// piece, the pieces in order; rounded once to T.
template <class T>
T sum_program_cpu(const program& p, array_ref<T> x);

}  // namespace resident::detail
