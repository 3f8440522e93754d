#pragma once
// What the binding files of resident._core share: the Array (py_array), element-type dispatch, stream
// handles, taking any library's array in (from_dlpack), and the call guard that records the Python line.
// Each binding file adds its part of the module through one bind_* function (module.cpp calls them).
#include <atomic>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "resident/insight/detail/call_scope.hpp"
#include "resident/interop/dlpack.hpp"
#include "resident/resident.hpp"

namespace nb = nanobind;
namespace rs = resident;

namespace resident::jit {
class pipeline;
}  // namespace resident::jit

namespace resident::py {

// ---- integer arguments ----------------------------------------------------------------------------

/// An integer parameter of type T that takes any Python integer (int, NumPy's, anything with
/// __index__): one out of T's range reaches the binding, which refuses it with invalid_argument naming
/// the parameter, where nanobind's own caster would fail the call with a TypeError. Floats, strings and
/// other types still fail the match (TypeError). get() is the only way to the value.
template <class T>
struct int_arg {
  static_assert(std::is_integral_v<T>);
  long long value = 0;             // the value when it fits T ...
  bool fits = true;                // ... else the caller's text, kept for the message
  std::string text;
  int_arg() = default;
  int_arg(T v) : value(static_cast<long long>(v)) {}  // defaults given in C++
  /// The value. @throws invalid_argument naming `what` and `name` when it is out of T's range.
  T get(const char* what, const char* name) const {
    if (!fits)
      throw rs::invalid_argument(std::string(what) + ": " + name + "=" + text + " is out of range: give " +
                                 std::to_string(std::numeric_limits<T>::min()) + " to " +
                                 std::to_string(std::numeric_limits<T>::max()));
    return static_cast<T>(value_t());
  }
  /// The value where it lies in [lo, hi]. @throws invalid_argument naming that range otherwise.
  T get_in(const char* what, const char* name, T lo, T hi) const {
    if (fits && value_t() >= lo && value_t() <= hi) return value_t();
    throw rs::invalid_argument(std::string(what) + ": " + name + "=" +
                               (fits ? std::to_string(value_t()) : text) + " is out of range: give " +
                               std::to_string(lo) + " to " + std::to_string(hi));
  }

 private:
  auto value_t() const { return unsigned_value ? static_cast<T>(uvalue) : static_cast<T>(value); }

 public:
  bool unsigned_value = false;     // uvalue holds it (above LLONG_MAX)
  unsigned long long uvalue = 0;
};

// ---- element types ----------------------------------------------------------------------------

// Calls f(T{}) for the element type t names. @throws invalid_type for any other type.
template <class F>
decltype(auto) visit(DLDataType t, F&& f) {
  auto is = [&](DLDataType want) { return t.code == want.code && t.bits == want.bits && t.lanes == want.lanes; };
  if (is(rs::dlpack_dtype<float>())) return f(float{});
  if (is(rs::dlpack_dtype<double>())) return f(double{});
  if (is(rs::dlpack_dtype<std::int32_t>())) return f(std::int32_t{});
  if (is(rs::dlpack_dtype<std::int64_t>())) return f(std::int64_t{});
  if (is(rs::dlpack_dtype<std::uint32_t>())) return f(std::uint32_t{});
  if (is(rs::dlpack_dtype<std::uint64_t>())) return f(std::uint64_t{});
  throw rs::invalid_type("element type " + rs::dlpack_dtype_name(t) +
                             " is not supported: use float32, float64, int32, int64, uint32 or uint64");
}

/// The element type a dtype name ("float32", ...) names. @throws invalid_argument for others.
DLDataType parse_dtype(const std::string& name);

/// The device a name picks (None: the default device), checked usable.
rs::device pick(const std::optional<std::string>& name);

// The stream handles of the DLPack and CUDA Array Interface protocols: 1 is the legacy default stream
// (resident's null handle), 2 the per-thread default stream, anything else a cudaStream_t.
/// The most dimensions an array has (a shape given, a tensor taken in through DLPack).
inline constexpr int most_dims = 32;

inline rs::cuda_stream_t native_of(std::intptr_t handle) {
  return handle == 1 ? nullptr : reinterpret_cast<rs::cuda_stream_t>(handle);
}
inline std::intptr_t handle_of(rs::cuda_stream_t s) { return s == nullptr ? 1 : reinterpret_cast<std::intptr_t>(s); }

/// A stream handle given by a consumer or producer (`what` names the protocol): an int.
std::intptr_t stream_handle(nb::handle h, const char* what);

// ---- the stream a call runs on ---------------------------------------------------------------------

/// The stream handle a `stream=` argument names (streams.cpp): None gives nothing; an int handle (0 and 1:
/// the legacy default stream, 2: the per-thread default stream); an object with __cuda_stream__ (the
/// CUDA stream protocol: a (version, handle) pair); a PyTorch (cuda_stream), CuPy (ptr) or Numba (handle)
/// stream. @throws invalid_type for anything else, invalid_argument for a negative handle.
std::optional<std::intptr_t> parse_stream(nb::handle stream, const char* what);

/// The stream given to the launching call running now on this thread (set by call_stream for the call).
struct call_stream_state {
  std::optional<std::intptr_t> given;
  const char* what = "";
  std::vector<rs::stream_ref> joins;  // resident arrays' own streams, ordered after the given one at the end
  std::shared_ptr<const void> keep;   // the rs.Stream given, if one: the arrays that adopt it keep it
};
extern thread_local call_stream_state* t_call_stream;

/// Sets the call's stream for its duration: arrays taken in by from_dlpack work on it. At the end the
/// own streams of resident's arrays the call used wait for it (an event each; no host wait), so later
/// work on those arrays stays ordered after the call.
class call_stream {
 public:
  call_stream(nb::handle stream, const char* what);
  ~call_stream();
  call_stream(const call_stream&) = delete;
  call_stream& operator=(const call_stream&) = delete;

