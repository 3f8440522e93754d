// Taking another library's array in place: a DLPack capsule (given bare or by a producer's __dlpack__),
// the CUDA Array Interface, host memory through the buffer protocol or NumPy's array interface. Every
// path ends in one check of the tensor (usable), made before anything reads its shape, strides or
// memory, so that a malformed tensor is the same typed refusal whichever way it came.
#include "bindings.hpp"

#include <algorithm>
#include <cstdio>

#include "resident/detail/cuda_runtime.hpp"

namespace resident::py {

namespace {

// The call taking an array in, for messages: the running call's name, else from_dlpack.
std::string call_name() { return t_call_stream && *t_call_stream->what ? t_call_stream->what : "from_dlpack"; }

constexpr const char* computed_types = "float32, float64, int32, int64, uint32 or uint64";

void check_element_type(DLDataType t) {
  try {
    visit(t, [](auto) {});
  } catch (const rs::invalid_argument&) {  // an element type resident has no arrays of: a type error
    throw rs::invalid_type(call_name() + ": element type " + rs::dlpack_dtype_name(t) + " is not supported: "
                           "resident computes on " + computed_types + "; convert it first, e.g. "
                           "x.astype(np.float32)");
  }
}

// What usable found: the device, the first element, and whether resident can work on the memory in
// place (C-contiguous and aligned) or a reader must copy it first.
struct checked_tensor {
  rs::device dev;
  void* first = nullptr;
  bool in_place = true;
};

// The one check of a tensor taken in. Its rank, shape, element type and device, and that every byte
// its extents and strides reach (either way from the first element) is addressable without wrapping
// around: no process has more than 2^56 bytes of address space, so an offset or a reach past that
// names no memory. The pointer itself is not bounded (its top byte may carry a tag: aarch64 TBI, MTE).
// any_layout: a strided or misaligned tensor passes (to_device copies it), with in_place false.
checked_tensor check_tensor(const DLTensor& t, bool any_layout) {
  const std::string call = call_name();
  if (t.ndim > most_dims)  // before its shape is read: an array of resident's has at most most_dims
    throw rs::invalid_argument(call + ": a tensor of " + std::to_string(t.ndim) + " dimensions; resident's arrays "
                               "have at most " + std::to_string(most_dims) + " (reshape it first)");
  const std::string malformed = "; its producer describes no array resident can read (a malformed DLPack tensor "
                                "or array interface): give a well-formed array, e.g. a NumPy array";
  if (t.ndim < 0)
    throw rs::invalid_argument(call + ": a tensor of " + std::to_string(t.ndim) + " dimensions" + malformed);
  if (t.ndim > 0 && !t.shape)
    throw rs::invalid_argument(call + ": a tensor of " + std::to_string(t.ndim) + " dimensions without a shape" +
                               malformed);
  check_element_type(t.dtype);
  checked_tensor r;
  try {
    r.dev = rs::device_of(t.device);
  } catch (const rs::invalid_argument& e) {
    throw rs::invalid_argument(call + ": " + e.what());
  }
  rs::require(r.dev);
  const std::uint64_t elem = t.dtype.bits / 8u;
  constexpr std::uint64_t span = sizeof(void*) == 8 ? std::uint64_t(1) << 56 : std::uint64_t(UINTPTR_MAX);
  const auto unaddressable = [&](const std::string& what) {
    return rs::invalid_argument(call + ": the tensor's " + what + " reach past any address a process can use" +
                                malformed);
  };
  std::uint64_t n = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const std::int64_t e = t.shape[i];
    if (e < 0)
      throw rs::invalid_argument(call + ": the tensor has extent " + std::to_string(e) + " in dimension " +
                                 std::to_string(i) + malformed);
    if (e != 0 && n > std::uint64_t(std::numeric_limits<std::int64_t>::max()) / std::uint64_t(e))
      throw unaddressable("extents (their element count overflows)");
    n *= std::uint64_t(e);
  }
  if (n == 0) return r;  // no element is read: its strides and pointer do not matter
  std::uint64_t up = 0, down = 0;  // elements: the furthest the strides reach each way from the first
  std::int64_t expect = 1;         // the C-contiguous stride of the dimension
  bool contiguous = true;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const std::int64_t e = t.shape[i], s = t.strides ? t.strides[i] : expect;
    if (e != 1 && s != expect) contiguous = false;  // extent 1 may carry any stride (as PyTorch makes them)
    if (e > 1) {
      const std::uint64_t mag = s < 0 ? 0 - std::uint64_t(s) : std::uint64_t(s), steps = std::uint64_t(e - 1);
      std::uint64_t& way = s < 0 ? down : up;
      if (mag != 0 && steps > span / elem / mag) throw unaddressable("strides");
      way += mag * steps;
      if (way > span / elem) throw unaddressable("strides");
    }
    expect *= e;
  }
  if (!t.data)
    throw rs::invalid_argument(call + ": a tensor of " + std::to_string(n) + " elements with no data" + malformed);
  const std::uint64_t base = reinterpret_cast<std::uintptr_t>(t.data);
  // Each clause guards the next one's arithmetic: no sum below wraps.
  const bool reachable = t.byte_offset <= span && (up + 1) * elem <= span - t.byte_offset &&
                         t.byte_offset + (up + 1) * elem <= std::uint64_t(UINTPTR_MAX) - base &&
                         down * elem <= base + t.byte_offset;
  if (!reachable) {
    char at[32];
    std::snprintf(at, sizeof at, "%#llx", static_cast<unsigned long long>(base));
    throw unaddressable(std::string("data at ") + at + ", byte_offset " + std::to_string(t.byte_offset) + " and " +
                        std::to_string(n) + " elements of " + std::to_string(elem) + " bytes (at its strides)");
  }
  r.first = static_cast<char*>(t.data) + t.byte_offset;
  const bool aligned = reinterpret_cast<std::uintptr_t>(r.first) % elem == 0;
  r.in_place = contiguous && aligned;
  if (any_layout) return r;
  if (!contiguous)
    throw rs::invalid_argument(call + ": the array is strided (a view such as x[::2] or x.T); resident works on "
                               "C-contiguous memory in place: pass a contiguous copy (np.ascontiguousarray(x), "
                               "x.contiguous()) and copy the results back if they are to land in the view");
  if (!aligned)
    throw rs::invalid_argument(call + ": the array's first element is not aligned to " + std::to_string(elem) +
                               " bytes (a view at an odd byte offset); pass an aligned copy, e.g. x.copy()");
  return r;
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
constexpr std::uint64_t dlpack_is_copied = 2;  // DLPACK_FLAG_BITMASK_IS_COPIED: the producer made a copy

// The tensor of a capsule not consumed yet, whether its producer marked it read-only and whether it
// is a copy the producer made (written, it would be lost). @throws invalid_argument for a consumed
// capsule, one of another kind or of another DLPack major version.
struct capsule_view {
  const DLTensor* tensor;
  bool readonly, copy;
};
capsule_view capsule_tensor(nb::handle cap) {
  const char* name = PyCapsule_GetName(cap.ptr());
  const std::string n = name ? name : "";
  if (n == "used_dltensor" || n == "used_dltensor_versioned")
    throw rs::invalid_argument(call_name() + ": the DLPack capsule was consumed already (a capsule is taken once; ask "
                               "the producer's __dlpack__ for another)");
  void* p = n == "dltensor" || n == "dltensor_versioned" ? PyCapsule_GetPointer(cap.ptr(), name) : nullptr;
  if (!p) {
    PyErr_Clear();
    throw rs::invalid_argument(call_name() + ": a capsule named '" + n + "' is not a DLPack tensor");
  }
  if (n == "dltensor") return {&static_cast<DLManagedTensor*>(p)->dl_tensor, false, false};
  const auto* m = static_cast<managed_tensor_versioned*>(p);
  if (m->major != 1)  // another major version may lay its struct out otherwise: nothing past the version is read
    throw rs::invalid_argument(call_name() + ": a DLPack " + std::to_string(m->major) + "." + std::to_string(m->minor) +
                               " capsule; resident reads DLPack 1.x and unversioned capsules (ask the producer "
                               "for one: __dlpack__(max_version=(1, 0)))");
  return {&m->dl_tensor, (m->flags & dlpack_read_only) != 0, (m->flags & dlpack_is_copied) != 0};
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
  r.owner = std::shared_ptr<const void>(new ND(std::move(nd)), [](const void* p) { drop_python(static_cast<const ND*>(p)); });
  r.foreign = true;
  r.finish_before_return = true;
  r.readonly = readonly;
  return r;
}

}  // namespace

