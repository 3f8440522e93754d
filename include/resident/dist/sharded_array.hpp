#pragma once
/// @file sharded_array.hpp
/// One logical 1-D array split over several devices: shard r holds elements [offset, offset + count)
/// of the whole, in its device's pool, and is an ordinary array there. Pipelines run per shard, all
/// shards at once (each on its own stream); reductions combine the shards' partial values.
///
///   auto x = rs::dist::to_device(std::span<const float>(host), {rs::device::cuda(0), rs::device::cuda(1)});
///   rs::dist::apply(rs::map<f1>() | rs::map<f2>(), x);                  // one kernel per GPU, concurrently
///   float s = rs::dist::reduce(rs::map<f3>() | rs::reduce(rs::plus{}, 0.f), x);
///   std::vector<float> back = x.to_host();
///
/// A file that runs pipelines on CUDA shards must be compiled by nvcc, as for one array.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/dist/communicator.hpp"
#include "resident/error.hpp"
#include "resident/fuse/pipeline.hpp"
#include "resident/memory/array.hpp"

namespace resident::dist {

/// Where one shard lies in the whole array: elements [offset, offset + count).
struct shard_extent {
  std::size_t offset = 0;  ///< the shard's first element in the whole array
  std::size_t count = 0;   ///< its number of elements
};

/// Shard r of n elements split into `shards` nearly equal parts: n / shards each, the first
/// n % shards of them one more. @throws invalid_argument when r >= shards.
inline shard_extent extent_of(std::size_t n, std::size_t shards, std::size_t r) {
  RESIDENT_EXPECTS(r < shards, "shard " + std::to_string(r) + " of " + std::to_string(shards) + " does not exist");
  const std::size_t base = n / shards, extra = n % shards;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

/// n elements of T split over ranks, one shard per rank, each shard an array<T> in its device's pool.
/// This process holds the shards of its ranks (all of them within one process). Move-only; a
/// moved-from sharded array throws on use. Operations are asynchronous on each shard's stream unless
/// documented otherwise.
template <class T>
class sharded_array {
  static_assert(std::is_trivially_copyable_v<T>, "sharded_array<T> needs a trivially copyable T");

 public:
  /// The element type.
  using value_type = T;

  /// No elements, no shards.
  sharded_array() = default;

  /// n uninitialized elements in one process, shard i on streams[i]'s device, ordered on streams[i]
  /// (several shards may share a device). @throws invalid_argument for no streams or when n * sizeof(T)
  /// overflows; out_of_memory.
  sharded_array(std::size_t n, std::vector<stream_ref> streams) : n_(n), world_(streams.size()) {
    RESIDENT_EXPECTS(!streams.empty(), "sharded_array: give at least one device or stream");
    allocate(streams);
  }
  /// n uninitialized elements in one process, shard i on devices[i], on its default stream.
  sharded_array(std::size_t n, const std::vector<device>& devices) : sharded_array(n, default_streams(devices)) {}
  /// n uninitialized elements over c's ranks: this process allocates its ranks' shards, on their
  /// devices' default streams. Reductions combine across c's processes, through c or the communicator
  /// c is moved into; once its ranks are destroyed, reductions throw invalid_argument.
  sharded_array(std::size_t n, const communicator& c)
      : ranks_(c.ranks()), over_comm_(true), n_(n), world_(std::size_t(c.size())), first_(std::size_t(c.first_rank())) {
    allocate(default_streams(c.devices()));
  }

  /// Takes over o's shards; o is left moved-from.
  sharded_array(sharded_array&& o) noexcept
      : ranks_(std::exchange(o.ranks_, {})), over_comm_(std::exchange(o.over_comm_, false)), n_(std::exchange(o.n_, 0)), world_(std::exchange(o.world_, 0)),
        first_(std::exchange(o.first_, 0)), shards_(std::move(o.shards_)), moved_(std::exchange(o.moved_, true)) {
    o.shards_.clear();
  }
  /// Frees this array's shards (each on its stream) and takes over o's; o is left moved-from.
  sharded_array& operator=(sharded_array&& o) noexcept {
    if (this != &o) {
      release();
      ranks_ = std::exchange(o.ranks_, {});
      over_comm_ = std::exchange(o.over_comm_, false);
      n_ = std::exchange(o.n_, 0);
      world_ = std::exchange(o.world_, 0);
      first_ = std::exchange(o.first_, 0);
      shards_ = std::move(o.shards_);
      o.shards_.clear();
      moved_ = std::exchange(o.moved_, true);
    }
    return *this;
  }
  sharded_array(const sharded_array&) = delete;
  sharded_array& operator=(const sharded_array&) = delete;
  ~sharded_array() { release(); }

  /// Elements in the whole array (all processes).
  std::size_t size() const noexcept { return n_; }
  /// Bytes of the whole array.
  std::size_t bytes() const noexcept { return n_ * sizeof(T); }
  /// True when the array has no elements.
  bool empty() const noexcept { return n_ == 0; }
  /// Shards in the whole array: one per rank.
  std::size_t shard_count() const noexcept { return world_; }
  /// Shards this process holds: shards first_shard() .. first_shard() + local_count() - 1.
  std::size_t local_count() const noexcept { return shards_.size(); }
  /// The number of this process's first shard.
  std::size_t first_shard() const noexcept { return first_; }
  /// Where shard r (0 .. shard_count() - 1) lies in the whole array. @throws invalid_argument.
  shard_extent extent(std::size_t r) const { return extent_of(n_, world_, r); }
  /// This process's shard i (0 .. local_count() - 1) as a slice onto its array, on its stream.
  /// @throws invalid_argument for i out of range or a moved-from array.
  array_ref<T> local(std::size_t i) const { return checked(i).slice(0, checked(i).size()); }
  /// This process's shard i as the array that holds it. @throws invalid_argument.
  const array<T>& local_array(std::size_t i) const { return checked(i); }
  /// This process's shard i as the array that holds it (mutable). @throws invalid_argument.
  array<T>& local_array(std::size_t i) { return const_cast<array<T>&>(checked(i)); }
  /// The device of this process's shard i. @throws invalid_argument.
  resident::device device(std::size_t i) const { return checked(i).device(); }
  /// The stream of this process's shard i. @throws invalid_argument.
  stream_ref stream(std::size_t i) const { return checked(i).stream(); }
  /// The communicator the array was made over (or the one it was moved into), or null (one process,
  /// reductions on the host). @throws invalid_argument when that communicator's ranks were destroyed.
  const communicator* comm() const {
    if (!over_comm_) return nullptr;
    if (const communicator* c = communicator::holder(ranks_)) return c;
    RESIDENT_FAIL("the communicator this sharded_array was made over no longer exists (destroyed, or assigned "
                  "another's ranks); keep it alive as long as the array, or move it instead");
  }

  /// Elements [offset, offset + count) as a slice of the one shard that holds them.
  /// @throws invalid_argument when the range is outside the array, crosses a border between two
  /// shards (they live on different devices: no single slice can see both), or lies in a shard of
  /// another process.
  array_ref<T> slice(std::size_t offset, std::size_t count) const {
    check_live();
    if (offset > n_ || count > n_ - offset)
      RESIDENT_FAIL("slice [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " + std::to_string(count) +
                    ") is outside a sharded array of " + std::to_string(n_) + " elements");
    std::size_t r = 0;  // the shard that holds offset (an empty range at a border: the one it ends)
    for (; r + 1 < world_; ++r) {
      const shard_extent e = extent(r);
      if (offset < e.offset + e.count || (count == 0 && offset == e.offset + e.count)) break;
    }
    const shard_extent e = extent(r);
    if (offset + count > e.offset + e.count)
      RESIDENT_FAIL("slice [" + std::to_string(offset) + ", " + std::to_string(offset + count) + ") crosses the border at element " +
                    std::to_string(e.offset + e.count) + " between shard " + std::to_string(r) + " and shard " +
                    std::to_string(r + 1) + " (different devices); slice within one shard (extent(r)) or copy "
                    "the range into one array first");
    if (r < first_ || r >= first_ + shards_.size())
      RESIDENT_FAIL("slice [" + std::to_string(offset) + ", " + std::to_string(offset + count) + ") lies in shard " +
                    std::to_string(r) + ", held by another process (this one holds shards " + std::to_string(first_) +
                    " to " + std::to_string(first_ + shards_.size() - 1) + ")");
    return shards_[r - first_].slice(offset - e.offset, count);
  }

  /// Gathers the whole array into a new host vector (one download per shard). Synchronizes.
  /// @throws invalid_argument when other processes hold shards (gather those per process).
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    to_host(std::span<T>(h));
    return h;
  }
  /// Gathers the whole array into host memory of its size. Synchronizes. @throws shape_mismatch;
  /// invalid_argument when other processes hold shards, or out is null with elements.
  void to_host(std::span<T> out) const {
    check_live();
    all_local("to_host");
    resident::detail::check_host_memory(out.data(), out.size(), "to_host");
    if (out.size() != n_)
      RESIDENT_FAIL("to_host: host buffer holds " + std::to_string(out.size()) + " elements, sharded array " +
                        std::to_string(n_), shape_mismatch);
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      const shard_extent e = extent(first_ + i);
      device_scope on(shards_[i].device());
      shards_[i].to_host(out.subspan(e.offset, e.count));
    }
  }

