#pragma once
/// @file jit.hpp
/// Stages defined at run time: C++ source text compiled while the program runs and fused, with the
/// other stages of its chain, into ONE kernel (NVRTC on a GPU, the host compiler on the CPU). Works
/// from a program built by g++ alone. Each stage's text defines one function (helpers may precede it:
/// the stage calls the last function defined at the top level, or the one it names); its parameter
/// and return types are read from the text and checked against the chain before anything compiles.
///
///   auto p = rs::jit::map("float f1(float v) { return 1.5f * v + 0.5f; }") |
///            rs::jit::map("float f2(float v) { return sqrtf(v * v + 1.0f); }") |
///            rs::jit::map("float f3(float v) { return 0.5f * sinf(v); }");
///   p(x, y);                                 // y[i] = f3(f2(f1(x[i]))): one kernel on y's stream
///   float s = (p | rs::jit::sum()).result<float>(x);        // one kernel, synchronizes
///   rs::jit::map("float d(float a, float b) { return a - b; }")(rs::jit::zip(a, b), y);
///   (rs::jit::normal<float>(seed) | p)(y);                  // y[i] = p(value i of the normal stream)
///
/// Compiled kernels are cached in memory (per process) and on disk (cache_directory()), keyed by a hash
/// of the generated source, the element types, the target (GPU architecture, or the host compiler) and
/// the compiler and driver versions; a second process loads the first one's kernel without compiling.
///
/// Thread safety: chains may be built, compiled and run from several threads at once. The process-wide
/// cache holds one entry per key under a lock, and a key is compiled once: concurrent callers of the
/// same key wait for the first one's build (the entry's own lock). Each chain's kernels per element
/// types and target are looked up under the chain's lock; disk entries are written aside and renamed,
/// so concurrent processes and threads see a whole entry or none.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "resident/error.hpp"
#include "resident/memory/array.hpp"

namespace resident::jit {

/// The element types arrays in run-time chains may hold, and stage functions may take and return.
enum class element : std::uint8_t {
  f32,  ///< float
  f64,  ///< double
  i32,  ///< int / int32_t
  u32,  ///< unsigned / uint32_t
  i64,  ///< long long / int64_t
  u64,  ///< unsigned long long / uint64_t
};

/// The C++ spelling of e ("float", "double", "int", "unsigned", "long long", "unsigned long long").
const char* type_name(element e) noexcept;

/// The element of C++ type T (a compile error for any other type).
template <class T>
constexpr element element_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return element::f32;
  else if constexpr (std::is_same_v<U, double>) return element::f64;
  else if constexpr (std::is_same_v<U, std::int32_t>) return element::i32;
  else if constexpr (std::is_same_v<U, std::uint32_t>) return element::u32;
  else if constexpr (std::is_same_v<U, std::int64_t> || std::is_same_v<U, long long>) return element::i64;
  else if constexpr (std::is_same_v<U, std::uint64_t> || std::is_same_v<U, unsigned long long>) return element::u64;
  else static_assert(sizeof(U) == 0, "run-time stages take float, double and 32- or 64-bit integer arrays");
}