std::pair<rs::device, void*> usable(const DLTensor& t) {
  const checked_tensor c = check_tensor(t, false);
  return {c.dev, c.first};
}

namespace {

// An array given through the CUDA Array Interface (version 3): every key checked before use.
py_array from_cuda_array_interface(nb::handle obj) {
  const std::string cai_name = std::string(call_name()) + ": __cuda_array_interface__";
  nb::object desc = obj.attr("__cuda_array_interface__");
  if (!PyDict_Check(desc.ptr()))
    throw rs::invalid_argument(cai_name + " is a dict, not " + py_type_name(desc));
  nb::dict cai = nb::borrow<nb::dict>(desc);
  auto key = [&](const char* k) -> nb::object {
    if (!cai.contains(k)) throw rs::invalid_argument(cai_name + " has no '" + k + "'");
    return cai[k];
  };
  py_array r;
  r.shape = shape_of(key("shape"));
  // typestr: a byte order (< little, | not applicable, = native) then f, i or u and the bytes.
  const nb::object ts_obj = key("typestr");
  const std::string ts = PyUnicode_Check(ts_obj.ptr()) ? utf8_of(ts_obj) : std::string();
  if (!ts.empty() && ts[0] == '>')
    throw rs::invalid_argument(cai_name + ": big-endian data is not supported");
  const bool well_formed = ts.size() >= 3 && ts.size() <= 4 && (ts[0] == '<' || ts[0] == '|' || ts[0] == '=') &&
                           std::string("fiu").find(ts[1]) != std::string::npos &&
                           ts.find_first_not_of("0123456789", 2) == std::string::npos;
  if (!well_formed)
    throw rs::invalid_argument(cai_name + ": typestr " + shown(ts_obj) +
                               " is not one resident reads (such as '<f4')");
  const int bytes = std::atoi(ts.c_str() + 2);
  r.dtype = DLDataType{static_cast<std::uint8_t>(ts[1] == 'f' ? kDLFloat : ts[1] == 'i' ? kDLInt : kDLUInt),
                       static_cast<std::uint8_t>(8 * bytes), 1};
  check_element_type(r.dtype);  // before a stride is divided by its size
  if (cai.contains("mask") && !cai["mask"].is_none())
    throw rs::invalid_argument(cai_name + ": a masked array; resident uses every element (fill the masked "
                               "ones and pass the data alone)");
  std::vector<std::int64_t> strides;
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    nb::object st = cai["strides"];
    if (!(PyTuple_Check(st.ptr()) || PyList_Check(st.ptr())) || std::size_t(PySequence_Size(st.ptr())) != r.shape.size())
      throw rs::invalid_argument(cai_name + ": strides " + shown(st) +
                                 " is not a tuple of one int per dimension of the shape");
    for (nb::handle e : nb::borrow<nb::sequence>(st)) {
      std::int64_t v = 0;
      if (!PyLong_Check(e.ptr()) || !nb::try_cast(e, v, false) || v % bytes != 0)
        throw rs::invalid_argument(cai_name + ": strides " + shown(st) +
                                   " are not whole elements");
      strides.push_back(v / bytes);
    }
  }
  const nb::object data = key("data");
  std::uintptr_t ptr = 0;
  if (!PyTuple_Check(data.ptr()) || PyTuple_GET_SIZE(data.ptr()) != 2 ||
      !nb::try_cast(nb::handle(PyTuple_GET_ITEM(data.ptr(), 0)), ptr, false))
    throw rs::invalid_argument(cai_name + ": data is a tuple (pointer, read_only), not " +
                               shown(data));
  r.readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data.ptr(), 1)) == 1;
  // The device that holds the pointer: the CUDA runtime knows it (an empty array's is the default).
  const int dev_index = ptr ? rs::detail::cuda::pointer_device(reinterpret_cast<void*>(ptr)) : 0;
  if (dev_index < 0)
    throw rs::invalid_argument(cai_name + ": the pointer is not device memory of a CUDA device here");
  const rs::device dev = rs::device::cuda(dev_index);
  DLTensor t{};
  t.data = reinterpret_cast<void*>(ptr);
  t.device = rs::dlpack_device(dev);
  t.ndim = static_cast<std::int32_t>(r.shape.size());
  t.dtype = r.dtype;
  t.shape = r.shape.data();
  t.strides = strides.empty() ? nullptr : strides.data();
  r.data = usable(t).second;
  // Worked on the stream the call was given, else the library's current one (the legacy default stream
  // for a library resident does not know, whose work is then finished before returning).
  const std::optional<std::intptr_t> work = library_stream(obj, dev);
  r.stream = work ? rs::stream_ref(dev, native_of(*work)) : rs::default_stream(dev);
  r.finish_before_return = !work;
  if (cai.contains("stream") && !cai["stream"].is_none()) {
    const std::intptr_t h = stream_handle(cai["stream"], cai_name.c_str());
    if (h == 0) throw rs::invalid_argument(cai_name + ": stream 0 is not allowed (version 3)");
    r.stream.wait_for(rs::stream_ref(r.stream.device(), native_of(h)));
  }
  r.owner = python_owner(obj);
  r.foreign = true;
  return r;
}

