// The CUDA backend's runtime calls (host code, built with the host compiler against cudart).
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "resident/detail/cuda_check.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/memory/ledger.hpp"
#include "resident/launch/config.hpp"

namespace resident::detail {

bool is_sticky(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed" + site(file, line) + ": CUDA " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")";
  if (is_sticky(e)) {
    throw device_lost(static_cast<int>(e), cudaGetErrorName(e),
                      msg + ". The device's context is lost: restart the process to use the GPU again.");
  }
  throw cuda_error(static_cast<int>(e), cudaGetErrorName(e), msg);
}

}  // namespace resident::detail

namespace resident::detail::cuda {
namespace {

// Runs f with dev current, restoring the caller's device afterwards: a null stream handle inside names
// dev's legacy default stream. Costs one cudaGetDevice when dev is already current.
template <class F>
auto on_device(int dev, F&& f) {
  int old = 0;
  RESIDENT_CUDA_TRY(cudaGetDevice(&old));
  if (old != dev) RESIDENT_CUDA_TRY(cudaSetDevice(dev));
  struct restore {
    int old, dev;
    ~restore() {
      if (old != dev) cudaSetDevice(old);
    }
  } r{old, dev};
  return f();
}

cudaMemPool_t pool_of(int dev) {
  static per_device<std::atomic<cudaMemPool_t>> pools;
  static std::mutex m;
  if (cudaMemPool_t p = pools.cuda(dev).load(std::memory_order_acquire)) return p;  // the hot path
  std::lock_guard lock(m);
  if (!pools.cuda(dev).load()) {
    cudaMemPool_t p;
    RESIDENT_CUDA_TRY(cudaDeviceGetDefaultMemPool(&p, dev));
    // Keep freed memory in the pool for reuse instead of returning it at each synchronization.
    std::uint64_t threshold = UINT64_MAX;
    RESIDENT_CUDA_TRY(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &threshold));
    pools.cuda(dev).store(p, std::memory_order_release);
  }
  return pools.cuda(dev).load();
}

}  // namespace

int device_count(std::string* why) noexcept {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the non-sticky error
    if (why) {
      if (e == cudaErrorNoDevice)
        *why = "the CUDA driver answers but reports no GPU (cudaErrorNoDevice)";
      else if (e == cudaErrorInsufficientDriver)
        *why = "no CUDA driver is installed, or it is older than this build's runtime "
               "(cudaErrorInsufficientDriver)";
      else
        *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ")";
    }
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA driver reports no GPU";
  return n;
}

device_properties properties(int dev) {
  cudaDeviceProp p{};
  RESIDENT_CUDA_TRY(cudaGetDeviceProperties(&p, dev));
  device_properties r;
  r.name = p.name;
  r.multiprocessors = p.multiProcessorCount;
  r.memory_bytes = p.totalGlobalMem;
  r.cc_major = p.major;
  r.cc_minor = p.minor;
  r.warp_size = p.warpSize;
  r.max_threads_per_block = p.maxThreadsPerBlock;
  r.max_threads_per_multiprocessor = p.maxThreadsPerMultiProcessor;
  r.max_blocks_per_multiprocessor = p.maxBlocksPerMultiProcessor;
  for (int i = 0; i < 3; ++i) {
    r.max_block_dim[i] = p.maxThreadsDim[i];
    r.max_grid_dim[i] = p.maxGridSize[i];
  }
  r.shared_per_block = p.sharedMemPerBlock;
  r.shared_per_block_optin = p.sharedMemPerBlockOptin;
  r.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  return r;
}

void synchronize_device(int dev) {
  on_device(dev, [] {
    RESIDENT_CUDA_TRY(cudaDeviceSynchronize());
    return 0;
  });
}

cuda_stream_t stream_create(int dev) {
  return on_device(dev, [] {
    cudaStream_t s;
    RESIDENT_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  });
}
namespace {
// The streams' counter slots. A destroyed stream's slot is retired, not reused: work queued on it may
// still be running, and a new stream may get the same handle. The table is never destroyed (code run
// at exit, such as the profile's report, still creates and destroys streams); its device memory is
// freed at exit and the table left empty and usable.
struct counter_slots {
  using key = std::tuple<int, cuda_stream_t, std::thread::id>;
  std::mutex m;
  std::map<key, void*> live;
  std::vector<void*> retired;
  void free_all() noexcept {
    std::lock_guard lock(m);
    for (auto& [k, p] : live) cudaFree(p);
    for (void* p : retired) cudaFree(p);
    live.clear();
    retired.clear();
  }
};
counter_slots& slots() {
  static auto* c = new counter_slots;
  static const struct freed_at_exit {
    ~freed_at_exit() { slots().free_all(); }
  } at_exit;
  return *c;
}
}  // namespace

