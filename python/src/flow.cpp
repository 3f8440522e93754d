// Flows and graphs of Python work: named stages with dependencies, independent ones on concurrent
// streams, resident calls inside a stage on the stage's stream; captured into one graph.
#include "bindings.hpp"

#include <chrono>
#include <shared_mutex>
#include <thread>

#include "resident/detail/cuda_runtime.hpp"
#include "resident/flow/flow.hpp"

namespace resident::py {

namespace {

// after=: the numbers add returned. One that is negative or past 64 bits names no stage: FlowError, as
// an unknown one; an item that is no integer is InvalidType.
std::vector<std::size_t> stage_numbers(nb::handle after, const std::string& name) {
  const std::string where = "Flow.add: after= of stage '" + name + "'";
  if (PyUnicode_Check(after.ptr()) || PyBytes_Check(after.ptr()) || !PySequence_Check(after.ptr()))
    throw rs::invalid_type(where + " must be a list of stage numbers, not " + py_type_name(after));
  const nb::object seq = nb::steal(PySequence_Fast(after.ptr(), "after="));
  if (!seq.is_valid()) {
    nb::python_error e;
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    throw rs::invalid_type(where + " could not be read (" + str_shown(e.value()) + ")");
  }
  std::vector<std::size_t> r;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.ptr()); ++i) {
    nb::handle item = PySequence_Fast_GET_ITEM(seq.ptr(), i);
    if (PyBool_Check(item.ptr())) throw rs::invalid_type(where + " holds a bool; give stage numbers");
    const nb::object k = nb::steal(PyNumber_Index(item.ptr()));
    if (!k.is_valid()) {
      nb::python_error e;
      if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
      throw rs::invalid_type(where + " holds a " + py_type_name(item) + "; give stage numbers (whole numbers)");
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(k.ptr(), &overflow);
    if (overflow || v < 0)
      throw rs::flow_error("flow: stage '" + name + "' is to run after stage " + utf8_of(nb::str(k)) +
                           ", which does not exist (stages are numbered from 0 as they are added)");
    r.push_back(std::size_t(v));
  }
  return r;
}

// A stage's work (and capture's) is called with no arguments: one that cannot be is refused when given,
// before any stage runs. A callable without a signature to read (some built-ins) is taken as it is.
void check_called_bare(nb::handle work, const std::string& what) {
  if (!PyCallable_Check(work.ptr())) throw rs::invalid_type(what + " is not callable");
  // Calling an async or generator function runs none of its body: the stage would do nothing.
  const nb::module_ inspect = nb::module_::import_("inspect");
  for (const char* kind : {"iscoroutinefunction", "isasyncgenfunction", "isgeneratorfunction"}) {
    bool is = false;
    try {
      is = nb::cast<bool>(inspect.attr(kind)(work));
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    }
    if (is)
      throw rs::invalid_type(what + " is " + (kind[2] == 'c' ? "an async function" : kind[2] == 'a' ?
                             "an async generator function" : "a generator function") + ", whose call runs none of "
                             "its body; give a plain function (run a coroutine with asyncio.run inside one, or "
                             "consume a generator there)");
  }
  nb::object sig;
  try {
    sig = nb::module_::import_("inspect").attr("signature")(work);
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt, SystemExit: unchanged
    return;  // no signature to read (a built-in, or one whose own code raised): taken as it is
  }
  try {
    sig.attr("bind")();
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    throw rs::invalid_type(what + " is called with no arguments, which it cannot take (" +
                           str_shown(e.value()) + "); give a callable of no arguments, e.g. "
                           "lambda: work(a, b)");
  }
}

// A Python callable as the work of a stage holds it: one reference, which the garbage collector sees
// through the Flow or Graph that owns the cell (their tp_traverse) and which their tp_clear drops.
using callable_cell = std::shared_ptr<nb::object>;

callable_cell cell_of(nb::object fn) {
  return callable_cell(new nb::object(std::move(fn)), [](nb::object* p) { drop_python(p); });
}

// Calls a Python stage with the GIL held and resident's work on s. Python errors propagate as
// nb::python_error (a flow wraps them into its stage_error).
std::function<void(rs::stream_ref)> python_work(callable_cell held) {
  return [held](rs::stream_ref s) {
    gil_held locked;
    if (!held->is_valid())
      throw rs::invalid_argument("the work was dropped by the garbage collector (its Flow or Graph was part of an "
                                 "unreachable cycle)");
    stage_stream_scope scope(s);
    nb::object r = (*held)();
    // A coroutine or generator returned (a callable object whose __call__ is async): its body never
    // ran. Closed (no "never awaited" warning later) and refused, as the stage's error.
    const nb::module_ inspect = nb::module_::import_("inspect");
    if (!r.is_none() && (nb::cast<bool>(inspect.attr("isawaitable")(r)) || nb::cast<bool>(inspect.attr("isgenerator")(r)) ||
                         nb::cast<bool>(inspect.attr("isasyncgen")(r)))) {
      const std::string kind = py_type_name(r);
      if (has_attr(r, "close")) r.attr("close")();
      throw rs::invalid_type("the work returned an unstarted " + kind + ", its body never run (an async or generator "
                             "function's call); give work that does its work when called, e.g. lambda: "
                             "asyncio.run(work())");
    }
  };
}

// The work a graph records: fn's resident work on s. On CUDA it runs once, while recorded, its error as
// it is; a CPU replay runs it again, its error then a StageError, as a flow's stage's (errors.cpp).
std::function<void()> recorded(callable_cell cell, rs::stream_ref s) {
  auto work = python_work(std::move(cell));
  return [work, s] {
    if (s.device().is_cuda()) return work(s);
    try {
      work(s);
    } catch (const std::exception& x) {
      std::throw_with_nested(rs::stage_error("captured work", std::string("the captured work failed: ") + x.what()));
    }
  };
}

// A CUDA graph's update has it to itself (replays launch the executable graph the update rewrites). The
// updating thread is known, so that its own work replaying or updating the graph is refused rather than
// waiting for itself. A CPU graph needs none of this: the C++ graph's turn orders its replays and
// updates, and refuses one from inside the other.
struct update_turn {
  std::shared_mutex m;
  std::atomic<std::thread::id> updater{};
  void refuse_inside(const char* what) const {
    if (updater.load() == std::this_thread::get_id())
      throw rs::invalid_argument(std::string("Graph.") + what + " from inside the same graph's update; call it after "
                                 "update returns");
  }
};

// A captured graph and what its work needs alive: the Python callables (inside the work, which a CPU
// replay calls again: the Flow it was captured from, or cells of its own) and the arrays the stages
// declared. Replays run on the device's default stream, where arrays' own work runs: ordered after the
// work queued there before the replay and before the work queued after it, with no event between streams.
struct py_graph {
  rs::graph g;
  rs::stream_ref stream;                      // the default stream of the graph's device
  std::shared_ptr<const void> stream_owner;   // the flow or stream the work was captured on
  std::vector<std::shared_ptr<const void>> keep;
  nb::object flow;                            // the Flow captured from, which holds the callables
  std::vector<callable_cell> callables;       // capture()'s (or the last update()'s) own work
  rs::stream_ref recorded_on;                 // the stream captured on, where an update records
  std::shared_ptr<update_turn> turn = std::make_shared<update_turn>();