/// A stage's source text did not compile. what() holds the compiler's log; its line numbers count the
/// lines of the stage's own text (line 3 of the chain's second stage reads "stage 2:3:" from the host
/// compiler, "stage 2(3)" from NVRTC).
class compile_error : public invalid_argument {
 public:
  /// The message (with the log) and the compiler's log alone.
  compile_error(const std::string& what, std::string log) : invalid_argument(what), log_(std::move(log)) {}
  /// The compiler's log as it printed it.
  const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

/// One array as run-time chains see it: its memory, size, element type and stream. Made by
/// operand_of from any array-like object (a moved-from array is refused there).
struct operand {
  const void* data = nullptr;  ///< the first element
  std::size_t size = 0;        ///< elements
  element type = element::f32; ///< their type
  stream_ref stream;           ///< the stream work on them is ordered on
};

/// The operand of an array, a slice or an array_ref. @throws invalid_argument for a moved-from array.
template <array_like A>
operand operand_of(const A& a) {
  a.check_live();
  using T = typename std::remove_cvref_t<A>::value_type;
  return {static_cast<const void*>(a.data()), std::size_t(a.size()), element_of<T>(), a.stream()};
}

/// Several arrays read element by element together: the first stage takes one argument per array.
struct inputs {
  std::vector<operand> arrays;  ///< in the order of the first stage's parameters
};

/// The arrays a, b, ... zipped: element i of the source is (a[i], b[i], ...). At most 8 arrays.
template <array_like... A>
inputs zip(const A&... a) {
  static_assert(sizeof...(A) >= 1 && sizeof...(A) <= 8, "jit::zip takes 1 to 8 arrays");
  return {{operand_of(a)...}};
}

namespace detail {
struct memo;
struct loaded;
struct signature;
struct streamed;
/// Where a reduction's value goes: host memory (the call synchronizes), or device memory on the
/// call's stream (asynchronous; a streamed chunk's partial).
enum class result_memory : std::uint8_t { host, device };
/// A fresh memo: the kernels one chain has used, by element types and target, so that repeated calls
/// skip generating and hashing its text.
std::shared_ptr<memo> new_memo();
/// One part of a chain: a map stage, a generator source or a reduction terminal.
struct part {
  /// What the part is.
  enum class kind : std::uint8_t { map, uniform, normal, sum, min, max, reduce } what = kind::map;
  std::string source;  ///< the stage's text (map, reduce)
  std::string name;    ///< the function the stage calls (map, reduce)
  std::vector<element> params;  ///< its parameter types
  element result = element::f32;  ///< its return type, a generator's value type
  std::uint64_t seed = 0, offset = 0;  ///< a generator's stream
  double a = 0, b = 0;  ///< low and high, mean and sd; a reduction's init (a)
  std::string ltoir;    ///< an external stage's LTO-IR for the GPU (linked by nvJitLink)
  const void* host_function = nullptr;  ///< an external stage's function for the CPU (C calling convention)
};
}  // namespace detail

/// A chain of run-time parts: an optional generator source, map stages, an optional reduction. Built
/// by map / uniform / normal / sum / min / max / reduce and composed with |. A value type: copies share
/// the kernels the chain has used (looked up by element types and target, under a lock, so one chain
/// may be called from several threads); a moved-from chain is the empty chain. Compiled kernels live
/// in the process-wide cache.
class pipeline {
 public:
  /// The empty chain (the identity on one array).
  pipeline() : memo_(detail::new_memo()) {}
  /// a's parts followed by b's. @throws invalid_argument when b starts with a generator or a follows a
  /// reduction (a generator comes first, a reduction last).
  friend pipeline operator|(pipeline a, const pipeline& b);
  /// The parts in order.
  const std::vector<detail::part>& parts() const noexcept { return parts_; }
  /// "map f1 | map f2 | sum", for messages.
  std::string name() const;

