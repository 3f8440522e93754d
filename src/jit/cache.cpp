// The compile cache: in memory (one entry per key, built once while concurrent callers wait) and on
// disk (one file per key, written aside and renamed into place, so several processes may fill the
// folder at once and a reader sees a whole entry or none).
//
// The disk cache holds code this process will run, so it trusts only what this user made: the folder
// is created 0700 and refused when another user owns it or others may write it (a warning once, and a
// private folder for the process instead); every entry is opened O_NOFOLLOW | O_NONBLOCK, must be a
// regular file of this user's no larger than max_entry_bytes, and carries an HMAC-SHA256 of its key
// and bytes under a per-user key kept 0600 in the folder. It is verified before anything loads it:
// a failed check is a miss, counted as rejected, and the entry is compiled again.
#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "jit/backend.hpp"
#include "resident/detail/files.hpp"
#include "resident/detail/fork.hpp"
#include "resident/detail/hmac.hpp"

namespace resident::jit {

namespace rd = ::resident::detail;  // files.hpp, hmac.hpp

namespace {
std::atomic<std::uint64_t> n_compiled{0}, n_disk{0}, n_memory{0}, n_rejected{0};

struct entry_slot {
  std::mutex building;
  std::shared_ptr<detail::loaded> value;
};
std::mutex table_mutex;
std::unordered_map<std::string, std::shared_ptr<entry_slot>> table;

// In a fork() child: a slot whose kernel a thread of the parent was building stays locked for good
// (that thread is not in the child), so it is replaced by an empty one and the child builds its own.
void fresh_building_slots() {
  for (auto& [key, slot] : table) {
    if (!slot->building.try_lock()) {
      slot = std::make_shared<entry_slot>();  // the old one is left as it is: its lock cannot be let go
      continue;
    }
    slot->building.unlock();
  }
}
const int table_guarded = rd::guard_across_fork(table_mutex, &fresh_building_slots);

// The largest entry read: a kernel's object is kilobytes to a few megabytes; a link to /dev/zero or a
// planted huge file is refused before it is read.
constexpr std::size_t max_entry_bytes = std::size_t(64) << 20;
constexpr std::size_t key_bytes = 32;

// An open cache folder: its descriptor (every entry is opened relative to it, so renaming the path
// behind it redirects nothing) and this user's key for the entries' MACs.
struct folder {
  int fd = -1;
  std::string path, key;
};

// Why the folder open at fd is not this user's alone, or "".
std::string untrusted(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::strerror(errno);
  if (st.st_uid != ::geteuid()) return "it belongs to user " + std::to_string(st.st_uid) + ", not to this user";
  if ((st.st_mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return std::string("other users may write it (mode ") + mode + ")";
  }
  return "";
}

// The folder's key: read, or made 0600 when absent (linked into place, so that of several processes
// making one at once every one reads the same key). "" with *why when the folder takes no files;
// *bad when a key is there but is not this user's private key.
std::string folder_key(int fd, std::string* why, bool* bad) {
  std::string reason;
  struct stat st {};
  if (auto k = rd::read_private_file_at(fd, "key", 4 * key_bytes, &reason)) {
    const bool others = ::fstatat(fd, "key", &st, AT_SYMLINK_NOFOLLOW) != 0 || (st.st_mode & 077) != 0;
    if (k->size() == key_bytes && !others) return *k;
    reason = others ? "others may read it" : "it holds " + std::to_string(k->size()) + " bytes, not " + std::to_string(key_bytes);
  }
  if (::fstatat(fd, "key", &st, AT_SYMLINK_NOFOLLOW) == 0) {
    *bad = true;
    *why = "its key file is not this user's private key (" + reason + ")";
    return "";
  }
  std::string key(key_bytes, '\0');
  if (::getrandom(key.data(), key.size(), 0) != ssize_t(key.size())) {
    *why = "no random bytes for a key";
    return "";
  }
  const std::string temp = "key.new-" + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
  if (std::string w = rd::try_write_file_atomically_at(fd, temp, key, rd::file_access::secret); !w.empty()) {
    *why = w;
    return "";
  }
  const bool linked = ::linkat(fd, temp.c_str(), fd, "key", 0) == 0 || errno == EEXIST;
  ::unlinkat(fd, temp.c_str(), 0);
  if (!linked) {
    *why = std::strerror(errno);
    return "";
  }
  auto k = rd::read_private_file_at(fd, "key", 4 * key_bytes, &reason);
  if (k && k->size() == key_bytes) return *k;
  *bad = true;
  *why = "its key file is not this user's private key (" + reason + ")";
  return "";
}

// The path the open folder fd has now (links resolved), from /proc; else dir resolved by path.
std::string real_path(int fd, const std::string& dir) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  if (const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf); n > 0 && std::size_t(n) < sizeof buf && buf[0] == '/')
    return std::string(buf, std::size_t(n));
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(dir, ec);
  return ec ? std::filesystem::absolute(dir).string() : p.string();
}

// Opens dir as a cache folder: nullopt with *refused saying why when it cannot be one (the caller warns
// and uses a private folder: a disk cache is never turned off without a word).
std::optional<folder> open_folder(const std::string& dir, std::string* refused) {
  if (dir.empty()) return std::nullopt;
  // The folder that already exists on the way is judged before any is made in it: root running with
  // another user's HOME would otherwise leave folders of root's there (that user's cache then off).
  std::error_code ec;
  std::filesystem::path existing = std::filesystem::absolute(dir, ec);
  while (!ec && existing.has_relative_path() && !std::filesystem::exists(existing, ec)) existing = existing.parent_path();
  const bool to_make = !ec && existing != std::filesystem::absolute(dir, ec);
  if (std::string above = to_make ? rd::untrusted_path(existing.string()) : ""; !above.empty()) {
    *refused = above;
    return std::nullopt;
  }
  folder f;
  f.path = dir;
  // Made through the judged folders and opened from the same walk: no lookup by path in between.
  f.fd = rd::open_made_folder(dir, refused);
  if (f.fd < 0) return std::nullopt;
  // The folders above the one opened, where it really is (a link to it is judged where it leads): one
  // another user owns or may write (not sticky) could swap the cache folder between runs.
  const std::string parent = std::filesystem::path(real_path(f.fd, dir)).parent_path().string();
  std::string why = rd::untrusted_path(parent);
  if (why.empty()) why = untrusted(f.fd);
  bool bad = !why.empty();
  if (!bad) f.key = folder_key(f.fd, &why, &bad);
  if (!f.key.empty()) return f;
  ::close(f.fd);
  *refused = why.empty() ? "it takes no files" : why;
  return std::nullopt;
}

std::mutex chosen_mutex;
std::optional<std::string> chosen_directory;  // detail::set_cache_directory's, over the environment
const int chosen_guarded = rd::guard_across_fork(chosen_mutex);

}  // namespace