  /// Throws invalid_argument when the array was moved from.
  void check_live() const {
    if (moved_) RESIDENT_FAIL("use of a moved-from sharded_array: it no longer owns shards");
  }
  /// Throws invalid_argument when another process holds shards; `what` names the call.
  void all_local(const char* what) const {
    if (shards_.size() != world_)
      RESIDENT_FAIL(std::string(what) + ": this process holds " + std::to_string(shards_.size()) + " of the " +
                    std::to_string(world_) + " shards; each process reads its own shards (local(i))");
  }

 private:
  static std::vector<stream_ref> default_streams(const std::vector<resident::device>& devices) {
    std::vector<stream_ref> s;
    for (auto d : devices) s.push_back(default_stream(d));
    return s;
  }
  void allocate(const std::vector<stream_ref>& streams) {
    RESIDENT_EXPECTS(n_ <= array<T>::max_size(), "sharded_array size " + std::to_string(n_) + " overflows the byte count");
    shards_.reserve(streams.size());
    for (std::size_t i = 0; i < streams.size(); ++i) {
      device_scope on(streams[i].device());
      shards_.emplace_back(extent(first_ + i).count, streams[i]);
    }
  }
  const array<T>& checked(std::size_t i) const {
    check_live();
    RESIDENT_EXPECTS(i < shards_.size(), "shard " + std::to_string(i) + " of the " + std::to_string(shards_.size()) +
                                             " this process holds does not exist");
    return shards_[i];
  }
  void release() noexcept {
    // Each shard is freed on its stream with its device current (a null stream names the current one's).
    for (auto& a : shards_) {
      try {
        device_scope on(a.device());
        a = array<T>();
      } catch (...) {
      }
    }
    shards_.clear();
  }

