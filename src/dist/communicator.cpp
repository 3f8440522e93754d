#include "resident/dist/communicator.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <unistd.h>

#include "backend/runtime.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/files.hpp"
#include "resident/dist/detail/mpi.hpp"
#include "resident/dist/detail/nccl.hpp"
#include "resident/error.hpp"

namespace resident::dist {
namespace cu = resident::detail::cuda;

const char* to_string(launcher l) noexcept {
  switch (l) {
    case launcher::in_process: return "in-process";
    case launcher::environment: return "environment";
    case launcher::mpi: return "mpi";
  }
  return "?";
}

namespace detail {

struct communicator_state {
  std::vector<device> devices;
  int size = 1;
  int first_rank = 0;
  launcher how = launcher::in_process;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  bool cpu = false;             // CPU ranks: the host combines, MPI across processes
  std::vector<nccl::comm_t> comms;  // GPU ranks: one NCCL communicator per local device
  const communicator* owner = nullptr;  // the communicator holding these ranks now (moves update it)
  communicator_state() = default;
  communicator_state(const communicator_state&) = delete;
  communicator_state& operator=(const communicator_state&) = delete;
  ~communicator_state() {
    for (auto c : comms) nccl::destroy(c);
  }
};

namespace {

// a + b; integers wrap (two's complement) as NCCL's and MPI's sums do, where C++'s signed overflow is
// undefined.
template <class T>
T wrapping_plus(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return T(a + b);
}

template <class T>
void combine_host(std::span<const buffer> b, std::size_t count, combine op) {
  T* out = static_cast<T*>(b[0].data);
  for (std::size_t r = 1; r < b.size(); ++r) {
    const T* in = static_cast<const T*>(b[r].data);
    for (std::size_t i = 0; i < count; ++i) {
      switch (op) {
        case combine::sum: out[i] = wrapping_plus(out[i], in[i]); break;
        // NaN propagates as in the pipelines' minimum and maximum.
        case combine::min: out[i] = (in[i] < out[i] || in[i] != in[i]) ? in[i] : out[i]; break;
        case combine::max: out[i] = (in[i] > out[i] || in[i] != in[i]) ? in[i] : out[i]; break;
      }
    }
  }
}

void combine_host(std::span<const buffer> b, std::size_t count, element t, combine op) {
  switch (t) {
    case element::f32: combine_host<float>(b, count, op); break;
    case element::f64: combine_host<double>(b, count, op); break;
    case element::i32: combine_host<std::int32_t>(b, count, op); break;
    case element::u32: combine_host<std::uint32_t>(b, count, op); break;
    case element::i64: combine_host<std::int64_t>(b, count, op); break;
    case element::u64: combine_host<std::uint64_t>(b, count, op); break;
  }
}

std::size_t element_bytes(element t) {
  return t == element::f32 || t == element::i32 || t == element::u32 ? 4 : 8;
}

// The first of the variables that is set, or null.
const char* first_env(std::initializer_list<const char*> names, const char** which = nullptr) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) {
      if (which) *which = n;
      return v;
    }
  return nullptr;
}

int parse_count(const char* name, const char* text, int low) {
  int v = 0;
  const std::string_view s(text);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < low)
    RESIDENT_FAIL(std::string(name) + " is '" + std::string(s) + "': give a whole number from " +
                  std::to_string(low));
  return v;
}

// Rank 0 writes NCCL's unique id into `path` (whole, by a rename); the others wait for it.
constexpr char magic[9] = "resident";
}  // namespace

// Written 0600 (the id lets a process join the job's NCCL communicator), through the one file writer:
// a FIFO, device or directory at the path is refused by name, a planted link is never followed.
void publish_id(const std::string& path, const nccl::unique_id& id) {
  std::string bytes(magic, 8);
  bytes.append(id.data(), id.size());
  if (std::string why = resident::detail::try_write_file_atomically(path, bytes, resident::detail::file_access::secret); !why.empty())
    RESIDENT_FAIL("RESIDENT_RENDEZVOUS: cannot write '" + path + "': " + why +
                  " (give a path, fresh for each job, in a folder all ranks see)");
}

