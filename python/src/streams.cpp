// The stream a launching call runs on: `stream=` parsed (the CUDA stream protocol, PyTorch, CuPy and
// Numba streams, int handles), and the stream another library's array is worked on without one (that
// library's current stream). The rule, stated once (docs/python.md, "Streams"): a call runs on the
// given stream; else on the current stream of the library whose array it takes; else on the array's own.
#include "bindings.hpp"

namespace resident::py {

thread_local call_stream_state* t_call_stream = nullptr;

namespace {

// rs.Stream: a stream resident made (non-blocking, on one device), destroyed after its queued work
// when the object goes. rs.Event: a point in a stream to wait on and time between.
struct py_stream {
  // Shared with the Arrays taken in on it (from_dlpack(x, stream=s)), which use it after this object goes.
  std::shared_ptr<rs::stream> held;
  explicit py_stream(rs::device d) : held(std::make_shared<rs::stream>(d)) {}
  const rs::stream& s() const { return *held; }
  // The handle as the CUDA stream protocol gives it: 0 on the CPU, where work runs as it is issued.
  std::intptr_t handle() const { return s().device().is_cuda() ? handle_of(s().ref().native()) : 0; }
};
struct py_event {
  rs::device d;
  rs::event e;
  explicit py_event(rs::device dev) : d(dev), e(dev) {}
};

// A handle from an int-like value (a PyTorch or CuPy stream's int, a ctypes pointer's value).
std::intptr_t handle_from(nb::handle v, const char* what, const char* via) {
  if (v.is_none()) return 0;  // a ctypes null pointer: the legacy default stream
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw rs::invalid_type(std::string(what) + ": stream" + via + " is " + shown(v) + ", not an int handle");
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long h = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0 || h < 0)
    throw rs::invalid_argument(std::string(what) + ": stream handle " + shown(v) + " is not a stream (a handle is "
                               "0, 1 or 2 for the default streams, or a cudaStream_t's address)");
  return std::intptr_t(h);
}

}  // namespace

