#pragma once
/// @file resident.hpp
/// Everything resident offers, in one include. `namespace rs = resident;` reads well.

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
#include "resident/insight/timing.hpp"
#include "resident/jit/jit.hpp"
#include "resident/random/random.hpp"