  // Asynchronous on CUDA (the GIL is released around the launch, which may wait for room in the
  // launch queue); on the CPU the captured Python work runs inside (it takes the GIL back: see python_work).
  // With a stream given, the replay is queued there instead (ordering it is then the caller's).
  void replay(nb::object on) {
    const std::optional<std::intptr_t> h = parse_stream(on, "Graph.replay");
    if (h && !stream.device().is_cuda())
      throw rs::invalid_argument("Graph.replay: a graph of " + stream.device().name() + " takes no stream");
    const rs::stream_ref s = h ? rs::stream_ref(stream.device(), native_of(*h)) : stream;
    if (!s.device().is_cuda()) {
      gil_released unlocked;
      g.replay(s);
      return;
    }
    turn->refuse_inside("replay");
    gil_released unlocked;
    const std::shared_lock<std::shared_mutex> shared(turn->m);
    g.replay(s);
  }

  // Records the resident work fn() issues into this graph in place (graph::update): the new work must
  // have the captured graph's shape on CUDA; on the CPU a replay calls fn() from now on.
  void update(nb::object fn) {
    check_called_bare(fn, "Graph.update: the work");
    callable_cell cell = cell_of(std::move(fn));
    std::function<void()> work = recorded(cell, recorded_on);
    if (!recorded_on.device().is_cuda()) {
      gil_released unlocked;
      g.update(recorded_on, work);
    } else {
      turn->refuse_inside("update");
      gil_released unlocked;
      const std::unique_lock<std::shared_mutex> alone(turn->m);
      turn->updater.store(std::this_thread::get_id());
      struct done {
        update_turn& t;
        ~done() { t.updater.store(std::thread::id{}); }
      } clear{*turn};
      g.update(recorded_on, work);
    }
    callables.assign(1, std::move(cell));  // the old work is not called again
  }
};

// A stage's declared arrays: a list or tuple of them (an array itself is no list of arrays: it was read
// element by element).
std::vector<nb::object> arrays_of(nb::handle given, const char* what) {
  if (!PyList_Check(given.ptr()) && !PyTuple_Check(given.ptr()))
    throw rs::invalid_type(std::string("Flow.add: ") + what + " takes a list of arrays, not a " + py_type_name(given) +
                           "; a single array goes as [x]");
  std::vector<nb::object> out;
  for (nb::handle h : nb::borrow<nb::sequence>(given)) out.push_back(nb::borrow(h));
  return out;
}

struct py_flow {
  std::shared_ptr<rs::flow> f;  // shared with the graphs captured from it, which replay on its stream
  std::vector<std::shared_ptr<const void>> keep;
  std::vector<callable_cell> callables;  // the stages' work, seen by the garbage collector
  std::vector<callable_cell> declared;   // other libraries' arrays the stages declared, seen by it too