std::string cache_directory() {
  {
    std::lock_guard<std::mutex> lock(chosen_mutex);
    if (chosen_directory) return *chosen_directory;
  }
  if (const char* d = std::getenv("RESIDENT_JIT_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/resident/jit";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/resident/jit";
  // No HOME (`env -i`, some services): the user's home from the password database, as a shell would.
  std::vector<char> buf(16384);
  passwd pw {}, *found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir && found->pw_dir[0] == '/')
    return std::string(found->pw_dir) + "/.cache/resident/jit";
  return "";
}

cache_stats stats() { return {n_compiled.load(), n_disk.load(), n_memory.load(), n_rejected.load()}; }

void clear_memory_cache() {
  std::lock_guard<std::mutex> lock(table_mutex);
  table.clear();
}

namespace detail {

std::optional<std::string> set_cache_directory(std::optional<std::string> dir) {
  std::lock_guard<std::mutex> lock(chosen_mutex);
  std::swap(dir, chosen_directory);
  return dir;
}

void count_compiled() { ++n_compiled; }
void count_disk_load() { ++n_disk; }
void count_memory_hit() { ++n_memory; }
void count_rejected() { ++n_rejected; }

std::string hash_hex(const std::string& text) {
  // SHA-256's first 128 bits: two texts that name one entry cannot be made on purpose (a 64-bit FNV
  // pair could be), and an entry's name stays 32 hex digits.
  return rd::hex(rd::sha256(text)).substr(0, 32);
}

namespace {

std::mutex folders_mutex;
// By the path cache_directory() gave; null where the disk cache is off. Shared: a folder replaced here
// (removed from disk) stays open for the threads still reading or writing through it, closed by the
// last of them, so that no thread uses a freed folder or a descriptor number reused meanwhile.
std::map<std::string, std::shared_ptr<const folder>> folders;
std::set<std::string> warned;
std::unique_ptr<rd::private_dir> fallback;  // removed at exit with what it holds
const int folders_guarded = rd::guard_across_fork(folders_mutex);

// The cache folder of cache_directory() now, opened and judged once per path (again when it has been
// removed since); null when the disk cache is off.
std::shared_ptr<const folder> current_folder() {
  std::string dir = cache_directory();
  std::lock_guard<std::mutex> lock(folders_mutex);
  if (dir.empty()) {  // none can be named: a private folder with a word, never the disk cache off silently
    if (warned.insert("").second)
      std::cerr << "resident: warning: no folder names the kernel cache (RESIDENT_JIT_CACHE, XDG_CACHE_HOME and "
                   "HOME are unset, and this user has no home). Kernels are cached in a private folder for this "
                   "process only; set RESIDENT_JIT_CACHE to a folder of yours (chmod 700)\n";
    try {
      if (!fallback) fallback = std::make_unique<rd::private_dir>("resident-jit");
    } catch (const error&) {  // no temporary folder either: the disk cache is off
      return nullptr;
    }
    dir = fallback->path();
  }
  if (auto it = folders.find(dir); it != folders.end()) {
    struct stat st {};
    if (!it->second) return nullptr;
    if (::fstat(it->second->fd, &st) == 0 && st.st_nlink > 0) return it->second;
    folders.erase(it);  // closed when the last thread using it lets it go
  }
  std::string refused;
  std::optional<folder> f = open_folder(dir, &refused);
  if (!f && !refused.empty()) {
    if (warned.insert(dir).second)
      std::cerr << "resident: warning: the kernel cache folder '" << dir << "' is refused: " << refused
                << ". Kernels are cached in a private folder for this process only; make the folder yours and "
                   "private (chmod 700) or set RESIDENT_JIT_CACHE to one that is (docs/security.md)\n";
    try {
      if (!fallback) fallback = std::make_unique<rd::private_dir>("resident-jit");
      std::string again;
      f = open_folder(fallback->path(), &again);
    } catch (const error&) {  // no temporary folder either: the disk cache is off
    }
  }
  std::shared_ptr<const folder> open;
  if (f) open = std::shared_ptr<const folder>(new folder(std::move(*f)), [](const folder* p) {
    ::close(p->fd);
    delete p;
  });
  return folders[dir] = open;
}

// "RSJIT2 <key> <MAC> <payload bytes>\n": the MAC is HMAC-SHA256 of the entry's name and payload under
// the folder's key, so an entry is this user's for this key, whole, or refused.
std::string header(const folder& f, const std::string& name, const std::string& payload) {
  const std::string mac = rd::hex(rd::hmac_sha256(f.key, name + "\n" + std::to_string(payload.size()) + "\n" + payload));
  return "RSJIT2 " + name + " " + mac + " " + std::to_string(payload.size()) + "\n";
}

}  // namespace

bool read_entry(const std::string& key, const char* suffix, std::string* payload) {
  const std::shared_ptr<const folder> f = current_folder();
  if (!f) return false;
  const std::string name = key + suffix;
  std::string why;
  std::optional<std::string> s = rd::read_private_file_at(f->fd, name, max_entry_bytes, &why);
  if (!s && why == "it does not exist") return false;
  if (s) {
    if (const auto nl = s->find('\n'); nl != std::string::npos) {
      std::string body = s->substr(nl + 1);
      if (rd::equal_in_constant_time(std::string_view(*s).substr(0, nl + 1), header(*f, name, body))) {
        *payload = std::move(body);
        return true;
      }
    }
  }
  count_rejected();  // not this user's, not a regular file, truncated or forged: compiled and rewritten
  ::unlinkat(f->fd, name.c_str(), 0);
  return false;
}

void write_entry(const std::string& key, const char* suffix, const std::string& payload) {
  const std::shared_ptr<const folder> f = current_folder();
  if (!f) return;
  const std::string name = key + suffix;
  // A failure (a full disk, a folder that takes no files) leaves the cache as it was.
  (void)rd::try_write_file_atomically_at(f->fd, name, header(*f, name, payload) + payload, rd::file_access::secret);
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