namespace {
constexpr std::size_t scratch_offset = 256;
constexpr std::size_t handover_offset = scratch_offset + stream_scratch_bytes;
constexpr std::size_t handover_bytes = stream_handover_slots * sizeof(unsigned long long);
constexpr std::size_t slot_bytes = handover_offset + handover_bytes;
}  // namespace

void* stream_scratch(int dev, cuda_stream_t s) {
  return reinterpret_cast<char*>(stream_counters(dev, s)) + scratch_offset;
}

unsigned long long* stream_handover(int dev, cuda_stream_t s) {
  return reinterpret_cast<unsigned long long*>(reinterpret_cast<char*>(stream_counters(dev, s)) + handover_offset);
}

unsigned long long* stream_counters(int dev, cuda_stream_t s) {
  auto& c = slots();
  // The default stream's handles name a different stream per thread (per-thread default stream) or
  // one stream that orders every thread's work (legacy): a slot per thread is right for both.
  const bool per_thread = !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
  const counter_slots::key k{dev, s, per_thread ? std::this_thread::get_id() : std::thread::id{}};
  std::lock_guard lock(c.m);
  void*& p = c.live[k];
  if (!p) {
    try {
      p = on_device(dev, [s] {
        void* q = nullptr;
        RESIDENT_CUDA_TRY(cudaMalloc(&q, slot_bytes));
        RESIDENT_CUDA_TRY(cudaMemsetAsync(q, 0, 2 * sizeof(unsigned long long), s));
        RESIDENT_CUDA_TRY(cudaMemsetAsync(static_cast<char*>(q) + handover_offset, 0, handover_bytes, s));
        return q;
      });
    } catch (...) {
      c.live.erase(k);
      throw;
    }
  }
  return static_cast<unsigned long long*>(p);
}

void stream_destroy(cuda_stream_t s) noexcept {
  try {
    auto& c = slots();
    std::lock_guard lock(c.m);
    for (auto it = c.live.begin(); it != c.live.end();) {
      if (std::get<1>(it->first) == s) {
        c.retired.push_back(it->second);
        it = c.live.erase(it);
      } else {
        ++it;
      }
    }
  } catch (...) {  // out of host memory: the slot stays live, unused
  }
  cudaStreamDestroy(s);
}
void stream_synchronize(int dev, cuda_stream_t s) {
  on_device(dev, [s] {
    RESIDENT_CUDA_TRY(cudaStreamSynchronize(s));
    return 0;
  });
}
bool stream_done(int dev, cuda_stream_t s) {
  const cudaError_t e = on_device(dev, [s] { return cudaStreamQuery(s); });
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  if (e != cudaSuccess) throw_cuda(e, "cudaStreamQuery", __FILE__, __LINE__);
  return true;
}
bool stream_is_capturing(cuda_stream_t s) {
  cudaStreamCaptureStatus st;
  RESIDENT_CUDA_TRY(cudaStreamIsCapturing(s, &st));
  return st != cudaStreamCaptureStatusNone;
}

void stream_after(int dev, cuda_stream_t after, cuda_stream_t before) {
  if (after == before) return;
  on_device(dev, [&] {
    // A stream being captured cannot wait for work outside its capture: the graph's replays are
    // ordered by the stream they are launched on instead.
    if (stream_is_capturing(after) && !stream_is_capturing(before)) return 0;
    // One event per thread and device, re-recorded each time: a wait binds to the record before it.
    thread_local per_device<cudaEvent_t> events;
    cudaEvent_t& e = events.cuda(dev);
    if (!e) RESIDENT_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    RESIDENT_CUDA_TRY(cudaEventRecord(e, before));
    RESIDENT_CUDA_TRY(cudaStreamWaitEvent(after, e, 0));
    return 0;
  });
}

