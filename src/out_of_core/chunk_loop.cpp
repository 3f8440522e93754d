#include "resident/out_of_core/detail/chunk_loop.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include "backend/runtime.hpp"
#include "resident/detail/cuda_runtime.hpp"
#include "resident/detail/per_device.hpp"
#include "resident/detail/tuning.hpp"
#include "resident/device/event.hpp"
#include "resident/error.hpp"
#include "resident/memory/array.hpp"
#include "resident/memory/ledger.hpp"
#include "resident/memory/pinned.hpp"
#include "resident/memory/pool.hpp"
#include "resident/memory/transfer.hpp"
#include "resident/out_of_core/detail/host_copy_pool.hpp"

namespace resident::detail {
namespace cu = detail::cuda;
namespace {

using tuning = out_of_core_tuning;
constexpr int max_depth = 16;
constexpr int max_host_threads = 256;
// A chosen chunk is never made smaller than this many elements to fit memory.
constexpr std::size_t smallest_chosen_chunk = 4096;
// Device buffers inside the staging allocation start at this alignment (the pool's).
constexpr std::size_t buffer_alignment = pool_alignment;

std::size_t round_up(std::size_t b) { return (b + buffer_alignment - 1) / buffer_alignment * buffer_alignment; }

// Page-locked staging kept per device between calls: page-locking hundreds of MiB costs tens of
// milliseconds, far more than the copies of a chunk.
struct pinned_cache {
  std::mutex m;
  std::vector<pinned_buffer<unsigned char>> free;
};
pinned_cache& cache_of(device d) {
  static auto* all = new per_device<pinned_cache>;  // never destroyed: code run at exit may still stream
  return (*all)[d];
}
constexpr std::size_t cache_keeps = 8;

pinned_buffer<unsigned char> take_pinned(device d, std::size_t bytes) {
  auto& c = cache_of(d);
  {
    std::lock_guard lock(c.m);
    auto best = c.free.end();
    for (auto it = c.free.begin(); it != c.free.end(); ++it)
      if (it->size() >= bytes && (best == c.free.end() || it->size() < best->size())) best = it;
    if (best != c.free.end()) {
      pinned_buffer<unsigned char> b = std::move(*best);
      c.free.erase(best);
      return b;
    }
  }
  return pinned_buffer<unsigned char>(bytes);
}
void give_back_pinned(device d, pinned_buffer<unsigned char>&& b) noexcept {
  if (!b.data()) return;
  auto& c = cache_of(d);
  std::lock_guard lock(c.m);
  if (c.free.size() < cache_keeps) c.free.push_back(std::move(b));  // else freed here
}

// The chunk (and the depth, when the call chooses it) for a staging budget: the chunk halved, then the
// depth lowered to 2, until depth slots fit or the chunk reaches its floor. A budget of 0 gives the
// least the call chooses for these arrays.
template <class SlotBytes>
std::pair<std::size_t, int> choose_chunk(std::size_t n, std::size_t chunk, int depth, bool depth_chosen,
                                         std::size_t budget, const SlotBytes& slot_bytes) {
  chunk = std::min(chunk, n);
  while (std::size_t(depth) * slot_bytes(chunk) > budget && chunk > smallest_chosen_chunk) chunk /= 2;
  if (depth_chosen)
    while (std::size_t(depth) * slot_bytes(chunk) > budget && depth > 2) --depth;
  if (chunk < n) chunk = std::max<std::size_t>(chunk / 256 * 256, 1);  // keeps chunks aligned
  return {chunk, depth};
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct chunk_loop::cuda_state {
  resident::stream up, kernel, down;
  std::vector<event> uploaded, computed, downloaded;
  array<unsigned char> staging;                     // depth slots of device buffers
  std::vector<std::vector<void*>> in;               // [slot][input] device chunk buffers
  std::vector<void*> out;                           // [slot] device output buffer
  std::vector<pinned_buffer<unsigned char>> stage_in;  // per input: depth pinned chunks (empty: pinned input)
  pinned_buffer<unsigned char> stage_out;           // depth pinned chunks (empty: pinned or no output)
  std::unique_ptr<host_copy_pool> copiers;          // fills stage_in and drains stage_out (null: no staging)
  pinned_buffer<unsigned char> results;             // one partial per chunk
  event start;
  std::vector<event> marks;                         // timeline: 6 per chunk
  explicit cuda_state(device d) : up(d), kernel(d), down(d), staging(0, kernel.ref()), start(d) {}
};

chunk_loop::chunk_loop(std::size_t n, std::vector<host_side> inputs, host_side output, bool in_place,
                       std::size_t result_bytes, const out_of_core_options& o)
    : device_(o.target), n_(n), result_bytes_(result_bytes), inputs_(std::move(inputs)), output_(output),
      in_place_(in_place && inputs_.size() == 1 && output.data && inputs_[0].element_bytes == output.element_bytes),
      timeline_(o.timeline), start_(std::chrono::steady_clock::now()) {
  require(device_);
  RESIDENT_EXPECTS(o.depth >= 0 && o.depth <= max_depth,
                   "out_of_core_options: depth " + std::to_string(o.depth) + " is out of range; give 1 to " +
                       std::to_string(max_depth) + " chunks in flight, or 0 to let the call choose");
  RESIDENT_EXPECTS(o.host_threads >= 0 && o.host_threads <= max_host_threads,
                   "out_of_core_options: host_threads " + std::to_string(o.host_threads) + " is out of range; give 1 to " +
                       std::to_string(max_host_threads) + " host copy threads, or 0 to let the call choose");
  // A bad RESIDENT_POOL_LIMIT is refused here on both backends (the CPU's loop takes no staging).
  (void)pool_limit(device_);
  // A null host array of n elements would be read or written at address 0 (by this thread or a
  // host copy worker). A null output of no element size is "no output" (a reduction).
  if (n > 0) {
    for (std::size_t i = 0; i < inputs_.size(); ++i)
      RESIDENT_EXPECTS(inputs_[i].data, "out-of-core pipeline: host input " + std::to_string(i) + " is a null pointer with " +
                                            std::to_string(n) + " elements; give the host memory to read");
    RESIDENT_EXPECTS(output.data || output.element_bytes == 0,
                     "out-of-core pipeline: the host output is a null pointer with " + std::to_string(n) +
                         " elements; give host memory of the input's size to write");
  }
  // Bytes of one element in every input together, and in the output.
  std::size_t in_bytes = 0;
  for (const host_side& h : inputs_) in_bytes += h.element_bytes;
  const std::size_t out_bytes = output_.data ? output_.element_bytes : 0;
  const std::size_t widest = std::max({in_bytes, out_bytes, std::size_t(1)});
  RESIDENT_EXPECTS(o.chunk_elements <= std::numeric_limits<std::size_t>::max() / max_depth / widest / 2,
                   "out_of_core_options: a chunk of " + std::to_string(o.chunk_elements) +
                       " elements overflows the byte count; give a smaller chunk_elements");
  // Output ranges that overlap an input other than exactly would be written before being read.
  if (output_.data && n > 0) {
    const auto* ob = static_cast<const unsigned char*>(output_.data);
    for (const host_side& h : inputs_) {
      const auto* ib = static_cast<const unsigned char*>(h.data);
      const bool overlap = ob < ib + n * h.element_bytes && ib < ob + n * out_bytes;
      const bool same = ob == ib && out_bytes == h.element_bytes;
      RESIDENT_EXPECTS(!overlap || same, "out-of-core pipeline: the host output overlaps an input without being "
                                         "the same elements; write into separate memory or exactly in place");
    }
  }
  // Device memory given as a host array: the copies and the host threads would read it as host memory
  // (managed memory is the host's to read: it is staged like pageable memory).
  detail::runtime& rt = backend_of(device_);
  if (n > 0) {
    auto refuse_device_memory = [&](const void* p, const std::string& which) {
      if (const auto on = rt.owner(p, false))
        RESIDENT_FAIL("out-of-core pipeline: " + which + " is memory of " + on->name() +
                      ", not host memory; run the pipeline on the device array itself, or stream a host copy");
    };
    for (std::size_t i = 0; i < inputs_.size(); ++i) refuse_device_memory(inputs_[i].data, "host input " + std::to_string(i));
    if (output_.data) refuse_device_memory(output_.data, "the host output");
  }
  const bool moves = !inputs_.empty() || output_.data || result_bytes_ > 0;
  if (n > 0 && moves && current_transfer_policy() == transfer_policy::forbid)
    RESIDENT_FAIL("an out-of-core pipeline of " + std::to_string(n) + " elements on " + device_.name() +
                      " would move data between host and device while the transfer policy is forbid; "
                      "run it outside that scope or relax the policy",
                  transfer_forbidden);
  // Pageable host arrays are staged through pinned buffers by worker threads: one more chunk in flight.
  std::vector<bool> staged_in(inputs_.size(), false);
  bool staged_out = false;
  if (n > 0) {
    for (std::size_t i = 0; i < inputs_.size(); ++i) staged_in[i] = !rt.copies_directly(inputs_[i].data);
    staged_out = output_.data && !rt.copies_directly(output_.data);
  }
  const bool staged = staged_out || std::find(staged_in.begin(), staged_in.end(), true) != staged_in.end();
  depth_ = o.depth ? o.depth : staged ? tuning::staged_depth : tuning::depth;
  chunk_ = o.chunk_elements ? o.chunk_elements
                            : std::max<std::size_t>((staged ? tuning::staged_chunk_bytes : tuning::chunk_bytes) / widest, 1);
  summary_.elements = n;
  if (n == 0) {  // no chunk, so no slot in flight (depth never exceeds the chunks)
    chunk_ = 0;
    depth_ = 0;
    summary_.depth = 0;
    return;
  }

  // Device bytes of one slot: each input's chunk, and the output's unless it is staged in place.
  const std::size_t stage_out_bytes = output_.data && !in_place_ ? out_bytes : 0;
  const std::size_t first_chunk = chunk_;  // before it is fitted to memory
  const int first_depth = depth_;
  auto slot_bytes = [&](std::size_t c) {
    std::size_t b = 0;
    for (const host_side& h : inputs_) b += round_up(c * h.element_bytes);
    return b + round_up(c * stage_out_bytes);
  };
  if (!rt.host_memory()) {
    // Half the free memory, and what the pool's limit leaves, less the partials and some slack.
    std::size_t budget = rt.memory(device_).free / 2;
    if (auto lim = pool_limit(device_)) {
      const std::size_t used = pool_stats(device_).bytes_in_use;
      budget = std::min(budget, *lim > used ? *lim - used : 0);
    }
    const std::size_t reserve = std::size_t(max_depth) * round_up(result_bytes_) + (std::size_t(64) << 10);
    budget = budget > reserve ? budget - reserve : 0;
    if (!o.chunk_elements) {
      const auto [c, dep] = choose_chunk(n, chunk_, depth_, o.depth == 0, budget, slot_bytes);
      chunk_ = c;
      depth_ = dep;
    }
  }
  chunk_ = std::min(std::max<std::size_t>(chunk_, 1), n);
  chunks_ = n / chunk_ + (n % chunk_ != 0);  // n + chunk_ - 1 may wrap (host_generate sizes)
  // No more slots than chunks, chosen or given: a slot no chunk uses is staging (and a reduction's
  // partial) allocated for nothing, which could fail a pool limit that the chunks fit under.
  if (std::size_t(depth_) > chunks_) depth_ = int(chunks_);
  summary_.chunk_elements = chunk_;
  summary_.depth = depth_;
  summary_.chunks = chunks_;
  // A reduction keeps one partial per chunk until the end.
  RESIDENT_EXPECTS(!result_bytes_ || chunks_ <= std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / result_bytes_,
                   "streamed reduction: " + std::to_string(chunks_) + " chunks of " + std::to_string(chunk_) +
                       " elements need more partials than any allocation holds; give a larger chunk_elements, or 0 "
                       "to let the call choose");
  const std::size_t partial_bytes = chunks_ * result_bytes_;
  auto partials_do_not_fit = [&](const std::string& why) {
    const pool_statistics ps = pool_stats(device_);
    return out_of_memory("streamed reduction on " + device_.name() + ": the partials of " + std::to_string(chunks_) +
                             " chunks, " + format_bytes(double(partial_bytes)) + " (" + std::to_string(partial_bytes) +
                             " bytes) of host memory, could not be allocated (" + why + "; the pool has " +
                             std::to_string(ps.bytes_in_use) + " bytes in use and " + std::to_string(ps.bytes_reserved) +
                             " reserved); give a larger chunk_elements, or 0 to let the call choose",
                         partial_bytes, 0, ps.bytes_reserved, ps.bytes_in_use, ps.limit, std::nullopt);
  };
  // More than the host's memory is not asked for (an allocator may abort rather than fail on it).
  const long page = sysconf(_SC_PAGE_SIZE), pages = sysconf(_SC_PHYS_PAGES);
  if (page > 0 && pages > 0 && partial_bytes / std::size_t(page) > std::size_t(pages))
    throw partials_do_not_fit("more than this host's " + format_bytes(double(pages) * double(page)) + " of memory");
  if (rt.host_memory()) {  // no staging: the loop works in the host's memory
    try {
      results_.resize(partial_bytes);
    } catch (const std::bad_alloc&) {
      throw partials_do_not_fit("the system has not that much memory to give");
    }
    summary_.pinned_input = summary_.pinned_output = true;  // the host memory is the device's
    return;
  }

  // Everything the loop needs, allocated before any data moves (the pool's limit applies here).
  auto st = std::make_unique<cuda_state>(device_);
  const std::size_t per_slot = slot_bytes(chunk_);
  try {
    st->staging = array<unsigned char>(std::size_t(depth_) * per_slot, st->kernel.ref());
  } catch (const out_of_memory& e) {  // the pool's figures, and what to change here
    // A given chunk can be made smaller. A chosen one was made as small as the call takes it already,
    // so a smaller chunk_elements is no advice there: the staging needs more room (or a smaller depth).
    std::string why;
    if (o.chunk_elements) {
      why = "the device staging of " + std::to_string(depth_) + " chunks in flight of " + std::to_string(chunk_) +
            " elements does not fit; give a smaller chunk_elements or depth, or 0 to let the call choose";
    } else {
      // The chunk and depth the call chooses with no room at all, a slot per chunk at most (as below).
      const auto [c, dep] = choose_chunk(n, first_chunk, first_depth, o.depth == 0, 0, slot_bytes);
      const std::size_t slots = std::min<std::size_t>(std::size_t(dep), n / c + (n % c != 0));
      const std::size_t least = slots * slot_bytes(c);
      why = "the device staging needs at least " + format_bytes(double(least)) + " (" + std::to_string(least) +
            " bytes: " + std::to_string(slots) + " chunks in flight of " + std::to_string(c) +
            " elements, the least the call chooses for these arrays), more than the pool's limit and the device's "
            "free memory leave; raise the pool's limit (set_pool_limit or RESIDENT_POOL_LIMIT) or free arrays" +
            (o.depth > 1 ? std::string(", or give a smaller depth") : "");
    }
    throw out_of_memory("out-of-core pipeline: " + why + ". " + e.what(), e.requested(), e.free_bytes(),
                        e.pool_reserved(), e.pool_in_use(), e.pool_limit(), e.largest_free_block());
  }
  st->in.assign(std::size_t(depth_), std::vector<void*>(inputs_.size()));
  st->out.assign(std::size_t(depth_), nullptr);
  for (int k = 0; k < depth_; ++k) {
    unsigned char* p = st->staging.data() + std::size_t(k) * per_slot;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      st->in[std::size_t(k)][i] = p;
      p += round_up(chunk_ * inputs_[i].element_bytes);
    }
    st->out[std::size_t(k)] = output_.data ? (in_place_ ? st->in[std::size_t(k)][0] : p) : nullptr;
    st->uploaded.emplace_back(device_);
    st->computed.emplace_back(device_);
    st->downloaded.emplace_back(device_);
  }
  // The device buffers come from the pool in the kernel stream's order: the upload and download
  // streams use them only after that (a pool block may still be in use by work before it).
  {
    event allocated(device_);
    allocated.record(st->kernel.ref());
    allocated.wait_on(st->up.ref());
    allocated.wait_on(st->down.ref());
  }
  summary_.pinned_input = true;
  st->stage_in.resize(inputs_.size());
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    if (!staged_in[i]) continue;
    summary_.pinned_input = false;
    st->stage_in[i] = take_pinned(device_, std::size_t(depth_) * chunk_ * inputs_[i].element_bytes);
  }
  summary_.pinned_output = output_.data && !staged_out;
  if (staged_out) st->stage_out = take_pinned(device_, std::size_t(depth_) * chunk_ * out_bytes);
  if (staged) {
    // Chosen: no more threads than pieces of a chunk's copies, nor than the cores less the caller and
    // the driver. Given: as given.
    int threads = o.host_threads;
    if (!threads) {
      const int cores = std::max(1, int(std::thread::hardware_concurrency()) - 2);
      std::size_t chunk_copy_bytes = staged_out ? chunk_ * out_bytes : 0;
      for (std::size_t i = 0; i < inputs_.size(); ++i)
        if (staged_in[i]) chunk_copy_bytes += chunk_ * inputs_[i].element_bytes;
      threads = int(std::clamp<std::size_t>(chunk_copy_bytes / tuning::copy_piece, 1,
                                            std::size_t(std::min(tuning::host_copy_threads, cores))));
    }
    st->copiers = std::make_unique<host_copy_pool>(threads, tuning::copy_piece, tuning::copy_pieces_per_thread);
    summary_.host_threads = threads;
  }
  if (result_bytes_) {
    try {
      st->results = pinned_buffer<unsigned char>(partial_bytes);
    } catch (const out_of_memory& e) {
      throw partials_do_not_fit(e.what());
    }
  }
  if (timeline_)
    for (std::size_t e = 0; e < 6 * chunks_; ++e) st->marks.emplace_back(device_);
  summary_.device_bytes = st->staging.size();
  cuda_ = std::move(st);
}

chunk_loop::~chunk_loop() {
  if (!cuda_) return;
  // After an error: no worker touches the user's memory or the staging once the call has returned.
  if (cuda_->copiers) cuda_->copiers->cancel();
  try {
    cuda_->up.synchronize();
    cuda_->kernel.synchronize();
    cuda_->down.synchronize();
  } catch (...) {
    // A lost device: its memory goes with it.
  }
  for (auto& b : cuda_->stage_in) give_back_pinned(device_, std::move(b));
  give_back_pinned(device_, std::move(cuda_->stage_out));
}

stream_ref chunk_loop::kernel_stream() const { return cuda_ ? cuda_->kernel.ref() : default_stream(device_); }

const void* chunk_loop::host_results() const noexcept {
  return cuda_ ? static_cast<const void*>(cuda_->results.data()) : static_cast<const void*>(results_.data());
}

void chunk_loop::run(const std::function<void(const chunk_view&)>& kernel, const std::vector<void*>& results,
                     const std::function<void(std::size_t)>& landed) {
  RESIDENT_EXPECTS(result_bytes_ == 0 || chunks_ == 0 || results.size() >= std::size_t(depth_),
                   "out-of-core pipeline: a result slot per chunk in flight is needed");
  if (timeline_) timeline_->clear();
  if (chunks_ > 0) {
    if (cuda_)
      run_cuda(kernel, results, landed);
    else
      run_cpu(kernel, results, landed);
  }
  for (const host_side& h : inputs_) summary_.h2d_bytes += std::uint64_t(n_) * h.element_bytes;
  if (output_.data) summary_.d2h_bytes = std::uint64_t(n_) * output_.element_bytes;
  summary_.seconds = ms_since(start_) / 1e3;
}

// The CPU's memory is the host's: each chunk's kernel reads and writes the host arrays in place. The
// ledger counts the chunks' bytes as the GPU's copies, so the counts agree across backends.
void chunk_loop::run_cpu(const std::function<void(const chunk_view&)>& kernel, const std::vector<void*>& results,
                         const std::function<void(std::size_t)>& landed) {
  std::vector<void*> in(inputs_.size());
  for (std::size_t c = 0; c < chunks_; ++c) {
    chunk_view v;
    v.index = c;
    v.first = c * chunk_;
    v.count = std::min(chunk_, n_ - v.first);
    v.inputs = &in;
    chunk_timing t{c, v.first, v.count};
    t.upload_begin_ms = ms_since(start_);
    std::uint64_t up = 0, down = 0;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const std::size_t b = v.count * inputs_[i].element_bytes;
      in[i] = const_cast<unsigned char*>(static_cast<const unsigned char*>(inputs_[i].data)) + v.first * inputs_[i].element_bytes;
      record_transfer(device_, direction::h2d, b);
      up += b;
    }
    if (output_.data)
      v.output = static_cast<unsigned char*>(const_cast<void*>(output_.data)) + v.first * output_.element_bytes;
    t.upload_end_ms = t.kernel_begin_ms = ms_since(start_);
    kernel(v);
    t.kernel_end_ms = t.download_begin_ms = ms_since(start_);
    if (output_.data) {
      down = v.count * output_.element_bytes;
      record_transfer(device_, direction::d2h, down);
    }
    if (result_bytes_) {
      std::memcpy(results_.data() + c * result_bytes_, results[0], result_bytes_);
      record_transfer(device_, direction::d2h, result_bytes_);
    }
    t.download_end_ms = ms_since(start_);
    record_stream_chunk(device_, up, down);
    if (timeline_) timeline_->push_back(t);
    if (landed) landed(v.count);
  }
}