  std::weak_ptr<const detail::communicator_state> ranks_;  // the communicator's, when made over one
  bool over_comm_ = false;
  std::size_t n_ = 0, world_ = 0, first_ = 0;
  std::vector<array<T>> shards_;
  bool moved_ = false;
};

/// Scatters host memory (the whole array) into a new sharded array, shard i on devices[i]: one
/// upload per shard, staged as to_device. Returns once the host memory has been read.
/// @throws invalid_argument for no devices or null host memory with elements (before allocating);
/// out_of_memory.
template <class T>
sharded_array<T> to_device(std::span<const T> host, const std::vector<device>& devices) {
  resident::detail::check_host_memory(host.data(), host.size(), "to_device");
  sharded_array<T> a(host.size(), devices);
  copy(host, a);
  return a;
}
/// Scatters host memory (the whole array, the same in every process) over c's ranks: each process
/// uploads its shards' parts.
template <class T>
sharded_array<T> to_device(std::span<const T> host, const communicator& c) {
  resident::detail::check_host_memory(host.data(), host.size(), "to_device");
  sharded_array<T> a(host.size(), c);
  copy(host, a);
  return a;
}
/// As above, from a vector.
template <class T>
sharded_array<T> to_device(const std::vector<T>& host, const std::vector<device>& devices) {
  return to_device(std::span<const T>(host), devices);
}
/// As above, from a vector, over c's ranks.
template <class T>
sharded_array<T> to_device(const std::vector<T>& host, const communicator& c) {
  return to_device(std::span<const T>(host), c);
}

