#include "resident/interop/dlpack.hpp"

#include <cstdint>
#include <limits>

namespace resident {

std::string dlpack_dtype_name(DLDataType t) {
  std::string code;
  switch (t.code) {
    case kDLInt: code = "int"; break;
    case kDLUInt: code = "uint"; break;
    case kDLFloat: code = "float"; break;
    case kDLBfloat: code = "bfloat"; break;
    case kDLComplex: code = "complex"; break;
    case 6: code = "bool"; break;  // kDLBool (DLPack 0.8), which older headers lack
    default: code = "code" + std::to_string(t.code) + "_"; break;
  }
  std::string s = code + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

DLDevice dlpack_device(device d) noexcept {
  return d.is_cuda() ? DLDevice{kDLCUDA, d.index()} : DLDevice{kDLCPU, 0};
}

device device_of(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost: return device::cpu();
    case kDLCUDA:
      if (d.device_id < 0) RESIDENT_FAIL("DLPack: CUDA device id " + std::to_string(d.device_id));
      return device::cuda(d.device_id);
    case kDLCUDAManaged:
      RESIDENT_FAIL("DLPack: managed (unified) memory is not used in place; copy it into a device or "
                             "host tensor first");
    default:
      RESIDENT_FAIL("DLPack: device type " + std::to_string(int(d.device_type)) +
                             " is neither the CPU nor a CUDA device");
  }
}

namespace detail {

void order_for(stream_ref producer, const std::optional<stream_ref>& consumer) {
  if (!consumer) return;
  if (!(consumer->device() == producer.device()))
    RESIDENT_FAIL("to_dlpack: the consumer's stream is on " + consumer->device().name() + ", the array on " +
                          producer.device().name(), device_mismatch);
  if (consumer->native() != producer.native()) consumer->wait_for(producer);
}

DLManagedTensor* make_dlpack(void* data, DLDataType dtype, device d, int ndim, const std::int64_t* shape,
                             const std::int64_t* strides, std::shared_ptr<const void> owner) {
  auto* e = new dlpack_export;
  e->owner = std::move(owner);
  e->shape.assign(shape, shape + ndim);
  e->strides.assign(strides, strides + ndim);
  DLTensor& t = e->tensor.dl_tensor;
  t.data = data;
  t.device = dlpack_device(d);
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->tensor.manager_ctx = e;
  e->tensor.deleter = [](DLManagedTensor* m) { delete static_cast<dlpack_export*>(m->manager_ctx); };
  return &e->tensor;
}

std::pair<void*, std::size_t> dlpack_checked(const DLTensor& t, DLDataType want, std::size_t align) {
  if (t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != want.lanes)
    RESIDENT_FAIL("DLPack: the tensor holds " + dlpack_dtype_name(t.dtype) + ", expected " +
                           dlpack_dtype_name(want) + " (convert it first, or ask for the matching element type)");
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
    RESIDENT_FAIL("DLPack: a tensor of " + std::to_string(t.ndim) + " dimensions without a shape");
  // Elements, checked for overflow; a dimension of extent 1 may carry any stride (as PyTorch makes them).
  std::uint64_t n = 1;
  bool contiguous = true;
  std::int64_t expect = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const std::int64_t e = t.shape[i];
    if (e < 0) RESIDENT_FAIL("DLPack: extent " + std::to_string(e) + " in dimension " + std::to_string(i));
    if (t.strides && e != 1 && t.strides[i] != expect) contiguous = false;
    // Beyond 2^63 - 1 elements no int64 stride or index reaches them all (and the expected stride overflows).
    if (e != 0 && n > std::uint64_t(std::numeric_limits<std::int64_t>::max()) / std::uint64_t(e))
      RESIDENT_FAIL("DLPack: the tensor's element count overflows");
    n *= std::uint64_t(e);
    expect *= e;
  }
  const std::size_t elem = (std::size_t(want.bits) * want.lanes + 7) / 8;
  if (n > std::numeric_limits<std::size_t>::max() / elem)
    RESIDENT_FAIL("DLPack: the tensor's byte count overflows");
  if (n != 0 && !contiguous)
    RESIDENT_FAIL("DLPack: the tensor is strided; resident uses C-contiguous memory in place (make it "
                           "contiguous first, e.g. .contiguous() or ascontiguousarray)");
  if (n != 0 && !t.data) RESIDENT_FAIL("DLPack: a tensor of " + std::to_string(n) + " elements with no data");
  // The bytes must be addressable: an offset and extent past the largest address space a process has
  // (2^56 bytes on 64-bit Linux) name no memory, and their sum with the pointer must not wrap around.
  // The pointer itself is not bounded: its top byte may carry a tag (aarch64 TBI, MTE).
  constexpr std::uint64_t span = sizeof(void*) == 8 ? std::uint64_t(1) << 56 : std::uint64_t(UINTPTR_MAX);
  const std::uint64_t base = reinterpret_cast<std::uintptr_t>(t.data);
  if (n != 0 && (t.byte_offset > span || n * elem > span - t.byte_offset ||
                 t.byte_offset + n * elem > std::uint64_t(UINTPTR_MAX) - base))
    RESIDENT_FAIL("DLPack: the tensor's byte_offset (" + std::to_string(t.byte_offset) + ") and " + std::to_string(n) +
                  " elements of " + std::to_string(elem) + " bytes reach past any address a process can use");
  char* p = static_cast<char*>(t.data) + t.byte_offset;
  if (n != 0 && reinterpret_cast<std::uintptr_t>(p) % align != 0)
    RESIDENT_FAIL("DLPack: the tensor's first element is not aligned to " + std::to_string(align) + " bytes");
  return {n ? p : nullptr, std::size_t(n)};
}

}  // namespace detail
}  // namespace resident
