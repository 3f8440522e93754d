// resident._core: arrays that other libraries share at zero copy (DLPack, CUDA Array Interface),
// explicit transfers to and from NumPy, the ledger, the transfer policy, random fills into any array,
// reductions. Built with the host compiler; the kernels are instantiated in ops.cpp.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings_38.hpp"
#include "ops.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/flow/flow.hpp"
#include "resident/fuse/program.hpp"
#include "resident/jit/jit.hpp"
#include "resident/interop/dlpack.hpp"
#include "resident/insight/detail/call_scope.hpp"
#include "resident/resident.hpp"

namespace nb = nanobind;
namespace rs = resident;

namespace {

// ---- element types ----------------------------------------------------------------------------

// Calls f(T{}) for the element type t names. @throws invalid_argument for any other type.
template <class F>
decltype(auto) visit(DLDataType t, F&& f) {
  auto is = [&](DLDataType want) { return t.code == want.code && t.bits == want.bits && t.lanes == want.lanes; };
  if (is(rs::dlpack_dtype<float>())) return f(float{});
  if (is(rs::dlpack_dtype<double>())) return f(double{});
  if (is(rs::dlpack_dtype<std::int32_t>())) return f(std::int32_t{});
  if (is(rs::dlpack_dtype<std::int64_t>())) return f(std::int64_t{});
  if (is(rs::dlpack_dtype<std::uint32_t>())) return f(std::uint32_t{});
  if (is(rs::dlpack_dtype<std::uint64_t>())) return f(std::uint64_t{});
  throw rs::invalid_argument("element type " + rs::dlpack_dtype_name(t) +
                             " is not supported: use float32, float64, int32, int64, uint32 or uint64");
}

DLDataType parse_dtype(const std::string& name) {
  if (name == "float32") return rs::dlpack_dtype<float>();
  if (name == "float64") return rs::dlpack_dtype<double>();
  if (name == "int32") return rs::dlpack_dtype<std::int32_t>();
  if (name == "int64") return rs::dlpack_dtype<std::int64_t>();
  if (name == "uint32") return rs::dlpack_dtype<std::uint32_t>();
  if (name == "uint64") return rs::dlpack_dtype<std::uint64_t>();
  throw rs::invalid_argument("unknown dtype '" + name + "': use float32, float64, int32, int64, uint32 or uint64");
}

std::string typestr(DLDataType t) {  // NumPy's array-interface type string, little-endian
  const char kind = t.code == kDLFloat ? 'f' : t.code == kDLInt ? 'i' : 'u';
  return std::string("<") + kind + std::to_string(t.bits / 8);
}

rs::device pick(const std::optional<std::string>& name) {
  rs::device d = name ? rs::parse_device(*name) : rs::default_device();
  rs::require(d);
  return d;
}

// The stream handles of the DLPack and CUDA Array Interface protocols: 1 is the legacy default stream
// (resident's null handle), 2 the per-thread default stream, anything else a cudaStream_t.
rs::cuda_stream_t native_of(std::intptr_t handle) {
  return handle == 1 ? nullptr : reinterpret_cast<rs::cuda_stream_t>(handle);
}
std::intptr_t handle_of(rs::cuda_stream_t s) { return s == nullptr ? 1 : reinterpret_cast<std::intptr_t>(s); }

// A stream handle given by a consumer or producer (`what` names the protocol): an int.
std::intptr_t stream_handle(nb::handle h, const char* what) {
  std::intptr_t v = 0;
  if (!PyLong_Check(h.ptr()) || !nb::try_cast(h, v, false))
    throw rs::invalid_argument(std::string(what) + ": a stream is an int handle (1 = the legacy default stream), not " +
                               nb::cast<std::string>(nb::repr(h)));
  return v;
}

// ---- the array ----------------------------------------------------------------------------------

// The stream of the flow stage (or capture) whose Python work runs now on this thread, if any: work on
// arrays of its device goes there instead of the array's own stream.
thread_local const rs::stream_ref* t_stage_stream = nullptr;

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
  bool foreign = false;  // memory of another library: work on it is finished before returning
  bool readonly = false;  // the producer marked the memory read-only: resident only reads it

