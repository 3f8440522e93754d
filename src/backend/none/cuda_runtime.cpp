// The CUDA interface of a build without the CUDA backend: no device answers, and any call that
// would need one says how to get it.
#include "resident/detail/cuda_runtime.hpp"
#include "resident/error.hpp"

namespace resident::detail::cuda {
namespace {
[[noreturn]] void absent() {
  RESIDENT_FAIL(
      "this build of resident has no CUDA backend: reconfigure with -DRESIDENT_CUDA=ON (needs the "
      "CUDA toolkit) or use the cpu device", device_unavailable);
}
}  // namespace

int device_count(std::string* why) noexcept {
  if (why) *why = "this build has no CUDA backend (configured with RESIDENT_CUDA=OFF or no toolkit)";
  return 0;
}
device_properties properties(int) { absent(); }
void synchronize_device(int) { absent(); }
cuda_stream_t stream_create(int) { absent(); }
void stream_destroy(cuda_stream_t) noexcept {}
void stream_synchronize(int, cuda_stream_t) { absent(); }
bool stream_done(int, cuda_stream_t) { absent(); }
bool stream_is_capturing(cuda_stream_t) { return false; }
unsigned long long* stream_counters(int, cuda_stream_t) { absent(); }
void* stream_scratch(int, cuda_stream_t) { absent(); }
unsigned long long* stream_handover(int, cuda_stream_t) { absent(); }
void stream_after(int, cuda_stream_t, cuda_stream_t) { absent(); }
void stream_after_peer(cuda_stream_t, int, cuda_stream_t, int) { absent(); }
cuda_event_t event_create(int) { absent(); }
void event_destroy(cuda_event_t) noexcept {}
void event_record(int, cuda_event_t, cuda_stream_t) { absent(); }
void event_synchronize(cuda_event_t) { absent(); }
void stream_wait_event(int, cuda_stream_t, cuda_event_t) { absent(); }
float event_elapsed_ms(cuda_event_t, cuda_event_t) { absent(); }
void* pool_allocate(int, std::size_t, cuda_stream_t) { absent(); }
void pool_deallocate(int, void*, cuda_stream_t) { absent(); }
std::size_t pool_reserved(int) { absent(); }
std::size_t pool_used(int) { absent(); }
void pool_trim(int, cuda_stream_t) { absent(); }
void* raw_malloc(int, std::size_t) { absent(); }
void raw_free(void*) { absent(); }
void mem_info(int, std::size_t*, std::size_t*) { absent(); }
void memcpy_async(int, void*, const void*, std::size_t, copy_kind, cuda_stream_t) { absent(); }
void memset_async(void*, int, std::size_t, cuda_stream_t) { absent(); }
bool can_access_peer(int, int) { return false; }
bool enable_peer_access(int, int) { absent(); }
void memcpy_peer_async(void*, int, const void*, int, std::size_t, cuda_stream_t) { absent(); }
void* host_pinned_allocate(std::size_t) { absent(); }
void host_pinned_free(void*) noexcept {}
bool is_pinned(const void*) noexcept { return false; }
int pointer_device(const void*) noexcept { return -1; }
int device_only_memory(const void*) noexcept { return -1; }
bool dependent_launch(int) { return false; }
void check_launch(const char*, resident::source_location) {}
void set_device(int) { absent(); }
int current_device() { absent(); }

void* graph_begin(stream_ref) { absent(); }
void* graph_end(stream_ref) { absent(); }
bool graph_end_update(stream_ref, void*) { absent(); }
void graph_abort(stream_ref) noexcept {}
void graph_launch(void*, stream_ref) { absent(); }
void graph_destroy(void*) noexcept {}

void* driver_entry_point(const char*, int) { absent(); }

}  // namespace resident::detail::cuda
