// resident._core's memory pool controls (resident/memory/pool.hpp): figures, a limit on the bytes in use,
// returning cached memory, caching on or off, the peak started again. resident/_pool.py names the figures.
#include "bindings.hpp"

#include "resident/memory/pool.hpp"

namespace resident::py {
namespace {

// A byte count: a whole number (NumPy's too) from 0 to 2^64 - 1, or a text as RESIDENT_POOL_LIMIT reads
// it ("512MiB", "2GB"). A bool or a float is a type error: 1.5 GiB is written "1536MiB".
std::size_t byte_count(nb::handle v, const char* what) {
  const std::string text = shown(v, 60);
  if (PyUnicode_Check(v.ptr())) {
    const std::optional<std::size_t> b = rs::detail::parse_bytes(utf8_of(v));
    if (!b)
      throw rs::invalid_argument(std::string(what) + ": " + text + " is not a byte count; give an int of bytes or "
                                 "a text such as '512MiB' or '2GB'");
    return *b;
  }
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw rs::invalid_type(std::string(what) + ": bytes is a " + py_type_name(v) + " (" + text + "); give an int "
                           "of bytes or a text such as '512MiB'");
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) {
    nb::python_error e;
    if (!e.matches(PyExc_Exception)) throw e;  // KeyboardInterrupt, SystemExit: unchanged
    throw rs::invalid_type(std::string(what) + ": the " + py_type_name(v) + "'s own __index__ raised " +
                           py_type_name(e.value()) + "; give an int of bytes");
  }
  int overflow = 0;
  const long long s = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && s < 0))
    throw rs::invalid_argument(std::string(what) + ": bytes=" + text + " is negative; give a positive byte count");
  if (overflow == 0) return std::size_t(s);
  const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw rs::invalid_argument(std::string(what) + ": bytes=" + text + " is beyond 2^64 - 1");
  }
  return std::size_t(u);
}

nb::object optional_bytes(std::optional<std::size_t> b) { return b ? nb::cast(*b) : nb::none(); }

}  // namespace

void bind_pool(nb::module_& m) {
  m.def("_pool_stats", [](const std::optional<std::string>& dev) {
    const rs::pool_statistics s = rs::pool_stats(pick(dev));
    nb::dict d;
    d["bytes_in_use"] = s.bytes_in_use;
    d["bytes_reserved"] = s.bytes_reserved;
    d["peak_bytes"] = s.peak_bytes;
    d["allocations"] = s.allocations;
    d["pool_hits"] = s.pool_hits;
    d["outstanding"] = s.outstanding;
    d["limit_bytes"] = optional_bytes(s.limit);
    return d;
  }, nb::arg("device") = nb::none());
  m.def("set_pool_limit", [](nb::handle bytes, const std::optional<std::string>& dev) {
    const std::size_t b = byte_count(bytes, "set_pool_limit");
    const rs::device d = pick(dev);
    gil_released unlocked;  // a limit below what is reserved trims the pool, which synchronizes
    rs::set_pool_limit(d, b);
  }, nb::arg("bytes").none(), nb::arg("device") = nb::none(),
     "Caps the bytes the device's pool may have in use at once (an int, or a text such as '512MiB'); an "
     "allocation past it raises OutOfMemory. 0 is refused: clear_pool_limit lifts a limit.");
  m.def("clear_pool_limit", [](const std::optional<std::string>& dev) { rs::clear_pool_limit(pick(dev)); },
        nb::arg("device") = nb::none(), "Lifts the device pool's limit (also one RESIDENT_POOL_LIMIT set).");
  m.def("pool_limit", [](const std::optional<std::string>& dev) { return optional_bytes(rs::pool_limit(pick(dev))); },
        nb::arg("device") = nb::none(), "The device pool's limit in bytes, or None when there is none.");
  m.def("trim_pool", [](const std::optional<std::string>& dev) {
    const rs::device d = pick(dev);
    gil_released unlocked;
    rs::trim_pool(d);
  }, nb::arg("device") = nb::none(), "Returns the memory the device's pool caches to the system. Synchronizes.");
  m.def("set_pool_caching", [](nb::handle enabled, const std::optional<std::string>& dev) {
    // A bool or NumPy's bool, not truthiness: 'off' would be True.
    const std::string name = py_type_name(enabled);
    const bool numpy_bool = (name == "bool" || name == "bool_") &&
                            utf8_of(nb::str(enabled.type().attr("__module__"))) == "numpy";
    if (!PyBool_Check(enabled.ptr()) && !numpy_bool)
      throw rs::invalid_type("set_pool_caching: enabled is a " + py_type_name(enabled) + "; give True or False");
    const rs::device d = pick(dev);
    const bool on = PyObject_IsTrue(enabled.ptr()) == 1;
    gil_released unlocked;  // turning it off trims the pool, which synchronizes
    rs::set_pool_caching(d, on);
  }, nb::arg("enabled").none(), nb::arg("device") = nb::none(),
     "Turns caching of freed memory on or off for the device's pool (off: every free returns its memory).");
  m.def("pool_caching", [](const std::optional<std::string>& dev) { return rs::pool_caching(pick(dev)); },
        nb::arg("device") = nb::none(), "Whether the device's pool caches freed memory.");
  m.def("reset_pool_peak", [](const std::optional<std::string>& dev) { rs::reset_pool_peak(pick(dev)); },
        nb::arg("device") = nb::none(), "Starts the device's peak figures again from the bytes in use now.");
}

}  // namespace resident::py
