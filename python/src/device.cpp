// resident._core's device facts (resident/device/device.hpp, config.hpp): a device's properties and the
// build's switches. resident/_device.py names the properties.
#include "bindings.hpp"

namespace resident::py {

void bind_device(nb::module_& m) {
  m.def("_device_properties", [](const std::optional<std::string>& dev) {
    const rs::device d = pick(dev);
    rs::device_properties p;
    {
      gil_released unlocked;  // the first question to a GPU's driver may take a while
      p = rs::properties(d);
    }
    nb::dict r;
    r["device"] = d.name();
    r["name"] = p.name;
    r["multiprocessors"] = p.multiprocessors;
    r["memory_bytes"] = p.memory_bytes;
    r["compute_capability"] = nb::make_tuple(p.cc_major, p.cc_minor);
    r["warp_size"] = p.warp_size;
    r["max_threads_per_block"] = p.max_threads_per_block;
    r["max_threads_per_multiprocessor"] = p.max_threads_per_multiprocessor;
    r["max_blocks_per_multiprocessor"] = p.max_blocks_per_multiprocessor;
    r["max_block_dim"] = nb::make_tuple(p.max_block_dim[0], p.max_block_dim[1], p.max_block_dim[2]);
    r["max_grid_dim"] = nb::make_tuple(p.max_grid_dim[0], p.max_grid_dim[1], p.max_grid_dim[2]);
    r["shared_per_block"] = p.shared_per_block;
    r["shared_per_block_optin"] = p.shared_per_block_optin;
    r["l2_bytes"] = p.l2_bytes;
    return r;
  }, nb::arg("device") = nb::none());
  // What this build of the C++ library contains (config.hpp).
  m.attr("cuda_compiled") = rs::cuda_compiled;
  m.attr("debug_checks") = rs::debug_checks;
  m.attr("debug_sync") = rs::debug_sync;
  m.attr("library_version") = rs::version();
}

}  // namespace resident::py
