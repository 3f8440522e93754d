#pragma once
/// @file ledger.hpp
/// The ledger: every host<->device transfer, kernel launch and pool allocation, counted per device.
///
/// Thread safety: every call may run concurrently from any number of threads. The process-wide counts
/// are atomics, added to by the thread that issues the work; each thread also keeps its own counts
/// (ledger_scope::this_thread), so that the process's totals are the sum of every thread's. A
/// scoped_ledger of the process counts other threads' work done meanwhile; one of this_thread does not.
/// Transfer policies are per thread (scoped_transfer_policy) over a process default read from the
/// environment at each transfer.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "resident/device/device.hpp"

namespace resident {

/// Counts for one device. Bytes and copies per direction; kernels launched; pool traffic.
struct ledger_counts {
  ///@{
  /// Host-to-device bytes and copies.
  std::uint64_t h2d_bytes = 0, h2d_copies = 0;
  ///@}
  ///@{
  /// Device-to-host bytes and copies.
  std::uint64_t d2h_bytes = 0, d2h_copies = 0;
  ///@}
  ///@{
  /// Device-to-device bytes and copies.
  std::uint64_t d2d_bytes = 0, d2d_copies = 0;
  ///@}
  ///@{
  /// Device-to-device-peer bytes and copies: from another GPU into this one (counted on the
  /// receiving device; NVLink or PCIe peer-to-peer, never the host).
  std::uint64_t peer_bytes = 0, peer_copies = 0;
  ///@}
  /// Kernels launched (a graph replay counts the kernels it holds).
  std::uint64_t kernels = 0;
  std::uint64_t allocations = 0;  ///< pool allocations (hits included)
  std::uint64_t pool_hits = 0;    ///< allocations served from memory the pool already held
  std::uint64_t peak_bytes = 0;   ///< the most bytes in use at once (a level, not a count)
  /// Host-to-device bytes moved by out-of-core pipelines (also counted in h2d_bytes, one copy per chunk
  /// and input).
  std::uint64_t streamed_h2d_bytes = 0;
  /// Device-to-host bytes moved by out-of-core pipelines (also counted in d2h_bytes).
  std::uint64_t streamed_d2h_bytes = 0;
  std::uint64_t stream_chunks = 0;  ///< chunks processed by out-of-core pipelines

  /// What happened since `before` (counts subtracted; peak_bytes is this snapshot's).
  ledger_counts operator-(const ledger_counts& before) const;
  /// One line: "H2D 1 copy 256.0 MiB, D2H ..., kernels 1, ..." (peer copies only when there were some).
  std::string summary() const;
  /// The counts as one JSON object.
  std::string json() const;
};

/// A snapshot of the counts for every device that has been used.
struct ledger_snapshot {
  /// Counts per device, in the order the devices were first used.
  std::vector<std::pair<device, ledger_counts>> devices;
  const ledger_counts& of(device d) const;  ///< zeros for a device with no entry
  /// The counts as one JSON object keyed by device name.
  std::string json() const;
};

/// Whose work a count covers: every thread's (the process), or the calling thread's alone.
enum class ledger_scope { process, this_thread };

/// The counts for d since the process started: of every thread, or (ledger_scope::this_thread) of
/// the work the calling thread issued; peak_bytes is the device's either way (a level, not a count).
ledger_counts ledger(device d, ledger_scope who = ledger_scope::process);
/// The counts for every device since the process started.
ledger_snapshot ledger();
/// One line per device ("ledger cpu: H2D ..."), each ending with a newline.
std::ostream& operator<<(std::ostream& os, const ledger_snapshot& s);
/// The summary line, ending with a newline.
std::ostream& operator<<(std::ostream& os, const ledger_counts& c);

/// Counts over a region: construction takes a snapshot, delta() returns what happened since. By
/// default the region counts every thread's work on the device; ledger_scope::this_thread counts only
/// what the constructing thread issued (what a region of one thread among several should measure).
class scoped_ledger {
 public:
  /// Takes a snapshot of d's counts now (every thread's, or the calling thread's).
  explicit scoped_ledger(device d = default_device(), ledger_scope who = ledger_scope::process);
  /// d's counts since construction. With ledger_scope::this_thread, call it on the constructing thread.
  /// @throws invalid_argument for a this_thread ledger read on another thread (its counts are not
  /// that thread's: the difference would be another thread's counts less this one's).
  ledger_counts delta() const;

