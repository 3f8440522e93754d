// The host side of staging pageable memory, alone (no GPU): GB/s of copies of whole chunks between a
// large pageable array and a ring of page-aligned "staging" slots, cut among threads the way the
// out-of-core pipelines' host copy pool cuts them (split_in_pages), with memcpy against streaming
// stores (copy_nontemporal, 16- and 32-byte).
//   up:     pageable source -> staging slot (what staging a chunk's input does)
//   down:   staging slot -> pageable destination (what draining a chunk's output does)
//   duplex: both for every chunk on the same threads, as a streamed map over pageable input and output
//           does; its GB/s counts the input bytes only (the figure the pipeline's rate compares with).
// The slots are plain aligned memory, not page-locked: the copies' cost is the same. No DMA engine
// reads or writes the slots here: the slots (depth x chunk per direction) may stay partly in the last
// level cache, which flatters memcpy up (its read-for-ownership of the slot hits the cache) and both
// methods down, and the pipeline's own memory traffic (the copy engines' reads and writes of the
// slots) is absent -- these figures are a ceiling for the pageable streamed rate, not its forecast. Every buffer is
// touched before timing; each figure is the median of --reps timed passes after one untimed pass.
//
// Built as the bench target `host_staging`, or alone from the repository root:
//   g++ -O2 -std=c++20 -Iinclude bench/experiments/host_staging.cpp src/out_of_core/host_copy.cpp -pthread -o host_staging
// usage: host_staging [--size 4GiB] [--chunk 16MiB[,4MiB...]] [--depth 4] [--threads 1,2,4,8,12,16] [--reps 3]
//                     [--json [PATH]]   (--json alone: only JSON on stdout; with PATH: the table too)
#include <algorithm>
#include <latch>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "resident/detail/files.hpp"
#include "resident/out_of_core/detail/host_copy.hpp"

namespace rd = resident::detail;

namespace {

struct free_deleter {
  void operator()(unsigned char* p) const noexcept { std::free(p); }
};
using buffer = std::unique_ptr<unsigned char[], free_deleter>;

[[noreturn]] void refuse(const std::string& what) {
  std::fprintf(stderr, "host_staging: %s (see --help)\n", what.c_str());
  std::exit(2);
}

std::size_t parse_bytes(const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    refuse("not a byte count: '" + s + "'");
  }
  const std::string unit = s.substr(used);
  double scale = 1;
  if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") refuse("unknown unit in '" + s + "': give B, KiB, MiB or GiB");
  if (!(v > 0) || v * scale > double(std::size_t(1) << 40)) refuse("byte count out of range (1B to 1TiB): '" + s + "'");
  return std::size_t(v * scale);
}

std::vector<std::size_t> parse_chunks(const std::string& s) {
  std::vector<std::size_t> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(parse_bytes(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

std::vector<int> parse_threads(const std::string& s) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    char* end = nullptr;
    const long t = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || t < 1 || t > 1024) refuse("thread counts are 1 to 1024, comma-separated: '" + s + "'");
    out.push_back(int(t));
    at = comma + 1;
  }
  return out;
}

buffer allocate(std::size_t bytes, const char* what) {
  const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
  buffer b(static_cast<unsigned char*>(std::aligned_alloc(4096, rounded)));
  if (!b) refuse(std::string("could not allocate the ") + what + " (" + std::to_string(bytes) + " bytes); give a smaller --size");
  return b;
}

