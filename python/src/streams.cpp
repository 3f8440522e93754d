// The stream a launching call runs on: `stream=` parsed (the CUDA stream protocol, PyTorch, CuPy and
// Numba streams, int handles), and the stream another library's array is worked on without one (that
// library's current stream). The rule, stated once (docs/python.md, "Streams"): a call runs on the
// given stream; else on the current stream of the library whose array it takes; else on the array's own.
#include "bindings.hpp"

namespace resident::py {

thread_local call_stream_state* t_call_stream = nullptr;

namespace {

std::string repr_of(nb::handle h) { return nb::cast<std::string>(nb::repr(h)); }

// A handle from an int-like value (a PyTorch or CuPy stream's int, a ctypes pointer's value).
std::intptr_t handle_from(nb::handle v, const char* what, const char* via) {
  if (v.is_none()) return 0;  // a ctypes null pointer: the legacy default stream
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw rs::invalid_type(std::string(what) + ": stream" + via + " is " + repr_of(v) + ", not an int handle");
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long h = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0 || h < 0)
    throw rs::invalid_argument(std::string(what) + ": stream handle " + repr_of(v) + " is not a stream (a handle is "
                               "0, 1 or 2 for the default streams, or a cudaStream_t's address)");
  return std::intptr_t(h);
}

}  // namespace

std::optional<std::intptr_t> parse_stream(nb::handle s, const char* what) try {
  if (s.is_none()) return std::nullopt;
  if (PyLong_Check(s.ptr()) || PyIndex_Check(s.ptr())) return handle_from(s, what, "");  // an int, NumPy's too
  if (has_attr(s, "__cuda_stream__")) {
    nb::object r = s.attr("__cuda_stream__");
    if (PyCallable_Check(r.ptr())) r = r();
    if (!PyTuple_Check(r.ptr()) || PyTuple_GET_SIZE(r.ptr()) != 2)
      throw rs::invalid_type(std::string(what) + ": __cuda_stream__ of a " + py_type_name(s) + " gave " + repr_of(r) +
                             "; the CUDA stream protocol gives (version, handle)");
    return handle_from(PyTuple_GET_ITEM(r.ptr(), 1), what, ".__cuda_stream__()[1]");
  }
  if (has_attr(s, "cuda_stream")) return handle_from(s.attr("cuda_stream"), what, ".cuda_stream");  // PyTorch
  if (has_attr(s, "ptr")) return handle_from(s.attr("ptr"), what, ".ptr");                          // CuPy
  if (has_attr(s, "handle")) {                                                                        // Numba
    nb::object h = s.attr("handle");
    if (has_attr(h, "value")) h = h.attr("value");  // a ctypes c_void_p
    return handle_from(h, what, ".handle");
  }
  throw rs::invalid_type(std::string(what) + ": stream= takes an object with __cuda_stream__, a PyTorch, CuPy or Numba "
                         "stream, or an int handle, not a " + py_type_name(s));
} catch (nb::python_error& e) {  // what the stream object's own code raised; an interrupt or exit as it is
  if (!e.matches(PyExc_Exception)) throw;
  throw rs::invalid_type(std::string(what) + ": the stream= object's own code raised " +
                         nb::cast<std::string>(nb::repr(e.value())) + "; give a stream that says its handle");
}

call_stream::call_stream(nb::handle stream, const char* what) : previous_(t_call_stream) {
  state_.given = parse_stream(stream, what);
  state_.what = what;
  t_call_stream = &state_;
}

call_stream::~call_stream() {
  t_call_stream = previous_;
  for (const rs::stream_ref& own : state_.joins) {
    try {
      own.wait_for(rs::stream_ref(own.device(), native_of(*state_.given)));
    } catch (...) {
      // a stream that cannot be waited for now reports itself at its next use
    }
  }
}

std::optional<std::intptr_t> library_stream(nb::handle obj, rs::device d) {
  if (t_call_stream && t_call_stream->given) return t_call_stream->given;
  const std::string module = nb::cast<std::string>(nb::str(obj.type().attr("__module__")));
  const std::string top = module.substr(0, module.find('.'));
  if (top == "torch") {
    static nb::object* current = new nb::object(nb::module_::import_("torch.cuda").attr("current_stream"));
    return handle_from((*current)(d.index()).attr("cuda_stream"), "PyTorch", ".cuda_stream");
  }
  if (top == "cupy") {
    static nb::object* current = new nb::object(nb::module_::import_("cupy.cuda").attr("get_current_stream"));
    return handle_from((*current)().attr("ptr"), "CuPy", ".ptr");
  }
  if (top == "numba") return 1;  // Numba's default stream is the legacy default stream
  return std::nullopt;
}

void apply_call_stream(py_array& a) {
  call_stream_state* c = t_call_stream;
  if (!c || !c->given) return;
  if (!a.device().is_cuda())
    throw rs::invalid_argument(std::string(c->what) + ": an array on " + a.device().name() + " takes no stream (got "
                               "stream handle " + std::to_string(*c->given) + ")");
  const rs::stream_ref s(a.device(), native_of(*c->given));
  if (s.native() == a.stream.native()) return;
  if (!a.foreign) {  // resident's array: after its queued work, and its own stream after the call
    s.wait_for(a.stream);
    c->joins.push_back(a.stream);
  }
  a.stream = s;
  a.finish_before_return = false;
}

void bind_streams(nb::module_& m) {
  m.def("_stream_handle", [](nb::handle s) { return parse_stream(s, "stream"); }, nb::arg("stream").none(),
        "The int handle a stream= argument names (None: none).");
}

}  // namespace resident::py