  py_flow(const std::optional<std::string>& dev, int streams) : f(std::make_shared<rs::flow>(pick(dev), streams)) {}

  std::size_t add(const std::string& name, nb::object work, nb::handle reads_given, nb::handle writes_given,
                  nb::handle after_given, bool infer) {
    check_called_bare(work, "Flow.add: the work of stage '" + name + "'");
    const call_stream on(nb::none(), "Flow.add");  // names the call in the arrays' refusals
    const std::vector<std::size_t> after = stage_numbers(after_given, name);
    const std::vector<nb::object> reads = arrays_of(reads_given, "reads"), writes = arrays_of(writes_given, "writes");
    rs::access acc;
    auto declare = [&](const std::vector<nb::object>& arrays, bool write) {
      for (const nb::object& o : arrays) {
        py_array a = from_dlpack(o);
        if (!(a.device() == f->stream().device()))
          throw rs::device_mismatch("Flow.add: stage '" + name + "' declares an array on " + a.device().name() +
                                    "; the flow runs on " + f->stream().device().name());
        const rs::access::range r{a.data, a.size() * a.itemsize()};
        write ? acc.writes(r) : acc.reads(r);
        // Another library's array is kept as the object itself, which the garbage collector sees (a
        // cycle through it, an attribute of the array holding the flow, was never collected).
        if (a.foreign && !PyCapsule_CheckExact(o.ptr()))
          declared.push_back(cell_of(o));
        else
          keep.push_back(a.owner);
      }
    };
    for (const nb::object& o : writes) from_dlpack(o).check_writable("Flow.add: stage '" + name + "'");
    declare(reads, false);
    declare(writes, true);
    callables.push_back(cell_of(std::move(work)));
    auto stage = python_work(callables.back());
    // Without the GIL: the flow waits for a run on another thread, whose stages take the GIL.
    gil_released unlocked;
    return f->add(name, std::move(stage), std::move(acc), after, infer ? rs::inference::on : rs::inference::off);
  }