// What obj.__dlpack__ gives, asked as a DLPack 1.x consumer asks (max_version=(1, 0)) and again without
// where the producer predates max_version (TypeError) or exports that way unversioned only (BufferError);
// `stream`: the handshake's stream, where one is given. What the producer raises goes on.
nb::object ask_dlpack(nb::handle obj, std::optional<std::intptr_t> stream) {
  nb::object call = obj.attr("__dlpack__");
  nb::kwargs kw;
  if (stream) kw["stream"] = *stream == 0 ? 1 : *stream;  // DLPack: 0 is not a CUDA stream; 1 the legacy default
  kw["max_version"] = nb::make_tuple(1, 0);
  try {
    return call(**kw);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError) && !e.matches(PyExc_BufferError)) throw;
  }
  PyDict_DelItemString(kw.ptr(), "max_version");
  return call(**kw);
}

py_array take_in(nb::object obj, bool any_layout);

// A capsule taken in: its name, version and tensor checked before nanobind (or anything) reads it, so
// that one refused stays unconsumed. any_layout (to_device, which copies): a strided or misaligned host
// tensor is read into a C-contiguous copy by NumPy, from the checked view.
py_array take_capsule(nb::handle cap, bool any_layout) {
  const auto [t, readonly, copy] = capsule_tensor(cap);
  const checked_tensor c = check_tensor(*t, any_layout);
  if (!c.in_place && !c.dev.is_cpu()) check_tensor(*t, false);  // a device's strided tensor: refused as such
  nb::ndarray<nb::ro> nd;
  if (!nb::try_cast(cap, nd, false)) throw rs::invalid_argument(call_name() + ": nanobind could not take the capsule");
  if (c.in_place) {
    py_array r = adopt(std::move(nd), readonly);
    r.producer_copy = copy;
    r.readonly = readonly || copy;  // the Python side reads _readonly before writing
    return r;
  }
  const nb::object view = nb::cast(nb::ndarray<nb::numpy, nb::ro>(nd));
  return take_in(nb::module_::import_("numpy").attr("array")(view, nb::arg("order") = "C"), false);
}

