// resident's C++ errors as Python exceptions: the classes, their hierarchy and the translation all come
// from the one table of error kinds (RESIDENT_ERRORS in error.hpp).
#include "bindings.hpp"

#include <exception>

#include "resident/flow/flow.hpp"
#include "resident/jit/jit.hpp"

namespace resident::py {

namespace {

// Each kind's C++ base is the one the table names (the `own` kinds are written out by hand).
#define RESIDENT_PY_CHECK_BASE(shape, name, base, py, builtin, doc) \
  static_assert(std::is_base_of_v<base, name>, #name " does not derive from " #base " as the error table says");
RESIDENT_ERRORS(RESIDENT_PY_CHECK_BASE)
#undef RESIDENT_PY_CHECK_BASE

// The Python built-in exception a kind also derives from (the table's fifth column).
#define RESIDENT_PY_BUILTIN_none nullptr
#define RESIDENT_PY_BUILTIN_RuntimeError PyExc_RuntimeError
#define RESIDENT_PY_BUILTIN_ValueError PyExc_ValueError
#define RESIDENT_PY_BUILTIN_TypeError PyExc_TypeError
#define RESIDENT_PY_BUILTIN_MemoryError PyExc_MemoryError

// One row of the table as the module sees it: whether a C++ exception is of the kind, and its class.
struct kind {
  const char* cpp;
  bool (*is)(const rs::error&);
  PyObject* cls;
};

std::vector<kind>& kinds() {
  static auto* k = new std::vector<kind>();  // lives as long as the module
  return *k;
}

// Text from C++ as a Python str: a message may quote a file name's bytes that are not UTF-8.
nb::object text(std::string_view t) {
  nb::object o = nb::steal(PyUnicode_DecodeUTF8(t.data(), Py_ssize_t(t.size()), "backslashreplace"));
  if (!o.is_valid()) throw nb::python_error();
  return o;
}

nb::object bytes_or_none(std::optional<std::size_t> b) { return b ? nb::cast(*b) : nb::none(); }

// The figures the C++ error carries, as attributes of the Python exception (the classes' own defaults,
// None, stay where an error was raised from Python without them).
void set_figures(const rs::error& e, nb::handle exc) {
  if (const auto* s = dynamic_cast<const rs::stage_error*>(&e)) exc.attr("stage") = text(s->stage());
  if (const auto* l = dynamic_cast<const rs::library_error*>(&e)) {
    exc.attr("library") = text(l->library());
    exc.attr("code") = l->code();
    exc.attr("name") = text(l->name());
  }
  if (const auto* o = dynamic_cast<const rs::out_of_memory*>(&e)) {
    exc.attr("requested_bytes") = o->requested();
    exc.attr("free_bytes") = o->free_bytes();
    exc.attr("pool_reserved_bytes") = o->pool_reserved();
    exc.attr("pool_in_use_bytes") = o->pool_in_use();
    exc.attr("pool_limit_bytes") = bytes_or_none(o->pool_limit());
    exc.attr("largest_free_block_bytes") = bytes_or_none(o->largest_free_block());
  }
  if (const auto* c = dynamic_cast<const rs::jit::compile_error*>(&e)) exc.attr("log") = text(c->log());
}

nb::object exception_of(const rs::error& e);

// What a stage_error wraps (std::throw_with_nested): the Python exception a Python stage raised, as it
// is, or a resident error as its Python exception; nothing for other C++ exceptions (the message
// already quotes them).
nb::object cause_of(const rs::stage_error& s) {
  try {
    std::rethrow_if_nested(s);
  } catch (nb::python_error& inner) {
    return nb::borrow(inner.value());
  } catch (const rs::error& inner) {
    return exception_of(inner);
  } catch (...) {
  }
  return nb::object();
}

// The Python exception of the most derived kind e is of, its figures set and its cause chained: the
// table lists a base before the kinds derived from it, so the last kind that matches is the deepest.
nb::object exception_of(const rs::error& e) {
  PyObject* cls = PyExc_RuntimeError;
  for (const kind& k : kinds())
    if (k.is(e)) cls = k.cls;
  nb::object exc = nb::handle(cls)(text(e.what()));
  set_figures(e, exc);
  if (const auto* s = dynamic_cast<const rs::stage_error*>(&e)) {
    nb::object cause = cause_of(*s);
    if (cause.is_valid()) PyException_SetCause(exc.ptr(), cause.release().ptr());  // steals the reference
  }
  return exc;
}

// Raises e as its Python exception. A flow stage that raised KeyboardInterrupt or SystemExit gives that
// exception back unchanged (it is not the stage's error).
void raise(const rs::error& e) {
  if (const auto* s = dynamic_cast<const rs::stage_error*>(&e)) {
    try {
      std::rethrow_if_nested(*s);
    } catch (nb::python_error& inner) {
      if (inner.matches(PyExc_KeyboardInterrupt) || inner.matches(PyExc_SystemExit)) {
        inner.restore();
        return;
      }
    } catch (...) {
    }
  }
  try {
    nb::object exc = exception_of(e);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (nb::python_error& failed) {
    failed.restore();  // making the exception failed (memory): that error is the one raised
  }
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const rs::error& e) {
    raise(e);
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  // The kinds that carry figures (set_figures) and the attributes they are read from.
  static const std::vector<std::pair<const char*, std::vector<const char*>>> figures = {
      {"stage_error", {"stage"}},
      {"library_error", {"library", "code", "name"}},
      {"out_of_memory", {"requested_bytes", "free_bytes", "pool_reserved_bytes", "pool_in_use_bytes",
                         "pool_limit_bytes", "largest_free_block_bytes"}},
      {"jit::compile_error", {"log"}}};
  nb::list names;
  auto add = [&](const char* cpp, bool (*is)(const rs::error&), const char* base, const char* name, PyObject* builtin,
                 const char* doc) {
    nb::list bases;
    for (const kind& k : kinds())
      if (std::string(k.cpp) == base) bases.append(nb::handle(k.cls));
    if (builtin) bases.append(nb::handle(builtin));
    const std::string qualified = std::string("resident.") + name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, nb::tuple(bases).ptr(), nullptr);
    if (!cls) throw nb::python_error();
    m.attr(name) = nb::steal(cls);
    // The figures' attributes, None on the class: an error raised from Python has them too.
    for (const auto& [owner, attrs] : figures)
      if (std::string(cpp) == owner)
        for (const char* a : attrs) nb::setattr(cls, a, nb::none());
    kinds().push_back({cpp, is, cls});
    names.append(name);
  };
#define RESIDENT_PY_ADD(shape, name, base, py, builtin, doc)                                                  \
  add(#name, [](const rs::error& e) { return dynamic_cast<const name*>(&e) != nullptr; }, #base, #py, \
      RESIDENT_PY_BUILTIN_##builtin, doc);
  RESIDENT_ERRORS(RESIDENT_PY_ADD)
#undef RESIDENT_PY_ADD
  m.attr("_error_names") = nb::tuple(names);
  // Raises a library_error (a cuda_error for "CUDA") as a failed vendor call would: the translation of
  // its figures is tested without a GPU.
  m.def("_raise_library_error", [](const std::string& library, int code, const std::string& name) {
    if (library == "CUDA") throw rs::cuda_error(code, name, "a test's failed CUDA call: " + name);
    throw rs::library_error(library, code, name, "a test's failed " + library + " call: " + name);
  }, nb::arg("library"), nb::arg("code"), nb::arg("name"));
  nb::register_exception_translator(translate);
}

}  // namespace resident::py
