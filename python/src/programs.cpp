// Calls of programs of built-in operations (p(x), op(x)). The first call of a program on a dtype and
// device goes through resident/_program.py, which compiles the program into a run-time chain and
// remembers it here; later calls run that chain in this one C++ call, with no Python frame between
// the caller and the launch (a call's host cost is the point).
#include "bindings.hpp"

namespace resident::py {

namespace {

// The remembered chains by slot, one slot per distinct chain. A program's dict maps a dtype name to a
// list of (target, slot) pairs; slot `interpreted` runs the interpreter (no run-time compiler there).
// The GIL guards both tables. They are emptied at exit before the core is torn down (the chains hold
// kernels): an emptied slot is a miss then.
struct remembered {
  std::vector<std::shared_ptr<const rs::jit::pipeline>> chains;
  nb::dict slot_of;  // the chain's key in resident/_program.py -> its slot
};
remembered& table() {
  static auto* t = new remembered();  // never destroyed: calls may come during interpreter teardown
  return *t;
}
constexpr long interpreted = -1;

nb::object dict_of(nb::handle self) {
  PyObject* d = PyObject_GenericGetDict(self.ptr(), nullptr);
  if (!d) {
    PyErr_Clear();
    return {};
  }
  return nb::steal(d);
}

nb::handle interned(const char* s) {
  PyObject* o = PyUnicode_InternFromString(s);
  if (!o) throw nb::python_error();
  return o;  // kept for the process's life
}

// The slot remembered in a program's dict for (dtype, device), if any.
std::optional<long> slot_in(PyObject* dict, DLDataType dtype, rs::device d) {
  PyObject* entries = PyDict_GetItemWithError(dict, dtype_name_of(dtype).ptr());
  if (!entries) {
    if (PyErr_Occurred()) throw nb::python_error();
    return std::nullopt;
  }
  if (!PyList_Check(entries)) return std::nullopt;
  const nb::object held = nb::borrow(entries);
  const nb::tuple target = target_of(d);
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); ++i) {
    const nb::object e = nb::borrow(PyList_GET_ITEM(entries, i));
    if (!PyTuple_Check(e.ptr()) || PyTuple_GET_SIZE(e.ptr()) != 2) continue;
    PyObject* t = PyTuple_GET_ITEM(e.ptr(), 0);
    if (t != target.ptr()) {
      const int same = PyObject_RichCompareBool(t, target.ptr(), Py_EQ);
      if (same < 0) throw nb::python_error();
      if (!same) continue;
    }
    const long s = PyLong_AsLong(PyTuple_GET_ITEM(e.ptr(), 1));
    if (s == -1 && PyErr_Occurred()) throw nb::python_error();
    return s;
  }
  return std::nullopt;
}

void note_engine(PyObject* dict, bool compiled) {
  static const nb::handle key = interned("_engine"), yes = interned("compiled"), no = interned("interpreted");
  const nb::handle want = compiled ? yes : no;
  PyObject* now = PyDict_GetItemWithError(dict, key.ptr());
  if (now == want.ptr()) return;
  if (!now && PyErr_Occurred()) throw nb::python_error();
  if (PyDict_SetItem(dict, key.ptr(), want.ptr()) != 0) throw nb::python_error();
}

// Runs p(x) into out (x when None) when p remembers its chain for x's dtype and device; false where
// Python's call must run instead (the first call, a capsule, a capture, an output of another dtype).
bool run_remembered(nb::handle self, nb::handle x, nb::handle out, nb::handle stream) {
  if (PyCapsule_CheckExact(x.ptr()) || PyCapsule_CheckExact(out.ptr()) || capturing_now()) return false;
  const nb::object dict = dict_of(self);
  if (!dict.is_valid()) return false;
  const call_stream on(stream, "program");
  const py_array a = taken_for_call(x);
  const std::optional<long> slot = slot_in(dict.ptr(), a.dtype, a.device());
  if (!slot) return false;
  std::optional<py_array> given;  // out, when it is another array (no copy of x's otherwise)
  if (!out.is_none()) given = taken_for_call(out);
  const py_array& o = given ? *given : a;
  if (!(o.dtype.code == a.dtype.code && o.dtype.bits == a.dtype.bits)) return false;  // Python names it
  if (*slot == interpreted) {
    run_interpreted(nb::cast<const rs::program&>(self), a, o);
    note_engine(dict.ptr(), false);
    return true;
  }
  const remembered& t = table();
  if (*slot < 0 || std::size_t(*slot) >= t.chains.size()) return false;
  const std::shared_ptr<const rs::jit::pipeline> chain = t.chains[std::size_t(*slot)];  // held while it runs
  if (!chain) return false;  // forgotten
  run_taken(*chain, std::span<const py_array>(&a, 1), o);
  note_engine(dict.ptr(), true);
  return true;
}