  // Refuses to write into memory its producer marked read-only (an immutable buffer, a NumPy array
  // with writeable=False): `what` names the call.
  void check_writable(const std::string& what) const {
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
  // Foreign memory may be read by its owner on any stream next: wait for resident's work on it (inside
  // a flow stage the flow's run waits for every stage before it returns).
  void finish_foreign() const {
    if (foreign && !t_stage_stream) stream.synchronize();
  }
};

// An extent of a shape: an int (or an integer such as NumPy's, through __index__) from 0 to 2^63 - 1.
std::int64_t extent_of(nb::handle e) {
  if (!PyIndex_Check(e.ptr()))
    throw rs::invalid_argument("a shape holds ints, not " + nb::cast<std::string>(nb::str(e.type().attr("__name__"))) +
                               " (" + nb::cast<std::string>(nb::repr(e)) + ")");
  nb::object i = nb::steal(PyNumber_Index(e.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow > 0) throw rs::invalid_argument("an extent beyond 2^63 - 1 in the shape: " + nb::cast<std::string>(nb::repr(e)));
  if (overflow < 0 || v < 0) throw rs::invalid_argument("a negative extent in the shape: " + nb::cast<std::string>(nb::repr(e)));
  return std::int64_t(v);
}

// A shape: an int, or a sequence (tuple, list) of ints.
std::vector<std::int64_t> shape_of(const nb::handle& shape) {
  std::vector<std::int64_t> s;
  if (PyIndex_Check(shape.ptr())) {
    s.push_back(extent_of(shape));
  } else if (PySequence_Check(shape.ptr()) && !PyUnicode_Check(shape.ptr()) && !PyBytes_Check(shape.ptr())) {
    for (nb::handle e : nb::borrow<nb::sequence>(shape)) s.push_back(extent_of(e));
  } else {
    throw rs::invalid_argument("a shape is an int or a sequence of ints, not " +
                               nb::cast<std::string>(nb::str(shape.type().attr("__name__"))));
  }
  return s;
}

py_array empty_of(std::vector<std::int64_t> shape, DLDataType dtype, rs::device d) {
  py_array r;
  r.shape = std::move(shape);
  r.dtype = dtype;
  std::uint64_t n = 1;
  for (auto e : r.shape) {
    if (e != 0 && n > std::uint64_t(-1) / std::uint64_t(e)) throw rs::invalid_argument("the shape's element count overflows");
    n *= std::uint64_t(e);
  }
  visit(r.dtype, [&](auto t) {
    using T = decltype(t);
    auto a = std::make_shared<rs::array<T>>(std::size_t(n), rs::default_stream(d));
    r.data = a->data();
    r.stream = a->stream();
    r.owner = a;
  });
  return r;
}

py_array empty(nb::handle shape, const std::string& dtype, const std::optional<std::string>& dev) {
  return empty_of(shape_of(shape), parse_dtype(dtype), pick(dev));
}

using host_array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

py_array to_device(host_array h, const std::optional<std::string>& dev) {
  const DLDataType dt{h.dtype().code, h.dtype().bits, static_cast<std::uint16_t>(h.dtype().lanes)};
  std::vector<std::int64_t> shape(h.ndim());
  for (std::size_t i = 0; i < h.ndim(); ++i) shape[i] = std::int64_t(h.shape(i));
  py_array r = empty_of(std::move(shape), dt, pick(dev));
  visit(r.dtype, [&](auto t) {
    using T = decltype(t);
    nb::gil_scoped_release unlocked;
    rs::copy_async(std::span<const T>(static_cast<const T*>(h.data()), r.size()), r.ref<T>());
    r.stream.synchronize();
  });
  return r;
}

nb::object to_host(const py_array& a) {
  return visit(a.dtype, [&](auto t) -> nb::object {
    using T = decltype(t);
    const std::size_t n = a.size();
    T* buf = new T[n ? n : 1];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
    {
      nb::gil_scoped_release unlocked;
      rs::copy_async(a.ref<T>(), std::span<T>(buf, n));
      a.stream.synchronize();
    }
    std::vector<std::size_t> shape(a.shape.begin(), a.shape.end());
    return nb::cast(nb::ndarray<nb::numpy, T>(buf, shape.size(), shape.data(), owner));
  });
}

// ---- DLPack and the CUDA Array Interface --------------------------------------------------------

// Exports through nanobind's ndarray, which speaks every DLPack version a consumer asks for
// (max_version) and keeps `owner` alive until the consumer lets go; the stream handshake is resident's.
nb::object dlpack_export(const py_array& a, nb::object stream, nb::object max_version, nb::object dl_device,
                         nb::object copy) {
  // Read-only memory goes out only in a versioned capsule, whose flag says so (as NumPy exports it): an
  // unversioned one cannot, and its consumer would write.
  if (a.readonly) {
    bool versioned = false;
    if (PyTuple_Check(max_version.ptr()) && PyTuple_GET_SIZE(max_version.ptr()) == 2) {
      const long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version.ptr(), 0));
      if (major == -1 && PyErr_Occurred()) PyErr_Clear();
      versioned = major >= 1;
    }
    if (!versioned && (max_version.is_none() || PyTuple_Check(max_version.ptr())))
      throw nb::buffer_error("__dlpack__: the array is read-only, which only a versioned capsule can say: pass "
                             "max_version=(1, 0)");
  }
  if (a.device().is_cuda()) {
    // The consumer's stream waits for the array's queued work (an event, no host synchronization).
    const std::intptr_t h = stream.is_none() ? 1 : stream_handle(stream, "__dlpack__");
    if (h == 0) throw rs::invalid_argument("__dlpack__: stream 0 is ambiguous; pass 1 for the legacy default stream");
    if (h != -1) {
      const rs::stream_ref consumer(a.device(), native_of(h));
      if (consumer.native() != a.stream.native()) consumer.wait_for(a.stream);
    }
  } else if (!stream.is_none()) {
    throw rs::invalid_argument("__dlpack__: a CPU array takes no stream (got " + nb::cast<std::string>(nb::str(stream)) + ")");
  }
  std::vector<std::size_t> shape(a.shape.begin(), a.shape.end());
  nb::capsule owner(new std::shared_ptr<const void>(a.owner),
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<const void>*>(p); });
  const DLDevice dev = rs::dlpack_device(a.device());
  const auto export_as = [&](auto view) {
    nb::object nd = nb::cast(view, nb::rv_policy::reference);
    return nd.attr("__dlpack__")(nb::arg("max_version") = max_version, nb::arg("dl_device") = dl_device,
                                 nb::arg("copy") = copy);
  };
  const nb::dlpack::dtype dt{a.dtype.code, a.dtype.bits, a.dtype.lanes};
  if (a.readonly)
    return export_as(nb::ndarray<nb::ro, nb::array_api>(a.data, shape.size(), shape.data(), owner, nullptr, dt,
                                                         int(dev.device_type), dev.device_id));
  return export_as(nb::ndarray<nb::array_api>(a.data, shape.size(), shape.data(), owner, nullptr, dt,
                                              int(dev.device_type), dev.device_id));
}

nb::tuple dlpack_device(const py_array& a) {
  const DLDevice d = rs::dlpack_device(a.device());
  return nb::make_tuple(int(d.device_type), d.device_id);
}

// Whether the work queued on the array's stream has finished, so that a consumer may use the memory
// on any stream without waiting (the CUDA Array Interface's stream=None). Inside a flow stage or a
// capture the answer is no (a capturing stream may not be queried); a null stream names the current
// device's legacy default stream, so an array of another device is asked about through its own
// stream only when that device is current.
bool idle_for_export(const py_array& a) {
  if (t_stage_stream || !a.device().is_cuda()) return false;
  const rs::cuda_stream_t s = a.stream.native();
  if (s == nullptr && rs::detail::cuda::current_device() != a.device().index()) return false;
  return rs::detail::cuda::stream_done(a.device().index(), s);
}

// The keys of the CUDA Array Interface's dict, made once (interned: a dict built per access then
// hashes nothing).
struct cai_keys {
  nb::object shape = nb::steal(PyUnicode_InternFromString("shape"));
  nb::object typestr = nb::steal(PyUnicode_InternFromString("typestr"));
  nb::object data = nb::steal(PyUnicode_InternFromString("data"));
  nb::object version = nb::steal(PyUnicode_InternFromString("version"));
  nb::object strides = nb::steal(PyUnicode_InternFromString("strides"));
  nb::object stream = nb::steal(PyUnicode_InternFromString("stream"));
};

// Version 3 with the stream: None when the array's work has finished (the consumer needs no
// synchronization: the specification allows None when no work on the data is queued), else the
// stream its work is queued on (inside a flow stage, the stage's stream), which the consumer
// synchronizes or queues behind. Built per access: the dict is the consumer's to keep.
nb::dict cuda_array_interface(const py_array& a) {
  if (!a.device().is_cuda())
    throw nb::attribute_error("__cuda_array_interface__: the array is on the CPU (use __dlpack__ or to_host)");
  static const cai_keys* k = new cai_keys();  // lives as long as the module
  nb::object shape = nb::steal(PyTuple_New(Py_ssize_t(a.shape.size())));
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    PyTuple_SET_ITEM(shape.ptr(), Py_ssize_t(i), PyLong_FromLongLong(a.shape[i]));
  nb::dict d;
  d[k->shape] = shape;
  d[k->typestr] = typestr(a.dtype);
  d[k->data] = nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data), false);
  d[k->version] = 3;
  d[k->strides] = nb::none();
  if (idle_for_export(a)) d[k->stream] = nb::none();
  else d[k->stream] = handle_of(a.work_stream().native());
  return d;
}

// Makes the array's queued work finished or ordered before any consumer stream, for a view handed
// to a library that assumes so (resident.to_numba): nothing when the work has finished, else the
// work's stream is synchronized (what a CUDA Array Interface consumer does with the exported stream).
// Inside a capture nothing can be waited for: refused.
void ready_for_any_stream(const py_array& a) {
  if (!a.device().is_cuda() || idle_for_export(a)) return;
  const rs::stream_ref s = a.work_stream();
  if (rs::detail::cuda::stream_is_capturing(s.native()))
    throw rs::invalid_argument("an array handed to another library during a capture: its work has not run yet");
  nb::gil_scoped_release unlocked;
  s.synchronize();
}

