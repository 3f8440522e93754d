// The compile cache: in memory (one entry per key, built once while concurrent callers wait) and on
// disk (one file per key, written to a temporary file and renamed into place, so several processes may
// fill the folder at once and a reader sees a whole entry or none).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <unordered_map>

#include "jit/backend.hpp"

namespace resident::jit {

namespace {
std::atomic<std::uint64_t> n_compiled{0}, n_disk{0}, n_memory{0}, n_rejected{0};

struct entry_slot {
  std::mutex building;
  std::shared_ptr<detail::loaded> value;
};
std::mutex table_mutex;
std::unordered_map<std::string, std::shared_ptr<entry_slot>> table;

bool make_folders(const std::string& path) {
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// "RSJIT1 <key> <payload hash> <payload bytes>\n" then the payload.
std::string header(const std::string& key, const std::string& payload) {
  return "RSJIT1 " + key + " " + detail::hash_hex(payload) + " " + std::to_string(payload.size()) + "\n";
}
}  // namespace

std::string cache_directory() {
  if (const char* d = std::getenv("RESIDENT_JIT_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/resident/jit";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/resident/jit";
  return "";
}

cache_stats stats() { return {n_compiled.load(), n_disk.load(), n_memory.load(), n_rejected.load()}; }

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(table_mutex);
  table.clear();
}

namespace detail {

void count_compiled() { ++n_compiled; }
void count_disk_load() { ++n_disk; }
void count_memory_hit() { ++n_memory; }
void count_rejected() { ++n_rejected; }

std::string hash_hex(const std::string& text) {
  // Two 64-bit FNV-1a lanes from different bases, each finished by a SplitMix64 mix.
  std::uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  for (unsigned char c : text) {
    h1 = (h1 ^ c) * 0x100000001b3ull;
    h2 = (h2 ^ c) * 0x100000001b3ull ^ (h2 >> 29);
  }
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(mix(h1 ^ text.size())),
                static_cast<unsigned long long>(mix(h2 + text.size())));
  return buf;
}

std::string entry_path(const std::string& key, const char* suffix) {
  const std::string dir = cache_directory();
  if (dir.empty() || !make_folders(dir)) return "";
  return dir + "/" + key + suffix;
}

std::string temporary_path(const std::string& key, const char* suffix) {
  static std::atomic<std::uint64_t> serial{0};
  std::random_device rd;
  const std::string unique = "tmp-" + key + "-" + std::to_string(::getpid()) + "-" + std::to_string(serial++) + "-" +
                             std::to_string(rd()) + suffix;
  const std::string dir = cache_directory();
  if (!dir.empty() && make_folders(dir)) return dir + "/" + unique;
  const char* t = std::getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/resident-jit-" + unique;
}

bool read_entry(const std::string& key, const char* suffix, std::string* payload) {
  const std::string path = entry_path(key, suffix);
  if (path.empty()) return false;
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream all;
  all << f.rdbuf();
  const std::string s = all.str();
  const auto nl = s.find('\n');
  if (nl != std::string::npos) {
    std::string body = s.substr(nl + 1);
    if (s.substr(0, nl + 1) == header(key, body)) {
      *payload = std::move(body);
      return true;
    }
  }
  count_rejected();  // truncated or overwritten: it is rewritten by this process's compile
  ::unlink(path.c_str());
  return false;
}

void write_entry(const std::string& key, const char* suffix, const std::string& payload) {
  const std::string path = entry_path(key, suffix);
  if (path.empty()) return;
  const std::string tmp = temporary_path(key, suffix);
  bool whole = false;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;  // a folder that takes no files: the disk cache is off
    f << header(key, payload) << payload;
    f.close();
    whole = bool(f);  // a full disk fails the write or the close
  }
  if (!whole || std::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

std::shared_ptr<loaded> cached(const std::string& key, const std::function<std::shared_ptr<loaded>()>& make) {
  std::shared_ptr<entry_slot> slot;
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    auto& s = table[key];
    if (!s) s = std::make_shared<entry_slot>();
    slot = s;
  }
  std::lock_guard<std::mutex> lock(slot->building);  // the first caller builds; the others wait here
  if (slot->value) {
    count_memory_hit();
    return slot->value;
  }
  slot->value = make();
  return slot->value;
}

}  // namespace detail
}  // namespace resident::jit
