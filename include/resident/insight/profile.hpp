#pragma once
/// @file profile.hpp
/// What a program's own calls achieved against the hardware, where in its source they were made, and
/// what to change: a report per call site (calls, kernels, time, bytes, GB/s against the device's
/// measured copy rate, host<->device bytes) with advice lines, each from a measured condition.
///
/// Collect over a scope with rs::profile, or over the whole program with RESIDENT_PROFILE=1 (the
/// report goes to stderr at exit, and as JSON to the file RESIDENT_PROFILE_JSON names).
///
/// Thread safety: calls on any thread are collected at once into one process-wide collector, under its
/// lock (a call that collects nothing reads one atomic word); the calling thread's open call scopes are
/// thread_local. Several profiles may be open on several threads; each counts every thread's calls.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "resident/device/device.hpp"

namespace resident {

/// One call site's figures: every call made from one file and line, of one kind, on one device.
struct profile_site {
  std::string file;      ///< the caller's source file ("" for work done outside any call site)
  unsigned line = 0;     ///< the caller's line
  std::string name;      ///< what was called: a pipeline's stages, "to_device", "copy", ...
  bool transfer = false;  ///< an explicit transfer (its rate is the bus's, not compared to the copy rate)
  int stages = 0;         ///< element-wise stages each call fused into one pass (0: not a pipeline)
  device dev{};           ///< where the calls ran
  std::uint64_t calls = 0;        ///< calls made
  std::uint64_t timed_calls = 0;  ///< calls whose time was measured (not those captured into graphs)
  std::uint64_t kernels = 0;      ///< kernels launched by the calls
  double seconds = 0;             ///< time of the timed calls (device events on a GPU, host clock on the CPU)
  std::uint64_t bytes_read = 0;     ///< bytes the calls read
  std::uint64_t bytes_written = 0;  ///< bytes the calls wrote
  std::uint64_t min_call_bytes = 0;  ///< the fewest bytes (read + written) one call moved
  std::uint64_t max_call_bytes = 0;  ///< the most bytes (read + written) one call moved
  std::uint64_t elements = 0;       ///< elements visited
  std::uint64_t h2d_bytes = 0;      ///< host-to-device bytes
  std::uint64_t d2h_bytes = 0;      ///< device-to-host bytes
  std::uint64_t d2d_bytes = 0;      ///< device-to-device copy bytes
  std::uint64_t allocations = 0;    ///< pool allocations made inside the calls
  std::uint64_t allocated_bytes = 0;  ///< bytes those allocations asked for
  /// Calls that allocated and left more pool memory in use than this site's previous allocating call
  /// did (the first such call counts): what the calls make stays alive.
  std::uint64_t calls_pool_grew = 0;
  std::uint64_t bytes_in_use = 0;  ///< pool bytes in use after the last allocating call (a level)
  std::uint64_t fusable_calls = 0;  ///< calls that mapped the array the previous call (one map, on an
                                    ///< adjacent line of the same file) had just mapped
  unsigned fusable_with_line = 0;   ///< the line of that previous call
  /// Kernels (CPU: parallel loops) whose launch shape was recorded.
  std::uint64_t shaped_launches = 0;
  std::uint64_t grid_blocks = 0;    ///< the lowest-occupancy launch's grid, in blocks (CPU: pieces)
  std::uint64_t block_threads = 0;  ///< its threads per block (0 on the CPU)
  int blocks_per_sm = 0;            ///< blocks of its kernel one SM holds at that block size (0 on the CPU)
  std::uint64_t workers = 0;        ///< threads it kept running at once (resident GPU threads, CPU threads)
  /// Its occupancy: active warps per SM over the SM's most (GPU), workers over the OpenMP team (CPU);
  /// the lowest among the site's launches. 0 when no shape was recorded.
  double occupancy = 0;

  /// "file:line" with the file's directories dropped ("(outside any call)" for that row).
  std::string site() const;
  /// Bytes read + written per second over the timed calls, in GB/s (0 when nothing was timed).
  double gbps() const;
  /// Mean seconds per timed call (0 when none was timed).
  double seconds_per_call() const;
  /// The launch shape: "GRIDxBLOCK, N/SM" on a GPU, "P pieces on W threads" on the CPU, "-" when none
  /// was recorded.
  std::string shape() const;
};

/// One piece of advice: which guideline a measured condition breaks, where, and the example that shows
/// the fix.
struct profile_advice {
  std::string kind;     ///< repeated_transfer, launch_bound, below_copy_rate, low_occupancy, could_fuse, pool_grows
  std::string site;     ///< "file:line" it is about
  std::string message;  ///< what was measured and what to change
  std::string example;  ///< the guide example that shows the fix (a path under examples/, or a command)
};

/// A profile: per call site, the measured copy rate of each device used, and the advice.
struct profile_report {
  std::vector<profile_site> sites;  ///< in order of total time, the longest first
  /// Per device used: its measured copy rate in GB/s (bytes read + written per second of a
  /// device-to-device copy; a memcpy on the CPU).
  std::vector<std::pair<device, double>> copy_rates;
  std::vector<profile_advice> advice;  ///< empty when nothing measured calls for a change

  /// The copy rate measured for d, in GB/s (0 when d is not in the report).
  double copy_rate(device d) const;
  /// An aligned table with units, then one line per advice.
  std::string table() const;
  /// The report as one JSON object (schema "resident.profile", schema_version 1; see
  /// docs/json.md).
  std::string json() const;
  /// Writes json() and a newline to the file `path` (what RESIDENT_PROFILE_JSON names at exit).
  /// @throws invalid_argument when the file cannot be written, saying why.
  void save_json(const std::string& path) const;
};

/// Prints report.table().
std::ostream& operator<<(std::ostream& os, const profile_report& report);

/// What a profile prints when it ends.
enum class profile_output { table, quiet };

/// Collects a profile over its lifetime: every call made on any thread while it is alive is counted
/// to its call site (several profiles may be open; each reports the calls made during its own life).
/// At destruction, prints the report to stderr unless built with profile_output::quiet. Collecting
/// adds two events per call on a GPU, read when a profile starts or reports (or when 512 wait): that
/// waits for those calls' end events only, never for the whole device.
class profile {
 public:
  /// Starts collecting.
  explicit profile(profile_output out = profile_output::table);
  /// Stops collecting; prints the report to stderr (profile_output::table).
  ~profile();
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;

  /// The report of the calls made since construction (waits for their timing events).
  profile_report report() const;

 private:
  std::uint64_t start_ = 0;  ///< the snapshot this profile subtracts
  profile_output out_;
};

/// Whether calls are being profiled now (a profile is open, or RESIDENT_PROFILE is 1, on, true or yes;
/// another value but 0, off, false or no is named on stderr once and profiles).
bool profiling();

/// The copy rate of d in GB/s: bytes read + written per second of a device-to-device copy of 256 MiB
/// (a parallel memcpy of 64 MiB on the CPU), the best of several; measured once per device and cached.
/// Synchronizes d's work. @throws device_unavailable.
double copy_rate(device d);

/// The advice for a report's sites and copy rates (what profile_report::advice holds): pure, so any
/// set of figures can be checked.
std::vector<profile_advice> advise(const std::vector<profile_site>& sites,
                                   const std::vector<std::pair<device, double>>& copy_rates);

}  // namespace resident