// The layout of DLPack 1.0's DLManagedTensorVersioned (the header here may predate it): what a
// "dltensor_versioned" capsule holds.
struct managed_tensor_versioned {
  std::uint32_t major, minor;
  void* manager_ctx;
  void (*deleter)(managed_tensor_versioned*);
  std::uint64_t flags;
  DLTensor dl_tensor;
};
constexpr std::uint64_t dlpack_read_only = 1;  // DLPACK_FLAG_BITMASK_READ_ONLY

std::string py_type_name(nb::handle o) { return nb::cast<std::string>(nb::str(o.type().attr("__name__"))); }

// Checks that resident can use the tensor in place (element type, a device of this build, C-contiguous,
// aligned) and returns its device and first element. @throws before anything is taken.
std::pair<rs::device, void*> usable(const DLTensor& t) {
  visit(t.dtype, [](auto) {});
  const rs::device dev = rs::device_of(t.device);
  rs::require(dev);
  return {dev, rs::detail::dlpack_checked(t, t.dtype, t.dtype.bits / 8u).first};
}

// The tensor of a capsule not consumed yet and whether its producer marked it read-only. @throws
// invalid_argument for a consumed capsule or one of another kind.
std::pair<const DLTensor*, bool> capsule_tensor(nb::handle cap) {
  const char* name = PyCapsule_GetName(cap.ptr());
  const std::string n = name ? name : "";
  if (n == "used_dltensor" || n == "used_dltensor_versioned")
    throw rs::invalid_argument("from_dlpack: the DLPack capsule was consumed already (a capsule is taken once; ask the "
                               "producer's __dlpack__ for another)");
  void* p = n == "dltensor" || n == "dltensor_versioned" ? PyCapsule_GetPointer(cap.ptr(), name) : nullptr;
  if (!p) {
    PyErr_Clear();
    throw rs::invalid_argument("from_dlpack: a capsule named '" + n + "' is not a DLPack tensor");
  }
  if (n == "dltensor") return {&static_cast<DLManagedTensor*>(p)->dl_tensor, false};
  const auto* m = static_cast<managed_tensor_versioned*>(p);
  if (m->major != 1)
    throw rs::invalid_argument("from_dlpack: a DLPack " + std::to_string(m->major) + "." + std::to_string(m->minor) +
                               " capsule; resident reads DLPack 1.x and unversioned capsules");
  return {&m->dl_tensor, (m->flags & dlpack_read_only) != 0};
}

// The array an imported tensor `nd` (an nb::ndarray) describes; `nd` is kept alive by the result.
template <class ND>
py_array adopt(ND nd, bool readonly) {
  py_array r;
  r.dtype = DLDataType{nd.dtype().code, nd.dtype().bits, nd.dtype().lanes};
  r.shape.resize(nd.ndim());
  std::vector<std::int64_t> strides(nd.ndim());
  for (std::size_t i = 0; i < nd.ndim(); ++i) {
    r.shape[i] = std::int64_t(nd.shape(i));
    strides[i] = nd.stride(i);
  }
  DLTensor t{};
  t.data = const_cast<void*>(nd.data());  // nanobind's data() has the byte offset applied
  t.device = DLDevice{static_cast<DLDeviceType>(nd.device_type()), nd.device_id()};
  t.ndim = static_cast<std::int32_t>(nd.ndim());
  t.dtype = r.dtype;
  t.shape = r.shape.data();
  t.strides = strides.data();
  const auto [dev, data] = usable(t);
  r.data = data;
  r.stream = rs::default_stream(dev);
  r.owner = std::shared_ptr<const void>(new ND(std::move(nd)), [](const void* p) {
    nb::gil_scoped_acquire locked;
    delete static_cast<const ND*>(p);
  });
  r.foreign = true;
  r.readonly = readonly;
  return r;
}

// An array given through the CUDA Array Interface (version 3): every key checked before use.
py_array from_cuda_array_interface(nb::handle obj) {
  const char* cai_name = "__cuda_array_interface__";
  nb::object desc = obj.attr(cai_name);
  if (!PyDict_Check(desc.ptr()))
    throw rs::invalid_argument(std::string(cai_name) + " is a dict, not " + py_type_name(desc));
  nb::dict cai = nb::borrow<nb::dict>(desc);
  auto key = [&](const char* k) -> nb::object {
    if (!cai.contains(k)) throw rs::invalid_argument(std::string(cai_name) + " has no '" + k + "'");
    return cai[k];
  };
  py_array r;
  r.shape = shape_of(key("shape"));
  // typestr: a byte order (< little, | not applicable, = native) then f, i or u and the bytes.
  const nb::object ts_obj = key("typestr");
  const std::string ts = PyUnicode_Check(ts_obj.ptr()) ? nb::cast<std::string>(ts_obj) : std::string();
  if (!ts.empty() && ts[0] == '>')
    throw rs::invalid_argument(std::string(cai_name) + ": big-endian data is not supported");
  const bool well_formed = ts.size() >= 3 && ts.size() <= 4 && (ts[0] == '<' || ts[0] == '|' || ts[0] == '=') &&
                           std::string("fiu").find(ts[1]) != std::string::npos &&
                           ts.find_first_not_of("0123456789", 2) == std::string::npos;
  if (!well_formed)
    throw rs::invalid_argument(std::string(cai_name) + ": typestr " + nb::cast<std::string>(nb::repr(ts_obj)) +
                               " is not one resident reads (such as '<f4')");
  const int bytes = std::atoi(ts.c_str() + 2);
  r.dtype = DLDataType{static_cast<std::uint8_t>(ts[1] == 'f' ? kDLFloat : ts[1] == 'i' ? kDLInt : kDLUInt),
                       static_cast<std::uint8_t>(8 * bytes), 1};
  visit(r.dtype, [](auto) {});
  if (cai.contains("mask") && !cai["mask"].is_none())
    throw rs::invalid_argument(std::string(cai_name) + ": a masked array; resident uses every element (fill the masked "
                               "ones and pass the data alone)");
  std::vector<std::int64_t> strides;
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    nb::object st = cai["strides"];
    if (!(PyTuple_Check(st.ptr()) || PyList_Check(st.ptr())) || std::size_t(PySequence_Size(st.ptr())) != r.shape.size())
      throw rs::invalid_argument(std::string(cai_name) + ": strides " + nb::cast<std::string>(nb::repr(st)) +
                                 " is not a tuple of one int per dimension of the shape");
    for (nb::handle e : nb::borrow<nb::sequence>(st)) {
      std::int64_t v = 0;
      if (!PyLong_Check(e.ptr()) || !nb::try_cast(e, v, false) || v % bytes != 0)
        throw rs::invalid_argument(std::string(cai_name) + ": strides " + nb::cast<std::string>(nb::repr(st)) +
                                   " are not whole elements");
      strides.push_back(v / bytes);
    }
  }
  const nb::object data = key("data");
  std::uintptr_t ptr = 0;
  if (!PyTuple_Check(data.ptr()) || PyTuple_GET_SIZE(data.ptr()) != 2 ||
      !nb::try_cast(nb::handle(PyTuple_GET_ITEM(data.ptr(), 0)), ptr, false))
    throw rs::invalid_argument(std::string(cai_name) + ": data is a tuple (pointer, read_only), not " +
                               nb::cast<std::string>(nb::repr(data)));
  r.readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data.ptr(), 1)) == 1;
  // The device that holds the pointer: the CUDA runtime knows it (an empty array's is the default).
  const int dev_index = ptr ? rs::detail::cuda::pointer_device(reinterpret_cast<void*>(ptr)) : 0;
  if (dev_index < 0)
    throw rs::invalid_argument(std::string(cai_name) + ": the pointer is not device memory of a CUDA device here");
  const rs::device dev = rs::device::cuda(dev_index);
  DLTensor t{};
  t.data = reinterpret_cast<void*>(ptr);
  t.device = rs::dlpack_device(dev);
  t.ndim = static_cast<std::int32_t>(r.shape.size());
  t.dtype = r.dtype;
  t.shape = r.shape.data();
  t.strides = strides.empty() ? nullptr : strides.data();
  r.data = usable(t).second;
  r.stream = rs::default_stream(dev);
  if (cai.contains("stream") && !cai["stream"].is_none()) {
    const std::intptr_t h = stream_handle(cai["stream"], cai_name);
    if (h == 0) throw rs::invalid_argument(std::string(cai_name) + ": stream 0 is not allowed (version 3)");
    r.stream.wait_for(rs::stream_ref(r.stream.device(), native_of(h)));
  }
  nb::object keep = nb::borrow(obj);
  r.owner = std::shared_ptr<const void>(new nb::object(std::move(keep)), [](const void* p) {
    nb::gil_scoped_acquire locked;
    delete static_cast<const nb::object*>(p);
  });
  r.foreign = true;
  return r;
}

