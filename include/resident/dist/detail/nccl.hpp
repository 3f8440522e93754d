#pragma once
/// @file nccl.hpp
/// The narrow interface to NCCL: implemented by src/dist/nccl.cpp in builds that found NCCL, by
/// src/backend/none/nccl.cpp otherwise (available() is false and every other call throws). Keeps nccl.h
/// out of every public header.

#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "resident/config.hpp"
#include "resident/dist/communicator.hpp"

namespace resident::dist::detail::nccl {

/// An ncclComm_t.
using comm_t = void*;
/// An ncclUniqueId's bytes.
using unique_id = std::array<char, 128>;

/// Whether this build has NCCL.
bool available() noexcept;
/// "NCCL 2.28.9" (the library's version at run time).
std::string version();
/// A fresh unique id (rank 0 makes it, the others receive it).
unique_id make_unique_id();
/// One communicator per device of this process (ncclCommInitAll), rank i on devs[i].
std::vector<comm_t> init_all(const std::vector<int>& devs);
/// This process's rank of nranks on the current device, joined through id. Non-blocking: a rank that
/// does not join within timeout aborts the communicator and throws library_error ("timeout").
comm_t init_rank(const unique_id& id, int nranks, int rank, std::chrono::milliseconds timeout);
/// Starts a group of calls (several devices of one process).
void group_start();
/// Ends the group: its calls are issued together.
void group_end();
/// In place all-reduce of count elements at buf, on stream s of the current device (the communicator's).
/// A non-blocking communicator's call is watched until taken up, for at most timeout.
void all_reduce(comm_t c, void* buf, std::size_t count, element t, combine op, cuda_stream_t s,
                std::chrono::milliseconds timeout);
/// Waits for stream s of device dev, polling c's asynchronous error; after timeout aborts c and throws
/// library_error ("timeout").
void wait(comm_t c, int dev, cuda_stream_t s, std::chrono::milliseconds timeout);
/// Frees c (after its work). Never throws.
void destroy(comm_t c) noexcept;

}  // namespace resident::dist::detail::nccl

namespace resident::dist::detail {
/// RESIDENT_RENDEZVOUS, rank 0's side: id written 0600 into path through the one file writer.
/// @throws invalid_argument when path cannot be written.
void publish_id(const std::string& path, const nccl::unique_id& id);
/// The other ranks' side: rank 0's id read from path, waiting at most timeout. @throws invalid_argument
/// for a path through a link another user could point, one that is not a regular file of this user's
/// alone, or no file within timeout.
nccl::unique_id receive_id(const std::string& path, std::chrono::milliseconds timeout);
}  // namespace resident::dist::detail