// The capsule a producer's __dlpack__ gave, taken as a bare one is.
py_array take_produced(nb::handle obj, const nb::object& cap, bool any_layout) {
  if (!PyCapsule_CheckExact(cap.ptr()))
    throw rs::invalid_type(call_name() + ": the __dlpack__ of a " + py_type_name(obj) + " returned a " +
                           py_type_name(cap) + ", not a DLPack capsule; give an array whose __dlpack__ follows the "
                           "DLPack protocol, or a NumPy array");
  return take_capsule(cap, any_layout);
}

// An object with __dlpack__, asked without a stream: its producer orders its work before the legacy
// default stream, which resident works on for arrays it takes in.
py_array take_exported(nb::handle obj, bool any_layout) {
  std::string said;
  nb::object cap;
  try {
    cap = ask_dlpack(obj, std::nullopt);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    said = "; it said: " + py_type_name(e.value()) + ": " + str_shown(e.value());
  }
  if (cap.is_valid()) return take_produced(obj, cap, any_layout);
  // Refused: memory it shares through the buffer protocol too is taken that way (a NumPy before 2.1
  // exports a read-only array so), read-only where the buffer is. A memoryview, so that nanobind reads
  // the buffer and never asks __dlpack__ again (a second answer would go unchecked).
  if (PyObject_CheckBuffer(obj.ptr())) {
    const nb::object mv = nb::steal(PyMemoryView_FromObject(obj.ptr()));
    if (!mv.is_valid()) {
      nb::python_error e;
      if (!e.matches(PyExc_Exception)) throw e;
    } else {
      nb::ndarray<> rw;
      if (nb::try_cast(mv, rw, false)) return adopt(std::move(rw), false);
      nb::ndarray<nb::ro> ro;
      if (nb::try_cast(mv, ro, false)) return adopt(std::move(ro), true);
    }
  }
  // The array's dtype, where it has one, names what was refused (float128, complex, object, '>f4').
  std::string dtype;
  if (PyObject* d = PyObject_GetAttrString(obj.ptr(), "dtype")) {
    if (PyObject* r = PyObject_Str(d)) {
      dtype = utf8_of(nb::handle(r));
      Py_DECREF(r);
    }
    Py_DECREF(d);
  }
  if (PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nb::python_error();
    PyErr_Clear();
  }
  // A dtype resident computes on ('float32', 'torch.float32'): the refusal was for another reason
  // (a tensor that requires grad, a device the producer cannot export), and its words say which.
  const std::string last = dtype.substr(dtype.rfind('.') + 1);
  if (dtype.empty() || last == "float32" || last == "float64" || last == "int32" || last == "int64" ||
      last == "uint32" || last == "uint64")
    throw rs::invalid_argument(call_name() + ": the __dlpack__ of a " + py_type_name(obj) +
                               (dtype.empty() ? "" : " of dtype " + dtype) +
                               " gave no tensor (its producer refused to export it)" + said);
  throw rs::invalid_type(call_name() + ": the __dlpack__ of a " + py_type_name(obj) + " of dtype " + dtype +
                         " gave no tensor (its producer refused to export it). resident computes on " +
                         computed_types + " in the machine's byte order: convert it, e.g. x.astype(np.float64), or "
                         "for bytes in the other order x.astype(x.dtype.newbyteorder('='))" + said);
}