// Takes another library's array in place: its __dlpack__ (with the stream handshake), a DLPack
// capsule, or its __cuda_array_interface__. Resident's Arrays are returned as they are. What cannot be
// used as it is is refused before anything is taken: a refused capsule stays unconsumed.
py_array from_dlpack(nb::object obj) {
  if (nb::isinstance<py_array>(obj)) return nb::cast<py_array>(obj);
  if (PyCapsule_CheckExact(obj.ptr())) {
    const auto [t, readonly] = capsule_tensor(obj);
    usable(*t);
    nb::ndarray<nb::ro> nd;
    if (!nb::try_cast(obj, nd, false)) throw rs::invalid_argument("from_dlpack: nanobind could not take the capsule");
    return adopt(std::move(nd), readonly);
  }
  if (nb::hasattr(obj, "__dlpack__")) {
    // Called without a stream, the producer orders its work before the legacy default stream, which
    // is the stream resident works on for arrays it takes in. Asked for writable memory first, so that
    // memory its producer marks read-only is known as such.
    nb::ndarray<> rw;
    if (nb::try_cast(obj, rw, false)) return adopt(std::move(rw), false);
    nb::ndarray<nb::ro> ro;
    if (nb::try_cast(obj, ro, false)) return adopt(std::move(ro), true);
    throw rs::invalid_argument("from_dlpack: the __dlpack__ of a " + py_type_name(obj) +
                               " gave no tensor (its producer refused to export it, e.g. an object or structured dtype)");
  }
  if (nb::hasattr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj);
  throw rs::invalid_argument("from_dlpack: a " + py_type_name(obj) + " has neither __dlpack__ nor __cuda_array_interface__");
}

// ---- random fills and reductions on any array ---------------------------------------------------

// Calls f(a.ref<T>()) for a float32 or float64 array, the GIL released; any other type is refused
// with `what` named.
template <class F>
auto on_floats(const py_array& a, const char* what, F&& f) {
  using R = decltype(f(std::declval<rs::array_ref<float>>()));
  return visit(a.dtype, [&](auto t) -> R {
    using T = decltype(t);
    if constexpr (std::is_floating_point_v<T>) {
      nb::gil_scoped_release unlocked;
      return f(a.ref<T>());
    } else {
      throw rs::invalid_argument(std::string(what) + " takes float32 or float64 arrays, not " +
                                 rs::dlpack_dtype_name(a.dtype));
    }
  });
}

void fill_uniform(nb::object x, std::uint64_t seed, std::uint64_t offset, double low, double high) {
  py_array a = from_dlpack(x);
  a.check_writable("fill_uniform");
  on_floats(a, "fill_uniform", [&](auto r) {
    rs::py::fill_uniform(r, seed, offset, low, high);
    a.finish_foreign();
  });
}

void fill_normal(nb::object x, std::uint64_t seed, std::uint64_t offset, double mean, double sd) {
  py_array a = from_dlpack(x);
  a.check_writable("fill_normal");
  on_floats(a, "fill_normal", [&](auto r) {
    rs::py::fill_normal(r, seed, offset, mean, sd);
    a.finish_foreign();
  });
}

void fill_bits(nb::object x, std::uint64_t seed, std::uint64_t offset) {
  py_array a = from_dlpack(x);
  if (!(a.dtype.code == kDLUInt && a.dtype.bits == 32))
    throw rs::invalid_argument("fill_bits fills uint32 arrays, not " + rs::dlpack_dtype_name(a.dtype));
  a.check_writable("fill_bits");
  nb::gil_scoped_release unlocked;
  rs::py::fill_bits(a.ref<std::uint32_t>(), seed, offset);
  a.finish_foreign();
}

double reduce(nb::object x, rs::py::reduction r) {
  py_array a = from_dlpack(x);
  // An empty array has a sum (0) but no least or greatest element.
  if (a.size() == 0 && r != rs::py::reduction::sum)
    throw rs::invalid_argument(std::string(r == rs::py::reduction::min ? "min" : "max") +
                               " of an empty array: it has no elements");
  return visit(a.dtype, [&](auto t) {
    using T = decltype(t);
    nb::gil_scoped_release unlocked;
    return rs::py::reduce(a.ref<T>(), r);
  });
}

// ---- run-time programs -------------------------------------------------------------------------

// Refuses an output that shares memory with an input other than exactly (in place): element i of the
// output would overwrite an input element not read yet. `what` names the call.
void check_overlap(const py_array& in, const py_array& out, const char* what) {
  const auto* i0 = static_cast<const char*>(in.data);
  const auto* o0 = static_cast<const char*>(out.data);
  const std::size_t ib = in.size() * in.itemsize(), ob = out.size() * out.itemsize();
  if (ib == 0 || ob == 0 || (i0 == o0 && ib == ob)) return;
  if (std::less<>{}(i0, o0 + ob) && std::less<>{}(o0, i0 + ib))
    throw rs::invalid_argument(std::string(what) + ": the output overlaps an input without being the same memory; "
                               "write into separate memory or exactly in place");
}

// out = p(x) (out defaults to x: in place), as one kernel; float32 or float64.
nb::object run_program(const rs::program& p, nb::object x, nb::object out) {
  py_array a = from_dlpack(x);
  py_array o = out.is_none() ? a : from_dlpack(out);
  o.check_writable("program");
  check_overlap(a, o, "program");
  if (!(a.dtype.code == o.dtype.code && a.dtype.bits == o.dtype.bits))
    throw rs::invalid_argument("program: the input holds " + rs::dlpack_dtype_name(a.dtype) + ", the output " +
                               rs::dlpack_dtype_name(o.dtype));
  if (a.shape != o.shape && a.size() != o.size())
    throw rs::shape_mismatch("program: the input has " + std::to_string(a.size()) + " elements, the output " +
                             std::to_string(o.size()));
  on_floats(a, "a program", [&](auto r) {
    using T = typename decltype(r)::value_type;
    rs::run(p, r, o.ref<T>());
    o.finish_foreign();
  });
  return out.is_none() ? x : out;
}