// Rank 0's file is opened O_NOFOLLOW | O_NONBLOCK and must be a regular file of this user's that no one
// else may write: a FIFO, device or another user's file at the path is a typed error at once, not a
// wait past the timeout.
nccl::unique_id receive_id(const std::string& path, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    // The writer's rule for the path: a link another user owns, or one in a folder they may rename
    // entries in, would hand this rank the id of their choosing.
    if (std::string why = resident::detail::foreign_link_on(path); !why.empty())
      RESIDENT_FAIL("RESIDENT_RENDEZVOUS: cannot read '" + path + "': " + why + " (rank 0 writes it through the "
                    "same path and refuses it too)");
    if (auto kind = resident::detail::kind_at(path); kind && !kind->empty())
      RESIDENT_FAIL("RESIDENT_RENDEZVOUS: '" + path + "' is " + *kind + ", not a regular file; give a fresh file "
                    "path that rank 0 creates");
    std::string why;
    auto bytes = resident::detail::read_private_file(path, 8 + sizeof(nccl::unique_id), &why);
    if (!bytes && (why.find("belongs to user") != std::string::npos || why.find("others may write") != std::string::npos))
      // Another user's file (or one anyone may rewrite) would join this job to their communicator.
      RESIDENT_FAIL("RESIDENT_RENDEZVOUS: '" + path + "': " + why + "; rank 0 of this job writes it, owned by this "
                    "user and readable by no one else: give a fresh path in a folder of this user's");
    if (bytes) {
      nccl::unique_id id{};
      if (bytes->size() == 8 + id.size() && std::equal(bytes->begin(), bytes->begin() + 8, magic)) {
        std::copy(bytes->begin() + 8, bytes->end(), id.begin());
        return id;
      }
    }
    if (std::chrono::steady_clock::now() - start > timeout)
      RESIDENT_FAIL("RESIDENT_RENDEZVOUS: rank 0 did not write '" + path + "' within " +
                    std::to_string(timeout.count()) + " ms; is rank 0 running, with the same path?");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace detail

communicator::communicator(std::unique_ptr<detail::communicator_state> s) : s_(std::move(s)) { s_->owner = this; }

communicator::communicator(std::vector<device> devices) : s_(std::make_unique<detail::communicator_state>()) {
  RESIDENT_EXPECTS(!devices.empty(), "communicator: give at least one device");
  // Ranks in host memory are combined by the host (or MPI); the others by NCCL.
  const bool cpu = resident::detail::backend_of(devices.front()).host_memory();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    RESIDENT_EXPECTS(resident::detail::backend_of(devices[i]).host_memory() == cpu, "communicator: devices " + devices.front().name() + " and " +
                                                     devices[i].name() + " mix the CPU and GPUs; give one kind");
    require(devices[i]);
    for (std::size_t j = 0; j < i && !cpu; ++j)
      RESIDENT_EXPECTS(!(devices[j] == devices[i]),
                       "communicator: " + devices[i].name() + " is named twice; NCCL joins each GPU once");
  }
  s_->owner = this;
  s_->devices = std::move(devices);
  s_->size = int(s_->devices.size());
  s_->cpu = cpu;
  if (!cpu) {
    std::vector<int> idx;
    for (auto d : s_->devices) idx.push_back(d.index());
    s_->comms = detail::nccl::init_all(idx);
  }
}