// Host memory NumPy reads in place (the buffer protocol: memoryview, array.array, bytearray; or the
// array interface): NumPy's view of it, taken as NumPy's arrays are (the one check sees the view's
// pointer, extents and strides before anything reads them). Where NumPy's read is no view but an array
// made anew (a NumPy scalar such as np.float64(5.0) or arr[1]: one value, not memory), the array is
// read-only and says so: a call's results written there would be lost.
py_array take_numpy_view(nb::handle obj, bool any_layout) {
  nb::object view;
  try {
    view = nb::module_::import_("numpy").attr("asarray")(obj);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    throw rs::invalid_type(call_name() + ": NumPy could not read the " + py_type_name(obj) + " as an array (" +
                           py_type_name(e.value()) + ": " + str_shown(e.value()) + "); give a NumPy array of " +
                           computed_types);
  }
  const nb::object dt = view.attr("dtype");
  const std::string dtype = utf8_of(nb::str(nb::handle(dt)));  // a handle: nb::str of a temporary would not convert
  if (std::string(" float32 float64 int32 int64 uint32 uint64 ").find(" " + dtype + " ") == std::string::npos) {
    // A buffer NumPy cannot get (a released memoryview) reads as an object: the buffer's own error says why.
    Py_buffer b;
    if (PyObject_CheckBuffer(obj.ptr()) && PyObject_GetBuffer(obj.ptr(), &b, PyBUF_RECORDS_RO) != 0) {
      nb::python_error e;
      if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
      throw rs::invalid_type(call_name() + ": the buffer of a " + py_type_name(obj) + " cannot be read (" +
                             py_type_name(e.value()) + ": " + str_shown(e.value()) + "); give an array whose "
                             "memory is alive, e.g. a NumPy array");
    }
    std::string what = "a " + py_type_name(obj);
    if (PyObject_CheckBuffer(obj.ptr())) {
      what += " of buffer format '" + std::string(b.format ? b.format : "B") + "'";
      PyBuffer_Release(&b);
    }
    throw rs::invalid_type(call_name() + ": " + what + " (NumPy reads " + dtype + ") is not supported: resident "
                           "computes on " + computed_types + " in the machine's byte order; convert it first, e.g. "
                           "np.asarray(x, dtype=np.float64)");
  }
  if (!has_attr(view, "__dlpack__"))  // a NumPy without DLPack: nothing else reads it in place
    throw rs::invalid_type(call_name() + ": this NumPy exports no DLPack; use NumPy 1.23 or later");
  const int made = PyObject_IsTrue(view.attr("flags").attr("owndata").ptr());
  if (made < 0) throw nb::python_error();
  py_array r = take_in(std::move(view), any_layout);
  if (made) r.readonly = r.copied = true;
  return r;
}

