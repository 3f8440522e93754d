// resident.jit's compiled half: run-time chains (stages from Python through Numba, or C++ text) built,
// compiled and run on any library's arrays.
#include "bindings.hpp"

#include <chrono>

#include "resident/jit/jit.hpp"

namespace resident::py {

namespace {

rs::jit::operand operand_of(const py_array& a) {
  return visit(a.dtype, [&](auto t) { return rs::jit::operand_of(a.ref<decltype(t)>()); });
}

rs::jit::element element_named(const std::string& dtype) {
  return visit(parse_dtype(dtype), [](auto t) { return rs::jit::element_of<decltype(t)>(); });
}

}  // namespace

// (kind, cc major, cc minor) of the device x lives on: what resident.jit compiles Python stages for.
nb::tuple target_of(rs::device d) {
  // Made once per device (the GIL guards the table): a chain call looks its kernel up by it.
  static std::vector<std::pair<rs::device, nb::tuple>>* made = new std::vector<std::pair<rs::device, nb::tuple>>();
  for (const auto& [dev, t] : *made)
    if (dev == d) return t;
  nb::tuple t;
  if (d.is_cpu()) {
    t = nb::make_tuple("cpu", 0, 0);
  } else {
    const auto p = rs::properties(d);
    t = nb::make_tuple("cuda", p.cc_major, p.cc_minor);
  }
  made->emplace_back(d, t);
  return t;
}

// The dtype's name as a Python string, made once per element type.
nb::handle dtype_name_of(DLDataType t) {
  static std::vector<std::pair<DLDataType, PyObject*>>* made = new std::vector<std::pair<DLDataType, PyObject*>>();
  for (const auto& [k, name] : *made)
    if (k.code == t.code && k.bits == t.bits && k.lanes == t.lanes) return name;
  PyObject* name = PyUnicode_InternFromString(rs::dlpack_dtype_name(t).c_str());
  if (!name) throw nb::python_error();
  made->emplace_back(t, name);
  return name;
}

void run_taken(const rs::jit::pipeline& p, std::span<const py_array> in, const py_array& o) {
  o.check_writable("a run-time chain");
  for (const py_array& a : in) {
    check_overlap(a, o, "a run-time chain");
    check_shapes(a, o, "a run-time chain");
    check_shapes(in[0], a, "a run-time chain");
  }
  rs::jit::inputs ops;
  ops.arrays.reserve(in.size());
  for (const auto& a : in) ops.arrays.push_back(operand_of(a));
  const rs::jit::operand oo = operand_of(o);
  {
    gil_released unlocked;
    // Counted as one call at the Python line (the profile's rows), as the built-in calls are.
    rs::detail::call_facts facts;
    for (const py_array& a : in) facts.bytes_read += a.size() * a.itemsize();
    facts.bytes_written = o.size() * o.itemsize();
    facts.elements = o.size();
    facts.stages = int(p.parts().size());
    facts.output = o.data;
    const rs::detail::call_scope scope("jit", oo.stream, facts);
    visit(o.dtype, [&](auto t) {
      using T = decltype(t);
      rs::array_ref<T> r{static_cast<T*>(const_cast<void*>(oo.data)), oo.size, oo.stream};
      if (ops.arrays.empty()) p(r);
      else p(ops, r);
    });
    for (const py_array& a : in) after_reads_on(o, {&a});
  }
  o.finish_foreign();
}

namespace {

nb::tuple jit_target(nb::object x) {
  const call_stream on(nb::none(), "a run-time chain");  // names the call in the array's refusals
  return target_of(from_dlpack(std::move(x)).device());
}

// The output of a chain's call: out (taken into `given`), else in place into the first input.
const py_array& output_of(const std::vector<py_array>& in, nb::object out, std::optional<py_array>& given) {
  if (in.empty() && out.is_none()) throw rs::invalid_argument("a run-time chain needs an input or an output array");
  if (out.is_none()) return in[0];
  given = from_dlpack(std::move(out));
  return *given;
}

void jit_run(const rs::jit::pipeline& p, nb::list inputs, nb::object out, nb::object stream) {
  const call_stream on(stream, "a run-time chain");
  std::vector<py_array> in;
  for (nb::handle h : inputs) in.push_back(from_dlpack(nb::borrow<nb::object>(h)));
  std::optional<py_array> given;
  run_taken(p, in, output_of(in, std::move(out), given));
}

// resident.jit.Chain's fast path: each array taken once, the chain built for the inputs' dtypes and
// device looked up in `built` ((dtypes, target) -> (pipeline, value dtype[, whether its loop calls a
// function Numba compiled])) and run. Returns None when it ran, else the key to build under (Python
// builds, then calls the slow path), or "guard" without running when `guard_cpu`, the arrays are on
// the CPU and the loop calls Numba's code (which may raise there: the caller runs it again inside its
// guard). A DLPack capsule among the arrays goes to the slow path untaken: a capsule is taken once,
// and one refused stays unconsumed.
nb::object jit_dispatch(nb::dict built, nb::tuple inputs, nb::object out, nb::object stream, bool guard_cpu) {
  for (nb::handle h : inputs)
    if (PyCapsule_CheckExact(h.ptr())) return nb::str("capsule");
  if (PyCapsule_CheckExact(out.ptr())) return nb::str("capsule");
  const call_stream on(stream, "a run-time chain");
  std::vector<py_array> in;
  in.reserve(inputs.size());
  nb::object dtypes = nb::steal(PyTuple_New(Py_ssize_t(inputs.size())));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(taken_for_call(inputs[i]));  // the call's own arguments: held while it runs
    PyTuple_SET_ITEM(dtypes.ptr(), Py_ssize_t(i), dtype_name_of(in.back().dtype).inc_ref().ptr());
  }
  const nb::object key = nb::make_tuple(dtypes, target_of(in.at(0).device()));
  PyObject* hit = PyDict_GetItemWithError(built.ptr(), key.ptr());
  const Py_ssize_t parts = hit && PyTuple_Check(hit) ? PyTuple_GET_SIZE(hit) : 0;
  if (parts != 2 && parts != 3) {
    if (PyErr_Occurred()) throw nb::python_error();
    return key;
  }
  // A third part says whether the loop calls a function Numba compiled (else C++ text, which cannot raise).
  if (guard_cpu && in[0].device().is_cpu()) {
    const int numba_calls = parts == 3 ? PyObject_IsTrue(PyTuple_GET_ITEM(hit, 2)) : 1;
    if (numba_calls < 0) throw nb::python_error();
    if (numba_calls) return nb::str("guard");
  }
  const nb::object entry = nb::borrow(hit);  // held: another thread may clear `built` while this one runs
  std::optional<py_array> given;
  if (!out.is_none()) given = taken_for_call(out);
  run_taken(nb::cast<const rs::jit::pipeline&>(nb::handle(PyTuple_GET_ITEM(entry.ptr(), 0))), in,
            given ? *given : in[0]);
  return nb::none();
}

}  // namespace