 private:
  call_stream_state state_;
  call_stream_state* previous_;
};

// ---- the array ----------------------------------------------------------------------------------

struct py_array;
/// The stream work on another library's array `obj` on device d runs on: the call's given stream, else
/// that library's current stream (PyTorch, CuPy; Numba's is the legacy default), else none (unknown).
std::optional<std::intptr_t> library_stream(nb::handle obj, rs::device d);
/// Puts the array on the call's given stream, if any (resident's arrays: after their queued work, their
/// own stream joined at the call's end). @throws invalid_argument for a CPU array given a stream.
void apply_call_stream(py_array& a);


// The stream of the flow stage (or capture) whose Python work runs now on this thread, if any: work on
// arrays of its device goes there instead of the array's own stream.
extern thread_local const rs::stream_ref* t_stage_stream;

// Sets t_stage_stream for a scope.
struct stage_stream_scope {
  const rs::stream_ref* previous;
  explicit stage_stream_scope(const rs::stream_ref& s) : previous(std::exchange(t_stage_stream, &s)) {}
  ~stage_stream_scope() { t_stage_stream = previous; }
  stage_stream_scope(const stage_stream_scope&) = delete;
  stage_stream_scope& operator=(const stage_stream_scope&) = delete;
};

// A C-contiguous block of elements on one device: memory resident allocated, or another library's
// tensor taken in place. `owner` keeps the memory alive as long as any Array or exported tensor uses it.
struct py_array {
  std::shared_ptr<const void> owner;
  void* data = nullptr;
  std::vector<std::int64_t> shape;
  DLDataType dtype{};
  rs::stream_ref stream;
  std::shared_ptr<const void> stream_keep;  // the rs.Stream `stream` belongs to, when adopted from a call's stream=
  bool foreign = false;  // memory of another library
  // Work on foreign memory whose library's stream resident does not know (a producer other than PyTorch,
  // CuPy or Numba, called without stream=) is finished before returning: the owner may read it on any
  // stream next. Otherwise the work is queued on the library's current stream (or the given one).
  bool finish_before_return = false;
  bool readonly = false;  // the producer marked the memory read-only: resident only reads it
  bool copied = false;    // (read-only too) NumPy made the array anew to read the object: a NumPy scalar
  bool producer_copy = false;  // the producer's __dlpack__ gave a copy (DLPack's IS_COPIED flag)

