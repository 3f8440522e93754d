// PyTorch tensors and CuPy arrays on a CUDA device, read from their attributes, and NumPy arrays
// through the buffer protocol: no DLPack export per call (PyTorch's __dlpack__ is Python code with
// checks and a stream handshake that costs tens of microseconds, NumPy's capsule about a microsecond
// of taking in). Resident then works on that library's current stream, where its own work is queued,
// so the order needs nothing more; a call given another stream makes it wait for the library's
// current one, as the DLPack handshake would. Anything unusual (a tensor that requires grad, a
// non-strided layout, a dtype outside the table, a CPU tensor) takes the __dlpack__ path, which
// says why it is refused.
#include "bindings.hpp"

#include "resident/detail/cuda_runtime.hpp"

namespace resident::py {

namespace {

nb::object intern(const char* s) { return nb::steal(PyUnicode_InternFromString(s)); }

// A library's array type and its dtype objects, found once the library is imported (never imported
// here: an array of it cannot exist before).
struct library {
  PyTypeObject* type = nullptr;
  std::vector<std::pair<nb::object, DLDataType>> dtypes;  // dtype object -> element type, by identity
  nb::object strided;                                      // torch.strided
  nb::object raw_stream;                                   // torch._C._cuda_getCurrentRawStream
  nb::object current_stream;                               // cupy.cuda.get_current_stream
};

const DLDataType f32{kDLFloat, 32, 1}, f64{kDLFloat, 64, 1}, i32{kDLInt, 32, 1}, i64{kDLInt, 64, 1},
    u32{kDLUInt, 32, 1}, u64{kDLUInt, 64, 1};

library* find_torch(nb::object torch) {
  auto* l = new library();  // kept for the process (the type and the objects stay valid as long)
  nb::object tensor = nb::getattr(torch, "Tensor", nb::none());
  if (!PyType_Check(tensor.ptr())) return nullptr;
  l->type = reinterpret_cast<PyTypeObject*>(tensor.ptr());
  const std::pair<const char*, DLDataType> names[] = {{"float32", f32}, {"float64", f64}, {"int32", i32},
                                                      {"int64", i64},   {"uint32", u32},  {"uint64", u64}};
  for (const auto& [n, t] : names) {
    nb::object d = nb::getattr(torch, n, nb::none());
    if (!d.is_none()) l->dtypes.emplace_back(d, t);
  }
  l->strided = nb::getattr(torch, "strided", nb::none());
  nb::object c = nb::getattr(torch, "_C", nb::none());
  l->raw_stream = c.is_none() ? nb::none() : nb::getattr(c, "_cuda_getCurrentRawStream", nb::none());
  if (l->strided.is_none() || l->raw_stream.is_none() || !has_attr(tensor, "is_neg"))
    return nullptr;  // a PyTorch without them: __dlpack__
  tensor.release();
  return l;
}

library* find_cupy(nb::object cupy) {
  auto* l = new library();
  nb::object nd = nb::getattr(cupy, "ndarray", nb::none());
  nb::object cuda = nb::getattr(cupy, "cuda", nb::none());
  if (!PyType_Check(nd.ptr()) || cuda.is_none()) return nullptr;
  l->type = reinterpret_cast<PyTypeObject*>(nd.ptr());
  l->current_stream = nb::getattr(cuda, "get_current_stream", nb::none());
  if (l->current_stream.is_none()) return nullptr;
  nb::object np = nb::module_::import_("numpy");
  const std::pair<const char*, DLDataType> names[] = {{"float32", f32}, {"float64", f64}, {"int32", i32},
                                                      {"int64", i64},   {"uint32", u32},  {"uint64", u64}};
  for (const auto& [n, t] : names) l->dtypes.emplace_back(np.attr("dtype")(n), t);
  nd.release();
  return l;
}

// The library's entry: unknown until it is imported, then found (usable or not) once.
struct entry {
  bool known = false;
  library* lib = nullptr;
  PyObject* name = nullptr;  // the module's name, interned once (looked up each call until imported)
};
template <class Find>
library* library_of(entry& e, const char* module, Find find) {
  if (!e.known) {
    if (!e.name) e.name = intern(module).release().ptr();
    nb::object m = nb::steal(PyImport_GetModule(e.name));
    if (!m.is_valid()) {
      PyErr_Clear();
      return nullptr;
    }
    e.lib = find(std::move(m));
    e.known = true;
  }
  return e.lib;
}

std::optional<DLDataType> dtype_in(const library& l, nb::handle d) {
  for (const auto& [o, t] : l.dtypes)
    if (o.ptr() == d.ptr()) return t;
  return std::nullopt;
}

std::vector<std::int64_t> ints_of(nb::handle seq) {
  std::vector<std::int64_t> v;
  for (nb::handle e : nb::borrow<nb::sequence>(seq)) v.push_back(nb::cast<std::int64_t>(e));
  return v;
}

// The array, given its fields; `current` is the library's current stream on the device.
py_array view(nb::handle obj, std::uintptr_t ptr, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
              DLDataType dtype, int device, std::intptr_t current, bool own) {
  py_array r;
  r.shape = std::move(shape);
  r.dtype = dtype;
  DLTensor t{};
  t.data = reinterpret_cast<void*>(ptr);
  t.device = DLDevice{kDLCUDA, device};
  t.ndim = static_cast<std::int32_t>(r.shape.size());
  t.dtype = dtype;
  t.shape = r.shape.data();
  t.strides = strides.data();
  const auto [dev, data] = usable(t);
  r.data = data;
  const rs::stream_ref mine(dev, native_of(current == 0 ? 1 : current));
  const std::optional<std::intptr_t> given = t_call_stream ? t_call_stream->given : std::nullopt;
  r.stream = given ? rs::stream_ref(dev, native_of(*given)) : mine;
  if (r.stream.native() != mine.native()) r.stream.wait_for(mine);  // the DLPack handshake's order
  if (own) r.owner = python_owner(obj);
  r.foreign = true;
  return r;
}

struct names {
  nb::object requires_grad = intern("requires_grad"), is_cuda = intern("is_cuda"), layout = intern("layout"),
             dtype = intern("dtype"), shape = intern("shape"), data_ptr = intern("data_ptr"),
             stride = intern("stride"), get_device = intern("get_device"), is_neg = intern("is_neg"),
             data = intern("data"), ptr = intern("ptr"), strides = intern("strides"), device = intern("device"),
             id = intern("id");
};

// Whether h is true; false (the error cleared) where it cannot say.
bool truth(nb::handle h) {
  const int t = PyObject_IsTrue(h.ptr());
  if (t < 0) PyErr_Clear();
  return t == 1;
}

std::optional<py_array> torch_view(nb::handle x, const library& l, const names& k, bool own) {
  if (truth(x.attr(k.requires_grad)) || !truth(x.attr(k.is_cuda)) || !x.attr(k.layout).is(l.strided) ||
      truth(x.attr(k.is_neg)()))
    return std::nullopt;
  const std::optional<DLDataType> dt = dtype_in(l, x.attr(k.dtype));
  if (!dt) return std::nullopt;
  const int device = nb::cast<int>(x.attr(k.get_device)());
  const std::intptr_t current = nb::cast<std::intptr_t>(l.raw_stream(device));
  return view(x, nb::cast<std::uintptr_t>(x.attr(k.data_ptr)()), ints_of(x.attr(k.shape)), ints_of(x.attr(k.stride)()),
              *dt, device, current, own);
}

std::optional<py_array> cupy_view(nb::handle x, const library& l, const names& k, bool own) {
  const std::optional<DLDataType> dt = dtype_in(l, x.attr(k.dtype));
  if (!dt) return std::nullopt;
  const int device = nb::cast<int>(x.attr(k.device).attr(k.id));
  if (device != rs::detail::cuda::current_device()) return std::nullopt;  // CuPy's current stream is its device's
  std::vector<std::int64_t> strides = ints_of(x.attr(k.strides));
  const std::int64_t bytes = dt->bits / 8;
  for (std::int64_t& s : strides) {
    if (s % bytes != 0) return std::nullopt;
    s /= bytes;
  }
  const std::intptr_t current = nb::cast<std::intptr_t>(l.current_stream().attr(k.ptr));
  return view(x, nb::cast<std::uintptr_t>(x.attr(k.data).attr(k.ptr)), ints_of(x.attr(k.shape)), std::move(strides),
              *dt, device, current, own);
}

// The element type a buffer's format names (one of the six, in the machine's order), if any.
std::optional<DLDataType> buffer_dtype(const Py_buffer& b) {
  if (!b.format || !b.format[0] || b.format[1]) return std::nullopt;  // '>f', 'Zf', records: the other path
  const char c = b.format[0];
  const bool fl = c == 'f' || c == 'd', sig = c == 'i' || c == 'l' || c == 'q', uns = c == 'I' || c == 'L' || c == 'Q';
  if (!(fl || sig || uns) || (b.itemsize != 4 && b.itemsize != 8)) return std::nullopt;
  if (fl && (c == 'f') != (b.itemsize == 4)) return std::nullopt;
  const auto bits = static_cast<std::uint8_t>(8 * b.itemsize);
  return DLDataType{static_cast<std::uint8_t>(fl ? kDLFloat : sig ? kDLInt : kDLUInt), bits, 1};
}

// A NumPy array (the exact type) read through the buffer protocol: no DLPack capsule per call. Only a
// writable, C-contiguous, aligned, non-empty one of a type resident computes on; any other (a view with
// strides, another byte order, a 0-d array) takes the __dlpack__ path, which copies or refuses it in its
// words.
std::optional<py_array> numpy_view(nb::handle x, bool own) {
  Py_buffer b;
  if (PyObject_GetBuffer(x.ptr(), &b, PyBUF_RECORDS_RO) != 0) {
    nb::python_error e;  // fetched, and cleared when it goes
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    return std::nullopt;
  }
  const struct released {
    Py_buffer* b;
    ~released() { PyBuffer_Release(b); }
  } hold{&b};
  const std::optional<DLDataType> dt = buffer_dtype(b);
  // Read-only buffers too: NumPy exports some arrays it lets be written (np.broadcast_arrays' results,
  // writes warned of) read-only this way, writable through DLPack.
  if (!dt || b.readonly || b.ndim < 1 || b.ndim > most_dims || b.len <= 0 || !PyBuffer_IsContiguous(&b, 'C') ||
      reinterpret_cast<std::uintptr_t>(b.buf) % std::uintptr_t(b.itemsize) != 0)
    return std::nullopt;
  py_array r;
  r.shape.assign(b.shape, b.shape + b.ndim);
  r.dtype = *dt;
  DLTensor t{};
  t.data = b.buf;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = b.ndim;
  t.dtype = *dt;
  t.shape = r.shape.data();  // no strides: C-contiguous
  const auto [dev, data] = usable(t);
  r.data = data;
  r.stream = rs::default_stream(dev);
  if (own) r.owner = python_owner(x);
  r.foreign = true;
  r.finish_before_return = true;
  return r;
}

}  // namespace

std::optional<py_array> take_direct(nb::handle obj, bool own) {
  static const names* k = new names();
  static entry torch, cupy;  // read and written with the GIL held
  static PyTypeObject* ndarray = nullptr;
  PyTypeObject* t = Py_TYPE(obj.ptr());
  if (!ndarray) {
    static PyObject* numpy = intern("numpy").release().ptr();
    nb::object np = nb::steal(PyImport_GetModule(numpy));
    if (np.is_valid()) {  // sys.modules may hold anything under the name (None, a stand-in)
      nb::object type = nb::getattr(np, "ndarray", nb::none());
      if (PyType_Check(type.ptr())) ndarray = reinterpret_cast<PyTypeObject*>(type.release().ptr());
    } else if (PyErr_Occurred()) {
      throw nb::python_error();
    }
  }
  if (t == ndarray) return numpy_view(obj, own);
  if (const library* l = library_of(torch, "torch", find_torch); l && t == l->type) return torch_view(obj, *l, *k, own);
  if (const library* l = library_of(cupy, "cupy", find_cupy); l && t == l->type) return cupy_view(obj, *l, *k, own);
  return std::nullopt;
}

}  // namespace resident::py
