// DLPack and the CUDA Array Interface, both ways: exporting resident's arrays with the stream
// handshake, and taking another library's arrays in place (every field checked before anything is taken).
#include "bindings.hpp"

#include "resident/detail/cuda_runtime.hpp"

namespace resident::py {

namespace {

// The call taking an array in, for messages: the running call's name, else from_dlpack.
const char* call_name() { return t_call_stream && *t_call_stream->what ? t_call_stream->what : "from_dlpack"; }

std::string typestr(DLDataType t) {  // NumPy's array-interface type string, little-endian
  const char kind = t.code == kDLFloat ? 'f' : t.code == kDLInt ? 'i' : 'u';
  return std::string("<") + kind + std::to_string(t.bits / 8);
}

}  // namespace

// Exports through nanobind's ndarray, which speaks every DLPack version a consumer asks for
// (max_version) and keeps `owner` alive until the consumer lets go; the stream handshake is resident's.
nb::object dlpack_export(const py_array& a, nb::object stream, nb::object max_version, nb::object dl_device,
                         nb::object copy) {
  // The arguments as the DLPack protocol spells them, named before anything is exported.
  const auto small_int = [](PyObject* v) {  // an int (not a bool) that fits a C int, as a version's part
    if (!PyLong_Check(v) || PyBool_Check(v)) return false;
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) PyErr_Clear();
    return overflow == 0 && x >= 0 && x <= 0x7FFFFFFF;
  };
  if (!max_version.is_none() && !(PyTuple_Check(max_version.ptr()) && PyTuple_GET_SIZE(max_version.ptr()) == 2 &&
                                  small_int(PyTuple_GET_ITEM(max_version.ptr(), 0)) &&
                                  small_int(PyTuple_GET_ITEM(max_version.ptr(), 1))))
    throw rs::invalid_type("__dlpack__: max_version is a (major, minor) tuple such as (1, 0), or None; got " +
                           shown(max_version));
  if (!copy.is_none() && !PyBool_Check(copy.ptr()))
    throw rs::invalid_type("__dlpack__: copy is True, False or None; got " + shown(copy));
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
    throw rs::invalid_argument("__dlpack__: a CPU array takes no stream (got " + utf8_of(nb::str(stream)) + ")");
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

namespace {

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

}  // namespace

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
  gil_released unlocked;
  s.synchronize();
}

std::pair<rs::device, void*> usable(const DLTensor& t) {
  if (t.ndim > most_dims)  // before its shape is read: an array of resident's has at most most_dims
    throw rs::invalid_argument(std::string(call_name()) + ": a tensor of " + std::to_string(t.ndim) + " dimensions; resident's arrays "
                               "have at most " + std::to_string(most_dims) + " (reshape it first)");
  try {
    visit(t.dtype, [](auto) {});
  } catch (const rs::invalid_argument& e) {  // an element type resident has no arrays of: a type error
    throw rs::invalid_type(e.what());
  }
  const rs::device dev = rs::device_of(t.device);
  rs::require(dev);
  return {dev, rs::detail::dlpack_checked(t, t.dtype, t.dtype.bits / 8u).first};
}