void refuse_empty_extreme(const rs::jit::pipeline& chain, std::size_t n, const char* what) {
  using kind = rs::jit::detail::part::kind;
  if (n != 0 || chain.parts().empty()) return;
  const kind k = chain.parts().back().what;
  if (k == kind::min || k == kind::max)
    throw rs::invalid_argument(std::string(what) + ": " + (k == kind::min ? "min" : "max") +
                               " of no values: nothing has a least or greatest element");
}

namespace {

// The chain's reduction over inputs (or over n values of its generator on device), as a Python number.
nb::object jit_result(const rs::jit::pipeline& p, nb::list inputs, const std::string& dtype, int_arg<std::size_t> n_,
                      const std::string& device, nb::object stream) {
  const std::size_t n = n_.get("result", "n");
  const call_stream on(stream, "a run-time chain");
  std::vector<py_array> in;
  for (nb::handle h : inputs) in.push_back(from_dlpack(nb::borrow<nb::object>(h)));
  for (const py_array& a : in) check_shapes(in[0], a, "a run-time chain");
  rs::jit::inputs ops;
  for (const auto& a : in) ops.arrays.push_back(operand_of(a));
  const rs::device d = rs::parse_device(device);
  refuse_empty_extreme(p, in.empty() ? n : in[0].size(), "a run-time chain");
  return visit(parse_dtype(dtype), [&](auto t) -> nb::object {
    using T = decltype(t);
    T r;
    {
      gil_released unlocked;
      // One call at the Python line, as run_taken's maps are (the C++ chain opens no scope of its own).
      rs::detail::call_facts facts;
      for (const py_array& a : in) facts.bytes_read += a.size() * a.itemsize();
      facts.elements = in.empty() ? n : in[0].size();
      facts.stages = int(p.parts().size());
      if (in.size() == 1) facts.input = in[0].data;
      const rs::detail::call_scope scope("jit reduce", ops.arrays.empty() ? rs::default_stream(d) : ops.arrays[0].stream,
                                         facts);
      r = ops.arrays.empty() ? p.template result<T>(n, d) : p.template result<T>(ops);
    }
    return nb::cast(r);
  });
}

}  // namespace

