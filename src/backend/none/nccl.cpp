// Builds without NCCL: no GPU communicator; the CPU's in-process and MPI ranks still work.
#include "resident/dist/detail/nccl.hpp"
#include "resident/error.hpp"

namespace resident::dist::detail::nccl {
namespace {
[[noreturn]] void absent() {
  RESIDENT_FAIL("this build of resident has no NCCL: GPU ranks need it. Install NCCL (nccl.h, libnccl) "
                "next to the CUDA toolkit and reconfigure, or use CPU ranks", device_unavailable);
}
}  // namespace

bool available() noexcept { return false; }
std::string version() { return "no NCCL in this build"; }
unique_id make_unique_id() { absent(); }
std::vector<comm_t> init_all(const std::vector<int>&) { absent(); }
comm_t init_rank(const unique_id&, int, int, std::chrono::milliseconds) { absent(); }
void group_start() { absent(); }
void group_end() { absent(); }
void all_reduce(comm_t, void*, std::size_t, element, combine, cuda_stream_t, std::chrono::milliseconds) { absent(); }
void wait(comm_t, int, cuda_stream_t, std::chrono::milliseconds) { absent(); }
void destroy(comm_t) noexcept {}

}  // namespace resident::dist::detail::nccl