  /// In place, x[i] = chain(x[i]); with a generator source, x[i] = chain(value i). One kernel on x's
  /// stream, asynchronous. @throws as the two-array form.
  template <array_like A>
  void operator()(A&& x) const {
    const operand o = operand_of(x);
    if (generates()) run({}, o);
    else run({{o}}, o);
  }
  /// y[i] = chain(x[i]): one kernel on y's stream, after x's queued work; asynchronous. x and y may be
  /// the same memory. @throws shape_mismatch (sizes), device_mismatch, invalid_argument (element
  /// types that do not fit the chain, named before compiling; a chain that ends in a reduction),
  /// compile_error (a stage that does not compile, with the compiler's log), device_unavailable.
  template <array_like A, array_like B>
  void operator()(const A& x, B&& y) const {
    run({{operand_of(x)}}, operand_of(y));
  }
  /// y[i] = chain(a[i], b[i], ...) for zipped inputs. @throws as above.
  template <array_like B>
  void operator()(const inputs& x, B&& y) const {
    run(x, operand_of(y));
  }
  /// The chain's reduction over x, returned to the host: one kernel on x's stream; synchronizes. R is
  /// the chain's result type. @throws as above; invalid_argument when the chain has no reduction or R
  /// is not its result type.
  template <class R, array_like A>
  R result(const A& x) const {
    R r{};
    reduce_into({{operand_of(x)}}, 0, default_device(), element_of<R>(), &r);
    return r;
  }
  /// The reduction over zipped inputs. Synchronizes. @throws as above.
  template <class R>
  R result(const inputs& x) const {
    R r{};
    reduce_into(x, 0, default_device(), element_of<R>(), &r);
    return r;
  }
  /// The reduction over values 0 .. n - 1 of the chain's generator, on d's default stream.
  /// Synchronizes. @throws as above; invalid_argument when the chain has no generator.
  template <class R>
  R result(std::size_t n, device d = default_device()) const {
    R r{};
    reduce_into({}, n, d, element_of<R>(), &r);
    return r;
  }

  /// The kernel source this chain generates for inputs of these types, writing (or reducing to) out,
  /// on device d: what is compiled and what the cache key hashes. @throws as the calls above.
  std::string kernel_source(const std::vector<element>& in, element out, device d) const;

 /// A chain of one part (what map, uniform, normal, sum, min, max and reduce build).
  explicit pipeline(detail::part p) : memo_(detail::new_memo()) { parts_.push_back(std::move(p)); }