double sum_program(const rs::program& p, nb::object x) {
  py_array a = from_dlpack(x);
  return on_floats(a, "a program", [&](auto r) { return double(rs::run_sum(p, r)); });
}

// ---- run-time stages (resident.jit) ----------------------------------------------------------------

rs::jit::operand operand_of(const py_array& a) {
  return visit(a.dtype, [&](auto t) { return rs::jit::operand_of(a.ref<decltype(t)>()); });
}

rs::jit::element element_named(const std::string& dtype) {
  return visit(parse_dtype(dtype), [](auto t) { return rs::jit::element_of<decltype(t)>(); });
}

// (kind, cc major, cc minor) of the device x lives on: what resident.jit compiles Python stages for.
nb::tuple jit_target(nb::object x) {
  py_array a = from_dlpack(x);
  const rs::device d = a.device();
  if (d.is_cpu()) return nb::make_tuple("cpu", 0, 0);
  const auto p = rs::properties(d);
  return nb::make_tuple("cuda", p.cc_major, p.cc_minor);
}

// out = chain(inputs...), or in place into inputs[0] (a generator chain writes into out alone).
void jit_run(const rs::jit::pipeline& p, nb::list inputs, nb::object out) {
  std::vector<py_array> in;
  for (nb::handle h : inputs) in.push_back(from_dlpack(nb::borrow<nb::object>(h)));
  if (in.empty() && out.is_none()) throw rs::invalid_argument("a run-time chain needs an input or an output array");
  const py_array o = out.is_none() ? in.at(0) : from_dlpack(out);
  o.check_writable("a run-time chain");
  for (const py_array& a : in) check_overlap(a, o, "a run-time chain");
  rs::jit::inputs ops;
  for (const auto& a : in) ops.arrays.push_back(operand_of(a));
  const rs::jit::operand oo = operand_of(o);
  {
    nb::gil_scoped_release unlocked;
    visit(o.dtype, [&](auto t) {
      using T = decltype(t);
      rs::array_ref<T> r{static_cast<T*>(const_cast<void*>(oo.data)), oo.size, oo.stream};
      if (ops.arrays.empty()) p(r);
      else p(ops, r);
    });
  }
  o.finish_foreign();
}

// The chain's reduction over inputs (or over n values of its generator on device), as a Python number.
nb::object jit_result(const rs::jit::pipeline& p, nb::list inputs, const std::string& dtype, std::size_t n,
                      const std::string& device) {
  std::vector<py_array> in;
  for (nb::handle h : inputs) in.push_back(from_dlpack(nb::borrow<nb::object>(h)));
  rs::jit::inputs ops;
  for (const auto& a : in) ops.arrays.push_back(operand_of(a));
  const rs::device d = rs::parse_device(device);
  return visit(parse_dtype(dtype), [&](auto t) -> nb::object {
    using T = decltype(t);
    T r;
    {
      nb::gil_scoped_release unlocked;
      r = ops.arrays.empty() ? p.template result<T>(n, d) : p.template result<T>(ops);
    }
    return nb::cast(r);
  });
}

// ---- matmul -------------------------------------------------------------------------------------

// out = alpha * a @ b + beta * out for 2-D C-contiguous float32 / float64 arrays of any library on one
// device, by one of the ladder's algorithms; out is made (beta must then be 0) when not given.
nb::object matmul(nb::object a_obj, nb::object b_obj, nb::object out_obj, const std::string& algo_name, double alpha,
                  double beta) {
  const rs::matmul_algo algo = rs::parse_matmul_algo(algo_name);
  py_array a = from_dlpack(a_obj), b = from_dlpack(b_obj);
  for (const py_array* m : {&a, &b})
    if (m->shape.size() != 2)
      throw rs::shape_mismatch("matmul takes 2-D arrays, got one of " + std::to_string(m->shape.size()) + " dimensions");
  if (!(a.dtype.code == b.dtype.code && a.dtype.bits == b.dtype.bits))
    throw rs::invalid_argument("matmul: A holds " + rs::dlpack_dtype_name(a.dtype) + ", B " + rs::dlpack_dtype_name(b.dtype));
  on_floats(a, "matmul", [](auto) {});
  if (out_obj.is_none()) {
    if (beta != 0) throw rs::invalid_argument("matmul: beta is not 0 but there is no out array to scale");
    out_obj = nb::cast(empty_of({a.shape[0], b.shape[1]}, a.dtype, a.device()));
  }
  py_array c = from_dlpack(out_obj);
  c.check_writable("matmul");
  if (c.shape.size() != 2)
    throw rs::shape_mismatch("matmul takes 2-D arrays, got an out array of " + std::to_string(c.shape.size()) +
                             " dimensions");
  if (!(c.dtype.code == a.dtype.code && c.dtype.bits == a.dtype.bits))
    throw rs::invalid_argument("matmul: A holds " + rs::dlpack_dtype_name(a.dtype) + ", out " + rs::dlpack_dtype_name(c.dtype));
  const auto ext = [](const py_array& m, int i) { return std::size_t(m.shape[std::size_t(i)]); };
  rs::detail::check_matmul(ext(a, 0), ext(a, 1), ext(b, 0), ext(b, 1), ext(c, 0), ext(c, 1), a.data,
                           a.size() * a.itemsize(), b.data, b.size() * b.itemsize(), c.data, c.size() * c.itemsize(),
                           a.device(), b.device(), c.device());
  {
    nb::gil_scoped_release unlocked;
    rs::detail::matmul({ext(a, 0), ext(b, 1), ext(a, 1), a.data, b.data, c.data, ext(a, 1), ext(b, 1), ext(c, 1),
                        alpha, beta, a.itemsize(), c.work_stream()},
                       algo);
    c.finish_foreign();
  }
  return out_obj;
}

// ---- flows and graphs of Python work ------------------------------------------------------------

// A captured graph and what its work needs alive: the Python callables (inside the work, which a CPU
// replay calls again) and the arrays the stages declared. Replays run on the device's default stream,
// where arrays' own work runs: ordered after the work queued there before the replay and before the
// work queued after it, with no event between streams.
struct py_graph {
  rs::graph g;
  rs::stream_ref stream;                      // the default stream of the graph's device
  std::shared_ptr<const void> stream_owner;   // the flow or stream the work was captured on
  std::vector<std::shared_ptr<const void>> keep;

  // Asynchronous on CUDA (the GIL is released around the launch, which may wait for room in the
  // launch queue); on the CPU the captured Python work runs inside (it takes the GIL back: see python_work).
  void replay() {
    nb::gil_scoped_release unlocked;
    g.replay(stream);
  }
};

// Calls a Python stage with the GIL held and resident's work on s. Python errors propagate as
// nb::python_error (a flow wraps them into its stage_error).
std::function<void(rs::stream_ref)> python_work(nb::object fn) {
  auto held = std::shared_ptr<nb::object>(new nb::object(std::move(fn)), [](nb::object* p) {
    nb::gil_scoped_acquire locked;
    delete p;
  });
  return [held](rs::stream_ref s) {
    nb::gil_scoped_acquire locked;
    stage_stream_scope scope(s);
    (*held)();
  };
}

struct py_flow {
  std::shared_ptr<rs::flow> f;  // shared with the graphs captured from it, which replay on its stream
  std::vector<std::shared_ptr<const void>> keep;

