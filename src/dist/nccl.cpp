// NCCL behind resident/dist/detail/nccl.hpp (builds that found NCCL).
#include <nccl.h>

#include <thread>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/library_check.hpp"
#include "resident/dist/detail/nccl.hpp"

namespace resident::dist::detail::nccl {
namespace {

ncclComm_t native(comm_t c) { return static_cast<ncclComm_t>(c); }

ncclDataType_t type_of(element t) {
  switch (t) {
    case element::f32: return ncclFloat32;
    case element::f64: return ncclFloat64;
    case element::i32: return ncclInt32;
    case element::u32: return ncclUint32;
    case element::i64: return ncclInt64;
    case element::u64: return ncclUint64;
  }
  return ncclFloat32;
}

ncclRedOp_t op_of(combine op) {
  switch (op) {
    case combine::sum: return ncclSum;
    case combine::min: return ncclMin;
    case combine::max: return ncclMax;
  }
  return ncclSum;
}

[[noreturn]] void give_up(ncclComm_t c, const std::string& what, std::chrono::milliseconds timeout) {
  ncclCommAbort(c);
  resident::detail::throw_library(
      "NCCL", int(ncclRemoteError), "timeout",
      "no answer from the other ranks within " + std::to_string(timeout.count()) +
          " ms; a rank failed or never started. The communicator was aborted: make a new one",
      what.c_str(), __FILE__, __LINE__);
}

// A non-blocking communicator answers ncclInProgress until a call has been taken up: poll until it
// has, a rank fails, or timeout passes.
void settle(ncclComm_t c, const char* what, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t r = ncclSuccess;
    RESIDENT_NCCL_TRY(ncclCommGetAsyncError(c, &r));
    if (r == ncclSuccess) return;
    if (r != ncclInProgress) {
      ncclCommAbort(c);
      RESIDENT_NCCL_TRY(r);
    }
    if (std::chrono::steady_clock::now() - start > timeout) give_up(c, what, timeout);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

bool available() noexcept { return true; }

std::string version() {
  int v = 0;
  RESIDENT_NCCL_TRY(ncclGetVersion(&v));
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

unique_id make_unique_id() {
  ncclUniqueId id;
  RESIDENT_NCCL_TRY(ncclGetUniqueId(&id));
  unique_id out{};
  static_assert(sizeof id.internal == sizeof out);
  std::copy(std::begin(id.internal), std::end(id.internal), out.begin());
  return out;
}

std::vector<comm_t> init_all(const std::vector<int>& devs) {
  std::vector<ncclComm_t> c(devs.size());
  RESIDENT_NCCL_TRY(ncclCommInitAll(c.data(), int(devs.size()), devs.data()));
  return {c.begin(), c.end()};
}

comm_t init_rank(const unique_id& id, int nranks, int rank, std::chrono::milliseconds timeout) {
  ncclUniqueId nid;
  std::copy(id.begin(), id.end(), std::begin(nid.internal));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;  // init and calls return at once; settle() watches them with a timeout
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&c, nranks, nid, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) RESIDENT_NCCL_TRY(r);
  settle(c, "ncclCommInitRankConfig", timeout);
  return c;
}

void group_start() { RESIDENT_NCCL_TRY(ncclGroupStart()); }
void group_end() { RESIDENT_NCCL_TRY(ncclGroupEnd()); }

void all_reduce(comm_t c, void* buf, std::size_t count, element t, combine op, cuda_stream_t s,
                std::chrono::milliseconds timeout) {
  const ncclResult_t r = ncclAllReduce(buf, buf, count, type_of(t), op_of(op), native(c), static_cast<cudaStream_t>(s));
  if (r == ncclInProgress) {
    settle(native(c), "ncclAllReduce", timeout);
    return;
  }
  RESIDENT_NCCL_TRY(r);
}

void wait(comm_t c, int dev, cuda_stream_t s, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t r = ncclSuccess;
    RESIDENT_NCCL_TRY(ncclCommGetAsyncError(native(c), &r));
    if (r != ncclSuccess && r != ncclInProgress) {
      ncclCommAbort(native(c));
      RESIDENT_NCCL_TRY(r);
    }
    if (resident::detail::cuda::stream_done(dev, s)) return;
    if (std::chrono::steady_clock::now() - start > timeout) give_up(native(c), "waiting for a collective", timeout);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void destroy(comm_t c) noexcept {
  if (c) ncclCommDestroy(native(c));
}

}  // namespace resident::dist::detail::nccl