nb::handle python_function(const char* name) {
  // Kept for the process's life (plain Python functions: nothing of the core's).
  return nb::object(nb::module_::import_("resident._program").attr(name)).release();
}

// Remembers in program p's dict that calls on dtype and target run `chain` (None: the interpreter),
// the chain filed under `key` (one slot per key, however many programs share it).
void remember(nb::handle p, nb::str dtype, nb::tuple target, nb::object chain, nb::object key) {
  const nb::object dict = dict_of(p);
  if (!dict.is_valid()) return;
  long slot = interpreted;
  if (!chain.is_none()) {
    remembered& t = table();
    PyObject* known = PyDict_GetItemWithError(t.slot_of.ptr(), key.ptr());
    if (known) {
      slot = nb::cast<long>(nb::handle(known));
    } else {
      if (PyErr_Occurred()) throw nb::python_error();
      slot = long(t.chains.size());
      t.chains.push_back(std::make_shared<const rs::jit::pipeline>(nb::cast<const rs::jit::pipeline&>(chain)));
      t.slot_of[key] = slot;
    }
  }
  nb::object entries = nb::borrow(PyDict_GetItemWithError(dict.ptr(), dtype.ptr()));
  if (!entries.is_valid() || !PyList_Check(entries.ptr())) {
    if (PyErr_Occurred()) throw nb::python_error();
    entries = nb::list();
    if (PyDict_SetItem(dict.ptr(), dtype.ptr(), entries.ptr()) != 0) throw nb::python_error();
  }
  // One entry per target: a forgotten slot's entry is replaced.
  nb::list list = nb::borrow<nb::list>(entries);
  const nb::tuple entry = nb::make_tuple(target, slot);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nb::object e = list[i];
    if (PyTuple_Check(e.ptr()) && PyTuple_GET_SIZE(e.ptr()) == 2 && target.equal(nb::handle(PyTuple_GET_ITEM(e.ptr(), 0)))) {
      list[i] = entry;
      return;
    }
  }
  list.append(entry);
}

}  // namespace

// Whether o is a resident.dist.ShardedArray (none is before resident.dist is imported).
bool sharded(nb::handle o) {
  nb::object dist = nb::steal(PyImport_GetModule(nb::str("resident.dist").ptr()));
  if (!dist.is_valid()) {
    if (PyErr_Occurred()) throw nb::python_error();
    return false;
  }
  const int is = PyObject_IsInstance(o.ptr(), nb::object(dist.attr("ShardedArray")).ptr());
  if (is < 0) throw nb::python_error();
  return is == 1;
}

nb::object program_call(nb::handle self, nb::object x, nb::object out, nb::object stream) {
  static const nb::handle call = python_function("call");
  try {
    if (run_remembered(self, x, out, stream)) return out.is_none() ? x : out;
  } catch (const rs::invalid_argument&) {
    if (!sharded(x) && !sharded(out)) throw;
    return call(self, x, out, stream);  // work per shard (resident.dist.apply)
  }
  return call(self, x, out, stream);
}

nb::object op_call(nb::handle self, nb::object x, nb::object out, nb::object stream) {
  // An op runs as the program of itself alone, made once and kept in its dict.
  static const nb::handle key = interned("program");
  const nb::object dict = dict_of(self);
  PyObject* p = dict.is_valid() ? PyDict_GetItemWithError(dict.ptr(), key.ptr()) : nullptr;
  if (!p) {
    if (PyErr_Occurred()) throw nb::python_error();
    static const nb::handle of_op = python_function("of_op");
    return program_call(of_op(self), std::move(x), std::move(out), std::move(stream));
  }
  return program_call(nb::borrow(p), std::move(x), std::move(out), std::move(stream));
}

void bind_programs(nb::module_& m) {
  m.def("_program_remember", &remember, nb::arg("program"), nb::arg("dtype"), nb::arg("target"), nb::arg("chain").none(),
        nb::arg("key"));
  m.def("_program_forget", [] {
    // The slots stay numbered (emptied, never reused): a program still naming one misses.
    remembered& t = table();
    for (auto& c : t.chains) c.reset();
    t.slot_of.clear();
  });
}

}  // namespace resident::py