  py_flow(const std::optional<std::string>& dev, int streams) : f(std::make_shared<rs::flow>(pick(dev), streams)) {}

  std::size_t add(const std::string& name, nb::object work, const std::vector<nb::object>& reads,
                  const std::vector<nb::object>& writes, const std::vector<std::size_t>& after, bool infer) {
    if (!PyCallable_Check(work.ptr()))
      throw rs::invalid_argument("Flow.add: the work of stage '" + name + "' is not callable");
    rs::access acc;
    auto declare = [&](const std::vector<nb::object>& arrays, bool write) {
      for (const nb::object& o : arrays) {
        py_array a = from_dlpack(o);
        if (!(a.device() == f->stream().device()))
          throw rs::device_mismatch("Flow.add: stage '" + name + "' declares an array on " + a.device().name() +
                                    "; the flow runs on " + f->stream().device().name());
        const rs::access::range r{a.data, a.size() * a.itemsize()};
        write ? acc.writes(r) : acc.reads(r);
        keep.push_back(a.owner);
      }
    };
    for (const nb::object& o : writes) from_dlpack(o).check_writable("Flow.add: stage '" + name + "'");
    declare(reads, false);
    declare(writes, true);
    auto stage = python_work(std::move(work));
    // Without the GIL: the flow waits for a run on another thread, whose stages take the GIL.
    nb::gil_scoped_release unlocked;
    return f->add(name, std::move(stage), std::move(acc), after, infer ? rs::inference::on : rs::inference::off);
  }

  void run() {
    nb::gil_scoped_release unlocked;  // each stage takes the GIL back for its Python work
    f->run();
  }

  py_graph capture() {
    py_graph g;
    {
      nb::gil_scoped_release unlocked;
      g.g = f->capture();
    }
    g.stream = rs::default_stream(f->stream().device());
    g.stream_owner = f;
    g.keep = keep;
    return g;
  }

  nb::list report() const {
    std::vector<rs::stage_report> rows;
    {
      nb::gil_scoped_release unlocked;  // as in add: a run on another thread holds the flow
      rows = f->report();
    }
    nb::list l;
    for (const rs::stage_report& r : rows) {
      nb::dict d;
      d["name"] = r.name;
      d["stream"] = r.stream_index;
      d["ms"] = r.ms;
      d["kernels"] = r.issued.kernels;
      d["h2d_bytes"] = r.issued.h2d_bytes;
      d["d2h_bytes"] = r.issued.d2h_bytes;
      l.append(d);
    }
    return l;
  }
};

// The resident work fn() issues, captured on a stream of its own (CUDA: one graph; the CPU: fn itself).
py_graph capture(nb::object fn, const std::optional<std::string>& dev) {
  if (!PyCallable_Check(fn.ptr())) throw rs::invalid_argument("capture: the work is not callable");
  py_graph g;
  auto own = std::make_shared<rs::stream>(pick(dev));
  g.stream = rs::default_stream(own->device());
  g.stream_owner = own;
  auto work = python_work(std::move(fn));
  const rs::stream_ref s = own->ref();
  {
    nb::gil_scoped_release unlocked;
    s.wait_for(rs::default_stream(s.device()));  // after the work queued so far, as a flow starts
    g.g = rs::graph::capture(s, [work, s] { work(s); });
  }
  return g;
}

// ---- errors -------------------------------------------------------------------------------------

nb::dict& exception_types() {
  static nb::dict* d = new nb::dict();  // filled by the package's __init__; lives as long as the module
  return *d;
}

void raise(const char* name, const std::exception& e) {
  nb::dict& types = exception_types();
  nb::handle cls = types.contains(name) ? nb::handle(types[name]) : nb::handle(PyExc_RuntimeError);
  PyErr_SetString(cls.ptr(), e.what());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const rs::device_lost& e) { raise("DeviceLost", e);
  } catch (const rs::cuda_error& e) { raise("CudaError", e);
  } catch (const rs::library_error& e) { raise("LibraryError", e);
  } catch (const rs::out_of_memory& e) { raise("OutOfMemory", e);
  } catch (const rs::invalid_launch& e) { raise("InvalidLaunch", e);
  } catch (const rs::shape_mismatch& e) { raise("ShapeMismatch", e);
  } catch (const rs::device_mismatch& e) { raise("DeviceMismatch", e);
  } catch (const rs::flow_error& e) { raise("FlowError", e);
  } catch (const rs::jit::compile_error& e) { raise("CompileError", e);
  } catch (const rs::invalid_argument& e) { raise("InvalidArgument", e);
  } catch (const rs::device_unavailable& e) { raise("DeviceUnavailable", e);
  } catch (const rs::transfer_forbidden& e) { raise("TransferForbidden", e);
  } catch (const rs::stage_error& e) { raise("StageError", e);
  } catch (const rs::error& e) { raise("Error", e);
  }
}

// The Python line that called a binding, as the call site of the calls it makes (the profile's rows,
// the transfer log's lines) in place of this file's, while a profile collects or the transfer policy
// is not allow (nothing otherwise: a call pays one relaxed load and a policy read). Frames of the
// resident package itself (resident.jit's wrappers) are skipped to the user's.
struct python_site {
  std::optional<rs::detail::foreign_site> site;
  python_site() noexcept {
    try {
      // The policy read throws for a bad RESIDENT_TRANSFER_POLICY: the call itself reports that.
      if (!rs::profiling() && rs::current_transfer_policy() == rs::transfer_policy::allow) return;
      static const std::string package = [] {
        std::string f = nb::cast<std::string>(nb::module_::import_("resident").attr("__file__"));
        return f.substr(0, f.find_last_of("/\\") + 1);
      }();
      PyFrameObject* f = PyEval_GetFrame();
      nb::object frame = f ? nb::borrow<nb::object>(reinterpret_cast<PyObject*>(f)) : nb::none();
      while (!frame.is_none()) {
        auto file = nb::cast<std::string>(frame.attr("f_code").attr("co_filename"));
        if (file.rfind(package, 0) != 0) {
          site.emplace(std::move(file), nb::cast<unsigned>(frame.attr("f_lineno")));
          return;
        }
        frame = frame.attr("f_back");
      }
    } catch (...) {
      // no site rather than a failed call
    }
  }
};
using at_python_line = nb::call_guard<python_site>;

struct scoped_policy {
  std::unique_ptr<rs::scoped_transfer_policy> scope;
  void close() { scope.reset(); }
};