  // Refuses to write into memory its producer marked read-only (an immutable buffer, a NumPy array
  // with writeable=False), or into a copy whose writes nobody would see: `what` names the call.
  void check_writable(const std::string& what) const {
    if (copied)
      throw rs::invalid_argument(what + ": the array is read-only here: NumPy reads it through a copy of its value "
                                 "(a NumPy scalar such as np.float64(5.0) or arr[1] is a value, not memory), so what "
                                 "is written would be lost; pass an array, e.g. np.array(v) or np.atleast_1d(v)");
    if (producer_copy)
      throw rs::invalid_argument(what + ": the array is a copy its producer's __dlpack__ made (DLPack's IS_COPIED "
                                 "flag), so what is written would be lost; pass memory the producer shares");
    if (readonly)
      throw rs::invalid_argument(what + ": the array is read-only (its producer marked it so); write into a "
                                 "writable array, e.g. a copy");
  }

  std::size_t size() const {
    return std::size_t(std::accumulate(shape.begin(), shape.end(), std::int64_t(1), std::multiplies<>()));
  }
  std::size_t itemsize() const { return dtype.bits / 8u; }
  rs::device device() const { return stream.device(); }
  // The stream work on the array runs on: a running flow stage's, else the array's own.
  rs::stream_ref work_stream() const {
    return t_stage_stream && t_stage_stream->device() == stream.device() ? *t_stage_stream : stream;
  }
  template <class T>
  rs::array_ref<T> ref() const {
    return {static_cast<T*>(data), size(), work_stream()};
  }
  // Foreign memory of an unknown library may be read by its owner on any stream next: wait for
  // resident's work on it (inside a flow stage the flow's run waits for every stage before it returns).
  void finish_foreign() const {
    if (foreign && finish_before_return && !t_stage_stream) stream.synchronize();
  }
};

/// The id of the thread that finalizes the interpreter: the main thread's, read when the module loads,
/// then that of the thread running the atexit functions.
unsigned long main_thread_id() noexcept;

/// Whether the interpreter is finalizing and this thread is not the one doing it: such a thread must
/// not take the GIL (Python would end it). The finalizing thread itself goes on (a __del__ at exit).
inline bool finalizing_elsewhere() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  return finalizing && PyThread_get_thread_ident() != main_thread_id();
}

/// Threads parked at exit (below): what they hold (a flow's turn, a lock up their stack) stays held.
inline std::atomic<int>& parked_threads() noexcept {
  static std::atomic<int> n{0};
  return n;
}

/// Parks this thread for the life of the process (the interpreter is ending it; what it holds stays
/// held). Touches nothing of Python's or nanobind's: the interpreter is being torn down meanwhile.
[[noreturn]] inline void park_thread() {
  parked_threads().fetch_add(1);
  for (;;) ::pause();
}

/// The GIL released for a scope (nb::gil_scoped_release), except that a thread other than the
/// finalizing one taking it back while the interpreter finalizes (a daemon thread inside a call at exit)
/// waits there for the process to end: Python would end it with pthread_exit, whose unwinding through
/// C++ frames aborts the process.
class gil_released {
 public:
  // @throws error on the finalizing thread once a thread is parked inside resident: the call could
  // wait for good on what that thread holds.
  gil_released() : state_((refuse_after_parking(), PyEval_SaveThread())) {}
  ~gil_released() {
    if (finalizing_elsewhere()) park_thread();
#if defined(__GLIBCXX__)
    try {  // finalizing began while this thread waited for the GIL: Python ends it here
      PyEval_RestoreThread(state_);
    } catch (abi::__forced_unwind&) {
      park_thread();  // never rethrown: the unwinding would reach nanobind's catch (...) and abort
    }
#else
    PyEval_RestoreThread(state_);
#endif
  }
  gil_released(const gil_released&) = delete;
  gil_released& operator=(const gil_released&) = delete;

 private:
  static void refuse_after_parking() {
    if (parked_threads().load(std::memory_order_relaxed) > 0)
      throw rs::error("a thread stopped at exit inside a resident call may hold what this call needs; "
                      "no resident work runs after that while the interpreter finalizes");
  }
  PyThreadState* state_;
};