// Chunk c uses slot k = c % depth. Its upload waits until the slot's previous chunk has been
// downloaded (the slot's device buffers are free), its kernel waits for its upload, its download for
// its kernel: events between the three streams, never a host wait on the device.
//
// Pageable host memory goes through the slot's pinned staging, copied by the worker threads: chunk c's
// inputs are staged in once the slot's previous upload has read the staging (a gate on that upload's
// event, on a worker), queued as soon as that upload is, so the workers stage up to depth chunks
// ahead; chunk c's output is staged out once its download has landed (a gate on its event). This
// thread only queues device work, and sleeps only when neither the next upload (its staging in not
// landed) nor the next download (its pinned buffer not yet staged out) can be queued.
void chunk_loop::run_cuda(const std::function<void(const chunk_view&)>& kernel, const std::vector<void*>& results,
                          const std::function<void(std::size_t)>& landed) {
  cuda_state& st = *cuda_;
  const std::size_t depth = std::size_t(depth_);
  const bool stage_out = output_.data && st.stage_out.data();
  const bool stage_in = std::any_of(st.stage_in.begin(), st.stage_in.end(), [](const auto& b) { return b.data() != nullptr; });
  host_copy_pool* copiers = st.copiers.get();
  std::vector<host_copy_pool::job> staged(depth), drained(depth);  // per slot: its latest host copies
  // A gate: a worker waits for the event with the loop's device current (its CUDA calls then run there).
  auto wait_for = [d = device_.index()](const event& e) -> std::function<void()> {
    return [d, ev = &e] {
      cu::set_device(d);
      ev->synchronize();
    };
  };
  auto count_of = [&](std::size_t c) { return std::min(chunk_, n_ - c * chunk_); };
  auto mark = [&](std::size_t c, int m, stream_ref s) {
    if (timeline_) st.marks[6 * c + std::size_t(m)].record(s);
  };
  // Queues the host copies of chunk c's pageable inputs into its slot's pinned staging, behind the
  // slot's previous upload when there is one.
  auto stage = [&](std::size_t c) {
    const std::size_t k = c % depth, first = c * chunk_, count = count_of(c);
    std::vector<host_copy> copies;
    for (std::size_t i = 0; i < inputs_.size(); ++i)
      if (st.stage_in[i].data()) {
        const std::size_t eb = inputs_[i].element_bytes;
        copies.push_back({st.stage_in[i].data() + k * chunk_ * eb, static_cast<const unsigned char*>(inputs_[i].data) + first * eb,
                          count * eb, tuning::staged_upload_plain_stores});
      }
    std::function<void()> gate;
    if (c >= depth) gate = wait_for(st.uploaded[k]);
    staged[k] = copiers->submit(copies, std::move(gate));
  };
  if (stage_in)
    for (std::size_t c = 0; c < std::min(depth, chunks_); ++c) stage(c);
  if (timeline_) st.start.record(st.up.ref());
  std::vector<void*> in(inputs_.size());
  // Chunk u's upload and kernel: its staging in must have landed; its slot's device buffers are free
  // once chunk u - depth's download is queued (the upload stream waits for its event).
  auto upload_and_compute = [&](std::size_t u) {
    const std::size_t k = u % depth, first = u * chunk_, count = count_of(u);
    if (u >= depth) st.downloaded[k].wait_on(st.up.ref());
    if (stage_in) copiers->wait(staged[k]);  // done already: rethrows its gate's error, if any
    mark(u, 0, st.up.ref());
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const std::size_t eb = inputs_[i].element_bytes, b = count * eb;
      const void* src = st.stage_in[i].data() ? static_cast<const void*>(st.stage_in[i].data() + k * chunk_ * eb)
                                              : static_cast<const unsigned char*>(inputs_[i].data) + first * eb;
      record_transfer(device_, direction::h2d, b);
      cu::memcpy_async(device_.index(), st.in[k][i], src, b, cu::copy_kind::host_to_device, st.up.ref().native());
    }
    mark(u, 1, st.up.ref());
    st.uploaded[k].record(st.up.ref());
    if (stage_in && u + depth < chunks_) stage(u + depth);
    st.uploaded[k].wait_on(st.kernel.ref());
    mark(u, 2, st.kernel.ref());
    for (std::size_t i = 0; i < inputs_.size(); ++i) in[i] = st.in[k][i];
    kernel(chunk_view{u, first, count, int(k), &in, st.out[k]});
    mark(u, 3, st.kernel.ref());
    st.computed[k].record(st.kernel.ref());
  };
  // Chunk d's download (and partial): into the slot's pinned staging once chunk d - depth has been
  // staged out of it, then staged out itself behind the download's event.
  auto download = [&](std::size_t d) {
    const std::size_t k = d % depth, first = d * chunk_, count = count_of(d);
    st.computed[k].wait_on(st.down.ref());
    if (stage_out) copiers->wait(drained[k]);  // done already: rethrows its gate's error, if any
    mark(d, 4, st.down.ref());
    std::uint64_t up = 0, down = 0;
    for (const host_side& h : inputs_) up += count * h.element_bytes;
    if (output_.data) {
      down = count * output_.element_bytes;
      void* dst = stage_out ? static_cast<void*>(st.stage_out.data() + k * chunk_ * output_.element_bytes)
                            : static_cast<unsigned char*>(const_cast<void*>(output_.data)) + first * output_.element_bytes;
      record_transfer(device_, direction::d2h, down);
      cu::memcpy_async(device_.index(), dst, st.out[k], down, cu::copy_kind::device_to_host, st.down.ref().native());
    }
    if (result_bytes_) {
      record_transfer(device_, direction::d2h, result_bytes_);
      cu::memcpy_async(device_.index(), st.results.data() + d * result_bytes_, results[k], result_bytes_,
                       cu::copy_kind::device_to_host, st.down.ref().native());
    }
    mark(d, 5, st.down.ref());
    st.downloaded[k].record(st.down.ref());
    if (stage_out) {
      const host_copy out{static_cast<unsigned char*>(const_cast<void*>(output_.data)) + first * output_.element_bytes,
                          st.stage_out.data() + k * chunk_ * output_.element_bytes, down};
      drained[k] = copiers->submit(std::span<const host_copy>(&out, 1), wait_for(st.downloaded[k]));
    }
    record_stream_chunk(device_, up, down);
    if (landed) landed(count);
  };
  // Whichever can go next goes: the next upload while fewer than depth chunks are between upload and
  // download and its staging in has landed; else the next download once its pinned buffer is free;
  // else this thread sleeps until a host copy it needs ends. Neither direction waits for the other's
  // host copies, so the copy engines stay fed while the workers catch up.
  std::size_t u = 0, d = 0;  // the next chunk to upload, to download
  try {
  while (d < chunks_) {
    const bool up_slot = u < chunks_ && u < d + depth;
    const bool down_ready = d < u;
    if (up_slot && (!stage_in || copiers->ended(staged[u % depth]))) {
      upload_and_compute(u++);
    } else if (down_ready && (!stage_out || copiers->ended(drained[d % depth]))) {
      download(d++);
    } else {
      const host_copy_pool::job* waits[2];
      std::size_t w = 0;
      if (up_slot) waits[w++] = &staged[u % depth];
      if (down_ready) waits[w++] = &drained[d % depth];
      copiers->wait_any(std::span<const host_copy_pool::job* const>(waits, w));
    }
  }
  } catch (...) {
    // A kernel or landed() threw: the downloads queued (and counted) land in the host arrays before
    // the error goes on, so what the ledger says was copied is there.
    try {
      st.down.synchronize();
    } catch (...) {
    }
    if (stage_out)
      for (auto& j : drained) {
        try {  // each on its own: one that failed leaves the others to land
          copiers->wait(j);
        } catch (...) {
        }
      }
    throw;
  }
  if (stage_out)
    for (auto& j : drained) copiers->wait(j);
  st.down.synchronize();
  if (timeline_) {
    auto at = [&](std::size_t c, int m) { return elapsed_ms(st.start, st.marks[6 * c + std::size_t(m)]); };
    for (std::size_t c = 0; c < chunks_; ++c) {
      const std::size_t first = c * chunk_;
      timeline_->push_back({c, first, std::min(chunk_, n_ - first), at(c, 0), at(c, 1), at(c, 2), at(c, 3), at(c, 4),
                            at(c, 5)});
    }
  }
}

}  // namespace resident::detail