// The array `obj` is, before the call's stream is applied; any_layout as take_capsule's.
py_array take_in(nb::object obj, bool any_layout) {
  if (nb::isinstance<py_array>(obj)) return nb::cast<py_array>(obj);
  if (std::optional<py_array> d = take_direct(obj)) return std::move(*d);  // PyTorch, CuPy on CUDA
  refuse_sharded(obj, call_name().c_str());
  refuse_masked(obj, call_name().c_str());
  if (PyCapsule_CheckExact(obj.ptr())) return take_capsule(obj, any_layout);
  const bool dlpack = has_attr(obj, "__dlpack__");
  if (dlpack && has_attr(obj, "__dlpack_device__")) {
    // A CUDA producer is asked for its memory ordered before the stream resident will work on: the
    // call's stream, else the producer library's current stream (PyTorch, CuPy, Numba), else the
    // legacy default stream (its work then finished before returning).
    nb::object where;
    try {
      where = obj.attr("__dlpack_device__")();
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
      throw rs::invalid_argument(call_name() + ": the __dlpack_device__ of a " + py_type_name(obj) + " raised " +
                                 py_type_name(e.value()) + ": " + str_shown(e.value()));
    }
    int type = 0, id = 0;
    if (PyTuple_Check(where.ptr()) && PyTuple_GET_SIZE(where.ptr()) == 2 &&
        nb::try_cast(nb::handle(PyTuple_GET_ITEM(where.ptr(), 0)), type, false) &&
        nb::try_cast(nb::handle(PyTuple_GET_ITEM(where.ptr(), 1)), id, false) && type == kDLCUDA && id >= 0) {
      const rs::device dev = rs::device::cuda(id);
      rs::require(dev);
      const std::optional<std::intptr_t> work = library_stream(obj, dev);
      nb::object cap;
      try {
        cap = ask_dlpack(obj, work.value_or(1));
      } catch (nb::python_error& e) {
        if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
        throw rs::invalid_argument(call_name() + ": the __dlpack__ of a " + py_type_name(obj) + " on " + dev.name() +
                                   " raised " + py_type_name(e.value()) + ": " + str_shown(e.value()));
      }
      py_array r = take_produced(obj, cap, any_layout);
      r.stream = rs::stream_ref(r.device(), native_of(work.value_or(1)));
      r.finish_before_return = !work;
      return r;
    }
  }
  if (dlpack && t_call_stream && t_call_stream->given && !has_attr(obj, "__dlpack_device__")) {
    // A producer that does not say its device is given the call's stream all the same (the handshake
    // orders its work before it), the device read from the capsule. One that refuses a stream (a CPU
    // producer) is asked again below without one, and a CPU array given a stream is refused after.
    nb::object cap;
    try {
      cap = ask_dlpack(obj, *t_call_stream->given);
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    }
    if (cap.is_valid() && PyCapsule_CheckExact(cap.ptr())) {
      py_array r = take_capsule(cap, any_layout);
      if (r.device().is_cuda()) {
        r.stream = rs::stream_ref(r.device(), native_of(*t_call_stream->given));
        r.finish_before_return = false;
      }
      return r;
    }
  }
  if (dlpack) return take_exported(obj, any_layout);
  if (has_attr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj);
  if (PyObject_CheckBuffer(obj.ptr()) || has_attr(obj, "__array_interface__")) return take_numpy_view(obj, any_layout);
  std::string why;  // an __array_interface__ that raises reads as absent above: named here
  if (PyObject* v = PyObject_GetAttrString(obj.ptr(), "__array_interface__")) {
    Py_DECREF(v);
  } else {
    nb::python_error e;
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    if (!e.matches(PyExc_AttributeError))
      why = " (its __array_interface__ raised " + py_type_name(e.value()) + ": " + str_shown(e.value()) + ")";
  }
  throw rs::invalid_type(call_name() + ": a " + py_type_name(obj) + " is not an array" + why + "; give a resident "
                         "Array, another library's array (DLPack, the CUDA Array Interface) or a host array (NumPy, "
                         "the buffer protocol)");
}

}  // namespace

