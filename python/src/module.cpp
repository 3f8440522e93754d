// resident._core: arrays that other libraries share at zero copy (DLPack, CUDA Array Interface),
// explicit transfers to and from NumPy, the ledger, the transfer policy, random fills into any array,
// reductions, programs, run-time chains and flows. Built with the host compiler; the kernels are
// instantiated in ops.cpp. Each concern binds its part in its own file (bindings.hpp lists them).
#include "bindings.hpp"
#include "bindings_38.hpp"

namespace resident::py {

python_site::python_site() noexcept {
  try {
    // The policy read throws for a bad RESIDENT_TRANSFER_POLICY: the call itself reports that.
    if (!rs::profiling() && rs::current_transfer_policy() == rs::transfer_policy::allow) return;
    static const std::string package = [] {
      std::string f = nb::cast<std::string>(nb::module_::import_("resident").attr("__file__"));
      return f.substr(0, f.find_last_of("/\\") + 1);
    }();
    PyFrameObject* f = PyEval_GetFrame();
    nb::object frame = f ? nb::borrow<nb::object>(reinterpret_cast<PyObject*>(f)) : nb::none();
    while (!frame.is_none()) {
      auto file = nb::cast<std::string>(frame.attr("f_code").attr("co_filename"));
      if (file.rfind(package, 0) != 0) {
        site.emplace(std::move(file), nb::cast<unsigned>(frame.attr("f_lineno")));
        return;
      }
      frame = frame.attr("f_back");
    }
  } catch (...) {
    // no site rather than a failed call
  }
}

}  // namespace resident::py

NB_MODULE(_core, m) {
  m.doc() = "resident's compiled core; use the resident package";
  resident::py::bind_errors(m);
  resident::py::bind_streams(m);
  resident::py::bind_array(m);
  resident::py::bind_compute(m);
  resident::py::bind_jit(m);
  resident::py::bind_flow(m);
  resident::py::bind_streaming(m);
  resident::py::bind_profile(m);
  resident::py::bind_dist(m);
}
