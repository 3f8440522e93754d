#pragma once
// Bindings of streaming (streaming.cpp), the profile as an object (profile.cpp) and several devices
// (dist.cpp): each file defines one bind_* function, called once from NB_MODULE.
#include <nanobind/nanobind.h>

#include <optional>
#include <string>

#include "resident/insight/detail/call_scope.hpp"
#include "resident/insight/profile.hpp"
#include "resident/memory/ledger.hpp"

namespace resident::py {

void bind_streaming(nanobind::module_& m);
void bind_profile(nanobind::module_& m);
void bind_dist(nanobind::module_& m);

/// The user's Python line (the first frame outside the resident package) as the call site of the
/// calls made while this lives, when a profile collects or the transfer policy is not allow; nothing
/// otherwise. Construct with the GIL held.
struct python_call_site {
  std::optional<detail::foreign_site> site;
  python_call_site() noexcept {
    namespace nb = nanobind;
    try {
      if (!profiling() && current_transfer_policy() == transfer_policy::allow) return;
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
};

}  // namespace resident::py