void stream_after_peer(cuda_stream_t after, int after_dev, cuda_stream_t before, int before_dev) {
  if (after == before && after_dev == before_dev) return;
  // The event belongs to before's device (an event is recorded on a stream of its own device); any
  // device's stream may wait on it. Each call runs with its stream's device current, so that a null
  // handle names that device's legacy default stream.
  const bool before_captured = on_device(before_dev, [&] { return stream_is_capturing(before); });
  const bool after_captured = on_device(after_dev, [&] { return stream_is_capturing(after); });
  // A stream being captured cannot wait for work outside its capture: the graph's replays are
  // ordered by the stream they are launched on instead.
  if (after_captured && !before_captured) return;
  thread_local per_device<cudaEvent_t> events;
  cudaEvent_t& e = events.cuda(before_dev);
  on_device(before_dev, [&] {
    if (!e) RESIDENT_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    RESIDENT_CUDA_TRY(cudaEventRecord(e, before));
    return 0;
  });
  on_device(after_dev, [&] {
    RESIDENT_CUDA_TRY(cudaStreamWaitEvent(after, e, 0));
    return 0;
  });
}

cuda_event_t event_create(int dev) {
  return on_device(dev, [] {
    cudaEvent_t e;
    RESIDENT_CUDA_TRY(cudaEventCreate(&e));
    return e;
  });
}
void event_destroy(cuda_event_t e) noexcept { cudaEventDestroy(e); }
void event_record(int dev, cuda_event_t e, cuda_stream_t s) {
  on_device(dev, [&] {
    RESIDENT_CUDA_TRY(cudaEventRecord(e, s));
    return 0;
  });
}
void event_synchronize(cuda_event_t e) { RESIDENT_CUDA_TRY(cudaEventSynchronize(e)); }
void stream_wait_event(int dev, cuda_stream_t s, cuda_event_t e) {
  on_device(dev, [&] {
    RESIDENT_CUDA_TRY(cudaStreamWaitEvent(s, e, 0));
    return 0;
  });
}
float event_elapsed_ms(cuda_event_t a, cuda_event_t b) {
  float ms = 0;
  RESIDENT_CUDA_TRY(cudaEventSynchronize(b));
  RESIDENT_CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

void* pool_allocate(int dev, std::size_t bytes, cuda_stream_t s) {
  cudaMemPool_t pool = pool_of(dev);
  void* p = nullptr;
  const cudaError_t e = on_device(dev, [&] { return cudaMallocFromPoolAsync(&p, bytes, pool, s); });
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  if (e != cudaSuccess) throw_cuda(e, "cudaMallocFromPoolAsync", __FILE__, __LINE__);
  return p;
}

void pool_deallocate(int dev, void* p, cuda_stream_t s) {
  on_device(dev, [&] {
    RESIDENT_CUDA_TRY(cudaFreeAsync(p, s));
    return 0;
  });
}

std::size_t pool_reserved(int dev) {
  std::uint64_t v = 0;
  RESIDENT_CUDA_TRY(cudaMemPoolGetAttribute(pool_of(dev), cudaMemPoolAttrReservedMemCurrent, &v));
  return v;
}
std::size_t pool_used(int dev) {
  std::uint64_t v = 0;
  RESIDENT_CUDA_TRY(cudaMemPoolGetAttribute(pool_of(dev), cudaMemPoolAttrUsedMemCurrent, &v));
  return v;
}

void pool_trim(int dev, cuda_stream_t s) {
  // Synchronizing inside a graph capture would invalidate it; trim only what is already free then.
  if (!stream_is_capturing(s)) synchronize_device(dev);
  RESIDENT_CUDA_TRY(cudaMemPoolTrimTo(pool_of(dev), 0));
}

void* raw_malloc(int dev, std::size_t bytes) {
  return on_device(dev, [&] {
    void* p = nullptr;
    RESIDENT_CUDA_TRY(cudaMalloc(&p, bytes));
    return p;
  });
}
void raw_free(void* p) { RESIDENT_CUDA_TRY(cudaFree(p)); }

void mem_info(int dev, std::size_t* free_bytes, std::size_t* total_bytes) {
  on_device(dev, [&] {
    RESIDENT_CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes));
    return 0;
  });
}

void memcpy_async(int dev, void* dst, const void* src, std::size_t bytes, copy_kind k, cuda_stream_t s) {
  cudaMemcpyKind kind = k == copy_kind::host_to_device   ? cudaMemcpyHostToDevice
                        : k == copy_kind::device_to_host ? cudaMemcpyDeviceToHost
                        : k == copy_kind::device_to_device ? cudaMemcpyDeviceToDevice
                                                           : cudaMemcpyHostToHost;
  on_device(dev, [&] { RESIDENT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, s)); });
}

