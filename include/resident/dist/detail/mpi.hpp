#pragma once
/// @file mpi.hpp
/// The narrow interface to MPI: implemented by src/dist/mpi.cpp in builds that found MPI (CMake's
/// find_package(MPI COMPONENTS CXX)), by src/backend/none/mpi.cpp otherwise. Keeps mpi.h out of every
/// public header. MPI carries host memory only: NCCL's unique id, and CPU ranks' values.

#include <cstddef>
#include <string>

#include "resident/dist/communicator.hpp"

namespace resident::dist::detail::mpi {

/// Whether this build has MPI.
bool available() noexcept;
/// Whether the process was started by an MPI launcher (its environment variables are set).
bool launched() noexcept;
/// Initializes MPI unless the program already has (then finalizes it at exit). Idempotent.
void init();
/// The library's version line, e.g. "Open MPI v4.1.4".
std::string version();
/// Rank and size in MPI_COMM_WORLD; the rank among the processes of this host.
int rank();
int size();
int local_rank();
/// bytes at data from root to every process.
void broadcast(void* data, std::size_t bytes, int root);
/// In place all-reduce of count host elements at buf.
void all_reduce(void* buf, std::size_t count, element t, combine op);

}  // namespace resident::dist::detail::mpi