std::optional<std::intptr_t> parse_stream(nb::handle s, const char* what) try {
  if (s.is_none()) return std::nullopt;
  if (nb::isinstance<py_stream>(s)) {  // a CPU one names no stream: its work runs as it is issued
    const py_stream& p = nb::cast<const py_stream&>(s);
    if (!p.s().device().is_cuda()) return std::nullopt;
    return p.handle();
  }
  if (PyLong_Check(s.ptr()) || PyIndex_Check(s.ptr())) return handle_from(s, what, "");  // an int, NumPy's too
  if (has_attr(s, "__cuda_stream__")) {
    nb::object r = s.attr("__cuda_stream__");
    if (PyCallable_Check(r.ptr())) r = r();
    if (!PyTuple_Check(r.ptr()) || PyTuple_GET_SIZE(r.ptr()) != 2)
      throw rs::invalid_type(std::string(what) + ": __cuda_stream__ of a " + py_type_name(s) + " gave " + shown(r) +
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
                         shown(e.value()) + "; give a stream that says its handle");
}

call_stream::call_stream(nb::handle stream, const char* what) : previous_(t_call_stream) {
  state_.given = parse_stream(stream, what);
  state_.what = what;
  if (state_.given && nb::isinstance<py_stream>(stream)) state_.keep = nb::cast<const py_stream&>(stream).held;
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
  const std::string module = utf8_of(nb::str(obj.type().attr("__module__")));
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
  a.stream_keep = c->keep;
  a.finish_before_return = false;
}

namespace {

// The stream a Stream's or Event's method is given: an rs.Stream, any stream= object (on `d`), or None
// (d's default stream).
rs::stream_ref stream_of(nb::handle s, rs::device d, const char* what) {
  if (nb::isinstance<py_stream>(s)) return nb::cast<const py_stream&>(s).s().ref();
  const std::optional<std::intptr_t> h = parse_stream(s, what);
  if (!h) return rs::default_stream(d);
  if (!d.is_cuda())
    throw rs::invalid_argument(std::string(what) + ": " + d.name() + " takes no stream handle (got " +
                               std::to_string(*h) + ")");
  return rs::stream_ref(d, native_of(*h));
}

}  // namespace

void bind_streams(nb::module_& m) {
  // Whether an object of the core's classes is made (its __init__ ran): a second __init__ is refused
  // by the package, which nanobind would answer with a warning and an "incompatible arguments" error.
  m.def("_made", [](nb::handle h) { return nb::inst_check(h) && nb::inst_ready(h); }, nb::arg("x"));
  nb::class_<py_stream>(m, "Stream", nb::is_weak_referenceable(), "A stream resident makes on one device (non-blocking on a GPU): queue calls on it "
                        "with stream=s. Speaks the CUDA stream protocol (__cuda_stream__); its handle is 0 on the CPU.")
      .def("__init__", [](py_stream* self, const std::optional<std::string>& dev) { new (self) py_stream(pick(dev)); },
           nb::arg("device") = nb::none())
      .def("__init__", [](py_stream*, nb::args args, nb::kwargs kwargs) {
        interrupts_again(args, kwargs);
        throw rs::invalid_type("resident.Stream(device=None) takes a device name such as 'cuda:0' or 'cpu'");
      })
      .def_prop_ro("device", [](const py_stream& p) { return p.s().device().name(); })
      .def_prop_ro("handle", &py_stream::handle, "the cudaStream_t as an int (0 on the CPU)")
      .def("__cuda_stream__", [](const py_stream& p) { return nb::make_tuple(0, p.handle()); })
      .def("synchronize", [](const py_stream& p) {
        gil_released unlocked;
        p.s().synchronize();
      }, "Blocks until the work queued on the stream so far has finished.")
      .def("wait_for", [](const py_stream& p, nb::handle before) {
        if (nb::isinstance<py_event>(before)) {
          nb::cast<const py_event&>(before).e.wait_on(p.s().ref());
          return;
        }
        p.s().ref().wait_for(stream_of(before, p.s().device(), "Stream.wait_for"));
      }, nb::arg("before").none(), "Later work on this stream waits for `before` (an Event, or a stream's work queued "
                                    "so far); no host wait.")
      .def("record", [](const py_stream& p) {
        auto* ev = new py_event(p.s().device());
        ev->e.record(p.s().ref());
        return ev;
      }, nb::rv_policy::take_ownership, "A new Event recorded at the stream's current end.")
      .def("__repr__", [](const py_stream& p) {
        return "resident.Stream(device=" + p.s().device().name() + ", handle=" + std::to_string(p.handle()) + ")";
      });
  nb::class_<py_event>(m, "Event", nb::is_weak_referenceable(), "A point in a stream to wait on and to time between (timing enabled).")
      .def("__init__", [](py_event* self, const std::optional<std::string>& dev) { new (self) py_event(pick(dev)); },
           nb::arg("device") = nb::none())
      .def("__init__", [](py_event*, nb::args args, nb::kwargs kwargs) {
        interrupts_again(args, kwargs);
        throw rs::invalid_type("resident.Event(device=None) takes a device name such as 'cuda:0' or 'cpu'");
      })
      .def("record", [](py_event& p, nb::handle stream) {
        p.e.record(stream_of(stream, p.d, "Event.record"));
      }, nb::arg("stream") = nb::none(), "Records the event at the current end of `stream` (an rs.Stream, any stream= "
                                         "object; None: the default stream).")
      .def("synchronize", [](const py_event& p) {
        gil_released unlocked;
        p.e.synchronize();
      }, "Blocks until the recorded work has finished.")
      .def("wait_for", [](const py_event& p, nb::handle stream) {
        p.e.wait_on(stream_of(stream, p.d, "Event.wait_for"));
      }, nb::arg("stream").none(), "Makes `stream` wait for this event before its later work (no host wait).")
      .def("elapsed_ms", [](const py_event& start, const py_event& end) -> double {
        gil_released unlocked;
        return elapsed_ms(start.e, end.e);  // a friend of event, found through its argument
      }, nb::arg("end"), "Milliseconds from this event to `end` (both recorded, one device); waits for `end`.")
      .def_prop_ro("device", [](const py_event& p) { return p.d.name(); })
      .def("__repr__", [](const py_event& p) { return "resident.Event(device=" + p.d.name() + ")"; });

  m.def("_stream_handle", [](nb::handle s) { return parse_stream(s, "stream"); }, nb::arg("stream").none(),
        "The int handle a stream= argument names (None: none).");
}

}  // namespace resident::py
