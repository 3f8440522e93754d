// DLPack and the CUDA Array Interface out: resident's arrays exported with the stream handshake (taking
// another library's arrays in is intake.cpp's), and the text helpers of the bindings' messages.
#include "bindings.hpp"

#include "resident/detail/cuda_runtime.hpp"

namespace resident::py {

namespace {

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

}  // namespace resident::py