void refuse_masked(nb::handle obj, const char* what) {
  // A masked array (or a subclass) exports its data alone: values it masks would be used without a
  // word. numpy.ma is imported wherever such an array exists; its type is looked up once.
  static PyObject* masked_type = nullptr;  // kept for the process, with the GIL held
  if (!masked_type) {
    nb::object ma = nb::steal(PyImport_GetModule(nb::str("numpy.ma").ptr()));
    if (!ma.is_valid()) {
      PyErr_Clear();
      return;
    }
    masked_type = nb::getattr(ma, "MaskedArray").release().ptr();
  }
  const int is = PyObject_IsInstance(obj.ptr(), masked_type);
  if (is < 0) throw nb::python_error();
  if (!is) return;
  nb::object ma = nb::steal(PyImport_GetModule(nb::str("numpy.ma").ptr()));
  bool masked = true;  // a mask that cannot be read at all is taken as masking something
  if (ma.is_valid()) {
    try {
      const int v = PyObject_IsTrue(ma.attr("is_masked")(obj).ptr());
      if (v < 0) throw nb::python_error();
      masked = v == 1;
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
      // is_masked reads a structured mask (one bool per field) as one truth value and raises: any byte
      // of the mask set is a masked field.
      try {
        const nb::object bytes = ma.attr("getmaskarray")(obj).attr("tobytes")();
        const char* p = PyBytes_AsString(bytes.ptr());
        if (!p) throw nb::python_error();
        masked = std::any_of(p, p + PyBytes_GET_SIZE(bytes.ptr()), [](char c) { return c != 0; });
      } catch (nb::python_error& again) {
        if (!again.matches(PyExc_Exception)) throw;
      }
    }
  } else {
    PyErr_Clear();
  }
  if (!masked) return;  // nothing masked: its data is all
  throw rs::invalid_argument(std::string(what) + ": a masked array with masked values, which would be used as they "
                             "are; pass x.filled(value) (or x.compressed() for the unmasked values)");
}

py_array from_dlpack(nb::object obj) {
  py_array r = take_in(std::move(obj), false);
  apply_call_stream(r);
  return r;
}

py_array from_dlpack_on(nb::object obj, nb::object stream) {
  const call_stream on(stream, "from_dlpack");
  return from_dlpack(std::move(obj));
}

py_array host_source(nb::handle obj) { return take_in(nb::borrow(obj), true); }

void refuse_sharded(nb::handle obj, const char* what) {
  // Looked up where resident.dist is imported (a ShardedArray exists only then).
  nb::object dist = nb::steal(PyImport_GetModule(nb::str("resident.dist").ptr()));
  if (!dist.is_valid()) {
    if (PyErr_Occurred()) PyErr_Clear();
    return;
  }
  nb::object cls = nb::getattr(dist, "ShardedArray", nb::none());
  if (cls.is_none()) return;
  const int is = PyObject_IsInstance(obj.ptr(), cls.ptr());
  if (is < 0) throw nb::python_error();
  if (is)
    throw rs::invalid_type(std::string(what) + ": a resident.dist.ShardedArray is several arrays, one per device, "
                           "which this call does not take as one: reduce it with rs.dist.sum, rs.dist.min or "
                           "rs.dist.max, run work on every shard with rs.dist.apply(work, x), copy it to NumPy with "
                           "x.to_host(), or pass its shards (x.shards) one at a time");
}

py_array taken_for_call(nb::handle obj) {
  if (!nb::isinstance<py_array>(obj)) {
    if (std::optional<py_array> d = take_direct(obj, false)) {
      apply_call_stream(*d);
      return std::move(*d);
    }
  }
  return from_dlpack(nb::borrow(obj));
}

}  // namespace resident::py
