#include "resident/error.hpp"
#include "../vendor.hpp"

namespace resident::cli {

double curand_uniform_fill_ms(float*, std::size_t, std::uint64_t, stream_ref, int) {
  throw device_unavailable("cuRAND is not in this build: it has no CUDA backend");
}

double curand_normal_fill_ms(float*, std::size_t, std::uint64_t, stream_ref, int) {
  throw device_unavailable("cuRAND is not in this build: it has no CUDA backend");
}

std::vector<double> hand_chunked_pipeline_ms(const float*, float*, std::size_t, std::size_t, int, int, int) {
  throw device_unavailable("the hand-written chunked pipeline needs the CUDA backend, which this build lacks");
}

std::pair<int, int> cuda_versions() noexcept { return {0, 0}; }

}  // namespace resident::cli
