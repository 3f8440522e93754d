#include "resident/error.hpp"
#include "vendor.hpp"

namespace resident::cli {

double curand_uniform_fill_ms(float*, std::size_t, std::uint64_t, stream_ref, int) {
  throw device_unavailable("cuRAND is not in this build: it has no CUDA backend");
}

double curand_normal_fill_ms(float*, std::size_t, std::uint64_t, stream_ref, int) {
  throw device_unavailable("cuRAND is not in this build: it has no CUDA backend");
}

}  // namespace resident::cli