namespace {

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



// The tensor of a capsule not consumed yet and whether its producer marked it read-only. @throws
// invalid_argument for a consumed capsule or one of another kind.
std::pair<const DLTensor*, bool> capsule_tensor(nb::handle cap) {
  const char* name = PyCapsule_GetName(cap.ptr());
  const std::string n = name ? name : "";
  if (n == "used_dltensor" || n == "used_dltensor_versioned")
    throw rs::invalid_argument(std::string(call_name()) + ": the DLPack capsule was consumed already (a capsule is taken once; ask the "
                               "producer's __dlpack__ for another)");
  void* p = n == "dltensor" || n == "dltensor_versioned" ? PyCapsule_GetPointer(cap.ptr(), name) : nullptr;
  if (!p) {
    PyErr_Clear();
    throw rs::invalid_argument(std::string(call_name()) + ": a capsule named '" + n + "' is not a DLPack tensor");
  }
  if (n == "dltensor") return {&static_cast<DLManagedTensor*>(p)->dl_tensor, false};
  const auto* m = static_cast<managed_tensor_versioned*>(p);
  if (m->major != 1)
    throw rs::invalid_argument(std::string(call_name()) + ": a DLPack " + std::to_string(m->major) + "." + std::to_string(m->minor) +
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
  r.owner = std::shared_ptr<const void>(new ND(std::move(nd)), [](const void* p) { drop_python(static_cast<const ND*>(p)); });
  r.foreign = true;
  r.finish_before_return = true;
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
  const std::string ts = PyUnicode_Check(ts_obj.ptr()) ? utf8_of(ts_obj) : std::string();
  if (!ts.empty() && ts[0] == '>')
    throw rs::invalid_argument(std::string(cai_name) + ": big-endian data is not supported");
  const bool well_formed = ts.size() >= 3 && ts.size() <= 4 && (ts[0] == '<' || ts[0] == '|' || ts[0] == '=') &&
                           std::string("fiu").find(ts[1]) != std::string::npos &&
                           ts.find_first_not_of("0123456789", 2) == std::string::npos;
  if (!well_formed)
    throw rs::invalid_argument(std::string(cai_name) + ": typestr " + shown(ts_obj) +
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
      throw rs::invalid_argument(std::string(cai_name) + ": strides " + shown(st) +
                                 " is not a tuple of one int per dimension of the shape");
    for (nb::handle e : nb::borrow<nb::sequence>(st)) {
      std::int64_t v = 0;
      if (!PyLong_Check(e.ptr()) || !nb::try_cast(e, v, false) || v % bytes != 0)
        throw rs::invalid_argument(std::string(cai_name) + ": strides " + shown(st) +
                                   " are not whole elements");
      strides.push_back(v / bytes);
    }
  }
  const nb::object data = key("data");
  std::uintptr_t ptr = 0;
  if (!PyTuple_Check(data.ptr()) || PyTuple_GET_SIZE(data.ptr()) != 2 ||
      !nb::try_cast(nb::handle(PyTuple_GET_ITEM(data.ptr(), 0)), ptr, false))
    throw rs::invalid_argument(std::string(cai_name) + ": data is a tuple (pointer, read_only), not " +
                               shown(data));
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
  // Worked on the stream the call was given, else the library's current one (the legacy default stream
  // for a library resident does not know, whose work is then finished before returning).
  const std::optional<std::intptr_t> work = library_stream(obj, dev);
  r.stream = work ? rs::stream_ref(dev, native_of(*work)) : rs::default_stream(dev);
  r.finish_before_return = !work;
  if (cai.contains("stream") && !cai["stream"].is_none()) {
    const std::intptr_t h = stream_handle(cai["stream"], cai_name);
    if (h == 0) throw rs::invalid_argument(std::string(cai_name) + ": stream 0 is not allowed (version 3)");
    r.stream.wait_for(rs::stream_ref(r.stream.device(), native_of(h)));
  }
  r.owner = python_owner(obj);
  r.foreign = true;
  return r;
}

}  // namespace

nb::object with_buffer_strides(nb::handle obj) {
  if (!PyObject_CheckBuffer(obj.ptr()) || PyMemoryView_Check(obj.ptr())) return nb::borrow(obj);
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
    nb::python_error e;  // an Exception: nanobind asks again and refuses it
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    return nb::borrow(obj);
  }
  const bool missing = view.ndim > 0 && view.strides == nullptr;
  PyBuffer_Release(&view);
  if (!missing) return nb::borrow(obj);
  PyObject* mv = PyMemoryView_FromObject(obj.ptr());
  if (!mv) throw nb::python_error();
  return nb::steal(mv);
}

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
  if (ma.is_valid() && !nb::cast<bool>(ma.attr("is_masked")(obj))) return;  // nothing masked: its data is all
  throw rs::invalid_argument(std::string(what) + ": a masked array with masked values, which would be used as they "
                             "are; pass x.filled(value) (or x.compressed() for the unmasked values)");
}

bool has_attr(nb::handle o, const char* name) {
  if (PyObject* v = PyObject_GetAttrString(o.ptr(), name)) {
    Py_DECREF(v);
    return true;
  }
  if (!PyErr_ExceptionMatches(PyExc_Exception)) throw nb::python_error();
  PyErr_Clear();
  return false;
}

namespace {
void convert_again(PyObject* o, int depth) {
  if ((PyList_Check(o) || PyTuple_Check(o)) && depth == 0) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n && i < 64; ++i) convert_again(PySequence_Fast_GET_ITEM(o, i), 1);
    return;
  }
  if (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o)) return;
  PyNumberMethods* m = Py_TYPE(o)->tp_as_number;
  for (auto convert : {m && m->nb_index ? &PyNumber_Index : nullptr, m && m->nb_float ? &PyNumber_Float : nullptr}) {
    if (!convert) continue;
    PyObject* r = convert(o);
    if (r) {
      Py_DECREF(r);
    } else if (!PyErr_ExceptionMatches(PyExc_Exception)) {
      throw nb::python_error();
    } else {
      PyErr_Clear();
    }
  }
}
}  // namespace