void bind_jit(nb::module_& m) {
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
      .def("run", &jit_run, at_python_line(), nb::arg("inputs"), nb::arg("out").none(), nb::arg("stream") = nb::none())
      .def("result", &jit_result, at_python_line(), nb::arg("inputs"), nb::arg("dtype"), nb::arg("n") = 0, nb::arg("device") = "cpu",
           nb::arg("stream") = nb::none());
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
  m.def("_jit_uniform", [](const std::string& dtype, int_arg<std::uint64_t> seed_, int_arg<std::uint64_t> offset_, double low, double high) {
    const auto seed = seed_.get("uniform", "seed"), offset = offset_.get("uniform", "offset");
    // The bounds as given, checked before they become floats (jit::detail::generator).
    return rs::jit::detail::generator(rs::jit::detail::part::kind::uniform,
                                      dtype == "float32" ? rs::jit::element::f32 : rs::jit::element::f64, seed,
                                      offset, low, high);
  });
  m.def("_jit_normal", [](const std::string& dtype, int_arg<std::uint64_t> seed_, int_arg<std::uint64_t> offset_, double mean, double sd) {
    const auto seed = seed_.get("normal", "seed"), offset = offset_.get("normal", "offset");
    return dtype == "float32" ? rs::jit::normal<float>(seed, offset, float(mean), float(sd))
                              : rs::jit::normal<double>(seed, offset, mean, sd);
  });
  m.def("_jit_target", &jit_target, nb::arg("x"));
  m.def("_jit_dispatch", &jit_dispatch, at_python_line(), nb::arg("built"), nb::arg("inputs"), nb::arg("out").none(),
        nb::arg("stream").none(), nb::arg("guard_cpu"));
  m.def("_time_cpp_jit_calls", [](const rs::jit::pipeline& p, nb::object x, int calls) {
    // A run-time chain called from C++ in place in a loop: wall time per call, the queue drained at the
    // end (the floor the Python call is measured against).
    if (calls < 1) throw rs::invalid_argument("_time_cpp_jit_calls: " + std::to_string(calls) + " calls; give 1 or more");
    py_array a = from_dlpack(std::move(x));
    if (!(a.dtype.code == kDLFloat && a.dtype.bits == 32)) throw rs::invalid_argument("_time_cpp_jit_calls takes float32");
    a.check_writable("_time_cpp_jit_calls");
    gil_released unlocked;
    auto r = a.ref<float>();
    const rs::jit::inputs in{{rs::jit::operand_of(r)}};
    p(in, r);
    a.stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) p(in, r);
    a.stream.synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  }, nb::arg("pipeline"), nb::arg("x"), nb::arg("calls"));
  m.def("_jit_stats", [] {
    const auto s = rs::jit::stats();
    return nb::make_tuple(s.compiled, s.disk_loads, s.memory_hits, s.rejected);
  });

}

}  // namespace resident::py