/// The GIL taken for Python work on any thread (nb::gil_scoped_acquire). @throws error on a thread other
/// than the finalizing one while the interpreter finalizes (taking it there would end the thread as
/// above): the work fails instead.
class gil_held {
 public:
  gil_held() {
    if (finalizing_elsewhere()) throw rs::error("the Python interpreter is finalizing: no Python work runs now");
#if defined(__GLIBCXX__)
    try {  // as in ~gil_released: finalizing began while this thread waited
      state_ = PyGILState_Ensure();
    } catch (abi::__forced_unwind&) {
      park_thread();
    }
#else
    state_ = PyGILState_Ensure();
#endif
  }
  ~gil_held() {
    // Python ended this thread inside the Python work (a daemon thread at exit whose work released
    // the GIL, time.sleep say, and took it back while the interpreter finalized): the unwinding passes
    // here without the GIL, and releasing it would abort the process. Parked, as ~gil_released parks.
    if (!PyGILState_Check()) park_thread();
    PyGILState_Release(state_);
  }
  gil_held(const gil_held&) = delete;
  gil_held& operator=(const gil_held&) = delete;

 private:
  PyGILState_STATE state_;
};

/// Drops a Python reference held by C++ (an owner, a callable) with the GIL taken; on a thread other
/// than the finalizing one while the interpreter finalizes the reference is left (the process is ending).
template <class T>
void drop_python(const T* p) {
  if (finalizing_elsewhere()) return;
  try {
    gil_held locked;
    delete p;
  } catch (const rs::error&) {  // finalizing began meanwhile
  }
}

/// Another library's object kept alive as an array's owner (let go with the GIL taken).
inline std::shared_ptr<const void> python_owner(nb::handle obj) {
  return std::shared_ptr<const void>(new nb::object(nb::borrow(obj)),
                                     [](const void* p) { drop_python(static_cast<const nb::object*>(p)); });
}
/// A PyTorch tensor or CuPy array on a CUDA device read from its attributes, or a NumPy array through
/// the buffer protocol (direct.cpp), or nothing
/// where the __dlpack__ path must take it. own = false: no owner (see taken_for_call).
std::optional<py_array> take_direct(nb::handle obj, bool own = true);
/// The one check of a tensor taken in, whatever gave it (intake.cpp), made before anything reads its shape,
/// strides or memory: rank, shape, element type, a device of this build, every byte it reaches addressable,
/// C-contiguous and aligned. Returns its device and first element. @throws before anything is taken.
std::pair<rs::device, void*> usable(const DLTensor& t);
/// A shape: an int, or a sequence (tuple, list) of ints (extents from 0 to 2^63 - 1).
std::vector<std::int64_t> shape_of(const nb::handle& shape);
/// A new uninitialized array of resident's pool.
py_array empty_of(std::vector<std::int64_t> shape, DLDataType dtype, rs::device d);
/// Takes another library's array in place (see intake.cpp); resident's Arrays as they are.
py_array from_dlpack(nb::object obj);
/// The host memory to_device copies from: as from_dlpack takes it (the same checks), but of any layout:
/// a strided or misaligned array comes as a C-contiguous copy NumPy makes of the checked view.
py_array host_source(nb::handle obj);
/// from_dlpack within a call of its own on `stream` (None: none): resident.from_dlpack(obj, stream=).
py_array from_dlpack_on(nb::object obj, nb::object stream);
/// Refuses a resident.dist.ShardedArray (several arrays) where one array is taken. @throws invalid_type
/// naming `what` and what to use instead.
void refuse_sharded(nb::handle obj, const char* what);
/// As from_dlpack, for a call that uses the array only until it returns, `obj` being one of its own
/// arguments (held by the caller's frame, which no other thread can let go): a PyTorch or CuPy array
/// gets no owner of its own (an allocation and a GIL round trip less per array). Never stored.
py_array taken_for_call(nb::handle obj);
/// The array through DLPack: a capsule of the version the consumer asks for, its stream ordered after
/// the array's work (interop.cpp).
nb::object dlpack_export(const py_array& a, nb::object stream, nb::object max_version, nb::object dl_device,
                         nb::object copy);
