#pragma once
// Internal to src/jit: the kernel texts, the cache and the two backends (host compiler + dlopen,
// NVRTC + the driver API) behind resident/jit/jit.hpp.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "resident/jit/jit.hpp"

namespace resident::jit::detail {

/// The header texts generator sources are built from (texts.cpp, made by CMake from the headers).
extern const char* const philox_text;
extern const char* const normal_math_text;

/// The launch shape run-time kernels share with the compiled ones: the values of detail/tuning.hpp's
/// cuda_tuning, read through this one function.
struct kernel_policy {
  int block = 256;     ///< threads per block of reductions, generators and striding maps
  int unroll = 4;      ///< 16-byte vectors in flight per thread of a striding loop
  int map_block = 128; ///< vector maps: threads per block of the flat grid, one block per tile ...
  int map_tile = 2;    ///< ... of this many vectors per thread
};
kernel_policy policy() noexcept;

/// Which compiler the generated text is written for.
enum class flavor { cuda, host };

/// The most arrays one chain reads.
inline constexpr int max_inputs = 8;

/// The arguments every generated kernel takes, one struct by value (the same layout on host and
/// device: 8-byte fields, then one int).
struct kernel_args {
  const void* in[max_inputs];
  void* out;                     // the output array, or the reduction's result
  unsigned long long n;          // elements
  unsigned long long seed, offset;
  double a, b;                   // generator parameters; a reduction's init (a)
  void* partials;                // a reduction's per-block partials or hand-over slots (CUDA)
  unsigned long long* counters;  // two counters, zero at the launch and left zero (CUDA)
  const void* fns[16];           // external stages' host functions, by part index (CPU)
  int vec;                       // every pointer 16-byte aligned: vector loads (CUDA)
};

// The generated struct rs_args (generate.cpp) must match this layout field for field.
static_assert(sizeof(kernel_args) == 264, "kernel_args and the generated rs_args must agree");

/// What a chain is compiled for: its input types (none with a generator), and what it writes or
/// reduces to.
struct signature {
  std::vector<element> in;
  element out = element::f32;
  bool reduces = false;
};

/// How a CUDA chain's kernel is entered and hands its blocks' partials over (generate() writes it so,
/// run_cuda launches it so). A reduction over arrays of one element size, and a map whose arrays all
/// have one, has a second entry, rs_kernel_32, indexing its vectors in 32 bits (rs_kernel: 64); a
/// built-in reduction of 4-byte values
/// hands its partials to the last block in 8-byte slots (zero at the launch, left zero) where others
/// take per-block partials and the counters.
struct cuda_shape {
  bool index32 = false;
  bool slots = false;
};
cuda_shape cuda_shape_of(const std::vector<part>& parts, const signature& sig) noexcept;

/// Checks the chain's types against sig (naming the first mismatch) and returns the kernel's text.
/// @throws invalid_argument.
std::string generate(const std::vector<part>& parts, const signature& sig, flavor f);

/// Values per Philox block for a generator of type t (4 for float, 2 for double).
int per_block(element t) noexcept;
/// Bytes of one element of type t.
std::size_t size_of(element t) noexcept;

// --- the cache ----------------------------------------------------------------------------------

/// A 128-bit hash of text as 32 hex digits.
std::string hash_hex(const std::string& text);
/// Reads the disk entry `<key><suffix>` of the cache folder, verified (this user's regular file, no
/// larger than a bound, its MAC under the folder's key) before anything uses it; false when absent;
/// counts and removes one that fails.
bool read_entry(const std::string& key, const char* suffix, std::string* payload);
/// Writes the disk entry atomically (aside, then renamed); failures leave the cache as it was.
void write_entry(const std::string& key, const char* suffix, const std::string& payload);
/// Counts for stats().
void count_compiled();
void count_disk_load();
void count_memory_hit();
void count_rejected();

/// One compiled kernel of the in-memory cache, shared by every thread: loaded once (the first caller
/// compiles or loads it while others wait on `once`), then read-only.
struct loaded {
  virtual ~loaded() = default;
};
/// The entry for key, made by make() once per process (until clear_memory_cache()); concurrent
/// callers of one key wait for the first. An exception from make() leaves no entry.
std::shared_ptr<loaded> cached(const std::string& key, const std::function<std::shared_ptr<loaded>()>& make);

// --- the backends -------------------------------------------------------------------------------

/// Runs the chain on the CPU: y = chain(inputs), or the reduction into result. `kernel` is the chain's
/// compiled kernel for sig when set (from its memo), else it is found, compiled or loaded and set.
void run_host(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n,
              std::shared_ptr<loaded>& kernel);
/// Runs the chain on a CUDA device, on stream s (CUDA builds; device_unavailable otherwise); `kernel`
/// as for run_host. A reduction's value goes to `result`: host memory (synchronizes), or device
/// memory written on s (result_memory::device).
void run_cuda(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n, stream_ref s,
              void* result, std::shared_ptr<loaded>& kernel, result_memory where = result_memory::host);

/// The run-time compiler of one kind of device (compiler.cpp), so that the chains ask compiler_of(d)
/// instead of branching on the device: the text it compiles, what its kernels are keyed by beyond
/// their types, and the run (run_host or run_cuda; `result` as for run_cuda).
class kernel_compiler {
 public:
  virtual ~kernel_compiler() = default;
  virtual flavor text() const noexcept = 0;
  /// "" for the host; the compute capability a CUDA kernel is built for.
  virtual std::string target(device d) const = 0;
  virtual void run(const std::vector<part>& parts, const signature& sig, kernel_args args, std::size_t n,
                   stream_ref s, void* result, std::shared_ptr<loaded>& kernel, result_memory where) const = 0;
};
const kernel_compiler& compiler_of(device d) noexcept;

/// The kernels one chain has used: (types and target, kernel), looked up under its mutex.
struct memo {
  std::mutex m;
  std::vector<std::pair<std::string, std::shared_ptr<loaded>>> kernels;
};

}  // namespace resident::jit::detail