rs::transfer_policy parse_policy(const std::string& p) {
  if (p == "allow") return rs::transfer_policy::allow;
  if (p == "log") return rs::transfer_policy::log;
  if (p == "forbid") return rs::transfer_policy::forbid;
  throw rs::invalid_argument("unknown transfer policy '" + p + "': use allow, log or forbid");
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "resident's compiled core; use the resident package";
  nb::register_exception_translator(translate);
  m.def("_set_exception_types", [](nb::dict d) { exception_types().update(d); });

  // dynamic_attr: an Array keeps what is made for it once (resident.to_numba's view) in its __dict__.
  nb::class_<py_array>(m, "Array", nb::dynamic_attr(),
                       "A C-contiguous array on one device (resident's own memory or another library's, taken in "
                       "place). Shares memory through __dlpack__ and __cuda_array_interface__.")
      .def_prop_ro("shape", [](const py_array& a) {
        nb::list l;
        for (auto e : a.shape) l.append(e);
        return nb::tuple(l);
      })
      .def_prop_ro("dtype", [](const py_array& a) { return rs::dlpack_dtype_name(a.dtype); })
      .def_prop_ro("size", &py_array::size)
      .def_prop_ro("nbytes", [](const py_array& a) { return a.size() * a.itemsize(); })
      .def_prop_ro("device", [](const py_array& a) { return a.device().name(); })
      .def_prop_ro("data_ptr", [](const py_array& a) { return reinterpret_cast<std::uintptr_t>(a.data); })
      .def_prop_ro("stream", [](const py_array& a) { return handle_of(a.stream.native()); },
                   "the stream handle work on the array is ordered on (1 = the legacy default stream)")
      .def("__len__", [](const py_array& a) {
        if (a.shape.empty()) throw nb::type_error("len() of a 0-d array");
        return a.shape[0];
      })
      .def("__repr__", [](const py_array& a) {
        std::string s = "resident.Array(shape=(";
        for (std::size_t i = 0; i < a.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(a.shape[i]);
        if (a.shape.size() == 1) s += ",";
        return s + "), dtype=" + rs::dlpack_dtype_name(a.dtype) + ", device=" + a.device().name() + ")";
      })
      .def("to_host", &to_host, at_python_line(), "Copies the array into a new NumPy array (one counted transfer). Synchronizes.")
      .def("__dlpack__", &dlpack_export, nb::kw_only(), nb::arg("stream") = nb::none(),
           nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none())
      .def("__dlpack_device__", &dlpack_device)
      .def_prop_ro("__cuda_array_interface__", &cuda_array_interface);

  m.def("empty", &empty, at_python_line(), nb::arg("shape").none(), nb::arg("dtype") = "float32", nb::arg("device") = nb::none(),
        "A new uninitialized array from the device's pool.");
  m.def("to_device", &to_device, at_python_line(), nb::arg("host"), nb::arg("device") = nb::none(),
        "Copies a host (NumPy) array into a new array on the device: one counted transfer.");
  m.def("_ready_for_any_stream", [](const py_array& a) { ready_for_any_stream(a); }, nb::arg("x"));
  m.def("from_dlpack", &from_dlpack, nb::arg("obj"),
        "Takes another library's array in place (DLPack or the CUDA Array Interface): no copy.");
  m.def("default_device", [] { return rs::default_device().name(); });
  m.def("cuda_device_count", [] { return rs::cuda_device_count(); });
  m.def("cuda_unavailable_reason", [] { return rs::cuda_unavailable_reason(); });
  m.def("synchronize", [](const std::optional<std::string>& d) {
    nb::gil_scoped_release unlocked;
    rs::synchronize(pick(d));
  }, nb::arg("device") = nb::none());
  m.def("_ledger_json", [] { return rs::ledger().json(); });

  nb::class_<scoped_policy>(m, "_ScopedPolicy").def("close", &scoped_policy::close);
  m.def("_open_policy", [](const std::string& p) {
    return scoped_policy{std::make_unique<rs::scoped_transfer_policy>(parse_policy(p))};
  });
  m.def("_current_policy", [] {
    switch (rs::current_transfer_policy()) {
      case rs::transfer_policy::allow: return "allow";
      case rs::transfer_policy::log: return "log";
      case rs::transfer_policy::forbid: return "forbid";
    }
    return "allow";
  });

  nb::class_<rs::op>(m, "op", "One built-in element-wise operation; compose them with | into a program.")
      .def_static("add", &rs::op::add, nb::arg("c"), "v + c")
      .def_static("mul", &rs::op::mul, nb::arg("c"), "v * c")
      .def_static("affine", &rs::op::affine, nb::arg("a"), nb::arg("b"), "a * v + b")
      .def_static("square", &rs::op::square, "v * v")
      .def_static("sqrt", &rs::op::sqrt, "sqrt(v)")
      .def_static("rsqrt", &rs::op::rsqrt, "1 / sqrt(v)")
      .def_static("exp", &rs::op::exp, "e^v")
      .def_static("log", &rs::op::log, "ln(v)")
      .def_static("sin", &rs::op::sin, "sin(v)")
      .def_static("cos", &rs::op::cos, "cos(v)")
      .def_static("tanh", &rs::op::tanh, "tanh(v)")
      .def_static("abs", &rs::op::abs, "|v|")
      .def_static("neg", &rs::op::neg, "-v")
      .def_static("recip", &rs::op::recip, "1 / v")
      .def_static("minimum", &rs::op::minimum, nb::arg("c"), "min(v, c)")
      .def_static("maximum", &rs::op::maximum, nb::arg("c"), "max(v, c)")
      .def_static("pow", &rs::op::pow, nb::arg("c"), "v ** c")
      .def_static("parse", &rs::op::parse, nb::arg("text"), "An operation from its name: 'sqrt', 'add(1)', 'affine(1.5, 0.5)'.")
      .def_prop_ro("name", &rs::op::name)
      .def("__repr__", [](const rs::op& o) { return "resident.op." + o.name(); })
      .def("__or__", [](const rs::op& a, const rs::op& b) { return rs::program{} | a | b; })
      .def("__or__", [](const rs::op& a, const rs::program& q) { return (rs::program{} | a) | q; })
      .def("__call__", [](const rs::op& o, nb::object x, nb::object out) { return run_program(rs::program{} | o, x, out); },
           at_python_line(), nb::arg("x"), nb::arg("out") = nb::none());

  nb::class_<rs::program>(m, "program",
                          "A chain of built-in operations run as ONE fused kernel: p(x) in place, p(x, out), p.sum(x).")
      .def(nb::init<>())
      .def("__init__", [](rs::program* self, const std::vector<rs::op>& ops) { new (self) rs::program(ops); },
           nb::arg("ops"))
      .def("__or__", [](const rs::program& p, const rs::op& o) { return p | o; })
      .def("__or__", [](const rs::program& p, const rs::program& q) { return p | q; })
      .def_prop_ro("ops", &rs::program::ops)
      .def_prop_ro("name", &rs::program::name)
      .def("__repr__", [](const rs::program& p) { return "resident.program(" + p.name() + ")"; })
      .def("__len__", [](const rs::program& p) { return p.ops().size(); })
      .def("__call__", &run_program, at_python_line(), nb::arg("x"), nb::arg("out") = nb::none(),
           "out = p(x) as one kernel (out defaults to x: in place); float32 or float64 arrays of any library.")
      .def("sum", &sum_program, at_python_line(), nb::arg("x"), "The sum of p(x[i]) in one pass, in x's precision. Synchronizes.");

  nb::class_<rs::jit::pipeline>(m, "_JitPipeline", "A run-time chain (resident.jit builds it).")
      .def("__or__", [](const rs::jit::pipeline& a, const rs::jit::pipeline& b) { return a | b; })
      .def_prop_ro("name", &rs::jit::pipeline::name)
      .def_prop_ro("result_dtype", [](const rs::jit::pipeline& p) -> nb::object {
        // The type the chain's last stage (or its generator) makes; None when it has neither.
        static const char* names[] = {"float32", "float64", "int32", "uint32", "int64", "uint64"};
        for (auto it = p.parts().rbegin(); it != p.parts().rend(); ++it)
          if (it->what == rs::jit::detail::part::kind::map || it->what == rs::jit::detail::part::kind::uniform ||
              it->what == rs::jit::detail::part::kind::normal)
            return nb::str(names[int(it->result)]);
        return nb::none();
      })
      .def("kernel_source", [](const rs::jit::pipeline& p, const std::vector<std::string>& in, const std::string& out,
                               const std::string& device) {
             std::vector<rs::jit::element> e;
             for (const auto& t : in) e.push_back(element_named(t));
             return p.kernel_source(e, element_named(out), rs::parse_device(device));
           }, nb::arg("inputs"), nb::arg("out"), nb::arg("device"))
      .def("run", &jit_run, at_python_line(), nb::arg("inputs"), nb::arg("out").none())
      .def("result", &jit_result, at_python_line(), nb::arg("inputs"), nb::arg("dtype"), nb::arg("n") = 0, nb::arg("device") = "cpu");
  m.def("_jit_map", [](const std::string& src, const std::string& name) { return rs::jit::map(src, name); });
  m.def("_jit_external", [](const std::string& name, const std::vector<std::string>& params, const std::string& result,
                            nb::bytes ltoir, std::uintptr_t host_function) {
    std::vector<rs::jit::element> e;
    for (const auto& t : params) e.push_back(element_named(t));
    return rs::jit::external(name, e, element_named(result), std::string(ltoir.c_str(), ltoir.size()),
                             reinterpret_cast<const void*>(host_function));
  });
  m.def("_jit_external_reduce", [](const std::string& name, const std::string& dtype, double init, nb::bytes ltoir,
                                   std::uintptr_t host_function) {
    return rs::jit::external_reduce(name, element_named(dtype), init, std::string(ltoir.c_str(), ltoir.size()),
                                    reinterpret_cast<const void*>(host_function));
  });
  m.def("_jit_sum", [] { return rs::jit::sum(); });
  m.def("_jit_min", [] { return rs::jit::min(); });
  m.def("_jit_max", [] { return rs::jit::max(); });
  m.def("_jit_reduce", [](const std::string& src, double init, const std::string& name) { return rs::jit::reduce(src, init, name); });
  m.def("_jit_uniform", [](const std::string& dtype, std::uint64_t seed, std::uint64_t offset, double low, double high) {
    // The bounds as given, checked before they become floats (jit::detail::generator).
    return rs::jit::detail::generator(rs::jit::detail::part::kind::uniform,
                                      dtype == "float32" ? rs::jit::element::f32 : rs::jit::element::f64, seed,
                                      offset, low, high);
  });
  m.def("_jit_normal", [](const std::string& dtype, std::uint64_t seed, std::uint64_t offset, double mean, double sd) {
    return dtype == "float32" ? rs::jit::normal<float>(seed, offset, float(mean), float(sd))
                              : rs::jit::normal<double>(seed, offset, mean, sd);
  });
  m.def("_jit_target", &jit_target, nb::arg("x"));
  m.def("_jit_stats", [] {
    const auto s = rs::jit::stats();
    return nb::make_tuple(s.compiled, s.disk_loads, s.memory_hits, s.rejected);
  });

  m.def("_time_cpp_calls", [](const rs::program& p, nb::object x, int calls) {
    // The same call made from C++ in a loop: wall time per call, the queue drained at the end.
    py_array a = from_dlpack(x);
    if (!(a.dtype.code == kDLFloat && a.dtype.bits == 32)) throw rs::invalid_argument("_time_cpp_calls takes float32");
    nb::gil_scoped_release unlocked;
    auto r = a.ref<float>();
    rs::run(p, r, r);
    a.stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) rs::run(p, r, r);
    a.stream.synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  }, nb::arg("program"), nb::arg("x"), nb::arg("calls"));

  m.def("_time_cpp_replays", [](const py_graph& g, int calls) {
    // The same replays made from C++ in a loop: wall time per replay, the queue drained at the end.
    nb::gil_scoped_release unlocked;
    g.g.replay(g.stream);
    g.stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) g.g.replay(g.stream);
    g.stream.synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  }, nb::arg("graph"), nb::arg("calls"));

  m.def("matmul", &matmul, at_python_line(), nb::arg("a"), nb::arg("b"), nb::arg("out") = nb::none(), nb::arg("algo") = "auto",
        nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
        "out = alpha * a @ b + beta * out (2-D float32 / float64 arrays of any library, one device) by one of the "
        "ladder's algorithms: auto, naive, blocked, shared, tuned, vendor, vendor_tf32. Asynchronous on "
        "out's stream for resident's arrays; finished before returning for other libraries' arrays.");

  m.def("fill_uniform", &fill_uniform, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("offset") = 0, nb::arg("low") = 0.0,
        nb::arg("high") = 1.0);
  m.def("fill_normal", &fill_normal, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("offset") = 0, nb::arg("mean") = 0.0,
        nb::arg("sd") = 1.0);
  m.def("fill_bits", &fill_bits, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("offset") = 0);
  m.def("sum", [](nb::object x) { return reduce(x, rs::py::reduction::sum); }, at_python_line(), nb::arg("x"));
  m.def("min", [](nb::object x) { return reduce(x, rs::py::reduction::min); }, at_python_line(), nb::arg("x"));
  m.def("max", [](nb::object x) { return reduce(x, rs::py::reduction::max); }, at_python_line(), nb::arg("x"));

  nb::class_<py_graph>(m, "Graph", "Captured resident work: replay() runs it again as one launch (CUDA).")
      .def("replay", &py_graph::replay,
           "Runs the captured work again, asynchronously, on the device's default stream (where arrays' own "
           "work runs): after the work queued before it, and later work sees its results.")
      .def_prop_ro("kernels", [](const py_graph& g) { return g.g.kernels(); }, "Kernels one replay launches.");
  nb::class_<py_flow>(m, "Flow", "Named stages of Python work with dependencies, independent ones on concurrent "
                                 "streams; resident calls inside a stage run on the stage's stream.")
      .def(nb::init<const std::optional<std::string>&, int>(), nb::arg("device") = nb::none(), nb::arg("streams") = 4)
      .def("add", &py_flow::add, nb::arg("name"), nb::arg("work").none(), nb::arg("reads") = std::vector<nb::object>{},
           nb::arg("writes") = std::vector<nb::object>{}, nb::arg("after") = std::vector<std::size_t>{},
           nb::arg("infer") = true,
           "Adds a stage calling work() (no arguments); returns its id. Edges are inferred from the declared "
           "reads and writes (arrays of any library) in the order stages are added, plus `after`.")
      .def("run", &py_flow::run, "Runs every stage in dependency order and waits for them.")
      .def("capture", &py_flow::capture, "The whole flow as one Graph (nothing runs during the capture).")
      .def("report", &py_flow::report, "The last run's per-stage figures: name, stream, ms, kernels, bytes.")
      .def("__len__", [](const py_flow& f) { return f.f->size(); });
  m.def("capture", &capture, nb::arg("work").none(), nb::arg("device") = nb::none(),
        "The resident work that work() issues, captured into a Graph on a stream of its own (nothing runs "
        "during the capture on CUDA; on the CPU a replay calls work() again).");
  resident::py::bind_streaming(m);
  resident::py::bind_profile(m);
  resident::py::bind_dist(m);
}
