// The CUDA backend of run-time chains: the generated text (CUDA flavor) compiled by NVRTC for the
// device's architecture, loaded with the driver API (cuLibraryLoadData: one load serves every device
// of that architecture), launched on the call's stream: as a programmatic dependent of the stream's
// previous kernel (cuLaunchKernelEx) where the compiled fused kernels are (cuda::dependent_launch), else
// with cuLaunchKernel. The driver is reached through the runtime's entry points, so nothing links libcuda
// itself.
#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <map>
#include <mutex>

#include "jit/backend.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/library_check.hpp"
#include "resident/memory/ledger.hpp"
#include "resident/memory/pool.hpp"
#include "resident/memory/transfer.hpp"

namespace resident::detail {
namespace {
// The driver functions this file uses, as of CUDA 12.0 (every one exists there).
struct driver_api {
  decltype(&::cuGetErrorName) get_error_name;
  decltype(&::cuGetErrorString) get_error_string;
  decltype(&::cuDriverGetVersion) driver_version;
  decltype(&::cuLibraryLoadData) library_load_data;
  decltype(&::cuLibraryGetKernel) library_get_kernel;
  decltype(&::cuKernelGetFunction) kernel_get_function;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy;
  decltype(&::cuLaunchKernel) launch_kernel;
  decltype(&::cuLaunchKernelEx) launch_kernel_ex;  // null where the driver lacks it: plain launches
};

template <class F>
void find(F& f, const char* name) {
  f = reinterpret_cast<F>(resident::detail::cuda::driver_entry_point(name, 12000));
}

const driver_api& driver() {
  static const driver_api api = [] {
    driver_api a{};
    find(a.get_error_name, "cuGetErrorName");
    find(a.get_error_string, "cuGetErrorString");
    find(a.driver_version, "cuDriverGetVersion");
    find(a.library_load_data, "cuLibraryLoadData");
    find(a.library_get_kernel, "cuLibraryGetKernel");
    find(a.kernel_get_function, "cuKernelGetFunction");
    find(a.occupancy, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    find(a.launch_kernel, "cuLaunchKernel");
    try {
      find(a.launch_kernel_ex, "cuLaunchKernelEx");
    } catch (const device_unavailable&) {
      a.launch_kernel_ex = nullptr;
    }
    return a;
  }();
  return api;
}
}  // namespace

std::string driver_status_name(int s) {
  const char* n = nullptr;
  if (driver().get_error_name(CUresult(s), &n) == CUDA_SUCCESS && n) return n;
  return "status " + std::to_string(s);
}
std::string driver_status_text(int s) {
  const char* n = nullptr;
  if (driver().get_error_string(CUresult(s), &n) == CUDA_SUCCESS && n) return n;
  return {};
}

}  // namespace resident::detail

namespace resident::jit::detail {
namespace {

using resident::detail::driver;

// An entry of the kernel on one device: its function there and its resident blocks per SM.
struct entry_on_device {
  CUfunction function = nullptr;
  int blocks_per_sm = 1;
};

// The kernel on one device: its entries there (rs_kernel, and rs_kernel_32 where the text has it:
// cuda_shape_of), the device's SMs.
struct on_device {
  entry_on_device index64, index32;
  int sms = 1;
};

struct cuda_kernel : loaded {
  CUlibrary library = nullptr;  // kept loaded for the process's life
  CUkernel kernel = nullptr;
  CUkernel kernel32 = nullptr;  // null where the text has no 32-bit entry
  std::mutex m;
  std::map<int, on_device> per_device;
};

// The image is a cubin for an architecture this NVRTC knows, else PTX for the newest one it knows
// (the driver compiles that for the device when loading).
struct target {
  std::string option;
  bool cubin;
};

target target_for(int major, int minor) {
  int n = 0;
  RESIDENT_NVRTC_TRY(nvrtcGetNumSupportedArchs(&n));
  std::vector<int> archs(std::size_t(n > 0 ? n : 0));
  if (n > 0) RESIDENT_NVRTC_TRY(nvrtcGetSupportedArchs(archs.data()));
  const int want = major * 10 + minor;
  for (int a : archs)
    if (a == want) return {"--gpu-architecture=sm_" + std::to_string(want), true};
  int best = 0;
  for (int a : archs)
    if (a <= want && a > best) best = a;
  if (best == 0) RESIDENT_FAIL("jit: NVRTC cannot compile for sm_" + std::to_string(want), device_unavailable);
  return {"--gpu-architecture=compute_" + std::to_string(best), false};
}

// -no-source-include: NVRTC would look for a stage's `#include "x.h"` in the current folder (the
// source's, as it names no other), which may be another user's; a header comes from -I paths only.
const std::vector<std::string> options = {"-default-device", "--std=c++17", "-w", "-no-source-include"};

// How the kernels are launched and what they do for it: version 2 launches them as programmatic
// dependents, each waiting (griddepcontrol.wait) before its first memory access.
constexpr const char* launch_contract = "launch 2: programmatic dependent";

std::string nvrtc_version() {
  int a = 0, b = 0;
  RESIDENT_NVRTC_TRY(nvrtcVersion(&a, &b));
  return std::to_string(a) + "." + std::to_string(b);
}

}  // namespace

namespace {
enum class output { image, ltoir };

std::string nvrtc_compile(const std::string& source, int major, int minor, output out) {
  target t = target_for(major, minor);
  if (out == output::ltoir) t = {"--gpu-architecture=sm_" + std::to_string(major * 10 + minor), true};
  nvrtcProgram prog = nullptr;
  RESIDENT_NVRTC_TRY(nvrtcCreateProgram(&prog, source.c_str(), "resident_kernel.cu", 0, nullptr, nullptr));
  struct destroy {
    nvrtcProgram* p;
    ~destroy() { nvrtcDestroyProgram(p); }
  } guard{&prog};
  std::vector<const char*> opts{t.option.c_str()};
  for (const auto& o : options) opts.push_back(o.c_str());
  if (out == output::ltoir) opts.push_back("-dlto");
  const nvrtcResult r = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  std::size_t log_size = 0;
  RESIDENT_NVRTC_TRY(nvrtcGetProgramLogSize(prog, &log_size));
  std::string log(log_size, '\0');
  if (log_size) RESIDENT_NVRTC_TRY(nvrtcGetProgramLog(prog, log.data()));
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (r == NVRTC_ERROR_COMPILATION)
    throw compile_error("jit: the chain did not compile (NVRTC " + nvrtc_version() + ", " + t.option +
                        "; line numbers count each stage's own lines):\n" + log, log);
  RESIDENT_NVRTC_TRY(r);
  std::size_t size = 0;
  std::string image;
  if (out == output::ltoir) {
    RESIDENT_NVRTC_TRY(nvrtcGetLTOIRSize(prog, &size));
    image.resize(size);
    RESIDENT_NVRTC_TRY(nvrtcGetLTOIR(prog, image.data()));
  } else if (t.cubin) {
    RESIDENT_NVRTC_TRY(nvrtcGetCUBINSize(prog, &size));
    image.resize(size);
    RESIDENT_NVRTC_TRY(nvrtcGetCUBIN(prog, image.data()));
  } else {
    RESIDENT_NVRTC_TRY(nvrtcGetPTXSize(prog, &size));
    image.resize(size);
    RESIDENT_NVRTC_TRY(nvrtcGetPTX(prog, image.data()));
  }
  return image;
}

std::string link_log(nvJitLinkHandle h) {
  std::size_t size = 0;
  if (nvJitLinkGetErrorLogSize(h, &size) != NVJITLINK_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (nvJitLinkGetErrorLog(h, log.data()) != NVJITLINK_SUCCESS) return {};
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}
}  // namespace

std::string compile_cuda(const std::string& source, int major, int minor) {
  return nvrtc_compile(source, major, minor, output::image);
}

std::string ltoir_of(const std::string& source, int major, int minor) {
  return nvrtc_compile(source, major, minor, output::ltoir);
}

std::string link_cuda(const std::string& source, const std::vector<part>& parts, int major, int minor) {
  const std::string kernel = nvrtc_compile(source, major, minor, output::ltoir);
  const std::string arch = "-arch=sm_" + std::to_string(major * 10 + minor);
  const char* opts[] = {arch.c_str(), "-lto"};
  nvJitLinkHandle h = nullptr;
  RESIDENT_NVJITLINK_TRY(nvJitLinkCreate(&h, 2, opts));
  struct destroy {
    nvJitLinkHandle* h;
    ~destroy() { nvJitLinkDestroy(h); }
  } guard{&h};
  auto add = [&](const std::string& data, const std::string& name) {
    if (nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, data.data(), data.size(), name.c_str()) != NVJITLINK_SUCCESS) {
      const std::string log = link_log(h);
      throw compile_error("jit: nvJitLink refused the LTO-IR of " + name + ":\n" + log, log);
    }
  };
  add(kernel, "the chain's kernel");
  for (const part& p : parts)
    if ((p.what == part::kind::map || p.what == part::kind::reduce) && p.source.empty()) add(p.ltoir, "stage " + p.name);
  if (nvJitLinkComplete(h) != NVJITLINK_SUCCESS) {
    const std::string log = link_log(h);
    throw compile_error("jit: nvJitLink could not link the chain (" + arch + "):\n" + log, log);
  }
  std::size_t size = 0;
  RESIDENT_NVJITLINK_TRY(nvJitLinkGetLinkedCubinSize(h, &size));
  std::string image(size, '\0');
  RESIDENT_NVJITLINK_TRY(nvJitLinkGetLinkedCubin(h, image.data()));
  return image;
}

namespace {

std::shared_ptr<cuda_kernel> load(const std::string& image, const cuda_shape& shape, CUresult* why) {
  auto k = std::make_shared<cuda_kernel>();
  *why = driver().library_load_data(&k->library, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (*why != CUDA_SUCCESS) return nullptr;
  RESIDENT_CU_TRY(driver().library_get_kernel(&k->kernel, k->library, "rs_kernel"));
  if (shape.index32) RESIDENT_CU_TRY(driver().library_get_kernel(&k->kernel32, k->library, "rs_kernel_32"));
  return k;
}

std::shared_ptr<loaded> load_or_compile(const std::string& key, const std::string& source,
                                        const std::vector<part>& parts, const cuda_shape& shape, int major,
                                        int minor) {
  std::string image;
  CUresult why = CUDA_SUCCESS;
  if (read_entry(key, ".cubin", &image)) {
    if (auto k = load(image, shape, &why)) {
      count_disk_load();
      return k;
    }
    count_rejected();  // a whole entry the driver refuses: compiled again and replaced
  }
  bool external = false;
  for (const part& p : parts)
    external = external || ((p.what == part::kind::map || p.what == part::kind::reduce) && p.source.empty());
  image = external ? link_cuda(source, parts, major, minor) : compile_cuda(source, major, minor);
  count_compiled();
  auto k = load(image, shape, &why);
  if (!k) RESIDENT_CU_TRY(why);
  write_entry(key, ".cubin", image);
  return k;
}

}  // namespace

void run_cuda(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n, stream_ref s,
              void* result, std::shared_ptr<loaded>& kernel, result_memory where) {
  const int dev = s.device().index();
  const cuda_shape shape = cuda_shape_of(parts, sig);
  if (!kernel) {
    const device_properties prop = resident::properties(s.device());
    const std::string source = generate(parts, sig, flavor::cuda);
    int driver_version = 0;
    RESIDENT_CU_TRY(driver().driver_version(&driver_version));
    std::string opts;
    for (const auto& o : options) opts += o + " ";
    // The launch contract is part of the key (with the text, which carries it too): entries from a
    // version whose kernels did not wait for their predecessor are never launched as dependents.
    const std::string key = hash_hex("cuda\n" + std::string(launch_contract) + "\nsm_" +
                                     std::to_string(prop.cc_major * 10 + prop.cc_minor) + "\nnvrtc " +
                                     nvrtc_version() + "\ndriver " + std::to_string(driver_version) + "\n" + opts +
                                     "\n" + source);
    kernel = cached(key, [&] { return load_or_compile(key, source, parts, shape, prop.cc_major, prop.cc_minor); });
  }
  auto* k = static_cast<cuda_kernel*>(kernel.get());
  const device d = s.device();
  if (n == 0 && !sig.reduces) return;

  // The launch's device current (cudaSetDevice also binds its primary context for the driver calls
  // below); the caller's device is restored when the launch returns.
  resident::device_scope current(d);
  resident::detail::cuda::set_device(dev);
  const kernel_policy pol = policy();
  on_device here;
  {
    std::lock_guard<std::mutex> lock(k->m);
    auto it = k->per_device.find(dev);
    if (it == k->per_device.end()) {
      on_device o;
      auto entry = [&](CUkernel kernel_entry, entry_on_device& e) {
        if (!kernel_entry) return;
        RESIDENT_CU_TRY(driver().kernel_get_function(&e.function, kernel_entry));
        RESIDENT_CU_TRY(driver().occupancy(&e.blocks_per_sm, e.function, pol.block, 0));
        e.blocks_per_sm = std::max(e.blocks_per_sm, 1);
      };
      entry(k->kernel, o.index64);
      entry(k->kernel32, o.index32);
      o.sms = resident::properties(d).multiprocessors;
      it = k->per_device.emplace(dev, o).first;
    }
    here = it->second;
  }
  const bool generates = !parts.empty() && (parts.front().what == part::kind::uniform ||
                                            parts.front().what == part::kind::normal);
  // Vector loads when every array is 16-byte aligned and all elements have one size (the kernel then
  // has a vector path: see generate()).
  bool vectors = !generates;
  const std::size_t esize = generates ? 0 : size_of(sig.in[0]);
  for (element e : sig.in) vectors = vectors && size_of(e) == esize;
  if (!sig.reduces) vectors = vectors && size_of(sig.out) == esize;
  for (const void* p : args.in)
    if (p && reinterpret_cast<std::uintptr_t>(p) % 16 != 0) vectors = false;
  if (!sig.reduces && reinterpret_cast<std::uintptr_t>(args.out) % 16 != 0) vectors = false;
  const std::size_t nv = vectors ? n / (16 / esize) : 0;
  // Vector maps run a flat grid of tiles (the compiled maps' shape); reductions and other maps stride
  // over one wave at full occupancy, generators (arithmetic-bound) too.
  const bool flat = vectors && !sig.reduces;
  args.vec = vectors ? 1 : 0;
  const std::size_t tile = std::size_t(pol.map_block) * std::size_t(pol.map_tile);
  const std::size_t units = generates ? n / 4 + 2 : vectors ? nv / std::size_t(pol.unroll) + 1 : n;
  const std::size_t wanted = (units + std::size_t(pol.block) - 1) / std::size_t(pol.block);
  const unsigned block = unsigned(flat ? pol.map_block : pol.block);
  // A flat grid has a block per tile (the kernel text does not loop over tiles).
  RESIDENT_EXPECTS(!flat || (nv + tile - 1) / tile <= 0x7FFFFFFF,
                   "jit: a map over " + std::to_string(n) + " elements needs more blocks than a grid holds; map it in parts",
                   invalid_launch);
  auto wave = [&](const entry_on_device& e) {
    return unsigned(std::max<std::size_t>(1, std::min(wanted, std::size_t(e.blocks_per_sm) * std::size_t(here.sms))));
  };
  // A reduction of vectors runs its 32-bit entry where every index a thread forms (below nv + (U + 1)
  // x the grid's threads) fits: its loop fits fewer registers. A flat map runs it where its indices
  // (below nv + a tile) fit: fewer instructions a thread, 0.996-0.998 of a copy's time at 2^26-2^28
  // against 1.000-1.006 with the GPU at its power cap.
  const bool fits32 = flat ? nv + tile < (std::size_t(1) << 32)
                           : nv + std::size_t(pol.unroll + 1) * wave(here.index32) * block < (std::size_t(1) << 32);
  const entry_on_device& e = vectors && here.index32.function && fits32 ? here.index32 : here.index64;
  const CUfunction f = e.function;
  const unsigned grid = flat ? unsigned(std::max<std::size_t>((nv + tile - 1) / tile, 1)) : wave(e);

  // Scratch of a reduction: its result (16 bytes), and where it hands partials over in slots
  // (shape.slots) the stream's own slots, zero and left zero; else its per-block partials (value + valid
  // flag, at most 16 bytes) and the stream's counters, zero and left zero too. While s is being captured,
  // or where the stream's slots are too few, the slots or counters are the graph's or the call's own,
  // zeroed with the call (a graph's replays may run on any stream).
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  // Asked only where it matters (a reduction's counters or slots): a map's call skips the query.
  const bool capturing = sig.reduces && resident::detail::cuda::stream_is_capturing(s.native());
  const bool own_slots = shape.slots && (capturing || grid > resident::detail::cuda::stream_handover_slots);
  const std::size_t partial_bytes = !sig.reduces ? 0
                                    : shape.slots ? (own_slots ? (std::size_t(grid) * 8 + 15) / 16 * 16 : 0)
                                                  : std::size_t(grid) * 16;
  const std::size_t result_bytes = sig.reduces ? 16 : 0;
  const std::size_t counter_bytes = sig.reduces && !shape.slots && capturing ? 16 : 0;
  scratch_bytes = partial_bytes + result_bytes + counter_bytes;
  if (scratch_bytes) scratch = resident::detail::pool_allocate(scratch_bytes, s);
  char* base = static_cast<char*>(scratch);
  if (sig.reduces) {
    args.out = base + partial_bytes;
    if (shape.slots) {
      args.partials = own_slots ? static_cast<void*>(base) : resident::detail::cuda::stream_handover(dev, s.native());
      if (own_slots) resident::detail::cuda::memset_async(base, 0, partial_bytes, s.native());
    } else {
      args.partials = base;
      if (capturing) {
        args.counters = reinterpret_cast<unsigned long long*>(base + partial_bytes + result_bytes);
        resident::detail::cuda::memset_async(args.counters, 0, 16, s.native());
      } else {
        args.counters = resident::detail::cuda::stream_counters(dev, s.native());
      }
    }
  }
  try {
    void* params[] = {&args};
    const auto stream = reinterpret_cast<CUstream>(s.native());
    // The kernel waits (griddepcontrol.wait) for the stream's previous kernel before its first access
    // to memory, so it may be scheduled while that one still runs, as the compiled fused kernels are.
    if (driver().launch_kernel_ex && resident::detail::cuda::dependent_launch(dev)) {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig c{};
      c.gridDimX = grid;
      c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = block;
      c.blockDimY = c.blockDimZ = 1;
      c.sharedMemBytes = 0;
      c.hStream = stream;
      c.attrs = &attr;
      c.numAttrs = 1;
      RESIDENT_CU_TRY(driver().launch_kernel_ex(&c, f, params, nullptr));
    } else {
      RESIDENT_CU_TRY(driver().launch_kernel(f, grid, 1, 1, block, 1, 1, 0, stream, params, nullptr));
    }
    resident::detail::cuda::check_launch("run-time chain kernel");
    resident::detail::record_kernel(d);
    if (sig.reduces && where == result_memory::device)  // stays on the device: no transfer to count
      resident::detail::cuda::memcpy_async(dev, result, args.out, size_of(sig.out),
                                           resident::detail::cuda::copy_kind::device_to_device, s.native());
    else if (sig.reduces)
      resident::detail::copy_device_to_host(result, args.out, size_of(sig.out), s, sync::blocking);
  } catch (...) {
    if (scratch) resident::detail::pool_deallocate(scratch, scratch_bytes, s);
    throw;
  }
  if (scratch) resident::detail::pool_deallocate(scratch, scratch_bytes, s);
}

}  // namespace resident::jit::detail
