#pragma once
/// @file communicator.hpp
/// Ranks that combine values: one rank per device. Within one process a communicator spans several
/// devices (GPUs joined by NCCL, made with ncclCommInitAll; CPU "ranks" combined by the host); across
/// processes each process is one rank (GPUs: NCCL made with ncclCommInitRank; the CPU: MPI), started by
/// `mpirun` or described by environment variables. Nothing travels through a transport of resident's
/// own: NCCL moves device memory, MPI host memory, and NCCL's unique id is exchanged by MPI or a file.
///
/// Thread safety: one communicator's collectives are called from one thread at a time (NCCL's and
/// MPI's rule; see communicator); different communicators may be used from different threads.
///
///   rs::dist::communicator local({rs::device::cuda(0), rs::device::cuda(1)});   // one process, 2 GPUs
///   auto world = rs::dist::communicator::from_launcher();                       // mpirun -n 2 prog

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "resident/device/device.hpp"
#include "resident/device/stream.hpp"
#include "resident/memory/array.hpp"

namespace resident::dist {

/// How values from all ranks are combined: what NCCL and MPI combine natively.
enum class combine { sum, min, max };

/// How the ranks of a communicator were started.
enum class launcher {
  in_process,   ///< one process, one rank per device given
  environment,  ///< one rank per process: RESIDENT_RANK, RESIDENT_WORLD_SIZE, RESIDENT_RENDEZVOUS
  mpi           ///< one rank per process, started by mpirun (a build with MPI)
};

/// "in-process", "environment" or "mpi".
const char* to_string(launcher l) noexcept;

namespace detail {
/// Element types that collectives carry.
enum class element { f32, f64, i32, u32, i64, u64 };
template <class T>
constexpr element element_of() {
  if constexpr (std::is_same_v<T, float>) return element::f32;
  else if constexpr (std::is_same_v<T, double>) return element::f64;
  else if constexpr (std::is_integral_v<T> && sizeof(T) == 4) return std::is_signed_v<T> ? element::i32 : element::u32;
  else if constexpr (std::is_integral_v<T> && sizeof(T) == 8) return std::is_signed_v<T> ? element::i64 : element::u64;
  else static_assert(sizeof(T) == 0, "collectives carry float, double and 32- or 64-bit integers");
}
/// One rank's buffer: count elements at data on s's device.
struct buffer {
  void* data;
  stream_ref stream;
};
struct communicator_state;
}  // namespace detail

/// resident::device_scope (device.hpp), under the name the dist code uses: the dist functions open
/// one for every shard; open one around CUDA calls of your own on a shard.
///
///   { rs::dist::device_scope on(x.device(1)); my_kernel<<<g, b, 0, x.local(1).stream().native()>>>(...); }
using resident::device_scope;

/// A set of ranks, one per device, that combine values. This process holds devices().size() of them
/// (ranks first_rank() ...); size() counts all. Move-only; a moved-from communicator throws on use.
/// Collectives are called by every process, each with its own ranks' buffers, from one thread at a
/// time per communicator (NCCL's rule; a second thread would interleave the processes' calls).
class communicator {
 public:
  /// One process, one rank per device in `devices` (all GPUs, or all the CPU; a device may repeat on the
  /// CPU, which makes several CPU ranks). GPUs are joined by NCCL (ncclCommInitAll), CPU ranks are
  /// combined by the host. @throws invalid_argument for no devices, a mix of kinds, a GPU named twice;
  /// device_unavailable; library_error from NCCL; invalid_argument when GPUs are named in a build
  /// without NCCL.
  explicit communicator(std::vector<device> devices);