 private:
  bool generates() const noexcept;
  std::shared_ptr<detail::loaded> memoized(const detail::signature& sig, device d) const;
  void memoize(const detail::signature& sig, device d, std::shared_ptr<detail::loaded> k) const;
  void run(const inputs& in, const operand& out) const;
  void reduce_into(const inputs& in, std::size_t n, device d, element r, void* result,
                   detail::result_memory where = detail::result_memory::host) const;
  friend struct detail::streamed;  // jit/out_of_core.hpp runs chunks through run and reduce_into
  std::vector<detail::part> parts_;
  std::shared_ptr<detail::memo> memo_;  // shared by copies, which have the same parts
};

namespace detail {
/// The GPU image (cubin, or PTX for an architecture newer than NVRTC knows) NVRTC makes of a kernel
/// source (pipeline::kernel_source) for compute capability major.minor; needs no GPU.
/// @throws compile_error with NVRTC's log; device_unavailable in a build without the CUDA backend.
std::string compile_cuda(const std::string& source, int major, int minor);
/// The same, where the chain has external stages: the kernel compiled to LTO-IR and linked with each
/// stage's LTO-IR by nvJitLink into one cubin. @throws compile_error with NVRTC's or nvJitLink's log.
std::string link_cuda(const std::string& source, const std::vector<part>& parts, int major, int minor);
/// LTO-IR of CUDA C++ source (functions with extern "C" __device__), for sm_<major><minor>.
std::string ltoir_of(const std::string& source, int major, int minor);
/// A generator source of kind k (uniform or normal) and type t; checks its parameters as rs::random does.
pipeline generator(part::kind k, element t, std::uint64_t seed, std::uint64_t offset, double a, double b);
}  // namespace detail

/// A map stage from C++ source text defining one function (helpers may precede it). The stage calls
/// `name`, or when name is empty the last function the text defines at the top level. Its parameter
/// and return types must be among those element names (const and & allowed). The text also compiles
/// for the GPU: write float maths as sqrtf, sinf, expf, fmaf, ... (std:: is not available there).
/// @throws invalid_argument when the text defines no function or its signature cannot be read.
pipeline map(std::string source, std::string name = {});

/// A map stage compiled elsewhere (by Numba, for instance): the function `name` with C linkage, taking
/// `params` and returning `result`. On a GPU its LTO-IR (`ltoir`, made for the device's architecture or
/// an older one) is linked with the chain's kernel by nvJitLink, so it is inlined into the one kernel; on
/// the CPU the kernel calls `host_function` (a pointer to that function, which must stay valid while
/// the chain is used). Either may be empty where that backend is not used.
/// @throws invalid_argument for an empty name, no parameters, or more than 8.
pipeline external(std::string name, std::vector<element> params, element result, std::string ltoir,
                  const void* host_function);

/// A reduction by an operator compiled elsewhere: the function `name` with C linkage, taking two values
/// of `type` and returning one, given as LTO-IR (GPU) and a function pointer (CPU) as for external();
/// init starts the fold. @throws invalid_argument for an empty name.
pipeline external_reduce(std::string name, element type, double init, std::string ltoir, const void* host_function);

/// A generator source: value i of the uniform stream (seed, offset) in [low, high), the same values as
/// rs::random::fill_uniform. T is float or double; the bounds are checked as given, before they
/// become T.
/// @throws invalid_argument when low >= high (also bounds that differ as given but are one value of
/// T), or a bound is not finite or beyond T's largest value.
template <class T>
pipeline uniform(std::uint64_t seed, std::uint64_t offset = 0, double low = 0, double high = 1) {
  static_assert(std::is_floating_point_v<T>, "jit::uniform<T>: T is float or double");
  return detail::generator(detail::part::kind::uniform, element_of<T>(), seed, offset, low, high);
}
/// A generator source: value i of the normal stream (seed, offset), the same values as
/// rs::random::fill_normal. T is float or double. @throws invalid_argument as fill_normal.
template <class T>
pipeline normal(std::uint64_t seed, std::uint64_t offset = 0, T mean = T(0), T sd = T(1)) {
  static_assert(std::is_floating_point_v<T>, "jit::normal<T>: T is float or double");
  return detail::generator(detail::part::kind::normal, element_of<T>(), seed, offset, double(mean), double(sd));
}

/// The sum of the chain's values, in their type (NaN propagates). A terminal.
pipeline sum();
/// The least value (NaN propagates; for no elements +infinity, or an integer type's largest value). A
/// terminal.
pipeline min();
/// The greatest value (NaN propagates; for no elements -infinity, or an integer type's lowest value). A
/// terminal.
pipeline max();
/// A reduction by a user operator: source defines a function of two values of the chain's type
/// returning one (associative: the order of combination is not fixed); init starts the fold and is
/// the result for no elements. @throws invalid_argument as map.
pipeline reduce(std::string source, double init, std::string name = {});

/// The disk cache's folder: $RESIDENT_JIT_CACHE when set, else $XDG_CACHE_HOME/resident/jit, else
/// ~/.cache/resident/jit ($HOME, else the user's home in the password database; "" when none can be
/// named: kernels are then cached in a private folder for the process, with a warning).
std::string cache_directory();
namespace detail {
/// Makes dir the disk cache's folder for this process, over the environment (nullopt: the environment's
/// again), and returns the setting it replaces. Safe while other threads run, as setenv is not: for a
/// benchmark that wants a fresh cache.
std::optional<std::string> set_cache_directory(std::optional<std::string> dir);
}  // namespace detail

/// What the cache did since the process started (for tests and benchmarks).
struct cache_stats {
  std::uint64_t compiled = 0;     ///< kernels compiled
  std::uint64_t disk_loads = 0;   ///< kernels loaded from the disk cache
  std::uint64_t memory_hits = 0;  ///< calls served by the in-memory cache
  std::uint64_t rejected = 0;     ///< disk entries found unusable (corrupt, truncated) and rewritten
};
/// The counts so far.
cache_stats stats();
/// Empties the in-memory cache (kernels already loaded stay loaded; the next call looks on disk).
void clear_memory_cache();

}  // namespace resident::jit
