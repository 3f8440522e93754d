// resident._core's several devices: communicators (one process over several devices, or one rank per
// process from mpirun, torchrun or RESIDENT_* variables), all-reduces on any resident arrays, and
// copies between arrays of two devices (peer copies between GPUs). Sharded arrays are built on these
// in resident/dist.py.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "resident/detail/files.hpp"
#include "resident/dist/communicator.hpp"
#include "resident/resident.hpp"

namespace nb = nanobind;
namespace rs = resident;
namespace dist = resident::dist;

namespace resident::py {
namespace {

// An array of resident, or of any library through from_dlpack (its checked path: contiguous memory of a
// known device, element type and stream); anything else is refused rather than read as raw memory.
// Any kind from_dlpack takes (a DLPack capsule, host memory through the buffer protocol), and only those.
py_array array_of(nb::handle a, const char* what) {
  const call_stream on(nb::none(), what);  // names the call in from_dlpack's messages
  return from_dlpack(nb::borrow(a));
}

bool same_dtype(const DLDataType& a, const DLDataType& b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// The longest timeout: milliseconds compared against steady_clock's nanoseconds stay far from overflow.
constexpr double max_timeout_s = 1e9;

dist::combine combine_of(const std::string& op) {
  if (op == "sum") return dist::combine::sum;
  if (op == "min") return dist::combine::min;
  if (op == "max") return dist::combine::max;
  throw rs::invalid_argument("all_reduce: op '" + op + "' is not sum, min or max");
}

// Raises resident.dist.Timeout (with the GIL) for a rank that did not arrive in time.
[[noreturn]] void raise_timeout(const std::string& what) {
  nb::object cls = nb::module_::import_("resident.dist").attr("Timeout");
  PyErr_SetString(cls.ptr(), what.c_str());
  throw nb::python_error();
}

// Runs f with the GIL released; a timeout (NCCL's, or the rendezvous file's) becomes Timeout.
template <class F>
auto watched(F&& f) {
  std::string timed_out;
  try {
    gil_released unlocked;
    return f();
  } catch (const rs::library_error& e) {
    if (e.name() != "timeout") throw;
    timed_out = e.what();
  } catch (const rs::invalid_argument& e) {
    if (std::string(e.what()).find("did not write") == std::string::npos) throw;
    timed_out = e.what();
  }
  raise_timeout(timed_out);
}

struct py_comm {
  std::unique_ptr<dist::communicator> c;
  dist::communicator& get() const {
    if (!c) throw rs::invalid_argument("the communicator is closed");
    return *c;
  }
};

}  // namespace

void bind_dist(nb::module_& m) {
  nb::class_<py_comm>(m, "_Communicator")
      .def_prop_ro("size", [](const py_comm& p) { return p.get().size(); })
      .def_prop_ro("rank", [](const py_comm& p) { return p.get().first_rank(); })
      .def_prop_ro("devices", [](const py_comm& p) {
        std::vector<std::string> d;
        for (const auto& x : p.get().devices()) d.push_back(x.name());
        return d;
      })
      .def_prop_ro("transport", [](const py_comm& p) { return p.get().transport(); })
      .def_prop_ro("launcher", [](const py_comm& p) { return std::string(dist::to_string(p.get().started_by())); })
      .def_prop_ro("timeout", [](const py_comm& p) { return double(p.get().timeout().count()) / 1e3; })
      .def("barrier", [](const py_comm& p) { watched([&] { p.get().barrier(); return 0; }); })
      .def("all_reduce", [](const py_comm& p, const std::vector<nb::object>& arrays, const std::string& op) {
        // One buffer per rank this process holds, each on its rank's device; waits for the result.
        std::vector<py_array> taken;
        for (const auto& a : arrays) taken.push_back(array_of(a, "all_reduce"));
        if (taken.empty()) throw rs::invalid_argument("all_reduce: give one array per rank this process holds");
        for (const auto& t : taken) {
          t.check_writable("all_reduce");
          if (!same_dtype(t.dtype, taken[0].dtype) || t.size() != taken[0].size())
            throw rs::shape_mismatch("all_reduce: the arrays differ in type or size");
        }
        const dist::combine how = combine_of(op);
        visit(taken[0].dtype, [&](auto t) {
          using T = decltype(t);
          std::vector<rs::array_ref<T>> refs;
          std::vector<rs::stream_ref> streams;
          for (const auto& a : taken) {
            refs.push_back(a.ref<T>());
            streams.push_back(refs.back().stream());
          }
          watched([&] {
            p.get().all_reduce(std::span<const rs::array_ref<T>>(refs), taken[0].size(), how);
            p.get().synchronize(streams);
            return 0;
          });
          return 0;
        });
      }, nb::arg("arrays"), nb::arg("op") = "sum")
      .def("close", [](py_comm& p) { p.c.reset(); })
      .def_prop_ro("closed", [](const py_comm& p) { return !p.c; });
  // The one judge of folders another user could swap (src/io/files.cpp), for the package's own checks
  // (the rendezvous default, Numba's settings file): "" where only this user and root can.
  m.def("_untrusted_path", [](const std::string& folder) { return rs::detail::untrusted_path(folder); },
        nb::arg("folder"));
  // The one writer (src/io/files.cpp), for the benchmarks' JSON (bench/peers/json_out.py): "" or why not.
  m.def("_write_file", [](const std::string& path, nb::bytes data) {
    return rs::detail::try_write_file_atomically(path, std::string_view(data.c_str(), data.size()));
  }, nb::arg("path"), nb::arg("data"));
  m.def("_comm_local", [](const std::vector<std::string>& devices) {
    std::vector<rs::device> d;
    for (const auto& n : devices) d.push_back(rs::parse_device(n));
    py_comm p;
    p.c = std::make_unique<dist::communicator>(watched([&] { return dist::communicator(d); }));
    return p;
  }, nb::arg("devices"));
  m.def("_comm_from_launcher", [](double timeout_s, const std::optional<std::string>& device) {
    if (!(timeout_s > 0)) throw rs::invalid_argument("Communicator.from_launcher: the timeout must be positive seconds");
    if (!(timeout_s <= max_timeout_s))  // also infinity: its milliseconds would not fit an integer
      throw rs::invalid_argument("Communicator.from_launcher: a timeout of " +
                                 shown(nb::float_(timeout_s)) +
                                 " seconds is too long; give at most 1e9 seconds (about 31 years)");
    std::optional<rs::device> d;
    if (device) d = rs::parse_device(*device);
    const auto ms = std::chrono::milliseconds(std::int64_t(timeout_s * 1e3 + 0.5) > 0 ? std::int64_t(timeout_s * 1e3 + 0.5) : 1);
    py_comm p;
    p.c = std::make_unique<dist::communicator>(watched([&] { return dist::communicator::from_launcher(d, ms); }));
    return p;
  }, nb::arg("timeout"), nb::arg("device") = nb::none());
  m.def("_copy_array", [](nb::object src, nb::object dst) {
    // dst = src between any two devices: a peer copy between GPUs (asynchronous), an explicit transfer
    // between a GPU and the CPU (counted as such).
    const py_array s = array_of(src, "copy"), d = array_of(dst, "copy");
    d.check_writable("copy");
    if (!same_dtype(s.dtype, d.dtype))
      throw rs::invalid_argument("copy: " + rs::dlpack_dtype_name(s.dtype) + " into " + rs::dlpack_dtype_name(d.dtype) +
                                 "; give one element type");
    visit(s.dtype, [&](auto t) {
      using T = decltype(t);
      {
        gil_released unlocked;
        rs::copy(s.ref<T>(), d.ref<T>());
      }
      d.finish_foreign();
      return 0;
    });
  }, nb::arg("src").none(), nb::arg("dst").none());
}

}  // namespace resident::py