void memset_async(void* dst, int value, std::size_t bytes, cuda_stream_t s) {
  // A created stream carries its device (a copy or memset may be issued to it from any device); a null
  // handle names the current device's default stream, so the memory's own device is made current.
  const int dev = s ? -1 : pointer_device(dst);
  if (dev < 0) {
    RESIDENT_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, s));
    return;
  }
  on_device(dev, [&] {
    RESIDENT_CUDA_TRY(cudaMemsetAsync(dst, value, bytes, s));
    return 0;
  });
}

bool can_access_peer(int dev, int peer) {
  int ok = 0;
  RESIDENT_CUDA_TRY(cudaDeviceCanAccessPeer(&ok, dev, peer));
  return ok != 0;
}

bool enable_peer_access(int a, int b) {
  // 0: not asked yet; 1: direct access enabled; 2: no direct access (the driver stages copies).
  static per_device<per_device<std::atomic<int>>> done;
  if (int v = done.cuda(a).cuda(b).load(std::memory_order_acquire)) return v == 1;
  static std::mutex m;
  std::lock_guard lock(m);
  if (int v = done.cuda(a).cuda(b).load()) return v == 1;
  const bool direct = a != b && can_access_peer(a, b) && can_access_peer(b, a);
  if (direct) {
    for (auto [dev, peer] : {std::pair{a, b}, std::pair{b, a}}) {
      on_device(dev, [peer] {
        const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
          cudaGetLastError();  // enabled outside resident: what we want
        else if (e != cudaSuccess)
          throw_cuda(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
        return 0;
      });
      // Allocations from peer's pool become readable and writable by dev's kernels and copies.
      cudaMemAccessDesc d{};
      d.location.type = cudaMemLocationTypeDevice;
      d.location.id = dev;
      d.flags = cudaMemAccessFlagsProtReadWrite;
      RESIDENT_CUDA_TRY(cudaMemPoolSetAccess(pool_of(peer), &d, 1));
    }
  }
  done.cuda(a).cuda(b).store(direct ? 1 : 2, std::memory_order_release);
  done.cuda(b).cuda(a).store(direct ? 1 : 2, std::memory_order_release);
  return direct;
}

void memcpy_peer_async(void* dst, int dst_dev, const void* src, int src_dev, std::size_t bytes, cuda_stream_t s) {
  on_device(dst_dev, [&] {
    // Under stream capture the copy is recorded as a plain memcpy node, the devices inferred from the
    // unified addresses (both pools are open to each other: enable_peer_access).
    if (stream_is_capturing(s))
      RESIDENT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    else
      RESIDENT_CUDA_TRY(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, s));
    return 0;
  });
}

int current_device() {
  int d = 0;
  RESIDENT_CUDA_TRY(cudaGetDevice(&d));
  return d;
}

void* host_pinned_allocate(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  if (e != cudaSuccess) throw_cuda(e, "cudaMallocHost", __FILE__, __LINE__);
  return p;
}
void host_pinned_free(void* p) noexcept { cudaFreeHost(p); }

namespace {
// What CUDA knows of p (type unregistered for plain host memory, or where it cannot say).
cudaPointerAttributes attributes_of(const void* p) noexcept {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    a.type = cudaMemoryTypeUnregistered;
  }
  return a;
}
}  // namespace

bool is_pinned(const void* p) noexcept { return attributes_of(p).type == cudaMemoryTypeHost; }

int pointer_device(const void* p) noexcept {
  const cudaPointerAttributes a = attributes_of(p);
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

int device_only_memory(const void* p) noexcept {
  const cudaPointerAttributes a = attributes_of(p);
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

bool dependent_launch(int dev) {
  if (!programmatic_launch()) return false;
  static per_device<std::atomic<int>> major;  // 0: not asked yet
  if (dev < 0 || dev >= max_cuda_devices) return false;
  int m = major.cuda(dev).load(std::memory_order_relaxed);
  if (m == 0) {
    RESIDENT_CUDA_TRY(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev));
    major.cuda(dev).store(m, std::memory_order_relaxed);
  }
  return m >= 9;
}

void check_launch(const char* what, resident::source_location at) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda(e, what, at.file_name(), int(at.line()));
  if constexpr (debug_sync) {
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw_cuda(e, what, at.file_name(), int(at.line()));
  }
}

void set_device(int dev) { RESIDENT_CUDA_TRY(cudaSetDevice(dev)); }