  void run() {
    gil_released unlocked;  // each stage takes the GIL back for its Python work
    f->run();
  }

  py_graph capture() {
    py_graph g;
    {
      gil_released unlocked;
      g.g = f->capture();
    }
    g.stream = rs::default_stream(f->stream().device());
    g.recorded_on = f->stream();
    g.stream_owner = f;
    g.keep = keep;
    return g;
  }

  nb::list report() const {
    std::vector<rs::stage_report> rows;
    {
      gil_released unlocked;  // as in add: a run on another thread holds the flow
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
  check_called_bare(fn, "capture: the work");
  py_graph g;
  auto own = std::make_shared<rs::stream>(pick(dev));
  g.stream = rs::default_stream(own->device());
  g.stream_owner = own;
  g.callables.push_back(cell_of(std::move(fn)));
  const rs::stream_ref s = own->ref();
  g.recorded_on = s;
  std::function<void()> work = recorded(g.callables.back(), s);
  {
    gil_released unlocked;
    s.wait_for(rs::default_stream(s.device()));  // after the work queued so far, as a flow starts
    g.g = rs::graph::capture(s, std::move(work));
  }
  return g;
}

// The garbage collector's view of a Flow and a Graph: the Python objects they hold (nanobind's
// "reference cycles involving functions").
int flow_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const py_flow* f = nb::inst_ptr<py_flow>(self);
  for (const callable_cell& c : f->callables) Py_VISIT(c->ptr());
  for (const callable_cell& c : f->declared) Py_VISIT(c->ptr());
  return 0;
}
int flow_clear(PyObject* self) {
  if (!nb::inst_ready(self)) return 0;
  py_flow* f = nb::inst_ptr<py_flow>(self);
  for (const callable_cell& c : f->callables) *c = nb::object();
  for (const callable_cell& c : f->declared) *c = nb::object();
  return 0;
}
int graph_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  const py_graph* g = nb::inst_ptr<py_graph>(self);
  Py_VISIT(g->flow.ptr());
  for (const callable_cell& c : g->callables) Py_VISIT(c->ptr());
  return 0;
}
int graph_clear(PyObject* self) {
  if (!nb::inst_ready(self)) return 0;
  py_graph* g = nb::inst_ptr<py_graph>(self);
  g->flow = nb::object();
  for (const callable_cell& c : g->callables) *c = nb::object();
  return 0;
}
PyType_Slot flow_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(flow_traverse)},
                            {Py_tp_clear, reinterpret_cast<void*>(flow_clear)},
                            {0, nullptr}};
PyType_Slot graph_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(graph_traverse)},
                             {Py_tp_clear, reinterpret_cast<void*>(graph_clear)},
                             {0, nullptr}};

}  // namespace

bool capturing_now() {
  return t_stage_stream != nullptr && t_stage_stream->device().is_cuda() &&
         rs::detail::cuda::stream_is_capturing(t_stage_stream->native());
}