// Touches every page (in parallel: gigabytes), with bytes that are not all equal.
void touch(unsigned char* p, std::size_t bytes, int threads) {
  std::vector<std::thread> team;
  const std::size_t per = (bytes + std::size_t(threads) - 1) / std::size_t(threads);
  for (int t = 0; t < threads; ++t)
    team.emplace_back([=] {
      const std::size_t b = std::min(bytes, std::size_t(t) * per), e = std::min(bytes, b + per);
      for (std::size_t i = b; i < e; ++i) p[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
    });
  for (auto& th : team) th.join();
}

// mixed: memcpy into the staging slots, the widest streaming stores out of them (the pipeline's way
// when out_of_core_tuning::staged_upload_plain_stores is set).
enum class method { memcpy_, nt16, nt32, mixed };
const char* name_of(method m) {
  return m == method::memcpy_ ? "memcpy" : m == method::nt16 ? "nt16" : m == method::nt32 ? "nt32" : "mixed";
}

void copy_with(method m, const rd::host_copy& c) {
  if (m == method::mixed)
    m = c.plain ? method::memcpy_ : rd::has_nontemporal_stores(rd::nontemporal_stores::bytes32) ? method::nt32 : method::nt16;
  if (m == method::memcpy_)
    std::memcpy(c.dst, c.src, c.bytes);
  else
    rd::copy_nontemporal(c.dst, c.src, c.bytes, m == method::nt16 ? rd::nontemporal_stores::bytes16 : rd::nontemporal_stores::bytes32);
}

enum class way { up, down, duplex };
const char* name_of(way w) { return w == way::up ? "up" : w == way::down ? "down" : "duplex"; }

struct setup {
  std::size_t size, chunk;
  int depth;
  unsigned char *pageable_in, *pageable_out, *stage_in, *stage_out;
};

// One pass over the whole array: thread t copies piece t of every chunk (the pieces of one chunk
// are the threads' at once, as in the pool). Returns seconds from the start (taken once every thread
// is ready, before they are let go) to the last join.
double pass(const setup& s, way w, method m, int threads) {
  std::latch ready(threads), go(1);
  std::vector<std::thread> team;
  const std::size_t chunks = (s.size + s.chunk - 1) / s.chunk;
  for (int t = 0; t < threads; ++t)
    team.emplace_back([&, t] {
      ready.count_down();
      go.wait();
      for (std::size_t c = 0; c < chunks; ++c) {
        const std::size_t first = c * s.chunk, bytes = std::min(s.chunk, s.size - first);
        const std::size_t slot = (c % std::size_t(s.depth)) * s.chunk;
        if (w != way::down) {
          const auto pieces = rd::split_in_pages({s.stage_in + slot, s.pageable_in + first, bytes, true}, std::size_t(threads));
          if (std::size_t(t) < pieces.size()) copy_with(m, pieces[std::size_t(t)]);
        }
        if (w != way::up) {
          const auto pieces = rd::split_in_pages({s.pageable_out + first, s.stage_out + slot, bytes}, std::size_t(threads));
          if (std::size_t(t) < pieces.size()) copy_with(m, pieces[std::size_t(t)]);
        }
      }
    });
  ready.wait();
  const auto t0 = std::chrono::steady_clock::now();
  go.count_down();
  for (auto& th : team) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct row {
  std::size_t chunk;
  int threads;
  way w;
  method m;
  double gbs;                // of the median pass
  std::vector<double> secs;  // every timed pass
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t size = std::size_t(4) << 30;
  std::vector<std::size_t> chunk_sizes{std::size_t(16) << 20};
  int depth = 4, reps = 3;
  std::vector<int> thread_counts{1, 2, 4, 8, 12, 16};
  bool json = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) refuse(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf(
          "host_staging: GB/s of the host copies that stage pageable memory for out-of-core pipelines\n"
          "(pageable <-> page-aligned staging slots, chunks cut in whole pages among threads),\n"
          "memcpy against streaming stores, up, down and both at once. CPU only.\n\n"
          "  --size BYTES      the pageable array (default 4GiB; twice that is allocated)\n"
          "  --chunk LIST      chunk sizes, comma-separated (default 16MiB)\n"
          "  --depth N         staging slots per direction (default 4)\n"
          "  --threads LIST    thread counts (default 1,2,4,8,12,16)\n"
          "  --reps N          timed passes per figure, median reported (default 3; one untimed first)\n"
          "  --json [PATH]     JSON to PATH (and the table to stdout), or alone: only JSON on stdout\n\n"
          "example: host_staging --size 4GiB --chunk 4MiB,16MiB --threads 8,12,16 --json staging.json\n");
      return 0;
    } else if (a == "--size") {
      size = parse_bytes(value());
    } else if (a == "--chunk") {
      chunk_sizes = parse_chunks(value());
    } else if (a == "--depth" || a == "--reps") {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 64) refuse(a + " is 1 to 64: '" + v + "'");
      (a == "--depth" ? depth : reps) = int(n);
    } else if (a == "--threads") {
      thread_counts = parse_threads(value());
    } else if (a == "--json") {
      json = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') json_path = argv[++i];
    } else {
      refuse("unknown option '" + a + "'");
    }
  }
  const std::size_t widest = *std::max_element(chunk_sizes.begin(), chunk_sizes.end());
  if (widest > size) refuse("a --chunk is larger than --size");
  if (widest > (std::size_t(1) << 34) / std::size_t(depth)) refuse("a --chunk times --depth is over 16GiB");
  const bool table = !json || !json_path.empty();
  FILE* progress = stderr;

  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  std::fprintf(progress, "host_staging: touching %.2f GiB of pageable memory and the staging slots...\n",
               2.0 * double(size) / double(1 << 30));
  buffer in = allocate(size, "pageable input"), out = allocate(size, "pageable output");
  const std::size_t ring = widest * std::size_t(depth);
  buffer sin = allocate(ring, "staging in"), sout = allocate(ring, "staging out");
  touch(in.get(), size, hw);
  touch(out.get(), size, hw);
  touch(sin.get(), ring, hw);
  touch(sout.get(), ring, hw);

  std::vector<method> methods{method::memcpy_, method::nt16};
  if (rd::has_nontemporal_stores(rd::nontemporal_stores::bytes32)) methods.push_back(method::nt32);
  methods.push_back(method::mixed);
  const way ways[] = {way::up, way::down, way::duplex};
  std::vector<row> rows;
  std::size_t step = 0;
  const std::size_t steps = chunk_sizes.size() * thread_counts.size();
  for (std::size_t chunk : chunk_sizes) {
    const setup s{size, chunk, depth, in.get(), out.get(), sin.get(), sout.get()};
    for (int t : thread_counts) {
      std::fprintf(progress, "  [%zu/%zu] %.0f MiB chunks, %d thread%s...\n", ++step, steps,
                   double(chunk) / double(1 << 20), t, t == 1 ? "" : "s");
      for (way w : ways)
        for (method m : methods) {
          pass(s, w, m, t);  // untimed: the first pass of a kind pays for whatever is cold
          row r{chunk, t, w, m, 0, {}};
          for (int k = 0; k < reps; ++k) r.secs.push_back(pass(s, w, m, t));
          std::vector<double> sorted = r.secs;
          std::sort(sorted.begin(), sorted.end());
          r.gbs = double(size) / sorted[sorted.size() / 2] / 1e9;
          rows.push_back(std::move(r));
        }
    }
    // The last pass (both directions) left the last chunk where it should be. Only with whole chunks:
    // the threads do not wait for each other between chunks, and a shorter last chunk is cut at other
    // page boundaries than the earlier chunk in its slot, whose late piece may land over it.
    if (size % chunk == 0) {
      const std::size_t last = size / chunk - 1, first = last * chunk, slot = (last % std::size_t(depth)) * chunk;
      if (std::memcmp(sin.get() + slot, in.get() + first, chunk) != 0 ||
          std::memcmp(out.get() + first, sout.get() + slot, chunk) != 0)
        refuse("a staged chunk differs from its source: the copy is wrong");
    }
  }

  if (table) {
    for (std::size_t chunk : chunk_sizes) {
      std::printf("\nhost staging copies: %.2f GiB pageable, %.0f MiB chunks, %d slots, median of %d (GB/s; duplex: of input)\n",
                  double(size) / double(1 << 30), double(chunk) / double(1 << 20), depth, reps);
      std::printf("%8s", "threads");
      for (way w : ways)
        for (method m : methods) std::printf(" %14s", (std::string(name_of(w)) + " " + name_of(m)).c_str());
      std::printf("\n");
      for (const row& r : rows) {
        if (r.chunk != chunk || r.w != way::up || r.m != method::memcpy_) continue;
        std::printf("%8d", r.threads);
        for (const row& q : rows)
          if (q.chunk == chunk && q.threads == r.threads) std::printf(" %9.1f GB/s", q.gbs);
        std::printf("\n");
      }
    }
  }
  if (json) {
    // Into memory, then through resident's one file writer (regular files only, written aside, renamed).
    char* text = nullptr;
    std::size_t length = 0;
    FILE* f = json_path.empty() ? stdout : ::open_memstream(&text, &length);
    if (!f) refuse("cannot write " + json_path);
    std::fprintf(f, "{\n  \"benchmark\": \"host_staging\",\n  \"size_bytes\": %zu,\n"
                    "  \"depth\": %d,\n  \"reps\": %d,\n  \"hardware_threads\": %d,\n  \"rows\": [\n",
                 size, depth, reps, hw);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      std::fprintf(f, "    {\"chunk_bytes\": %zu, \"threads\": %d, \"direction\": \"%s\", \"copy\": \"%s\", \"gbs\": %.4f, \"seconds\": [",
                   r.chunk, r.threads, name_of(r.w), name_of(r.m), r.gbs);
      for (std::size_t k = 0; k < r.secs.size(); ++k) std::fprintf(f, "%s%.6f", k ? ", " : "", r.secs[k]);
      std::fprintf(f, "]}%s\n", i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    if (f != stdout) {
      std::fclose(f);
      const std::string why = resident::detail::try_write_file_atomically(json_path, std::string(text, length));
      std::free(text);
      if (!why.empty()) refuse("cannot write " + json_path + ": " + why);
    }
  }
  return 0;
}
