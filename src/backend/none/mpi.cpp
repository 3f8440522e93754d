// Builds without MPI: processes are described by environment variables instead (GPU ranks), and CPU
// ranks stay within one process.
#include <cstdlib>

#include "resident/dist/detail/mpi.hpp"
#include "resident/error.hpp"

namespace resident::dist::detail::mpi {
namespace {
[[noreturn]] void absent() {
  RESIDENT_FAIL("this build of resident has no MPI: install an MPI (libopenmpi-dev) and reconfigure, or "
                "describe the processes with RESIDENT_RANK, RESIDENT_WORLD_SIZE and RESIDENT_RENDEZVOUS");
}
}  // namespace

bool available() noexcept { return false; }
bool launched() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}
void init() { absent(); }
std::string version() { return "no MPI in this build"; }
int rank() { absent(); }
int size() { absent(); }
int local_rank() { absent(); }
void broadcast(void*, std::size_t, int) { absent(); }
void all_reduce(void*, std::size_t, element, combine) { absent(); }

}  // namespace resident::dist::detail::mpi
