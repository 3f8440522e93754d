// resident._core's Array: a block of elements on one device, made by resident (empty, to_device) or
// another library's taken in place; explicit transfers to and from NumPy, the ledger, the transfer policy.
#include "bindings.hpp"

namespace resident::py {

thread_local const rs::stream_ref* t_stage_stream = nullptr;

DLDataType parse_dtype(const std::string& name) {
  if (name == "float32") return rs::dlpack_dtype<float>();
  if (name == "float64") return rs::dlpack_dtype<double>();
  if (name == "int32") return rs::dlpack_dtype<std::int32_t>();
  if (name == "int64") return rs::dlpack_dtype<std::int64_t>();
  if (name == "uint32") return rs::dlpack_dtype<std::uint32_t>();
  if (name == "uint64") return rs::dlpack_dtype<std::uint64_t>();
  throw rs::invalid_type("unknown dtype '" + name + "': use float32, float64, int32, int64, uint32 or uint64");
}

rs::device pick(const std::optional<std::string>& name) {
  rs::device d = name ? rs::parse_device(*name) : rs::default_device();
  rs::require(d);
  return d;
}

// A stream handle given by a consumer or producer (`what` names the protocol): an int.
std::intptr_t stream_handle(nb::handle h, const char* what) {
  std::intptr_t v = 0;
  if (!PyLong_Check(h.ptr()) || !nb::try_cast(h, v, false))
    throw rs::invalid_argument(std::string(what) + ": a stream is an int handle (1 = the legacy default stream), not " +
                               shown(h));
  return v;
}
// An extent of a shape: an int (or an integer such as NumPy's, through __index__) from 0 to 2^63 - 1.
namespace {

// What a shape's own code raised (__index__, __len__, __getitem__), as InvalidType naming `what`;
// KeyboardInterrupt and SystemExit as they are.
[[noreturn]] void shape_raised(const char* what) {
  nb::python_error e;
  if (!e.matches(PyExc_Exception)) throw e;
  throw rs::invalid_type(std::string("a shape's ") + what + " raised " + shown(e.value()));
}

std::int64_t extent_of(nb::handle e) {
  if (PyBool_Check(e.ptr())) throw rs::invalid_type("a shape holds ints, not bool (" + shown(e) + ")");
  if (!PyIndex_Check(e.ptr()))
    throw rs::invalid_argument("a shape holds ints, not " + py_type_name(e) +
                               " (" + shown(e) + ")");
  nb::object i = nb::steal(PyNumber_Index(e.ptr()));
  if (!i.is_valid()) shape_raised("extent's __index__()");
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow > 0) throw rs::invalid_argument("an extent beyond 2^63 - 1 in the shape: " + shown(e));
  if (overflow < 0 || v < 0) throw rs::invalid_argument("a negative extent in the shape: " + shown(e));
  return std::int64_t(v);
}

// Whether a shape is one extent. NumPy's integer arrays have __index__ and are sequences too: a 0-d
// one is a whole number, one of a dimension or more a sequence of extents, as NumPy reads them.
bool whole_number(nb::handle shape, bool sequence) {
  if (!PyIndex_Check(shape.ptr())) return false;
  if (!sequence || PyLong_Check(shape.ptr())) return true;
  if (PyObject_Size(shape.ptr()) >= 0) return false;
  nb::python_error e;  // no len(): a 0-d array
  if (!e.matches(PyExc_Exception)) throw e;
  return true;
}

}  // namespace

// A shape: an int, or a sequence (tuple, list) of at most 32 ints. The sequence is read by len() and
// index, never iterated: a sequence whose items never end would fill the memory.
std::vector<std::int64_t> shape_of(const nb::handle& shape) {
  std::vector<std::int64_t> s;
  if (PyBool_Check(shape.ptr())) throw rs::invalid_type("a shape is an int or a sequence of ints, not bool");
  const bool sequence = PySequence_Check(shape.ptr()) && !PyUnicode_Check(shape.ptr()) && !PyBytes_Check(shape.ptr());
  if (whole_number(shape, sequence)) {
    s.push_back(extent_of(shape));
  } else if (sequence) {
    const Py_ssize_t n = PySequence_Size(shape.ptr());
    if (n < 0) shape_raised("len()");
    if (n > most_dims)
      throw rs::invalid_argument("a shape of " + std::to_string(n) + " dimensions; at most " +
                                 std::to_string(most_dims) + " are supported");
    for (Py_ssize_t i = 0; i < n; ++i) {
      nb::object e = nb::steal(PySequence_GetItem(shape.ptr(), i));
      if (!e.is_valid()) shape_raised("item");
      s.push_back(extent_of(e));
    }
  } else {
    throw rs::invalid_argument("a shape is an int or a sequence of ints, not " +
                               py_type_name(shape));
  }
  return s;
}