/// Uploads host memory (the whole array) into an existing sharded array: each local shard its part.
/// @throws shape_mismatch when the sizes differ; invalid_argument for null host memory with elements.
template <class T>
void copy(std::type_identity_t<std::span<const T>> host, sharded_array<T>& dst) {
  dst.check_live();
  resident::detail::check_host_memory(host.data(), host.size(), "copy");
  if (host.size() != dst.size())
    RESIDENT_FAIL("copy: host buffer holds " + std::to_string(host.size()) + " elements, sharded array " +
                      std::to_string(dst.size()), shape_mismatch);
  for (std::size_t i = 0; i < dst.local_count(); ++i) {
    const shard_extent e = dst.extent(dst.first_shard() + i);
    device_scope on(dst.device(i));
    resident::copy(host.subspan(e.offset, e.count), dst.local_array(i));
  }
}

/// Calls f(shard, extent) for each shard this process holds, with the shard's device current: shard
/// is an array_ref onto it, extent where it lies in the whole array. What f queues runs on the shard's
/// stream, so the shards' work overlaps.
template <class T, class F>
void for_each_shard(const sharded_array<T>& a, F&& f) {
  a.check_live();
  for (std::size_t i = 0; i < a.local_count(); ++i) {
    device_scope on(a.device(i));
    f(a.local(i), a.extent(a.first_shard() + i));
  }
}

/// Runs pipeline p on every shard this process holds: in place for a map pipeline, or filling each
/// shard from a generate source (whose index is local to the shard). One kernel per shard on the
/// shard's stream, all shards at once; asynchronous (no host synchronization).
template <class P, class T>
void apply(const P& p, sharded_array<T>& a) {
  for_each_shard(a, [&](array_ref<T> s, shard_extent) { p(s); });
}

/// y = p(x) shard by shard (out of place; y's element type may differ). One kernel per shard on y's
/// shard's stream, after x's shard's work. @throws shape_mismatch when the sizes or the shardings
/// differ; device_mismatch when a shard of x and its shard of y are on different devices.
template <class P, class T, class U>
void apply(const P& p, const sharded_array<T>& x, sharded_array<U>& y) {
  x.check_live();
  y.check_live();
  if (x.size() != y.size() || x.shard_count() != y.shard_count() || x.first_shard() != y.first_shard() ||
      x.local_count() != y.local_count())
    RESIDENT_FAIL("apply: the input has " + std::to_string(x.size()) + " elements in " + std::to_string(x.shard_count()) +
                      " shards, the output " + std::to_string(y.size()) + " in " + std::to_string(y.shard_count()) +
                      "; shard both alike", shape_mismatch);
  for (std::size_t i = 0; i < x.local_count(); ++i)
    if (!(x.device(i) == y.device(i)))
      RESIDENT_FAIL("apply: shard " + std::to_string(x.first_shard() + i) + " of the input is on " + x.device(i).name() +
                        ", of the output on " + y.device(i).name() + "; shard both over the same devices", device_mismatch);
  for (std::size_t i = 0; i < x.local_count(); ++i) {
    device_scope on(y.device(i));
    y.stream(i).wait_for(x.stream(i));
    p(x.local(i), y.local(i));
  }
}

