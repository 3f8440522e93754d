// resident._core's copies between existing arrays (resident/memory/array.hpp: copy, copy_async,
// array::to_host into host memory): device to device, host to device and back, into memory the caller
// already has, each one counted transfer as the C++ counts it.
#include "bindings.hpp"

namespace resident::py {

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

bool same_dtype(const DLDataType& a, const DLDataType& b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

// An array of any library taken in place for the copy (from_dlpack's checks: a known device and element
// type, C-contiguous memory); `role` ("src", "dst", "out") names it in the messages. NumPy's own flags
// are read first, so that a strided or read-only destination is named as such.
py_array taken(nb::handle obj, const char* what, const char* role, bool written) {
  if (obj.is_none())
    throw rs::invalid_type(std::string(what) + ": " + role + " is None; give an array (resident's, NumPy's or "
                           "another library's)");
  refuse_sharded(obj, what);
  if (has_attr(obj, "flags") && has_attr(obj, "strides") && has_attr(obj, "dtype")) {  // NumPy's
    const nb::object flags = obj.attr("flags");
    // A flag read as Python's truth (np.True_, 1): nb::cast<bool> takes an exact bool only.
    auto flag = [&](const char* name) {
      const int v = PyObject_IsTrue(flags.attr(name).ptr());
      if (v < 0) {
        PyErr_Clear();
        throw rs::invalid_type(std::string(what) + ": " + role + ".flags." + name + " cannot be read as true or false");
      }
      return v == 1;
    };
    if (has_attr(flags, "c_contiguous") && !flag("c_contiguous"))
      throw rs::invalid_argument(std::string(what) + ": " + role + " is not C-contiguous; give a C-contiguous "
                                 "array (np.ascontiguousarray, or np.empty(shape, dtype) for a destination)");
    if (written && has_attr(flags, "writeable") && !flag("writeable")) {
      const call_stream none(nb::none(), what);  // a NumPy scalar is named as the copy it is read through
      from_dlpack(nb::borrow(obj)).check_writable(std::string(what) + ": " + role);
      throw rs::invalid_argument(std::string(what) + ": " + role + " is read-only; give a writable array");
    }
  }
  const call_stream none(nb::none(), what);  // names the call in from_dlpack's messages
  py_array a = from_dlpack(nb::borrow(obj));
  if (written) a.check_writable(std::string(what) + ": " + role);
  return a;
}

// The checks every copy makes before any work: one element type, one shape, a writable destination.
void check_pair(const py_array& s, const py_array& d, const char* what) {
  if (!same_dtype(s.dtype, d.dtype))
    throw rs::invalid_argument(std::string(what) + ": copying " + rs::dlpack_dtype_name(s.dtype) + " into " +
                               rs::dlpack_dtype_name(d.dtype) + "; give arrays of one element type (convert "
                               "first, e.g. with NumPy's astype)");
  if (s.shape != d.shape)
    throw rs::shape_mismatch(std::string(what) + ": source of shape " + shape_text(s.shape) + ", destination of "
                             "shape " + shape_text(d.shape) + "; give arrays of one shape (reshape first)");
}

// Puts the CUDA arrays of the copy on the stream given to it, if any. A copy between two GPUs runs on
// the arrays' own streams (a stream is of one device): refused with a stream.
void on_given_stream(py_array& s, py_array& d, const char* what) {
  if (!t_call_stream || !t_call_stream->given) return;
  if (s.device().is_cuda() && d.device().is_cuda() && !(s.device() == d.device()))
    throw rs::invalid_argument(std::string(what) + ": a copy from " + s.device().name() + " to " + d.device().name() +
                               " runs on the arrays' own streams; leave stream= out");
  if (!s.device().is_cuda() && !d.device().is_cuda())
    throw rs::invalid_argument(std::string(what) + ": a copy between CPU memory takes no stream");
  if (s.device().is_cuda()) apply_call_stream(s);
  if (d.device().is_cuda()) apply_call_stream(d);
}

// dst = src. blocking: a copy with host memory on one side is finished when this returns (pinned memory
// is otherwise copied asynchronously); a copy between device arrays is ordered on their streams.
// download: d is the host side of a to_host, a counted device-to-host transfer (refused under forbid)
// also where the array is on the CPU backend, as in C++.
void copy_between(const py_array& s, const py_array& d, bool blocking, bool download = false) {
  visit(s.dtype, [&](auto t) {
    using T = decltype(t);
    const rs::device sd = s.device(), dd = d.device();
    {
      gil_released unlocked;
      const rs::array_ref<T> from = s.ref<T>(), to = d.ref<T>();
      if (sd.is_cpu() && dd.is_cuda()) {
        rs::copy_async(std::span<const T>(from.data(), from.size()), to);
        if (blocking) to.stream().synchronize();
      } else if ((sd.is_cuda() || download) && dd.is_cpu()) {
        rs::copy_async(from, std::span<T>(to.data(), to.size()));
        if (blocking) from.stream().synchronize();
      } else {
        rs::copy(from, to);
        // One device, two streams: src's later writes and its release wait for the copy's read (a peer
        // copy makes that wait itself).
        if (sd == dd && from.stream().native() != to.stream().native()) from.stream().wait_for(to.stream());
      }
    }
    s.finish_foreign();  // another library's memory its owner may use next on any stream
    d.finish_foreign();
    return 0;
  });
}

void copy_arrays(nb::handle src, nb::handle dst, nb::handle stream, bool blocking) {
  const char* what = blocking ? "copy" : "copy_async";
  py_array s = taken(src, what, "src", false), d = taken(dst, what, "dst", true);
  check_pair(s, d, what);
  const call_stream on(stream, what);
  on_given_stream(s, d, what);
  copy_between(s, d, blocking);
}

}  // namespace

nb::object to_host_into(const py_array& self, nb::handle out, nb::handle stream, bool blocking) {
  const char* what = blocking ? "to_host" : "to_host_async";
  py_array a = self;
  const py_array h = taken(out, what, "out", true);
  if (!h.device().is_cpu())
    throw rs::invalid_argument(std::string(what) + ": out is on " + h.device().name() + "; give host memory (a "
                               "NumPy array), or copy between devices with resident.copy");
  check_pair(a, h, what);
  const call_stream on(stream, what);
  apply_call_stream(a);  // read on the given stream, if any, after the array's queued work
  if (a.device().is_cpu()) {
    // Host memory on both sides: one memcpy, never over itself (the C++ copy's rule).
    const auto* x = static_cast<const char*>(a.data);
    const auto* y = static_cast<const char*>(h.data);
    const std::size_t n = a.size() * a.itemsize();
    if (x == y) return nb::borrow(out);
    if (n && std::less<>{}(x, y + n) && std::less<>{}(y, x + n))
      throw rs::invalid_argument(std::string(what) + ": out overlaps the array's own memory; give separate memory");
  }
  copy_between(a, h, blocking, true);
  return nb::borrow(out);
}

void bind_transfers(nb::module_& m) {
  m.def("copy", [](nb::handle src, nb::handle dst, nb::handle stream) { copy_arrays(src, dst, stream, true); },
        at_python_line(), nb::arg("src").none(), nb::arg("dst").none(), nb::kw_only(), nb::arg("stream") = nb::none(),
        "dst[...] = src between two existing arrays of one shape and element type, of any library, on any devices: "
        "device to device (ordered on the arrays' streams), between two GPUs (a peer copy), or host memory to a "
        "device and back (a counted transfer, finished when this returns). stream= orders the copy on a stream of "
        "the device.");
  m.def("copy_async", [](nb::handle src, nb::handle dst, nb::handle stream) { copy_arrays(src, dst, stream, false); },
        at_python_line(), nb::arg("src").none(), nb::arg("dst").none(), nb::kw_only(), nb::arg("stream") = nb::none(),
        "As copy, but a copy with host memory on one side returns once queued: page-locked host memory "
        "(resident.streaming.pinned_empty) is copied while the host goes on; keep it alive and unchanged until the "
        "stream (stream=, else the device array's) is synchronized. Pageable memory is staged: an upload returns "
        "once the host memory was read, a download once it is done.");
}

}  // namespace resident::py
