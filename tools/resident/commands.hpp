#pragma once
// The commands of the resident CLI but its benchmarks (bench/commands/bench.hpp). Each returns the
// process exit code.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "commands/bench.hpp"
#include "resident/device/device.hpp"

namespace resident::cli {

struct info_options {
  bool measure = false;
  std::string device;  ///< "" = default
  std::string json;    ///< "" = none, "-" = stdout
};
int run_info(const info_options& o);

struct demo_options {
  std::string device;
  std::size_t n = 0;  ///< 0 = the device's default
  int reps = 0;       ///< 0 = the device's default
  std::string json;
  bool stream = false;  ///< also stream the pipeline host to host in chunks
  bool profile = false;  ///< print the profile report of the run (and add it to the JSON)
  int gpus = 0;             ///< > 0: the seed pipeline sharded over this many devices against one
  bool beyond_one = false;  ///< with gpus: an array larger than one device, filled, mapped and summed
  std::size_t size = 0;     ///< beyond_one: bytes of the array; 0 = 1.25x one GPU's free memory
};
int run_demo(const demo_options& o);
/// demo --gpus N: the seed pipeline over an array sharded over N devices against one device, checked
/// against FP64; with beyond_one, one array larger than a device filled, mapped in place and summed.
int run_demo_sharded(const demo_options& o);

}  // namespace resident::cli