namespace detail {
template <class Op>
inline constexpr bool is_plus = std::is_same_v<Op, resident::plus>;
template <class Op>
inline constexpr bool is_min_or_max = std::is_same_v<Op, resident::minimum> || std::is_same_v<Op, resident::maximum>;
template <class Op>
constexpr combine combine_of() {
  if constexpr (is_plus<Op>) return combine::sum;
  else if constexpr (std::is_same_v<Op, resident::minimum>) return combine::min;
  else return combine::max;
}
}  // namespace detail

/// Reduces pipeline p (ending in rs::reduce(op, init)) over the whole array and returns the value.
/// Each shard reduces into a one-element array on its device (one kernel per shard, all at once); the
/// partial values are then combined: within one process on the host (one small device-to-host copy
/// per GPU shard, counted in the ledger), across processes by an all-reduce of the communicator (NCCL
/// between GPUs, MPI between CPUs) that leaves the value on every rank's device, then one small
/// download. init counts once: for plus the other shards start from 0; minimum and maximum may repeat
/// it; for any other op give an init that is op's identity. Synchronizes.
/// @throws invalid_argument across processes for an op other than plus, minimum and maximum, and,
/// before any work, when the communicator the array was made over is gone; library_error when a rank fails or stays silent past the communicator's timeout.
template <class P, class T>
auto reduce(const P& p, const sharded_array<T>& a) {
  using R = std::remove_cvref_t<decltype(p.red.init)>;
  using Op = std::remove_cvref_t<decltype(p.red.op)>;
  a.check_live();
  const communicator* c = a.comm();  // before any work: its ranks may be gone
  const std::size_t L = a.local_count();
  // The partial values, each freed on its own device's stream also when a combine throws.
  struct partials : std::vector<array<R>> {
    ~partials() {
      for (auto& x : *this) {
        try {
          device_scope on(x.device());
          x = array<R>();
        } catch (...) {
        }
      }
    }
  } part;
  part.reserve(L);
  for (std::size_t i = 0; i < L; ++i) {
    device_scope on(a.device(i));
    part.emplace_back(1, a.stream(i));
    if constexpr (detail::is_plus<Op>) {
      P q = p;
      if (a.first_shard() + i != 0) q.red.init = R{};
      q(a.local(i), part.back());
    } else {
      p(a.local(i), part.back());
    }
  }
  R v{};
  if (c && c->spans_processes()) {
    if constexpr (detail::is_plus<Op> || detail::is_min_or_max<Op>) {
      std::vector<array_ref<R>> refs;
      std::vector<stream_ref> streams;
      for (auto& x : part) {
        refs.push_back(x.slice(0, 1));
        streams.push_back(x.stream());
      }
      c->all_reduce<R>(refs, 1, detail::combine_of<Op>());
      c->synchronize(streams);
      device_scope on(part[0].device());
      part[0].to_host(std::span<R>(&v, 1));
    } else {
      RESIDENT_FAIL("reduce: across processes the shards' values combine by NCCL or MPI, which know plus, minimum "
                    "and maximum; reduce with one of those");
    }
  } else {
    if (L == 0) return R(p.red.init);  // no shards (a default-made array): nothing but init
    for (std::size_t i = 0; i < L; ++i) {
      R x{};
      {
        device_scope on(part[i].device());
        part[i].to_host(std::span<R>(&x, 1));
      }
      v = i == 0 ? x : p.red.op(v, x);
    }
  }
  return v;
}

}  // namespace resident::dist
