// resident._core's streaming: host arrays of any size through a run-time chain or a program, in
// chunks (resident/jit/out_of_core.hpp), with the GIL released while the chunks run.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "resident/jit/out_of_core.hpp"
#include "resident/resident.hpp"

namespace nb = nanobind;
namespace rs = resident;
namespace jit = resident::jit;

namespace resident::py {
namespace {

using host_in = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using host_out = nb::ndarray<nb::c_contig, nb::device::cpu>;

jit::element element_of(nb::dlpack::dtype t) {
  const auto code = nb::dlpack::dtype_code(t.code);
  if (t.lanes == 1 && code == nb::dlpack::dtype_code::Float && t.bits == 32) return jit::element::f32;
  if (t.lanes == 1 && code == nb::dlpack::dtype_code::Float && t.bits == 64) return jit::element::f64;
  if (t.lanes == 1 && code == nb::dlpack::dtype_code::Int && t.bits == 32) return jit::element::i32;
  if (t.lanes == 1 && code == nb::dlpack::dtype_code::Int && t.bits == 64) return jit::element::i64;
  if (t.lanes == 1 && code == nb::dlpack::dtype_code::UInt && t.bits == 32) return jit::element::u32;
  if (t.lanes == 1 && code == nb::dlpack::dtype_code::UInt && t.bits == 64) return jit::element::u64;
  throw rs::invalid_argument("resident.stream: host arrays of float32, float64, int32, int64, uint32 or uint64 "
                             "stream; this one holds another type");
}

template <class A>
jit::host_operand operand_of(const A& a) {
  return {a.data(), a.size(), element_of(a.dtype())};
}

// The call's options; `timeline` (when not null) is filled with one entry per chunk.
rs::out_of_core_options options_of(const int_arg<std::int64_t>& chunk_, const int_arg<int>& depth_,
                                   const std::optional<std::string>& dev, const int_arg<int>& host_threads,
                                   std::vector<rs::chunk_timing>* timeline) {
  const std::int64_t chunk = chunk_.get("resident.stream", "chunk");
  const int depth = depth_.get("resident.stream", "depth");
  if (chunk < 0) throw rs::invalid_argument("resident.stream: chunk " + std::to_string(chunk) + " is negative; give "
                                            "elements per chunk, or None to let the call choose");
  rs::out_of_core_options o;
  o.chunk_elements = std::size_t(chunk);
  o.depth = depth;
  o.host_threads = host_threads.get("resident.stream", "host_threads");  // its range: the C++ call's
  o.timeline = timeline;
  o.target = dev ? rs::parse_device(*dev) : rs::default_device();
  rs::require(o.target);
  return o;
}

// The progress callback, called with the GIL (its exception ends the call).
jit::out_of_core_progress progress_of(nb::object progress) {
  if (progress.is_none()) return {};
  return [progress](std::size_t done, std::size_t total) {
    gil_held held;
    progress(done, total);
  };
}

// How the call ran; "timeline": one dict per chunk when it was asked for, else None.
nb::dict summary_dict(const rs::out_of_core_summary& s, const std::optional<std::vector<rs::chunk_timing>>& timeline) {
  nb::dict d;
  d["elements"] = s.elements;
  d["chunks"] = s.chunks;
  d["chunk_elements"] = s.chunk_elements;
  d["depth"] = s.depth;
  d["h2d_bytes"] = s.h2d_bytes;
  d["d2h_bytes"] = s.d2h_bytes;
  d["device_bytes"] = s.device_bytes;
  d["pinned_input"] = s.pinned_input;
  d["pinned_output"] = s.pinned_output;
  d["host_threads"] = s.host_threads;
  d["seconds"] = s.seconds;
  nb::object t = nb::none();
  if (timeline) {
    nb::list l;
    for (const rs::chunk_timing& c : *timeline) {
      nb::dict e;
      e["index"] = c.index;
      e["first"] = c.first;
      e["count"] = c.count;
      e["upload_begin_ms"] = c.upload_begin_ms;
      e["upload_end_ms"] = c.upload_end_ms;
      e["kernel_begin_ms"] = c.kernel_begin_ms;
      e["kernel_end_ms"] = c.kernel_end_ms;
      e["download_begin_ms"] = c.download_begin_ms;
      e["download_end_ms"] = c.download_end_ms;
      l.append(e);
    }
    t = l;
  }
  d["timeline"] = t;
  return d;
}

// The whole streamed call as one call of the profile's (its bytes read and written, on the target).
struct stream_call {
  python_site site;
  std::optional<rs::detail::call_scope> scope;
  stream_call(const rs::out_of_core_options& o, std::uint64_t read, std::uint64_t written, std::uint64_t n) {
    rs::detail::call_facts f;
    f.bytes_read = read;
    f.bytes_written = written;
    f.elements = n;
    scope.emplace("stream", rs::default_stream(o.target), f);
  }
};

std::uint64_t bytes_of(const std::vector<jit::host_operand>& in) {
  std::uint64_t b = 0;
  for (const auto& h : in) b += std::uint64_t(h.size) * (h.type == jit::element::f32 || h.type == jit::element::i32 ||
                                                         h.type == jit::element::u32 ? 4 : 8);
  return b;
}

nb::dict stream_chain(const jit::pipeline& chain, const std::vector<host_in>& xs, host_out out, int_arg<std::int64_t> chunk,
                      int_arg<int> depth, const std::optional<std::string>& dev, nb::object progress,
                      int_arg<int> host_threads, bool timeline) {
  std::vector<jit::host_operand> in;
  for (const auto& x : xs) in.push_back(operand_of(x));
  const jit::host_operand o = operand_of(out);
  std::optional<std::vector<rs::chunk_timing>> times;
  if (timeline) times.emplace();
  const rs::out_of_core_options opt = options_of(chunk, depth, dev, host_threads, times ? &*times : nullptr);
  const auto cb = progress_of(progress);
  stream_call call(opt, bytes_of(in), bytes_of({o}), o.size);
  rs::out_of_core_summary s;
  {
    gil_released unlocked;
    s = jit::out_of_core(chain, in, o, opt, cb);
  }
  return summary_dict(s, times);
}

nb::tuple stream_chain_reduce(const jit::pipeline& chain, const std::vector<host_in>& xs, const std::string& dtype,
                              int_arg<std::int64_t> chunk, int_arg<int> depth, const std::optional<std::string>& dev, nb::object progress,
                              int_arg<int> host_threads, bool timeline) {
  std::vector<jit::host_operand> in;
  for (const auto& x : xs) in.push_back(operand_of(x));
  jit::element r;
  if (dtype == "float32") r = jit::element::f32;
  else if (dtype == "float64") r = jit::element::f64;
  else if (dtype == "int32") r = jit::element::i32;
  else if (dtype == "int64") r = jit::element::i64;
  else if (dtype == "uint32") r = jit::element::u32;
  else if (dtype == "uint64") r = jit::element::u64;
  else throw rs::invalid_argument("resident.stream: unknown value type '" + dtype + "'");
  refuse_empty_extreme(chain, in.empty() ? 0 : in[0].size, "resident.stream");
  std::optional<std::vector<rs::chunk_timing>> times;
  if (timeline) times.emplace();
  const rs::out_of_core_options opt = options_of(chunk, depth, dev, host_threads, times ? &*times : nullptr);
  const auto cb = progress_of(progress);
  stream_call call(opt, bytes_of(in), 0, in.empty() ? 0 : in[0].size);
  alignas(8) unsigned char value[8] = {};
  rs::out_of_core_summary s;
  {
    gil_released unlocked;
    s = jit::out_of_core_reduce(chain, in, r, value, opt, cb);
  }
  nb::object v;
  auto as = [&](auto t) {
    decltype(t) x;
    std::memcpy(&x, value, sizeof x);
    return x;
  };
  switch (r) {
    case jit::element::f32: v = nb::float_(double(as(float{}))); break;
    case jit::element::f64: v = nb::float_(as(double{})); break;
    case jit::element::i32: v = nb::int_(as(std::int32_t{})); break;
    case jit::element::i64: v = nb::int_(as(std::int64_t{})); break;
    case jit::element::u32: v = nb::int_(as(std::uint32_t{})); break;
    case jit::element::u64: v = nb::int_(as(std::uint64_t{})); break;
  }
  return nb::make_tuple(v, summary_dict(s, times));
}

nb::dict stream_program(const rs::program& p, host_in x, host_out out, int_arg<std::int64_t> chunk, int_arg<int> depth,
                        const std::optional<std::string>& dev, nb::object progress, int_arg<int> host_threads,
                        bool timeline) {
  const jit::host_operand i = operand_of(x), o = operand_of(out);
  std::optional<std::vector<rs::chunk_timing>> times;
  if (timeline) times.emplace();
  const rs::out_of_core_options opt = options_of(chunk, depth, dev, host_threads, times ? &*times : nullptr);
  const auto cb = progress_of(progress);
  stream_call call(opt, bytes_of({i}), bytes_of({o}), o.size);
  rs::out_of_core_summary s;
  {
    gil_released unlocked;
    s = jit::out_of_core(p, i, o, opt, cb);
  }
  return summary_dict(s, times);
}

// A NumPy array over a new pinned_buffer (page-locked when a GPU answers): streamed without staging.
nb::object pinned_empty(int_arg<std::size_t> n_, const std::string& dtype) {
  const std::size_t n = n_.get("pinned_empty", "n");
  std::size_t item = 0;
  nb::dlpack::dtype t{};
  if (dtype == "float32") t = nb::dtype<float>(), item = 4;
  else if (dtype == "float64") t = nb::dtype<double>(), item = 8;
  else if (dtype == "int32") t = nb::dtype<std::int32_t>(), item = 4;
  else if (dtype == "int64") t = nb::dtype<std::int64_t>(), item = 8;
  else if (dtype == "uint32") t = nb::dtype<std::uint32_t>(), item = 4;
  else if (dtype == "uint64") t = nb::dtype<std::uint64_t>(), item = 8;
  else throw rs::invalid_type("pinned_empty: unknown dtype '" + dtype + "': use float32, float64, int32, int64, uint32 or uint64");
  if (n > std::size_t(-1) / 2 / item) throw rs::invalid_argument("pinned_empty: " + std::to_string(n) + " elements overflow the byte count");
  auto* b = new rs::pinned_buffer<unsigned char>(n > 0 ? n * item : 1);
  nb::capsule owner(b, [](void* p) noexcept { delete static_cast<rs::pinned_buffer<unsigned char>*>(p); });
  const std::size_t shape[1] = {n};
  return nb::cast(nb::ndarray<nb::numpy>(b->data(), 1, shape, owner, nullptr, t));
}

}  // namespace

void bind_streaming(nb::module_& m) {
  m.def("_pinned_empty", &pinned_empty, nb::arg("n"), nb::arg("dtype"));
  m.def("_stream_chain", &stream_chain, nb::arg("chain"), nb::arg("inputs"), nb::arg("out"), nb::arg("chunk") = 0,
        nb::arg("depth") = 0, nb::arg("device") = nb::none(), nb::arg("progress") = nb::none(),
        nb::arg("host_threads") = 0, nb::arg("timeline") = false);
  m.def("_stream_chain_reduce", &stream_chain_reduce, nb::arg("chain"), nb::arg("inputs"), nb::arg("dtype"),
        nb::arg("chunk") = 0, nb::arg("depth") = 0, nb::arg("device") = nb::none(), nb::arg("progress") = nb::none(),
        nb::arg("host_threads") = 0, nb::arg("timeline") = false);
  m.def("_stream_program", &stream_program, nb::arg("program"), nb::arg("x"), nb::arg("out"), nb::arg("chunk") = 0,
        nb::arg("depth") = 0, nb::arg("device") = nb::none(), nb::arg("progress") = nb::none(),
        nb::arg("host_threads") = 0, nb::arg("timeline") = false);
  m.def("_parse_bytes", [](const std::string& text) { return rs::detail::parse_bytes(text); }, nb::arg("text"),
        "A byte count as RESIDENT_POOL_LIMIT reads it (2GiB, 512MiB, 1000000), or None.");
}

}  // namespace resident::py