 private:
  device device_;
  ledger_scope who_;
  ledger_counts start_;
  std::thread::id owner_;
};

/// What a host<->device transfer is allowed to do: allow silently, log it to stderr, or throw
/// transfer_forbidden. Device-to-device copies, within one GPU or between two (peer copies), are not
/// transfers across the host bus and always pass, and
/// copies of nothing (0 bytes, or memory onto itself) are not transfers at all.
///
/// The policy in force on a thread is that of its innermost open scoped_transfer_policy, else the
/// process default: the environment variable RESIDENT_TRANSFER_POLICY (allow, log or forbid), read at
/// each transfer made outside any scope; allow when it is unset or empty.
enum class transfer_policy { allow, log, forbid };

namespace detail {
struct policy_scope;
}  // namespace detail

/// Sets the calling thread's transfer policy for the lifetime of the object. Other threads are not
/// affected. Scopes may close in any order (held in unique_ptrs or optionals), and on any thread
/// (Python may collect one anywhere): the policy in force on a thread is always that of its innermost
/// scope still open.
/// @throws invalid_argument when p is none of allow, log, forbid.
class scoped_transfer_policy {
 public:
  /// Sets the transfer policy to p until destruction.
  explicit scoped_transfer_policy(transfer_policy p);
  ~scoped_transfer_policy();
  scoped_transfer_policy(const scoped_transfer_policy&) = delete;
  scoped_transfer_policy& operator=(const scoped_transfer_policy&) = delete;

 private:
  std::shared_ptr<detail::policy_scope> scope_;  ///< shared with its thread's list of open scopes
};

/// The process default (RESIDENT_TRANSFER_POLICY, else allow).
/// @throws invalid_argument when the variable holds something other than allow, log or forbid.
transfer_policy default_transfer_policy();
/// The calling thread's policy: its innermost scope's, else the process default.
/// @throws invalid_argument as default_transfer_policy() when no scope is open.
transfer_policy current_transfer_policy();

namespace detail {
/// The calling thread's innermost open scope's policy, or nullptr when none is open (no environment
/// read: bindings called per element of a loop ask this, and read the default once).
const transfer_policy* scoped_transfer_policy_now();
enum class direction { h2d, d2h, d2d, peer };
/// Applies the transfer policy (may throw transfer_forbidden) and counts the copy.
void record_transfer(device d, direction dir, std::uint64_t bytes);
void record_kernel(device d, std::uint64_t count = 1);
/// Takes back count kernels recorded on d: captured launches that did not run.
void forget_kernels(device d, std::uint64_t count);
/// Counts an allocation of `bytes` (bytes_in_use: the pool's use after it, for the peak).
void record_allocation(device d, bool pool_hit, std::uint64_t bytes_in_use, std::uint64_t bytes);
/// Counts one chunk of an out-of-core pipeline and the bytes it moved each way (the copies themselves are
/// counted by record_transfer).
void record_stream_chunk(device d, std::uint64_t h2d_bytes, std::uint64_t d2h_bytes);
/// Sets d's peak figure to bytes_in_use (reset_pool_peak).
void reset_ledger_peak(device d, std::uint64_t bytes_in_use);
/// Human-readable bytes: "256.0 MiB".
std::string format_bytes(double bytes);
/// v with `digits` decimals (precision < 0: the shortest "%.6g"-like general form), a '.' whatever the
/// C locale says: a host program's setlocale must not turn a JSON number into "1,5".
std::string decimal_text(double v, int digits);
}  // namespace detail

}  // namespace resident