  /// This process as one rank of several, as its launcher says:
  /// - started by mpirun in a build with MPI: MPI's rank and size (MPI is initialized here when the
  ///   program has not done it, and finalized at exit);
  /// - else RESIDENT_RANK and RESIDENT_WORLD_SIZE (or mpirun's OMPI_COMM_WORLD_RANK / _SIZE, or
  ///   PMI_RANK / PMI_SIZE), with RESIDENT_RENDEZVOUS naming a file, fresh for each job, on a file
  ///   system all ranks see, through which rank 0 hands NCCL's unique id to the others;
  /// - else a world of one rank.
  /// The rank works on `d`, by default cuda:(local rank) when this host has a GPU for each of its
  /// ranks (RESIDENT_LOCAL_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE or MPI_LOCALNRANKS; else the world's
  /// size), else the CPU; a GPU becomes the calling thread's current device. GPU ranks are joined by NCCL
  /// (ncclCommInitRank); CPU ranks of several processes need MPI. A rank that
  /// does not join within `timeout` (or fails) makes the others throw instead of hanging.
  /// @throws invalid_argument for inconsistent variables or a CPU world without MPI; library_error
  /// (NCCL, MPI, or "timeout").
  static communicator from_launcher(std::optional<device> d = std::nullopt,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(120));

  ~communicator();
  /// Takes over o's ranks (sharded arrays made over o follow them); o is left moved-from.
  communicator(communicator&& o) noexcept;
  /// Releases this communicator's ranks (sharded arrays made over it then throw on reductions) and
  /// takes over o's.
  communicator& operator=(communicator&& o) noexcept;
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  /// Ranks in all processes.
  int size() const;
  /// The rank of this process's first device; its devices hold ranks first_rank() + i.
  int first_rank() const;
  /// This process's devices, one per rank it holds.
  const std::vector<device>& devices() const;
  /// How the ranks were started.
  launcher started_by() const;
  /// True when other processes hold ranks too.
  bool spans_processes() const { return int(devices().size()) < size(); }
  /// How long a collective waits for the other ranks before it gives up (from_launcher's timeout).
  std::chrono::milliseconds timeout() const;
  /// What joins the ranks: "NCCL 2.28.9", "MPI (Open MPI ...)", "host".
  std::string transport() const;

  /// In place, on every rank: buffers[i] (count elements on devices()[i], one per rank this process
  /// holds, in order) becomes the combination of that buffer over all ranks. GPU ranks: one NCCL
  /// all-reduce per buffer, on the buffer's stream, asynchronous (no host synchronization); the
  /// buffers are read on their streams after the work queued there. CPU ranks: combined by the host
  /// (and MPI across processes) before the call returns.
  /// @throws invalid_argument for the wrong number of buffers, a buffer shorter than count, or a
  /// moved-from communicator; device_mismatch for a buffer on another device than its rank's;
  /// library_error from NCCL or MPI.
  template <class T>
  void all_reduce(std::span<const array_ref<T>> buffers, std::size_t count, combine op) const {
    std::vector<detail::buffer> b;
    b.reserve(buffers.size());
    for (const auto& r : buffers) {
      RESIDENT_EXPECTS(r.size() >= count, "all_reduce: a buffer holds " + std::to_string(r.size()) +
                                              " elements, the call combines " + std::to_string(count));
      b.push_back({r.data(), r.stream()});
    }
    all_reduce_raw(b, count, detail::element_of<T>(), op);
  }

  /// Waits until the collectives queued on the buffers' streams have finished, watching for a failed
  /// or silent rank: after timeout() the communicator is aborted and the call throws. Synchronizes.
  /// @throws library_error (NCCL's error, or "timeout").
  void synchronize(std::span<const stream_ref> streams) const;

  /// Blocks until every rank has called barrier (a one-element all-reduce). Synchronizes.
  void barrier() const;

  /// The implementation's state (for the library's own files).
  detail::communicator_state& state() const;
  /// A weak reference to this communicator's ranks: sharded arrays find their communicator through it.
  /// For the library's own files. @throws invalid_argument for a moved-from communicator.
  std::weak_ptr<const detail::communicator_state> ranks() const;
  /// The communicator that holds the ranks r refers to now (it follows moves), or null once they are
  /// destroyed. For the library's own files.
  static const communicator* holder(const std::weak_ptr<const detail::communicator_state>& r) noexcept;

 private:
  explicit communicator(std::unique_ptr<detail::communicator_state> s);
  void all_reduce_raw(std::span<const detail::buffer> b, std::size_t count, detail::element t, combine op) const;
  std::shared_ptr<detail::communicator_state> s_;  // shared only to be watched by weak references
};

}  // namespace resident::dist