/// (device type, device id) as DLPack names them.
nb::tuple dlpack_device(const py_array& a);
/// The CUDA Array Interface (version 3) of a CUDA array.
nb::dict cuda_array_interface(const py_array& a);
/// Makes the array's queued work finished or ordered before any consumer stream (resident.to_numba).
void ready_for_any_stream(const py_array& a);
/// The name of o's type, for messages.
std::string py_type_name(nb::handle o);
/// A Python str's text as UTF-8, what is not (lone surrogates) as backslash escapes.
std::string utf8_of(nb::handle str);
/// repr(h) for a message, at most `most` characters: never raises for the object's sake (a repr that
/// raises, an int past Python's digit limit, text that is not UTF-8); an interrupt propagates.
std::string shown(nb::handle h, std::size_t most = 200);
/// str(h) for a message (an exception's text), as shown(): never raises for the object's sake.
std::string str_shown(nb::handle h, std::size_t most = 300);

/// Whether o has the attribute, as Python's hasattr; but an error other than AttributeError reads as
/// absent too, except an interrupt or exit (not an Exception), which goes on unchanged.
bool has_attr(nb::handle o, const char* name);
/// A catch-all overload's first step: nanobind's casters clear what an argument's __index__ or __float__
/// raised, so each argument (and each item of a list or tuple given) converts once more, and a
/// KeyboardInterrupt or SystemExit it raises goes on unchanged instead of the overload's InvalidType.
void interrupts_again(const nb::args& args, const nb::kwargs& kwargs);
/// Throws OutOfMemory for a host array of `bytes` that could not be allocated, with the host's free
/// memory and the CPU pool's figures: `what` names the call, `advice` what to do.
[[noreturn]] void host_out_of_memory(std::size_t bytes, const std::string& what, const std::string& advice);
/// Refuses a NumPy masked array (what would take its data alone, dropping the mask). @throws invalid_argument.
void refuse_masked(nb::handle obj, const char* what);

// Calls f(a.ref<T>()) for a float32 or float64 array, the GIL released; any other type is refused
// with `what` named.
template <class F>
auto on_floats(const py_array& a, const char* what, F&& f) {
  using R = decltype(f(std::declval<rs::array_ref<float>>()));
  return visit(a.dtype, [&](auto t) -> R {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      gil_released unlocked;
      return f(a.ref<T>());
    } else {
      throw rs::invalid_type(std::string(what) + " takes float32 or float64 arrays, not " +
                                 rs::dlpack_dtype_name(a.dtype));
    }
  });
}

/// Refuses an output that shares memory with an input other than exactly (in place): element i of the
/// output would overwrite an input element not read yet. `what` names the call.
void check_overlap(const py_array& in, const py_array& out, const char* what);
/// The inputs a call read on its output's stream: work queued on an input's stream next (its library
/// writing it) waits for the call (an event each where the streams differ; no host wait).
void after_reads_on(const py_array& out, std::initializer_list<const py_array*> inputs);
/// Refuses arrays of two shapes (both of two or more dimensions) in one element-wise call.
void check_shapes(const py_array& a, const py_array& b, const char* what);

// ---- run-time chains (jit.cpp) and programs' calls (programs.cpp) --------------------------------

/// (kind, cc major, cc minor) of device d, one tuple object per device: the target resident.jit builds for.
nb::tuple target_of(rs::device d);
/// The dtype's name as an interned Python string, one object per element type.
nb::handle dtype_name_of(DLDataType t);
/// o = chain(in...) (in place when o is in[0]), counted as one call at the Python line.
void run_taken(const rs::jit::pipeline& p, std::span<const py_array> in, const py_array& o);
/// o = p(a) by the interpreter: one kernel of the program's op codes (compute.cpp).
void run_interpreted(const rs::program& p, const py_array& a, const py_array& o);
/// Whether the Python work running now is being captured into a CUDA graph (flow.cpp): nothing may be
/// compiled or loaded then.
bool capturing_now();
/// p(x, out, stream) and op(x, out, stream): the chain the program's first call compiled, run in one
/// C++ call; the first call (and any other case) goes through resident/_program.py (programs.cpp).
nb::object program_call(nb::handle self, nb::object x, nb::object out, nb::object stream);
nb::object op_call(nb::handle self, nb::object x, nb::object out, nb::object stream);

