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

// Raises the Python class of the most derived kind e is of: the table lists a base before the kinds
// derived from it, so the last kind that matches is the deepest. A flow stage that raised
// KeyboardInterrupt or SystemExit gives that exception back unchanged (it is not the stage's error).
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
  PyObject* cls = PyExc_RuntimeError;
  for (const kind& k : kinds())
    if (k.is(e)) cls = k.cls;
  // Not PyErr_SetString: a message may quote a file name's bytes that are not UTF-8.
  const std::string_view what = e.what();
  nb::object message = nb::steal(PyUnicode_DecodeUTF8(what.data(), Py_ssize_t(what.size()), "backslashreplace"));
  if (!message.is_valid()) return;  // the decoding's error (memory) is the one raised
  PyErr_SetObject(cls, message.ptr());
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
    kinds().push_back({cpp, is, cls});
    names.append(name);
  };
#define RESIDENT_PY_ADD(shape, name, base, py, builtin, doc)                                                  \
  add(#name, [](const rs::error& e) { return dynamic_cast<const name*>(&e) != nullptr; }, #base, #py, \
      RESIDENT_PY_BUILTIN_##builtin, doc);
  RESIDENT_ERRORS(RESIDENT_PY_ADD)
#undef RESIDENT_PY_ADD
  m.attr("_error_names") = nb::tuple(names);
  nb::register_exception_translator(translate);
}

}  // namespace resident::py
