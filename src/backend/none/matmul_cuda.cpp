// matmul's GPU rungs in a build without the CUDA backend: there is no CUDA array to multiply.
#include "resident/linalg/matmul.hpp"

namespace resident::detail {
void matmul_cuda(const gemm_args&, matmul_algo) {
  RESIDENT_FAIL("matmul on a CUDA device needs the CUDA backend: reconfigure with -DRESIDENT_CUDA=ON", device_unavailable);
}
}  // namespace resident::detail