// The Python line that called a binding, as the call site of the calls it makes (the profile's rows,
// the transfer log's lines) in place of this file's, while a profile collects or the transfer policy
// is not allow (nothing otherwise: a call pays one relaxed load and a policy read). Frames of the
// resident package itself (resident.jit's wrappers) are skipped to the user's.
struct python_site {
  std::optional<rs::detail::foreign_site> site;
  python_site() noexcept;
};
using at_python_line = nb::call_guard<python_site>;

/// The user's Python file:line calling now (frames of the resident package skipped), or nullopt.
std::optional<std::pair<std::string, unsigned>> python_line_now() noexcept;

/// A site captured on one thread put in force on this one (resident.dist's worker threads, whose own
/// frames are the pool's): while it lives, python_site takes it instead of walking the frames.
struct pinned_site {
  rs::detail::foreign_site site;
  bool before;
  pinned_site(std::string file, unsigned line) noexcept;
  ~pinned_site();
  pinned_site(const pinned_site&) = delete;
  pinned_site& operator=(const pinned_site&) = delete;
};

/// Refuses (InvalidArgument) a chain ending in min or max over n == 0 values, as resident.min and max
/// refuse an empty array: nothing has a least or greatest element (jit.cpp).
void refuse_empty_extreme(const rs::jit::pipeline& chain, std::size_t n, const char* what);

// The parts of the module, one per binding file.
void bind_errors(nb::module_& m);
void bind_streams(nb::module_& m);
void bind_array(nb::module_& m);
void bind_compute(nb::module_& m);
void bind_jit(nb::module_& m);
void bind_flow(nb::module_& m);
void bind_programs(nb::module_& m);
void bind_transfers(nb::module_& m);
void bind_device(nb::module_& m);
void bind_streaming(nb::module_& m);
void bind_profile(nb::module_& m);
void bind_dist(nb::module_& m);
void bind_pool(nb::module_& m);

/// self copied into the host array out (same shape and dtype, C-contiguous, writable), on `stream` if
/// given; blocking: finished when this returns. Returns out (transfers.cpp).
nb::object to_host_into(const py_array& self, nb::handle out, nb::handle stream, bool blocking);

}  // namespace resident::py

namespace nanobind::detail {
// Takes any Python integer into resident::py::int_arg<T>, range checked there (see int_arg).
template <class T>
struct type_caster<resident::py::int_arg<T>> {
  NB_TYPE_CASTER(resident::py::int_arg<T>, const_name("int"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (PyFloat_Check(src.ptr()) || PyBool_Check(src.ptr()) || !PyIndex_Check(src.ptr())) return false;
    PyObject* i = PyNumber_Index(src.ptr());
    if (!i) {
      PyErr_Clear();
      return false;
    }
    value = {};
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    if (overflow == 0 && !(v == -1 && PyErr_Occurred())) {
      value.value = v;
      value.fits = std::is_signed_v<T> ? (v >= (long long)std::numeric_limits<T>::min() &&
                                          v <= (long long)std::numeric_limits<T>::max())
                                       : (v >= 0 && (unsigned long long)v <= (unsigned long long)std::numeric_limits<T>::max());
    } else if (overflow > 0 && !std::is_signed_v<T>) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(i);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        value.fits = false;
      } else {
        value.unsigned_value = true;
        value.uvalue = u;
        value.fits = u <= (unsigned long long)std::numeric_limits<T>::max();
      }
    } else {
      PyErr_Clear();
      value.fits = false;
    }
    if (!value.fits) {
      PyObject* r = PyObject_Repr(i);
      const char* c = r ? PyUnicode_AsUTF8(r) : nullptr;
      value.text = c ? c : "?";
      Py_XDECREF(r);
      PyErr_Clear();
    }
    Py_DECREF(i);
    return true;
  }
  static handle from_cpp(const resident::py::int_arg<T>& v, rv_policy, cleanup_list*) noexcept {
    return v.unsigned_value ? PyLong_FromUnsignedLongLong(v.uvalue) : PyLong_FromLongLong(v.value);
  }
};
}  // namespace nanobind::detail
