// resident._core's profile as an object: rs::profile over a `with` block, its report as rows (call
// site as the user's Python file:line), advice, a table and JSON.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "resident/error.hpp"

namespace nb = nanobind;
namespace rs = resident;

namespace resident::py {
namespace {

// A profile collecting from open() to close(); the report stays readable after. Threads reading it
// and one closing it take turns (a report read while another thread replaced it read freed memory).
struct py_profile {
  std::unique_ptr<rs::profile> collecting;
  std::optional<rs::profile_report> last;
  std::shared_ptr<std::mutex> turn = std::make_shared<std::mutex>();

  rs::profile_report report() {
    gil_released unlocked;  // waits for the calls' timing events, and for another thread's turn
    const std::lock_guard<std::mutex> hold(*turn);
    if (collecting) last = collecting->report();
    if (!last) throw rs::invalid_argument("resident.profile: not started; use it as `with resident.profile() as p:`");
    return *last;
  }
  void close() {
    gil_released unlocked;
    const std::lock_guard<std::mutex> hold(*turn);
    if (!collecting) return;
    last = collecting->report();
    collecting.reset();
  }
};

nb::dict row_of(const rs::profile_site& s, const rs::profile_report& r) {
  nb::dict d;
  d["site"] = s.site();
  d["file"] = s.file;
  d["line"] = s.line;
  d["name"] = s.name;
  d["device"] = s.dev.name();
  d["transfer"] = s.transfer;
  d["stages"] = s.stages;
  d["calls"] = s.calls;
  d["timed_calls"] = s.timed_calls;
  d["kernels"] = s.kernels;
  d["seconds"] = s.seconds;
  d["bytes"] = s.bytes_read + s.bytes_written;
  d["bytes_read"] = s.bytes_read;
  d["bytes_written"] = s.bytes_written;
  d["gbps"] = s.gbps();
  const double rate = r.copy_rate(s.dev);
  // A computation's rate against the device's measured copy rate; a transfer crosses the bus instead.
  d["copy_fraction"] = s.transfer || rate <= 0 ? nb::none() : nb::cast(s.gbps() / rate);
  d["h2d_bytes"] = s.h2d_bytes;
  d["d2h_bytes"] = s.d2h_bytes;
  d["d2d_bytes"] = s.d2d_bytes;
  d["allocations"] = s.allocations;
  d["shape"] = s.shape();
  d["occupancy"] = s.occupancy;
  return d;
}

}  // namespace

void bind_profile(nb::module_& m) {
  nb::class_<py_profile>(m, "_Profile")
      .def("close", &py_profile::close)
      .def("rows", [](py_profile& p) {
        const rs::profile_report r = p.report();
        nb::list rows;
        for (const auto& s : r.sites) rows.append(row_of(s, r));
        return rows;
      })
      .def("advice", [](py_profile& p) {
        nb::list out;
        const rs::profile_report r = p.report();
        for (const auto& a : r.advice) {
          nb::dict d;
          d["kind"] = a.kind;
          d["site"] = a.site;
          d["message"] = a.message;
          d["example"] = a.example;
          out.append(d);
        }
        return out;
      })
      .def("copy_rates", [](py_profile& p) {
        nb::dict d;
        const rs::profile_report r = p.report();
        for (const auto& [dev, rate] : r.copy_rates) d[nb::str(dev.name().c_str())] = rate;
        return d;
      })
      .def("table", [](py_profile& p) { return p.report().table(); })
      .def("json", [](py_profile& p) { return p.report().json(); })
      // The path as the file system's bytes: a POSIX name need not be UTF-8.
      .def("save_json", [](py_profile& p, nb::bytes path) { p.report().save_json(std::string(path.c_str(), path.size())); },
           nb::arg("path"));
  // The caller's site captured on its thread, and f(*args) run under it on another (resident.dist's
  // worker threads): their calls are the user's line's, not the pool's.
  m.def("_call_site", []() -> nb::object {
    auto at = python_line_now();
    if (!at) return nb::none();
    return nb::make_tuple(at->first, at->second);
  });
  m.def("_at_site", [](nb::object site, nb::callable f, nb::args args) {
    if (site.is_none()) return f(*args);
    const pinned_site pinned(utf8_of(nb::str(site[0])), nb::cast<unsigned>(site[1]));
    return f(*args);
  });
  m.def("_profile_open", [] {
    py_profile p;
    p.collecting = std::make_unique<rs::profile>(rs::profile_output::quiet);
    return p;
  });
}

}  // namespace resident::py