py_array empty_of(std::vector<std::int64_t> shape, DLDataType dtype, rs::device d) {
  if (shape.size() > std::size_t(most_dims))  // a host array's shape too (NumPy's go to 64)
    throw rs::invalid_argument("an array of " + std::to_string(shape.size()) + " dimensions; resident's arrays have "
                               "at most " + std::to_string(most_dims) + " (reshape it first)");
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

namespace {

// A dtype given as a name, or as anything NumPy reads as one (np.float64, np.dtype("f4")): its name.
std::string dtype_name_arg(nb::handle d) {
  const bool text = PyUnicode_Check(d.ptr());
  if (text) {
    std::string name = utf8_of(d);
    for (const char* known : {"float32", "float64", "int32", "int64", "uint32", "uint64"})
      if (name == known) return name;
  }
  try {
    nb::object dt = nb::module_::import_("numpy").attr("dtype")(d);
    if (!nb::cast<bool>(dt.attr("isnative")))
      throw rs::invalid_argument("dtype " + utf8_of(nb::str(dt)) + " is in the other byte order; give "
                                 "the native one");
    return utf8_of(nb::str(dt.attr("name")));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    if (text) return utf8_of(d);  // parse_dtype names what it takes
    throw rs::invalid_type("the dtype argument's type does not fit: " + shown(d) +
                           "; give a name such as 'float32' or a NumPy dtype");
  }
}

py_array empty(nb::handle shape, nb::handle dtype, const std::optional<std::string>& dev) {
  return empty_of(shape_of(shape), parse_dtype(dtype_name_arg(dtype)), pick(dev));
}

// The host array a Python object is, checked first so that what resident cannot copy is named: an
// element type DLPack has no name for (object, string, datetime, structured) or a byte order other than
// the host's. Then taken as every call takes arrays (from_dlpack's checks), of any layout: a strided
// view comes as NumPy's C-contiguous copy of it.
py_array host_array_of(nb::handle obj) {
  refuse_sharded(obj, "to_device");  // it has a dtype, and would be refused as not of it
  refuse_masked(obj, "to_device");
  if (has_attr(obj, "dtype") && has_attr(nb::getattr(obj, "dtype"), "kind")) {
    const nb::object dt = obj.attr("dtype");
    const std::string kind = utf8_of(nb::str(dt.attr("kind")));
    const std::string name = utf8_of(nb::str(dt));
    if (kind.size() == 1 && std::string("OUSMmV").find(kind) != std::string::npos)  // no DLPack type at all
      throw rs::invalid_type("to_device: arrays of " + name +
                             " are not supported: use float32, float64, int32, int64, uint32 or uint64");
    if (!nb::cast<bool>(dt.attr("isnative")))
      throw rs::invalid_type("to_device: the array's bytes are in the other byte order (" + name +
                             "); convert it first: x.astype(x.dtype.newbyteorder('='))");
  }
  py_array h;
  try {
    h = host_source(obj);
  } catch (nb::python_error& e) {  // NumPy's copy of a strided view (2^45 elements of stride 0) the host cannot hold
    if (e.matches(PyExc_ValueError))  // 2^62 elements: more than an array's bytes may count
      throw rs::invalid_argument("to_device: the array's copy would hold more than a host array holds (" +
                                 str_shown(e.value()) + "); give fewer elements, or a contiguous array");
    if (!e.matches(PyExc_MemoryError)) throw;
    double bytes = 0;
    if (has_attr(obj, "nbytes")) nb::try_cast(obj.attr("nbytes"), bytes, true);
    host_out_of_memory(bytes > 0 && bytes < 0x1p63 ? std::size_t(bytes) : 0, "to_device",
                       "It copies a strided array into a C-contiguous one first; give fewer elements, or a contiguous "
                       "array");
  }
  if (!h.device().is_cpu())
    throw rs::invalid_type("to_device takes a host array; this one is on " + h.device().name() +
                           " (copy between devices with resident.copy, or into a new array with copy.copy(x))");
  return h;
}

py_array to_device(nb::handle obj, const std::optional<std::string>& dev, nb::object stream) {
  const call_stream on(stream, "to_device");
  const py_array h = host_array_of(obj);
  py_array r = empty_of(h.shape, h.dtype, pick(dev));
  py_array w = r;  // the copy runs on the given stream, if any; the host waits for it (h is the caller's)
  apply_call_stream(w);
  visit(r.dtype, [&](auto t) {
    using T = decltype(t);
    gil_released unlocked;
    rs::copy_async(std::span<const T>(static_cast<const T*>(h.data), w.size()), w.ref<T>());
    w.stream.synchronize();
  });
  return r;
}

// A host array to_host could not allocate: OutOfMemory with the figures others carry (the bytes asked
// for, the host's free memory, the CPU pool's), not the std::bad_alloc nanobind would make a bare MemoryError.
}  // namespace

[[noreturn]] void host_out_of_memory(std::size_t bytes, const std::string& what, const std::string& advice) {
  const long page = sysconf(_SC_PAGE_SIZE), avail = sysconf(_SC_AVPHYS_PAGES);
  const std::size_t free_b = page > 0 && avail > 0 ? std::size_t(avail) * std::size_t(page) : 0;
  const rs::pool_statistics pool = rs::pool_stats(rs::device::cpu());
  throw rs::out_of_memory(what + ": a new host array of " + rs::detail::format_bytes(double(bytes)) + " (" +
                              std::to_string(bytes) + " bytes) could not be allocated; the host has " +
                              rs::detail::format_bytes(double(free_b)) + " free. " + advice,
                          bytes, free_b, pool.bytes_reserved, pool.bytes_in_use);
}

namespace {

nb::object to_host(const py_array& self, nb::object stream) {
  const call_stream on(stream, "to_host");
  py_array a = self;  // read on the given stream, if any, after the array's queued work
  apply_call_stream(a);
  return visit(a.dtype, [&](auto t) -> nb::object {
    using T = decltype(t);
    const std::size_t n = a.size();
    T* buf = new (std::nothrow) T[n ? n : 1];
    if (!buf) host_out_of_memory((n ? n : 1) * sizeof(T), "to_host", "Free memory, or download into an existing array "
                                                                       "with x.to_host(out=...)");
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
    {
      gil_released unlocked;
      rs::copy_async(a.ref<T>(), std::span<T>(buf, n));
      a.stream.synchronize();
    }
    std::vector<std::size_t> shape(a.shape.begin(), a.shape.end());
    return nb::cast(nb::ndarray<nb::numpy, T>(buf, shape.size(), shape.data(), owner));
  });
}

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

void bind_array(nb::module_& m) {
  // dynamic_attr: an Array keeps what is made for it once (resident.to_numba's view) in its __dict__.
  nb::class_<py_array>(m, "Array", nb::dynamic_attr(), nb::is_weak_referenceable(),
                       "A C-contiguous array on one device (resident's own memory or another library's, taken in "
                       "place). Shares memory through __dlpack__ and __cuda_array_interface__.")
      .def("__init__", [](py_array*, nb::args, nb::kwargs) {
        throw rs::invalid_type("resident.Array is not made directly: rs.to_device(host) copies a host array to a "
                               "device, rs.empty(shape, dtype, device) takes one from the pool, rs.from_dlpack(x) "
                               "takes another library's array in place");
      })
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
      .def_prop_ro("_readonly", [](const py_array& a) { return a.readonly; })
      .def_prop_ro("stream", [](const py_array& a) { return handle_of(a.stream.native()); },
                   "the stream handle work on the array is ordered on (1 = the legacy default stream)")
      .def("__len__", [](const py_array& a) {
        if (a.shape.empty()) throw rs::invalid_type("len() of a 0-d array (x.item() reads its value)");
        return a.shape[0];
      })
      .def("__repr__", [](const py_array& a) {
        std::string s = "resident.Array(shape=(";
        for (std::size_t i = 0; i < a.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(a.shape[i]);
        if (a.shape.size() == 1) s += ",";
        return s + "), dtype=" + rs::dlpack_dtype_name(a.dtype) + ", device=" + a.device().name() + ")";
      })
      .def("to_host", [](const py_array& self, nb::object stream, nb::object out) {
             // x.to_host(y) meant out=y: an array (even a 0-d one a handle could be read from) is no stream.
             if (has_attr(stream, "__dlpack__") || has_attr(stream, "__cuda_array_interface__") ||
                 (has_attr(stream, "shape") && has_attr(stream, "dtype") && !has_attr(stream, "__index__")))
               throw rs::invalid_type("to_host(stream=None, *, out=None): the first argument is the stream; give an "
                                      "output array as out=, e.g. x.to_host(out=y)");
             return out.is_none() ? to_host(self, stream) : to_host_into(self, out, stream, true);
           }, at_python_line(), nb::arg("stream") = nb::none(), nb::kw_only(), nb::arg("out") = nb::none(),
           "Copies the array into a new NumPy array, or into out= (an existing C-contiguous, writable host array "
           "of the same shape and dtype, returned): one counted transfer. Synchronizes.")
      .def("to_host_async", [](const py_array& self, nb::handle out, nb::handle stream) {
             return to_host_into(self, out, stream, false);
           }, at_python_line(), nb::arg("out").none(), nb::kw_only(), nb::arg("stream") = nb::none(),
           "Starts copying the array into out (a host array of the same shape and dtype) and returns it: from "
           "page-locked memory (resident.streaming.pinned_empty) the copy runs while the host goes on; read out "
           "and let it go only after the stream (stream=, else the array's) is synchronized. Into pageable "
           "memory it is finished when this returns.")
      .def("__dlpack__", &dlpack_export, nb::kw_only(), nb::arg("stream") = nb::none(),
           nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none())
      .def("__dlpack_device__", &dlpack_device)
      .def_prop_ro("__cuda_array_interface__", &cuda_array_interface);

  m.def("empty", &empty, at_python_line(), nb::arg("shape").none(), nb::arg("dtype") = "float32", nb::arg("device") = nb::none(),
        "A new uninitialized array from the device's pool.");
  m.def("to_device", &to_device, at_python_line(), nb::arg("host").none(), nb::arg("device") = nb::none(),
        nb::arg("stream") = nb::none(),
        "Copies a host (NumPy) array into a new array on the device: one counted transfer.");
  m.def("_ready_for_any_stream", [](const py_array& a) { ready_for_any_stream(a); }, nb::arg("x"));
  m.def("from_dlpack", &from_dlpack_on, nb::arg("obj").none(), nb::arg("stream") = nb::none(),
        "Takes another library's array in place (DLPack, the CUDA Array Interface, or host memory through the "
        "buffer protocol or the array interface): no copy. `stream`: the stream the array is worked on, given to "
        "the producer's __dlpack__ (the DLPack handshake).");
  // from_dlpack for the package's own calls (resident.stream, resident.dist): `what` names the call in
  // the refusals; written: the array is refused where it cannot be written (read-only, a copy).
  m.def("_taken", [](nb::handle obj, const std::string& what, bool written) {
    const call_stream on(nb::none(), what.c_str());
    py_array a = from_dlpack(nb::borrow(obj));
    if (written) a.check_writable(what);
    return a;
  }, nb::arg("obj").none(), nb::arg("what"), nb::arg("written") = false);
  m.def("default_device", [] { return rs::default_device().name(); });
  m.def("cuda_device_count", [] { return rs::cuda_device_count(); });
  m.def("cuda_unavailable_reason", [] { return rs::cuda_unavailable_reason(); });
  m.def("synchronize", [](const std::optional<std::string>& d) {
    gil_released unlocked;
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

}

}  // namespace resident::py
