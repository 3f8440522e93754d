#pragma once
/// @file plan.hpp
/// Where a flow's stages run and which edges need events, apart from streams and events themselves:
/// one logic for both backends (the CPU is one device with one stream), and plannable for several
/// GPUs on a machine without them (the tests do).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "resident/device/device.hpp"
#include "resident/flow/flow.hpp"

namespace resident::detail::flow_plan {

/// A stage's number in its flow.
using stage_id = std::size_t;

/// One of the flow's streams: the index-th it holds on dev.
struct lane {
  /// The device the stream belongs to.
  device dev;
  /// Which of that device's streams.
  int index = 0;
  /// Same device and same stream.
  friend bool operator==(const lane& a, const lane& b) noexcept { return a.dev == b.dev && a.index == b.index; }
};

/// One stage as issued.
struct step {
  /// The stage.
  stage_id stage = 0;
  /// The stream it is issued on.
  lane on;
  /// The stream's first stage: the stream first waits for the flow's start (the fork, an event on the
  /// home stream; a cross-device wait when the stream is another device's).
  bool first_on_lane = false;
  /// Predecessors issued on other streams: the stage's stream waits for their done-events first (a
  /// cross-device wait for a predecessor on another device). A predecessor on the same stream needs none.
  std::vector<stage_id> waits;
};

/// A flow's stages on its streams.
struct plan {
  /// The stages in issue order (a topological order).
  std::vector<step> steps;
  /// Every stream but the home one that ran a stage, with its last stage: the home stream waits for
  /// each at the end (the join), so that work queued after the flow there follows all of it.
  std::vector<std::pair<lane, stage_id>> tails;
};

/// Plans `order` (a topological order of the stages) given each stage's device and predecessors. A
/// stage continues on the stream of a predecessor on its own device when that predecessor was the
/// stream's last stage (no event needed); otherwise it takes its device's next stream, round robin
/// over `lanes_per_device`. The home stream (home, 0) starts and ends the flow.
/// @throws invalid_argument when the tables disagree in size or lanes_per_device < 1.
plan make(device home, int lanes_per_device, const std::vector<device>& device_of,
          const std::vector<std::vector<stage_id>>& preds, const std::vector<stage_id>& order);

/// The device a stage runs on, from its declarations: the one named with access::on; else the device
/// of the memory it writes; else of the memory it reads; else `home`. Only ranges of home's backend
/// count (a CUDA flow treats the CPU's arrays as host memory); ranges whose device is unknown (host
/// memory, views, raw ranges) count for none.
/// @throws device_mismatch naming the stage when it writes memory of two devices, reads (writing
/// nothing) memory of two devices, or is named a device of the other backend.
device stage_device(const std::string& stage, const access& acc, device home);

}  // namespace resident::detail::flow_plan
