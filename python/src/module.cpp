// resident._core: arrays that other libraries share at zero copy (DLPack, CUDA Array Interface),
// explicit transfers to and from NumPy, the ledger, the transfer policy, random fills into any array,
// reductions, programs, run-time chains and flows. Built with the host compiler; the kernels are
// instantiated in ops.cpp. Each concern binds its part in its own file (bindings.hpp lists them).
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "bindings.hpp"

namespace resident::py {

namespace {
thread_local bool t_pinned = false;  // a pinned_site is in force on this thread
std::atomic<unsigned long> g_main_thread{0};  // the thread to finalize: set as the module loads and at exit
}  // namespace

unsigned long main_thread_id() noexcept { return g_main_thread.load(std::memory_order_relaxed); }

namespace {
// At exit, before finalizing, on the thread that will finalize (recorded: an embedder may finalize on
// another than the main one): a thread still alive (a daemon, or one threading does not list) stays
// where it is (parked inside a call, or ended by Python elsewhere), and what its frames hold is no
// leak of resident's to report.
void at_exit() {
  g_main_thread.store(PyThread_get_thread_ident(), std::memory_order_relaxed);
  if (nb::len(nb::module_::import_("sys").attr("_current_frames")()) > 1) nb::set_leak_warnings(false);
}
}  // namespace

pinned_site::pinned_site(std::string file, unsigned line) noexcept : site(std::move(file), line), before(t_pinned) {
  t_pinned = true;
}
pinned_site::~pinned_site() { t_pinned = before; }

std::optional<std::pair<std::string, unsigned>> python_line_now() noexcept {
  try {
    // Frames walked through the C API, the package's own told by a prefix of their file's name: only
    // the user's frame is turned into a string (a profile pays this per call).
    static PyObject* package = [] {
      std::string f = nb::cast<std::string>(nb::module_::import_("resident").attr("__file__"));
      return PyUnicode_FromString(f.substr(0, f.find_last_of("/\\") + 1).c_str());
    }();
    const Py_ssize_t prefix = PyUnicode_GetLength(package);
    PyFrameObject* f = PyEval_GetFrame();  // borrowed
    nb::object frame = f ? nb::borrow<nb::object>(reinterpret_cast<PyObject*>(f)) : nb::object();
    while (frame.is_valid()) {
      auto* fr = reinterpret_cast<PyFrameObject*>(frame.ptr());
      const nb::object code = nb::steal(reinterpret_cast<PyObject*>(PyFrame_GetCode(fr)));
      PyObject* file = reinterpret_cast<PyCodeObject*>(code.ptr())->co_filename;
      const Py_ssize_t inside = PyUnicode_Tailmatch(file, package, 0, prefix, -1);
      if (inside < 0) PyErr_Clear();
      if (inside != 1) {
        Py_ssize_t size = 0;
        const char* text = PyUnicode_AsUTF8AndSize(file, &size);
        if (!text) {
          PyErr_Clear();
          return std::nullopt;
        }
        return std::pair(std::string(text, std::size_t(size)), unsigned(PyFrame_GetLineNumber(fr)));
      }
      frame = nb::steal(reinterpret_cast<PyObject*>(PyFrame_GetBack(fr)));  // null past the outermost
    }
  } catch (...) {
    // no site rather than a failed call
  }
  return std::nullopt;
}

python_site::python_site() noexcept {
  try {
    if (t_pinned) return;  // the caller's site, captured on its thread, is in force already
    // The process default read once (getenv scans the environment, which every call would pay); a
    // scope (resident.transfer_policy) per call. A bad RESIDENT_TRANSFER_POLICY throws here and is
    // read again next time: the call itself reports it.
    static const rs::transfer_policy by_default = rs::default_transfer_policy();
    const rs::transfer_policy* scoped = rs::detail::scoped_transfer_policy_now();
    if (!rs::profiling() && (scoped ? *scoped : by_default) == rs::transfer_policy::allow) return;
    if (auto at = python_line_now()) site.emplace(std::move(at->first), at->second);
  } catch (...) {
    // no site rather than a failed call
  }
}

}  // namespace resident::py

NB_MODULE(_core, m) {
  m.doc() = "resident's compiled core; use the resident package";
  // Another extension's caches can hold our objects past the interpreter's teardown (Numba keeps every
  // function it compiled, and what hangs on it): nanobind's report of them alarms users for nothing, so
  // it is on only where asked for, as our own tests do (RESIDENT_LEAK_WARNINGS=1).
  const char* leak_warnings = std::getenv("RESIDENT_LEAK_WARNINGS");
  nb::set_leak_warnings(leak_warnings != nullptr && std::string_view(leak_warnings) == "1");
  resident::py::g_main_thread.store(
      nb::cast<unsigned long>(nb::module_::import_("threading").attr("main_thread")().attr("ident")));
  nb::module_::import_("atexit").attr("register")(nb::cpp_function(&resident::py::at_exit));
  // A thread parked at exit inside a flow's stage holds the flow's turn for good: a wait for it (a
  // __del__ at exit running that flow) gives up once any thread is parked.
  rs::detail::set_turn_abandoned([]() noexcept { return resident::py::parked_threads().load() > 0; });
  resident::py::bind_errors(m);
  resident::py::bind_streams(m);
  resident::py::bind_array(m);
  resident::py::bind_transfers(m);
  resident::py::bind_device(m);
  resident::py::bind_compute(m);
  resident::py::bind_jit(m);
  resident::py::bind_programs(m);
  resident::py::bind_flow(m);
  resident::py::bind_streaming(m);
  resident::py::bind_profile(m);
  resident::py::bind_dist(m);
  resident::py::bind_pool(m);
}