void interrupts_again(const nb::args& args, const nb::kwargs& kwargs) {
  for (nb::handle a : args) convert_again(a.ptr(), 0);
  for (auto [k, v] : kwargs) convert_again(v.ptr(), 0);
}

std::string utf8_of(nb::handle str) {
  nb::object b = nb::steal(PyUnicode_AsEncodedString(str.ptr(), "utf-8", "backslashreplace"));
  if (!b.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AS_STRING(b.ptr()), std::size_t(PyBytes_GET_SIZE(b.ptr())));
}

std::string py_type_name(nb::handle o) {
  PyTypeObject* t = Py_TYPE(o.ptr());
  nb::object name = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(t), "__name__"));
  if (!name.is_valid()) {  // a metaclass whose __name__ raises: the name the type was made with
    nb::python_error e;
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
  }
  return name.is_valid() && PyUnicode_Check(name.ptr()) ? utf8_of(name) : std::string(t->tp_name);
}

std::string str_shown(nb::handle h, std::size_t most) {
  nb::object r = nb::steal(PyObject_Str(h.ptr()));
  if (!r.is_valid()) {
    nb::python_error e;
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    return "a " + py_type_name(h) + " (its __str__ raised " + py_type_name(e.value()) + ")";
  }
  std::string t = utf8_of(r);
  if (t.size() > most) t = t.substr(0, most) + "...";
  return t;
}

std::string shown(nb::handle h, std::size_t most) {
  nb::object r = nb::steal(PyObject_Repr(h.ptr()));
  if (!r.is_valid()) {
    nb::python_error e;
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    if (PyLong_Check(h.ptr()))  // past Python's digits limit for int to text
      return "an int of " + utf8_of(nb::str(nb::handle(h).attr("bit_length")())) + " bits";
    return "a " + py_type_name(h) + " (its __repr__ raised " + py_type_name(e.value()) + ")";
  }
  std::string t = utf8_of(r);
  if (t.size() > most) t = t.substr(0, most) + "...";
  return t;
}

