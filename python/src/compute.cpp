// Work on any library's float arrays: random fills, reductions, programs of built-in operations (one
// fused kernel), matmul. The kernels are instantiated in ops.cpp.
#include "bindings.hpp"

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ops.hpp"
#include "resident/fuse/program.hpp"

namespace resident::py {

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

void after_reads_on(const py_array& out, std::initializer_list<const py_array*> inputs) {
  const rs::stream_ref os = out.work_stream();
  for (const py_array* in : inputs) {
    const rs::stream_ref is = in->work_stream();
    if (is.device() == os.device() && is.native() != os.native()) is.wait_for(os);
  }
}

// Arrays of one element-wise call have one shape, as NumPy's do (nothing broadcasts): a (2, 3) array
// beside a (3, 2) one pairs elements NumPy would refuse to. A 1-D (or 0-d) array of the same count
// stands for any shape, its elements in C order; counts are checked where the call runs.
void check_shapes(const py_array& a, const py_array& b, const char* what) {
  if (a.shape.size() <= 1 || b.shape.size() <= 1 || a.shape == b.shape) return;
  auto text = [](const std::vector<std::int64_t>& s) {
    std::string t = "(";
    for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + ")";
  };
  throw rs::shape_mismatch(std::string(what) + ": arrays of shapes " + text(a.shape) + " and " + text(b.shape) +
                           " in one element-wise call; give arrays of one shape (or reshape one to 1-D)");
}

namespace {

void any_fill_uniform(nb::object x, int_arg<std::uint64_t> seed_, int_arg<std::uint64_t> offset_, double low, double high, nb::object stream) {
  const auto seed = seed_.get("fill_uniform", "seed"), offset = offset_.get("fill_uniform", "offset");
  const call_stream on(stream, "fill_uniform");
  py_array a = from_dlpack(x);
  a.check_writable("fill_uniform");
  on_floats(a, "fill_uniform", [&](auto r) {
    fill_uniform(r, seed, offset, low, high);
    a.finish_foreign();
  });
}

void any_fill_normal(nb::object x, int_arg<std::uint64_t> seed_, int_arg<std::uint64_t> offset_, double mean, double sd, nb::object stream) {
  const auto seed = seed_.get("fill_normal", "seed"), offset = offset_.get("fill_normal", "offset");
  const call_stream on(stream, "fill_normal");
  py_array a = from_dlpack(x);
  a.check_writable("fill_normal");
  on_floats(a, "fill_normal", [&](auto r) {
    fill_normal(r, seed, offset, mean, sd);
    a.finish_foreign();
  });
}

void any_fill_bits(nb::object x, int_arg<std::uint64_t> seed_, int_arg<std::uint64_t> offset_, nb::object stream) {
  const auto seed = seed_.get("fill_bits", "seed"), offset = offset_.get("fill_bits", "offset");
  const call_stream on(stream, "fill_bits");
  py_array a = from_dlpack(x);
  if (!(a.dtype.code == kDLUInt && a.dtype.bits == 32))
    throw rs::invalid_type("fill_bits fills uint32 arrays, not " + rs::dlpack_dtype_name(a.dtype));
  a.check_writable("fill_bits");
  gil_released unlocked;
  fill_bits(a.ref<std::uint32_t>(), seed, offset);
  a.finish_foreign();
}

void any_fill_integers(nb::object x, int_arg<std::uint64_t> seed_, int_arg<std::int64_t> low_, int_arg<std::int64_t> high_,
                       int_arg<std::uint64_t> offset_, nb::object stream) {
  const auto seed = seed_.get("fill_integers", "seed"), offset = offset_.get("fill_integers", "offset");
  // Any bound of an int32 or a uint32 array (high one past the largest): the C++ check then names the
  // element type's own range.
  constexpr std::int64_t lowest = -(std::int64_t(1) << 31), past = std::int64_t(1) << 32;
  const auto low = low_.get_in("fill_integers", "low", lowest, past), high = high_.get_in("fill_integers", "high", lowest, past);
  const call_stream on(stream, "fill_integers");
  py_array a = from_dlpack(x);
  const bool i32 = a.dtype.code == kDLInt && a.dtype.bits == 32, u32 = a.dtype.code == kDLUInt && a.dtype.bits == 32;
  if (!i32 && !u32)
    throw rs::invalid_type("fill_integers fills int32 or uint32 arrays, not " + rs::dlpack_dtype_name(a.dtype) +
                               " (fill a float array with fill_uniform)");
  a.check_writable("fill_integers");
  gil_released unlocked;  // the bounds are checked against the element type before any work
  if (i32) fill_integers(a.ref<std::int32_t>(), seed, offset, low, high);
  else fill_integers(a.ref<std::uint32_t>(), seed, offset, low, high);
  a.finish_foreign();
}

// A float32 sum, added in double, rounded once to float32 as every other float32 sum is (a chain's, a
// program's, a stream's): past float32's range it is inf, as NumPy's. Written out: a double beyond
// float's range converted to float is undefined behaviour in C++.
float rounded_to_float(double v) {
  const double rounds_to_inf = double(std::numeric_limits<float>::max()) + std::ldexp(1.0, 103);  // half an ulp above
  if (std::abs(v) >= rounds_to_inf) return v > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  return float(v);
}

// A Python float for float arrays (a float32 sum rounded to float32), an exact Python int for integer
// arrays.
nb::object any_reduce(nb::object x, reduction r, nb::object stream) {
  const call_stream on(stream, "a reduction");
  py_array a = from_dlpack(x);
  // An empty array has a sum (0) but no least or greatest element.
  if (a.size() == 0 && r != reduction::sum)
    throw rs::invalid_argument(std::string(r == reduction::min ? "min" : "max") +
                               " of an empty array: it has no elements");
  return visit(a.dtype, [&](auto t) -> nb::object {
    using T = decltype(t);
    reduced_type<T> v;
    {
      gil_released unlocked;
      v = reduce(a.ref<T>(), r);
    }
    if constexpr (std::is_same_v<T, float>) return nb::cast(double(rounded_to_float(v)));
    return nb::cast(v);
  });
}

// out = the inclusive scan of x's elements in C order (NumPy's axis=None); out is made when not given:
// x's element type, a sum of integers in 64 bits (NumPy's and PyTorch's rule). Queued without a host wait.
nb::object any_scan(nb::object x, nb::object out_obj, reduction r, nb::object stream) {
  const char* what = r == reduction::sum ? "cumsum" : r == reduction::min ? "cummin" : "cummax";
  const call_stream on(stream, what);
  py_array a = from_dlpack(x);
  const DLDataType wide = visit(a.dtype, [](auto t) { return rs::dlpack_dtype<reduced_type<decltype(t)>>(); });
  if (out_obj.is_none()) {
    const bool widen = r == reduction::sum && a.dtype.code != kDLFloat;
    out_obj = nb::cast(empty_of({std::int64_t(a.size())}, widen ? wide : a.dtype, a.device()));
  }
  py_array o = from_dlpack(out_obj);
  o.check_writable(what);
  check_shapes(a, o, what);
  if (a.size() != o.size())
    throw rs::shape_mismatch(std::string(what) + ": the input has " + std::to_string(a.size()) + " elements, out " +
                             std::to_string(o.size()));
  check_overlap(a, o, what);
  const auto same = [](DLDataType p, DLDataType q) { return p.code == q.code && p.bits == q.bits && p.lanes == q.lanes; };
  const bool widened = r == reduction::sum && same(o.dtype, wide) && !same(o.dtype, a.dtype);
  if (!same(o.dtype, a.dtype) && !widened)
    throw rs::invalid_argument(std::string(what) + ": the input holds " + rs::dlpack_dtype_name(a.dtype) +
                               "; give an out array of " + rs::dlpack_dtype_name(a.dtype) +
                               (r == reduction::sum && !same(wide, a.dtype) ? " or " + rs::dlpack_dtype_name(wide) : "") +
                               ", not " + rs::dlpack_dtype_name(o.dtype));
  visit(a.dtype, [&](auto t) {
    using T = decltype(t);
    gil_released unlocked;
    if (widened) scan(a.ref<T>(), o.ref<reduced_type<T>>(), r);
    else scan(a.ref<T>(), o.ref<T>(), r);
    after_reads_on(o, {&a});
    o.finish_foreign();
  });
  return out_obj;
}

// The reductions of several arrays (a sharded array's shards) launched all at once, each into a value
// on its own device, then read: the devices reduce side by side, where one call per shard in turn (or a
// thread per shard, waking in turn) left each device idle while another was read.
nb::list reduce_each(const nb::list& xs, reduction r) {
  std::vector<py_array> arrays;
  for (nb::handle x : xs) {
    arrays.push_back(from_dlpack(nb::borrow(x)));
    if (arrays.back().size() == 0 && r != reduction::sum)  // as any_reduce: a sum of none is 0, a min is not
      throw rs::invalid_argument(std::string(r == reduction::min ? "min" : "max") + " of an empty array: it has no elements");
  }
  using value = std::variant<double, std::int64_t, std::uint64_t>;
  std::vector<std::function<value()>> reads;
  std::vector<value> values;
  {
    gil_released unlocked;
    for (py_array& a : arrays)
      visit(a.dtype, [&](auto t) {
        using T = decltype(t);
        auto out = std::make_shared<array<reduced_type<T>>>(reduce_into(a.ref<T>(), r));
        reads.push_back([out] { return value(out->to_host()[0]); });
      });
    for (auto& read : reads) values.push_back(read());
  }
  nb::list result;
  for (const value& v : values) std::visit([&](auto x) { result.append(nb::cast(x)); }, v);
  return result;
}

}  // namespace

// ---- run-time programs -------------------------------------------------------------------------

// A call with other arguments than (x, out=None, stream=None): the typed error, not nanobind's list of
// signatures (tried only after the call's own overload did not match).
[[noreturn]] static void throw_call_signature(const char* what) {
  throw rs::invalid_type(std::string(what) + "(x, out=None, stream=None) takes one array, and optionally the output "
                         "array and a stream; e.g. p(x) in place or p(x, out=y)");
}

void run_interpreted(const rs::program& p, const py_array& a, const py_array& o) {
  o.check_writable("program");
  check_overlap(a, o, "program");
  check_shapes(a, o, "program");
  if (!(a.dtype.code == o.dtype.code && a.dtype.bits == o.dtype.bits))
    throw rs::invalid_argument("program: the input holds " + rs::dlpack_dtype_name(a.dtype) + ", the output " +
                               rs::dlpack_dtype_name(o.dtype));
  if (a.shape != o.shape && a.size() != o.size())
    throw rs::shape_mismatch("program: the input has " + std::to_string(a.size()) + " elements, the output " +
                             std::to_string(o.size()));
  on_floats(a, "a program", [&](auto r) {
    using T = typename decltype(r)::value_type;
    rs::run(p, r, o.ref<T>());
    after_reads_on(o, {&a});
    o.finish_foreign();
  });
}

namespace {

// out = p(x) (out defaults to x: in place), as one kernel; float32 or float64.
nb::object run_program(const rs::program& p, nb::object x, nb::object out, nb::object stream) {
  const call_stream on(stream, "program");
  py_array a = from_dlpack(x);
  run_interpreted(p, a, out.is_none() ? a : from_dlpack(out));
  return out.is_none() ? x : out;
}

double sum_program(const rs::program& p, nb::object x, nb::object stream) {
  const call_stream on(stream, "program.sum");
  py_array a = from_dlpack(x);
  return on_floats(a, "a program", [&](auto r) { return double(rs::run_sum(p, r)); });
}

// ---- matmul -------------------------------------------------------------------------------------

// out = alpha * a @ b + beta * out for 2-D C-contiguous float32 / float64 arrays of any library on one
// device, by one of the ladder's algorithms; out is made (beta must then be 0) when not given.
nb::object matmul(nb::object a_obj, nb::object b_obj, nb::object out_obj, const std::string& algo_name, double alpha,
                  double beta, nb::object stream) {
  const call_stream on(stream, "matmul");
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
    gil_released unlocked;
    rs::detail::matmul({ext(a, 0), ext(b, 1), ext(a, 1), a.data, b.data, c.data, ext(a, 1), ext(b, 1), ext(c, 1),
                        alpha, beta, a.itemsize(), c.work_stream()},
                       algo);
    after_reads_on(c, {&a, &b});
    c.finish_foreign();
  }
  return out_obj;
}

}  // namespace