communicator communicator::from_launcher(std::optional<device> d, std::chrono::milliseconds timeout) {
  namespace mpi = detail::mpi;
  namespace nccl = detail::nccl;
  RESIDENT_EXPECTS(timeout.count() > 0, "communicator::from_launcher: the timeout must be positive");
  auto s = std::make_unique<detail::communicator_state>();
  s->timeout = timeout;
  int rank = 0, size = 1, local = 0;
  const char* rank_name = "RESIDENT_RANK";
  const char* size_name = "RESIDENT_WORLD_SIZE";
  if (mpi::available() && mpi::launched()) {
    mpi::init();
    rank = mpi::rank();
    size = mpi::size();
    local = mpi::local_rank();
    s->how = launcher::mpi;
  } else if (const char* n = detail::first_env({"RESIDENT_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, &size_name)) {
    size = detail::parse_count(size_name, n, 1);
    const char* r = detail::first_env({"RESIDENT_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, &rank_name);
    RESIDENT_EXPECTS(r, std::string(size_name) + " is set but no rank: set RESIDENT_RANK too (0 to " +
                            std::to_string(size - 1) + ")");
    rank = detail::parse_count(rank_name, r, 0);
    RESIDENT_EXPECTS(rank < size, std::string(rank_name) + " is " + std::to_string(rank) + " but " + size_name +
                                      " is " + std::to_string(size) + ": ranks go from 0 to size - 1");
    const char* local_name = "RESIDENT_LOCAL_RANK";
    const char* l = detail::first_env({"RESIDENT_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}, &local_name);
    local = l ? detail::parse_count(local_name, l, 0) : rank;
    s->how = launcher::environment;
  } else if (const char* r = detail::first_env({"RESIDENT_RANK"})) {
    // A rank without a world size would quietly be a world of one, each process on its own.
    RESIDENT_FAIL(std::string(rank_name) + " is '" + r + "' but no world size is set: set RESIDENT_WORLD_SIZE "
                  "too (the number of ranks), or unset " + rank_name + " for a world of one");
  }
  // A GPU per rank of this host, or the CPU for all of them: NCCL refuses two ranks on one GPU, and a
  // world mixes no GPU ranks with CPU ranks.
  const char* local_size_name = "RESIDENT_LOCAL_SIZE";
  const char* ls = detail::first_env({"RESIDENT_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"},
                                     &local_size_name);
  const int local_size = ls ? detail::parse_count(local_size_name, ls, 1) : size;
  const device dev = d ? *d : (cuda_device_count() >= local_size ? device::cuda(local) : device::cpu());
  require(dev);
  s->devices = {dev};
  s->size = size;
  s->first_rank = rank;
  s->cpu = resident::detail::backend_of(dev).host_memory();
  if (s->cpu) {
    RESIDENT_EXPECTS(size == 1 || s->how == launcher::mpi,
                     "communicator: " + std::to_string(size) + " CPU ranks in separate processes combine through "
                     "MPI: " + (mpi::available() ? std::string("this build has MPI; start the program with mpirun "
                                                               "(not through " + std::string(size_name) + ")")
                                                 : std::string("build resident with MPI (libopenmpi-dev) and start "
                                                               "the program with mpirun")) +
                         ", or give each rank a GPU");
    return communicator(std::move(s));
  }
  // One GPU per process: it becomes the process's current device, so that work on its default stream
  // outside the dist functions lands there too.
  cu::set_device(dev.index());
  if (size == 1) {
    s->comms = nccl::init_all({dev.index()});
    return communicator(std::move(s));
  }
  nccl::unique_id id{};
  std::string rendezvous;
  if (rank == 0) id = nccl::make_unique_id();
  if (s->how == launcher::mpi) {
    mpi::broadcast(id.data(), id.size(), 0);
  } else {
    const char* path = std::getenv("RESIDENT_RENDEZVOUS");
    RESIDENT_EXPECTS(path && *path, "communicator: " + std::to_string(size) + " ranks from " + size_name +
                                        " need RESIDENT_RENDEZVOUS: a file path, fresh for each job, on a file system "
                                        "all ranks see, through which rank 0 hands NCCL's unique id to the others");
    rendezvous = path;
    if (rank == 0)
      detail::publish_id(rendezvous, id);
    else
      id = detail::receive_id(rendezvous, timeout);
  }
  device_scope on(dev);
  std::error_code ignored;
  try {
    s->comms = {nccl::init_rank(id, size, rank, timeout)};
  } catch (...) {
    if (rank == 0 && !rendezvous.empty()) std::filesystem::remove(rendezvous, ignored);
    throw;
  }
  if (rank == 0 && !rendezvous.empty()) std::filesystem::remove(rendezvous, ignored);  // every rank has joined
  return communicator(std::move(s));
}

communicator::~communicator() = default;
communicator::communicator(communicator&& o) noexcept : s_(std::move(o.s_)) {
  if (s_) s_->owner = this;
}
communicator& communicator::operator=(communicator&& o) noexcept {
  if (this != &o) {
    s_ = std::move(o.s_);  // the old ranks go: weak references to them expire
    if (s_) s_->owner = this;
  }
  return *this;
}

std::weak_ptr<const detail::communicator_state> communicator::ranks() const {
  (void)state();
  return s_;
}
const communicator* communicator::holder(const std::weak_ptr<const detail::communicator_state>& r) noexcept {
  const auto s = r.lock();
  return s ? s->owner : nullptr;
}

detail::communicator_state& communicator::state() const {
  if (!s_) RESIDENT_FAIL("use of a moved-from communicator: it no longer holds ranks");
  return *s_;
}
int communicator::size() const { return state().size; }
int communicator::first_rank() const { return state().first_rank; }
const std::vector<device>& communicator::devices() const { return state().devices; }
launcher communicator::started_by() const { return state().how; }
std::chrono::milliseconds communicator::timeout() const { return state().timeout; }
std::string communicator::transport() const {
  auto& s = state();
  if (!s.cpu) return detail::nccl::version();
  return s.size > int(s.devices.size()) ? detail::mpi::version() : "host";
}

void communicator::all_reduce_raw(std::span<const detail::buffer> b, std::size_t count, detail::element t,
                                  combine op) const {
  auto& s = state();
  // A value cast from an int that is none of the three would give rank 0's values on the CPU and
  // whatever MPI or NCCL take it for elsewhere.
  RESIDENT_EXPECTS(op == combine::sum || op == combine::min || op == combine::max,
                   "all_reduce: combine " + std::to_string(static_cast<int>(op)) + " is none of sum, min or max");
  RESIDENT_EXPECTS(b.size() == s.devices.size(), "all_reduce: " + std::to_string(b.size()) + " buffers for the " +
                                                     std::to_string(s.devices.size()) + " ranks of this process");
  for (std::size_t i = 0; i < b.size(); ++i)
    if (!(b[i].stream.device() == s.devices[i]))
      RESIDENT_FAIL("all_reduce: buffer " + std::to_string(i) + " is on " + b[i].stream.device().name() + ", its rank on " +
                        s.devices[i].name(), device_mismatch);
  if (count == 0) return;
  // CPU ranks may share a device: the host combines rank by rank in place, so a buffer over another
  // rank's would read a value already combined (and the copies back would overlap).
  const std::size_t bytes = count * detail::element_bytes(t);
  for (std::size_t i = 0; i < b.size(); ++i)
    for (std::size_t j = i + 1; j < b.size(); ++j) {
      const auto* bi = static_cast<const char*>(b[i].data);
      const auto* bj = static_cast<const char*>(b[j].data);
      RESIDENT_EXPECTS(!(bi < bj + bytes && bj < bi + bytes),
                       "all_reduce: the buffers of ranks " + std::to_string(s.first_rank + int(i)) + " and " +
                           std::to_string(s.first_rank + int(j)) + " overlap; give each rank its own memory");
    }
  if (s.cpu) {
    detail::combine_host(b, count, t, op);
    if (s.size > int(s.devices.size())) detail::mpi::all_reduce(b[0].data, count, t, op);
    for (std::size_t i = 1; i < b.size(); ++i)
      std::copy_n(static_cast<const char*>(b[0].data), bytes, static_cast<char*>(b[i].data));
    return;
  }
  const bool group = b.size() > 1;
  if (group) detail::nccl::group_start();
  try {
    for (std::size_t i = 0; i < b.size(); ++i) {
      device_scope on(s.devices[i]);
      detail::nccl::all_reduce(s.comms[i], b[i].data, count, t, op, b[i].stream.native(), s.timeout);
    }
  } catch (...) {
    if (group) detail::nccl::group_end();
    throw;
  }
  if (group) detail::nccl::group_end();
}

void communicator::synchronize(std::span<const stream_ref> streams) const {
  auto& s = state();
  RESIDENT_EXPECTS(streams.size() == s.devices.size(), "synchronize: " + std::to_string(streams.size()) +
                                                           " streams for the " + std::to_string(s.devices.size()) +
                                                           " ranks of this process");
  // A stream of another device would be waited on in place of the rank's: the wait could end early.
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (!(streams[i].device() == s.devices[i]))
      RESIDENT_FAIL("synchronize: stream " + std::to_string(i) + " is on " + streams[i].device().name() + ", its rank on " +
                        s.devices[i].name() + "; give each rank's buffer's stream",
                    device_mismatch);
  if (s.cpu) return;  // the host's combine is done when all_reduce returns
  for (std::size_t i = 0; i < streams.size(); ++i) {
    device_scope on(s.devices[i]);
    detail::nccl::wait(s.comms[i], s.devices[i].index(), streams[i].native(), s.timeout);
  }
}

void communicator::barrier() const {
  auto& s = state();
  std::vector<array<std::int32_t>> one;
  std::vector<array_ref<std::int32_t>> refs;
  std::vector<stream_ref> streams;
  for (auto d : s.devices) {
    device_scope on(d);
    one.emplace_back(1, default_stream(d));
    refs.push_back(one.back().slice(0, 1));
    streams.push_back(one.back().stream());
  }
  if (s.cpu)
    for (auto& a : one) *a.data() = 0;
  else
    for (auto& a : one) {
      device_scope on(a.device());
      cu::memset_async(a.data(), 0, sizeof(std::int32_t), a.stream().native());
    }
  all_reduce<std::int32_t>(refs, 1, combine::sum);
  synchronize(streams);
  for (auto& a : one) {
    device_scope on(a.device());
    a = array<std::int32_t>();
  }
}

}  // namespace resident::dist