void* driver_entry_point(const char* symbol, int cuda_version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  RESIDENT_CUDA_TRY(cudaGetDriverEntryPointByVersion(symbol, &fn, unsigned(cuda_version), cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !fn)
    RESIDENT_FAIL(std::string("the CUDA driver has no ") + symbol + " (version " + std::to_string(cuda_version) +
                      "); update the driver", device_unavailable);
  return fn;
}


void* graph_begin(stream_ref s) {
  RESIDENT_CUDA_TRY(cudaStreamBeginCapture(s.native(), cudaStreamCaptureModeThreadLocal));
  return nullptr;
}
namespace {
// The shape of a captured graph: each node's type and, for kernels, the function. An update whose new
// capture has another shape is refused here, before cudaGraphExecUpdate would fail (an API error that
// compute-sanitizer reports, and a cost).
using topology = std::vector<std::uintptr_t>;
topology topology_of(cudaGraph_t g) {
  std::size_t n = 0;
  RESIDENT_CUDA_TRY(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  RESIDENT_CUDA_TRY(cudaGraphGetNodes(g, nodes.data(), &n));
  topology t;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    RESIDENT_CUDA_TRY(cudaGraphNodeGetType(node, &type));
    t.push_back(std::uintptr_t(type));
    if (type == cudaGraphNodeTypeKernel) {
      // The driver's getter: it reads kernels launched through the driver API too (run-time chains,
      // compiled programs), where the runtime's returns cudaErrorInvalidDeviceFunction and leaves that
      // error to be read by the next launch's check.
      using get_params = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
      static const auto get = reinterpret_cast<get_params>(driver_entry_point("cuGraphKernelNodeGetParams", 12000));
      CUDA_KERNEL_NODE_PARAMS p{};
      const CUresult r = get(reinterpret_cast<CUgraphNode>(node), &p);
      if (r != CUDA_SUCCESS)
        throw cuda_error(int(r), "CUresult " + std::to_string(int(r)),
                         "cuGraphKernelNodeGetParams failed: reading a captured kernel's parameters [src/cuda/runtime.cpp]");
      t.push_back(reinterpret_cast<std::uintptr_t>(p.func));
    }
  }
  return t;
}
// By instantiated graph. Never destroyed: graphs in static storage are destroyed at exit after it.
struct topology_registry {
  std::mutex m;
  std::map<void*, topology> shapes;
};
topology_registry& topologies() {
  static auto* r = new topology_registry;
  return *r;
}
}  // namespace

void* graph_end(stream_ref s) {
  cudaGraph_t g = nullptr;
  RESIDENT_CUDA_TRY(cudaStreamEndCapture(s.native(), &g));
  cudaGraphExec_t exec = nullptr;
  topology t;
  try {
    t = topology_of(g);
  } catch (...) {
    cudaGraphDestroy(g);
    throw;
  }
  cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) throw_cuda(e, "cudaGraphInstantiate", __FILE__, __LINE__);
  std::lock_guard lock(topologies().m);
  topologies().shapes[exec] = std::move(t);
  return exec;
}
bool graph_end_update(stream_ref s, void* exec) {
  cudaGraph_t g = nullptr;
  RESIDENT_CUDA_TRY(cudaStreamEndCapture(s.native(), &g));
  bool same_shape = false;
  try {
    const topology t = topology_of(g);
    std::lock_guard lock(topologies().m);
    auto it = topologies().shapes.find(exec);
    same_shape = it != topologies().shapes.end() && it->second == t;
  } catch (...) {
    cudaGraphDestroy(g);
    throw;
  }
  if (!same_shape) {
    cudaGraphDestroy(g);
    return false;
  }
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t e = cudaGraphExecUpdate(static_cast<cudaGraphExec_t>(exec), g, &info);
  cudaGraphDestroy(g);
  if (e == cudaErrorGraphExecUpdateFailure) {
    cudaGetLastError();
    return false;
  }
  if (e != cudaSuccess) throw_cuda(e, "cudaGraphExecUpdate", __FILE__, __LINE__);
  return true;
}
void graph_abort(stream_ref s) noexcept {
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(s.native(), &g) == cudaSuccess && g) cudaGraphDestroy(g);
  cudaGetLastError();
}
void graph_launch(void* exec, stream_ref s) {
  on_device(s.device().index(), [&] {
    RESIDENT_CUDA_TRY(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), s.native()));
    return 0;
  });
}
void graph_destroy(void* exec) noexcept {
  if (!exec) return;
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  std::lock_guard lock(topologies().m);
  topologies().shapes.erase(exec);
}

}  // namespace resident::detail::cuda