void bind_compute(nb::module_& m) {
  nb::class_<rs::op>(m, "op", nb::dynamic_attr(), "One built-in element-wise operation; compose them with | into a program.")
      .def("__init__", [](rs::op*, nb::args, nb::kwargs) {
        throw rs::invalid_type("resident.op is not called itself: its functions make operations, e.g. rs.op.sqrt(), "
                               "rs.op.add(1.0), rs.op.parse('affine(1.5, 0.5)'); compose them with |");
      })
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
      .def_ro("a", &rs::op::a, "the operation's first constant")
      .def_ro("b", &rs::op::b, "its second constant")
      .def("__repr__", [](const rs::op& o) { return "resident.op." + o.name(); })
      .def("__call__", &op_call, at_python_line(), nb::arg("x"), nb::arg("out") = nb::none(), nb::arg("stream") = nb::none(),
           "out = op(x) as one kernel (out defaults to x: in place), as a program of one operation.")
      .def("__call__", [](nb::handle, nb::args, nb::kwargs) -> nb::object { throw_call_signature("op"); })
      .def("__or__", [](const rs::op& a, const rs::op& b) { return rs::program{} | a | b; }, nb::is_operator())
      .def("__or__", [](const rs::op& a, const rs::program& q) { return (rs::program{} | a) | q; }, nb::is_operator());

  // The interpreter of programs, where no run-time compiler is available (resident/_program.py).
  m.def("_run_program", &run_program, at_python_line(), nb::arg("program"), nb::arg("x"), nb::arg("out") = nb::none(),
        nb::arg("stream") = nb::none());
  // dynamic_attr: the package keeps a program's compiled chains on it (resident/_program.py).
  nb::class_<rs::program>(m, "program", nb::dynamic_attr(),
                          "A chain of built-in operations run as ONE fused kernel: p(x) in place, p(x, out), p.sum(x).")
      .def(nb::init<>())
      .def("__init__", [](rs::program* self, const std::vector<rs::op>& ops) { new (self) rs::program(ops); },
           nb::arg("ops"))
      .def("__init__", [](rs::program*, nb::args args, nb::kwargs kwargs) {
        interrupts_again(args, kwargs);
        throw rs::invalid_type("program(ops) takes a list of resident.op, e.g. rs.program([rs.op.sqrt(), "
                               "rs.op.add(1)]); it was given " + shown(args) +
                               (kwargs.size() ? " and " + shown(kwargs) : std::string()));
      })
      .def("__or__", [](const rs::program& p, const rs::op& o) { return p | o; }, nb::is_operator())
      .def("__or__", [](const rs::program& p, const rs::program& q) { return p | q; }, nb::is_operator())
      .def_prop_ro("ops", &rs::program::ops)
      .def_prop_ro("name", &rs::program::name)
      .def("__repr__", [](const rs::program& p) { return "resident.program(" + p.name() + ")"; })
      .def("__len__", [](const rs::program& p) { return p.ops().size(); })
      .def("__call__", &program_call, at_python_line(), nb::arg("x"), nb::arg("out") = nb::none(),
           nb::arg("stream") = nb::none(),
           "out = p(x) as one kernel (out defaults to x: in place); float32 or float64 arrays of any library, "
           "queued on `stream` (else the current stream of x's library) without a host wait. Compiled by the "
           "run-time compiler where one is available (p.engine says which ran).")
      .def("__call__", [](nb::handle, nb::args, nb::kwargs) -> nb::object { throw_call_signature("program"); })
      .def("sum", &sum_program, at_python_line(), nb::arg("x"), nb::arg("stream") = nb::none(), "The sum of p(x[i]) in one pass, in x's precision. Synchronizes.");

  m.def("_time_cpp_calls", [](const rs::program& p, nb::object x, int calls) {
    // The same call made from C++ in a loop: wall time per call, the queue drained at the end.
    if (calls < 1) throw rs::invalid_argument("_time_cpp_calls: " + std::to_string(calls) + " calls; give 1 or more");
    py_array a = from_dlpack(x);
    if (!(a.dtype.code == kDLFloat && a.dtype.bits == 32)) throw rs::invalid_argument("_time_cpp_calls takes float32");
    a.check_writable("_time_cpp_calls");
    gil_released unlocked;
    auto r = a.ref<float>();
    rs::run(p, r, r);
    a.stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) rs::run(p, r, r);
    a.stream.synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  }, nb::arg("program"), nb::arg("x"), nb::arg("calls"));

  m.def("matmul", &matmul, at_python_line(), nb::arg("a"), nb::arg("b"), nb::arg("out") = nb::none(), nb::arg("algo") = "auto",
        nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0, nb::arg("stream") = nb::none(),
        "out = alpha * a @ b + beta * out (2-D float32 / float64 arrays of any library, one device) by one of the "
        "ladder's algorithms: auto, naive, blocked, shared, tuned, vendor, vendor_tf32. Asynchronous on "
        "out's stream for resident's arrays; finished before returning for other libraries' arrays.");

  m.def("fill_uniform", &any_fill_uniform, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("offset") = 0, nb::arg("low") = 0.0,
        nb::arg("high") = 1.0, nb::arg("stream") = nb::none());
  m.def("fill_normal", &any_fill_normal, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("offset") = 0, nb::arg("mean") = 0.0,
        nb::arg("sd") = 1.0, nb::arg("stream") = nb::none());
  m.def("fill_bits", &any_fill_bits, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("offset") = 0,
        nb::arg("stream") = nb::none());
  m.def("fill_integers", &any_fill_integers, at_python_line(), nb::arg("x"), nb::arg("seed"), nb::arg("low"),
        nb::arg("high"), nb::arg("offset") = 0, nb::arg("stream") = nb::none());
  m.def("sum", [](nb::object x, nb::object stream) { return any_reduce(x, reduction::sum, stream); }, at_python_line(),
        nb::arg("x"), nb::arg("stream") = nb::none());
  m.def("min", [](nb::object x, nb::object stream) { return any_reduce(x, reduction::min, stream); }, at_python_line(),
        nb::arg("x"), nb::arg("stream") = nb::none());
  m.def("max", [](nb::object x, nb::object stream) { return any_reduce(x, reduction::max, stream); }, at_python_line(),
        nb::arg("x"), nb::arg("stream") = nb::none());
  struct scan_kind {
    const char* name;
    reduction r;
    const char* doc;
  };
  for (const scan_kind& k : {
           scan_kind{"cumsum", reduction::sum, "out[i] = x[0] + ... + x[i] over x's elements in C order, added in out's "
                                               "type (made when not given: x's type, 64-bit for integers)."},
           scan_kind{"cummin", reduction::min, "out[i] = min(x[0], ..., x[i]) over x's elements in C order (NaN "
                                               "propagates)."},
           scan_kind{"cummax", reduction::max, "out[i] = max(x[0], ..., x[i]) over x's elements in C order (NaN "
                                               "propagates)."}})
    m.def(k.name, [r = k.r](nb::object x, nb::object out, nb::object stream) { return any_scan(x, out, r, stream); },
          at_python_line(), nb::arg("x"), nb::arg("out") = nb::none(), nb::kw_only(), nb::arg("stream") = nb::none(),
          k.doc);
  m.def("_reduce_each", [](const nb::list& xs, const std::string& op) {
        if (op != "sum" && op != "min" && op != "max") throw rs::invalid_argument("_reduce_each: op is sum, min or max");
        return reduce_each(xs, op == "sum" ? reduction::sum : op == "min" ? reduction::min : reduction::max);
      }, at_python_line(), nb::arg("xs"), nb::arg("op"));

}

}  // namespace resident::py