// Takes another library's array in place: its __dlpack__ (with the stream handshake), a DLPack
// capsule, or its __cuda_array_interface__. Resident's Arrays are returned as they are. What cannot be
// used as it is is refused before anything is taken: a refused capsule stays unconsumed.
namespace {

// A CUDA producer's capsule, its work ordered before stream handle h (the DLPack stream handshake):
// versioned where the producer speaks DLPack 1.x, else unversioned.
nb::object dlpack_capsule(nb::handle obj, std::intptr_t h) {
  nb::object call = obj.attr("__dlpack__");
  const std::intptr_t stream = h == 0 ? 1 : h;  // DLPack: 0 is not a CUDA stream; 1 is the legacy default
  try {
    return call(nb::arg("stream") = stream, nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;  // a producer that predates max_version
  }
  return call(nb::arg("stream") = stream);
}

// The name of the call taking an array in, for messages.

// The array `obj` is, before the call's stream is applied.
py_array take_in(nb::object obj) {
  if (nb::isinstance<py_array>(obj)) return nb::cast<py_array>(obj);
  if (std::optional<py_array> d = take_direct(obj)) return std::move(*d);  // PyTorch, CuPy on CUDA
  refuse_sharded(obj, call_name());
  refuse_masked(obj, "resident");
  if (!PyCapsule_CheckExact(obj.ptr()) && has_attr(obj, "__dlpack__") && has_attr(obj, "__dlpack_device__")) {
    // A CUDA producer is asked for its memory ordered before the stream resident will work on: the
    // call's stream, else the producer library's current stream (PyTorch, CuPy, Numba), else the
    // legacy default stream (its work then finished before returning).
    nb::object where;
    try {
      where = obj.attr("__dlpack_device__")();
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
      throw rs::invalid_argument(std::string(call_name()) + ": the __dlpack_device__ of a " + py_type_name(obj) + " raised " +
                                 py_type_name(e.value()) + ": " +
                                 str_shown(e.value()));
    }
    int type = 0, id = 0;
    if (PyTuple_Check(where.ptr()) && PyTuple_GET_SIZE(where.ptr()) == 2 &&
        nb::try_cast(nb::handle(PyTuple_GET_ITEM(where.ptr(), 0)), type, false) &&
        nb::try_cast(nb::handle(PyTuple_GET_ITEM(where.ptr(), 1)), id, false) && type == kDLCUDA && id >= 0) {
      const rs::device dev = rs::device::cuda(id);
      rs::require(dev);
      const std::optional<std::intptr_t> work = library_stream(obj, dev);
      py_array r = take_in(dlpack_capsule(obj, work.value_or(1)));
      r.stream = rs::stream_ref(r.device(), native_of(work.value_or(1)));
      r.finish_before_return = !work;
      return r;
    }
  }
  if (PyCapsule_CheckExact(obj.ptr())) {
    const auto [t, readonly] = capsule_tensor(obj);
    usable(*t);
    nb::ndarray<nb::ro> nd;
    if (!nb::try_cast(obj, nd, false)) throw rs::invalid_argument(std::string(call_name()) + ": nanobind could not take the capsule");
    return adopt(std::move(nd), readonly);
  }
  if (t_call_stream && t_call_stream->given && !PyCapsule_CheckExact(obj.ptr()) && has_attr(obj, "__dlpack__") &&
      !has_attr(obj, "__dlpack_device__")) {
    // A producer that does not say its device is given the call's stream all the same (the handshake
    // orders its work before it), the device read from the capsule. One that refuses a stream (a CPU
    // producer) is asked again below without one, and a CPU array given a stream is refused after.
    nb::object cap;
    try {
      cap = dlpack_capsule(obj, *t_call_stream->given);
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    }
    if (cap.is_valid() && PyCapsule_CheckExact(cap.ptr())) {
      py_array r = take_in(cap);
      if (r.device().is_cuda()) {
        r.stream = rs::stream_ref(r.device(), native_of(*t_call_stream->given));
        r.finish_before_return = false;
      }
      return r;
    }
  }
  if (has_attr(obj, "__dlpack__")) {
    // Called without a stream, the producer orders its work before the legacy default stream, which
    // is the stream resident works on for arrays it takes in. Asked for writable memory first, so that
    // memory its producer marks read-only is known as such.
    const nb::object src = with_buffer_strides(obj);
    nb::ndarray<> rw;
    if (nb::try_cast(src, rw, false)) return adopt(std::move(rw), false);
    nb::ndarray<nb::ro> ro;
    if (nb::try_cast(src, ro, false)) return adopt(std::move(ro), true);
    // The casts keep quiet about why: the producer asked once more, so that an interrupt (or exit) it
    // raises goes on unchanged and its own error is the message.
    std::string said;
    try {
      (void)obj.attr("__dlpack__")();
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
      said = "; it said: " + py_type_name(e.value()) + ": " +
             str_shown(e.value());
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
      throw rs::invalid_argument(std::string(call_name()) + ": the __dlpack__ of a " + py_type_name(obj) +
                                 (dtype.empty() ? "" : " of dtype " + dtype) +
                                 " gave no tensor (its producer refused to export it)" + said);
    dtype = " of dtype " + dtype;
    throw rs::invalid_type(std::string(call_name()) + ": the __dlpack__ of a " + py_type_name(obj) + dtype +
                               " gave no tensor (its producer refused to export it). resident computes on float32, "
                               "float64, int32, int64, uint32 and uint64 in the machine's byte order: convert it, e.g. "
                               "x.astype(np.float64), or for bytes in the other order x.astype(x.dtype.newbyteorder('='))" +
                               said);
  }
  if (has_attr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj);
  // Host memory NumPy reads in place (the buffer protocol: memoryview, array.array, bytearray; or the
  // array interface): its zero-copy view, read-only where the buffer is, taken as NumPy's arrays are.
  if (PyObject_CheckBuffer(obj.ptr()) || has_attr(obj, "__array_interface__")) {
    nb::object view;
    try {
      view = nb::module_::import_("numpy").attr("asarray")(obj);
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
      throw rs::invalid_type(std::string(call_name()) + ": NumPy could not read the " + py_type_name(obj) +
                             " as an array (" + str_shown(e.value()) +
                             "); give a NumPy array of float32, float64, int32, int64, uint32 or uint64");
    }
    if (!has_attr(view, "__dlpack__"))  // a NumPy without DLPack: nothing else reads it in place
      throw rs::invalid_type(std::string(call_name()) + ": this NumPy exports no DLPack; use NumPy 1.23 or later");
    return take_in(std::move(view));
  }
  throw rs::invalid_type(std::string(call_name()) + ": a " + py_type_name(obj) + " is not an array; give a resident "
                         "Array, another library's array (DLPack, the CUDA Array Interface) or a host array (NumPy, "
                         "the buffer protocol)");
}

}  // namespace

py_array from_dlpack(nb::object obj) {
  py_array r = take_in(std::move(obj));
  apply_call_stream(r);
  return r;
}

py_array from_dlpack_on(nb::object obj, nb::object stream) {
  const call_stream on(stream, "from_dlpack");
  return from_dlpack(std::move(obj));
}

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