void bind_flow(nb::module_& m) {
  // Whether the Python work running now is being captured into a CUDA graph, where nothing may be
  // compiled and loaded (resident/_program.py then runs the interpreter's kernel).
  m.def("_capturing", &capturing_now);
  m.def("_time_cpp_replays", [](const py_graph& g, int calls) {
    // The same replays made from C++ in a loop: wall time per replay, the queue drained at the end.
    if (calls < 1) throw rs::invalid_argument("_time_cpp_replays: " + std::to_string(calls) + " calls; give 1 or more");
    gil_released unlocked;
    g.g.replay(g.stream);
    g.stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) g.g.replay(g.stream);
    g.stream.synchronize();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  }, nb::arg("graph"), nb::arg("calls"));

  nb::class_<py_graph>(m, "Graph", nb::type_slots(graph_slots), "Captured resident work: replay() runs it again as one launch (CUDA).")
      .def("__init__", [](py_graph*, nb::args, nb::kwargs) {
        throw rs::invalid_type("resident.Graph is not made directly: rs.capture(work) records the resident work "
                               "that work() issues into one");
      })
      .def("replay", &py_graph::replay, nb::arg("stream") = nb::none(),
           "Runs the captured work again, asynchronously, on the device's default stream (where arrays' own "
           "work runs): after the work queued before it, and later work sees its results. With stream=, on "
           "that stream instead (ordering it against other work is then the caller's).")
      .def("replay", [](const py_graph&, nb::args args, nb::kwargs kwargs) {  // not wrapped: a hot call
        throw rs::invalid_type("Graph.replay(stream=None) takes at most a stream; it was given " +
                               shown(args) +
                               (kwargs.size() ? " and " + shown(kwargs) : std::string()));
      })
      .def("update", &py_graph::update, nb::arg("work").none(),
           "Records the resident work that work() issues into this graph in place, keeping its instantiation "
           "(the way to change scalars between replays): on CUDA the new work must launch the same kernels in "
           "the same order and dependencies (else InvalidArgument: capture a new graph); on the CPU a replay "
           "calls work() from now on.")
      .def_prop_ro("kernels", [](const py_graph& g) { return g.g.kernels(); }, "Kernels one replay launches.");
  nb::class_<py_flow>(m, "Flow", nb::type_slots(flow_slots), "Named stages of Python work with dependencies, independent ones on concurrent "
                                 "streams; resident calls inside a stage run on the stage's stream.")
      .def("__init__", [](py_flow* self, const std::optional<std::string>& dev, int_arg<long long> streams_) {
             const long long streams = streams_.get_in("Flow", "streams", 1, rs::flow::max_streams);
             new (self) py_flow(dev, int(streams));
           }, nb::arg("device") = nb::none(), nb::arg("streams") = 4)
      .def("__init__", [](py_flow*, nb::args args, nb::kwargs kwargs) {
        interrupts_again(args, kwargs);
        throw rs::invalid_type("Flow(device=None, streams=4) takes a device name and a whole number of streams; it "
                               "was given " + shown(args) +
                               (kwargs.size() ? " and " + shown(kwargs) : std::string()));
      })
      .def("add", &py_flow::add, nb::arg("name"), nb::arg("work").none(), nb::arg("reads") = nb::list(),
           nb::arg("writes") = nb::list(), nb::arg("after") = nb::list(),
           nb::arg("infer") = true,
           "Adds a stage calling work() (no arguments); returns its id. Edges are inferred from the declared "
           "reads and writes (arrays of any library) in the order stages are added, plus `after`.")
      .def("run", &py_flow::run, "Runs every stage in dependency order and waits for them.")
      .def("capture", [](nb::handle self) {
             py_graph g = nb::cast<py_flow&>(self).capture();
             g.flow = nb::borrow(self);  // the graph's CPU replays call the flow's callables
             return g;
           }, "The whole flow as one Graph (nothing runs during the capture).")
      .def("report", &py_flow::report, "The last run's per-stage figures: name, stream, ms, kernels, bytes.")
      .def("__len__", [](const py_flow& f) { return f.f->size(); });
  m.def("capture", &capture, nb::arg("work").none(), nb::arg("device") = nb::none(),
        "The resident work that work() issues, captured into a Graph on a stream of its own (nothing runs "
        "during the capture on CUDA; on the CPU a replay calls work() again).");
}

}  // namespace resident::py
