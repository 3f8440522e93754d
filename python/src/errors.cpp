// resident's C++ errors as Python exceptions.
#include "bindings.hpp"

#include "resident/flow/flow.hpp"
#include "resident/jit/jit.hpp"

namespace resident::py {

namespace {

nb::dict& exception_types() {
  static nb::dict* d = new nb::dict();  // filled by the package's __init__; lives as long as the module
  return *d;
}

void raise(const char* name, const std::exception& e) {
  nb::dict& types = exception_types();
  nb::handle cls = types.contains(name) ? nb::handle(types[name]) : nb::handle(PyExc_RuntimeError);
  PyErr_SetString(cls.ptr(), e.what());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const rs::device_lost& e) { raise("DeviceLost", e);
  } catch (const rs::cuda_error& e) { raise("CudaError", e);
  } catch (const rs::library_error& e) { raise("LibraryError", e);
  } catch (const rs::out_of_memory& e) { raise("OutOfMemory", e);
  } catch (const rs::invalid_launch& e) { raise("InvalidLaunch", e);
  } catch (const rs::shape_mismatch& e) { raise("ShapeMismatch", e);
  } catch (const rs::device_mismatch& e) { raise("DeviceMismatch", e);
  } catch (const rs::flow_error& e) { raise("FlowError", e);
  } catch (const rs::jit::compile_error& e) { raise("CompileError", e);
  } catch (const rs::invalid_argument& e) { raise("InvalidArgument", e);
  } catch (const rs::device_unavailable& e) { raise("DeviceUnavailable", e);
  } catch (const rs::transfer_forbidden& e) { raise("TransferForbidden", e);
  } catch (const rs::stage_error& e) { raise("StageError", e);
  } catch (const rs::error& e) { raise("Error", e);
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("_set_exception_types", [](nb::dict d) { exception_types().update(d); });
}

}  // namespace resident::py
