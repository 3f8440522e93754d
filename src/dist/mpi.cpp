// MPI behind resident/dist/detail/mpi.hpp (builds that found MPI).
#include <mpi.h>

#include <cstdlib>
#include <mutex>

#include "resident/detail/library_check.hpp"
#include "resident/dist/detail/mpi.hpp"

namespace resident::dist::detail::mpi {
namespace {

std::string error_name(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, std::size_t(len));
}
std::string no_text(int) { return {}; }

#define RESIDENT_MPI_TRY(call) RESIDENT_LIBRARY_TRY("MPI", call, MPI_SUCCESS, error_name, no_text)

MPI_Datatype type_of(element t) {
  switch (t) {
    case element::f32: return MPI_FLOAT;
    case element::f64: return MPI_DOUBLE;
    case element::i32: return MPI_INT32_T;
    case element::u32: return MPI_UINT32_T;
    case element::i64: return MPI_INT64_T;
    case element::u64: return MPI_UINT64_T;
  }
  return MPI_FLOAT;
}

MPI_Op op_of(combine op) {
  switch (op) {
    case combine::sum: return MPI_SUM;
    case combine::min: return MPI_MIN;
    case combine::max: return MPI_MAX;
  }
  return MPI_SUM;
}

void finalize_at_exit() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

}  // namespace

bool available() noexcept { return true; }

bool launched() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    int ready = 0;
    RESIDENT_MPI_TRY(MPI_Initialized(&ready));
    if (ready) return;  // the program's own MPI_Init: it finalizes too
    int provided = 0;
    RESIDENT_MPI_TRY(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
    std::atexit(finalize_at_exit);
    // Errors come back as codes that the wrapper turns into exceptions, instead of aborting the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  });
}

std::string version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  RESIDENT_MPI_TRY(MPI_Get_library_version(text, &len));
  std::string s(text, std::size_t(len));
  if (auto cut = s.find_first_of(",\n"); cut != std::string::npos) s.resize(cut);
  return s;
}

int rank() {
  int r = 0;
  RESIDENT_MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}
int size() {
  int n = 0;
  RESIDENT_MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &n));
  return n;
}
int local_rank() {
  MPI_Comm host;
  RESIDENT_MPI_TRY(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  int r = 0;
  MPI_Comm_rank(host, &r);
  MPI_Comm_free(&host);
  return r;
}

void broadcast(void* data, std::size_t bytes, int root) {
  RESIDENT_MPI_TRY(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
}

void all_reduce(void* buf, std::size_t count, element t, combine op) {
  RESIDENT_EXPECTS(count <= std::size_t(INT32_MAX), "all_reduce: MPI combines at most 2^31 - 1 elements a call");
  RESIDENT_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, buf, int(count), type_of(t), op_of(op), MPI_COMM_WORLD));
}

}  // namespace resident::dist::detail::mpi
