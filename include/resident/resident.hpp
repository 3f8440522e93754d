#pragma once
/// @file resident.hpp
/// The single-device library in one include: devices, streams, events and graphs; arrays, memory
/// pools and the ledger; launches, fused pipelines and programs; flows; matmul; random fills;
/// run-time (jit) chains; out-of-core pipelines over host data larger than the device (compile-time
/// and run-time: out_of_core/out_of_core.hpp, jit/out_of_core.hpp); profiling and timing.
/// `namespace rs = resident;` reads well.
///
/// Separate, included where wanted:
/// - `resident/dist/dist.hpp`: communicators and sharded arrays beyond one device. Its collectives
///   run over NCCL (GPUs) and MPI (processes), which a build has only where they were found, and a
///   program on one device has no use for it.
/// - `resident/interop/dlpack.hpp`: zero-copy exchange with other array libraries. It includes
///   `<dlpack/dlpack.h>`, a header resident does not ship (Debian: libdlpack-dev).
/// - `resident/streaming/*.hpp`, `resident/jit/stream.hpp`: deprecated headers that forward to the
///   out-of-core ones. `jit/stream.hpp` declares the deprecated function `jit::stream`, which would
///   make the name `stream` ambiguous beside the class `resident::stream` in code that uses both
///   namespaces.

#include "resident/config.hpp"
#include "resident/device/device.hpp"
#include "resident/device/event.hpp"
#include "resident/device/graph.hpp"
#include "resident/device/stream.hpp"
#include "resident/error.hpp"
#include "resident/flow/flow.hpp"
#include "resident/launch/config.hpp"
#include "resident/launch/launch.hpp"
#include "resident/linalg/matmul.hpp"
#include "resident/memory/array.hpp"
#include "resident/memory/ledger.hpp"
#include "resident/memory/pinned.hpp"
#include "resident/memory/pool.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/fuse/program.hpp"
#include "resident/insight/profile.hpp"
#include "resident/insight/timing.hpp"
#include "resident/jit/jit.hpp"
#include "resident/jit/out_of_core.hpp"
#include "resident/random/random.hpp"
#include "resident/out_of_core/out_of_core.hpp"
