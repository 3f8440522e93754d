// Files resident writes: regular files only, written aside under a fresh O_EXCL | O_NOFOLLOW name in
// the target's folder, flushed and renamed into place (see resident/detail/files.hpp).
#include "resident/detail/files.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <vector>

#include "resident/detail/fork.hpp"
#include "resident/error.hpp"

namespace resident::detail {
namespace {

// "a FIFO (named pipe)" for what is not a regular file, "" for one.
std::string kind_of(mode_t m) {
  if (S_ISREG(m)) return "";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Why what lies at st cannot be replaced, or "".
std::string refusal(const struct stat& st) {
  const std::string kind = kind_of(st.st_mode);
  if (kind.empty()) return "";
  if (S_ISDIR(st.st_mode)) return "it is a directory; give a file name inside it";
  if (S_ISLNK(st.st_mode))
    return "it is a symbolic link; resident does not write through links: give the path of the file itself";
  return "it is " + kind + ", not a regular file; resident writes regular files only: choose another path";
}

// Why a new file cannot be made in folder (errno e from trying), phrased for the user.
std::string folder_refusal(const std::string& folder, int e) {
  struct stat st {};
  const bool exists = ::stat(folder.c_str(), &st) == 0, is_folder = exists && S_ISDIR(st.st_mode);
  if (e == ENOTDIR && exists && !is_folder) return "'" + folder + "' is a file, not a folder; choose another path";
  if ((e == ENOENT || e == ENOTDIR) && !is_folder)
    return "the folder '" + folder + "' does not exist; create it or choose another path";
  if (e == ENOENT)
    return "the folder '" + folder + "' does not accept new files (" + std::strerror(e) +
           "); choose a path on an ordinary file system";
  if (e == EACCES || e == EPERM)
    return "permission denied: the folder '" + folder + "' is not writable by this user; choose another path";
  if (e == EROFS) return "the folder '" + folder + "' is on a read-only file system; choose another path";
  return std::string("the path cannot be used (") + std::strerror(e) + "); choose another path";
}

std::string random_suffix() {
  unsigned char b[8] = {};
  if (::getrandom(b, sizeof b, 0) != ssize_t(sizeof b)) {  // no entropy source: pid and a counter
    static unsigned counter = 0;
    const unsigned long long v = (unsigned long long)::getpid() << 20 ^ ++counter;
    std::memcpy(b, &v, sizeof b);
  }
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", b[i]);
  return hex;
}

mode_t umask_now() { return mode_t(umask_from("/proc/self/status")); }

bool write_all(int fd, std::string_view bytes, int* error) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n < 0 ? errno : EIO;
      return false;
    }
    done += std::size_t(n);
  }
  return true;
}

bool ours_or_roots(uid_t u) { return u == 0 || u == ::geteuid(); }

// Whether another user may rename or replace entries in the folder at st: it is theirs, or group or
// others may write it and it is not sticky.
bool others_may_rename_in(const struct stat& st) {
  return !ours_or_roots(st.st_uid) || ((st.st_mode & 022) && !(st.st_mode & S_ISVTX));
}

// The writer behind both entry points; folder names the folder in messages.
std::string write_at(int dir_fd, const std::string& folder, const std::string& name, std::string_view bytes,
                     file_access access) {
  if (name.empty() || name == "." || name == "..") return "the path names no file; give a file name";
  struct stat in {};
  if (::fstat(dir_fd, &in) != 0) return folder_refusal(folder, errno);
  // A secret there could be renamed aside by another user and read at leisure, or swapped for theirs.
  if (access == file_access::secret && others_may_rename_in(in))
    return "other users may rename or replace files in the folder '" + folder + "' (it is not this user's alone "
           "and not sticky), so a secret written there could be swapped; choose a folder only this user may write";
  struct stat st {};
  const bool existed = ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (existed) {
    if (std::string why = refusal(st); !why.empty()) return why;
    if (::faccessat(dir_fd, name.c_str(), W_OK, AT_EACCESS) != 0 && errno == EACCES)
      return "permission denied: the file is not writable by this user; choose another path";
  }
  // An existing file of this user's keeps its permissions (never set-user-ID, set-group-ID or sticky);
  // one of another user's is replaced as a new file would be.
  const mode_t mode = access == file_access::secret             ? 0600
                      : existed && st.st_uid == ::geteuid()      ? (st.st_mode & 0777)
                                                                 : (0666 & ~umask_now());
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = "." + name.substr(0, 64) + ".tmp-" + random_suffix();
    fd = ::openat(dir_fd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return folder_refusal(folder, errno);
  }
  if (fd < 0) return "no fresh temporary name in '" + folder + "'; choose another path";
  int error = 0;
  struct stat mine {}, there {};
  bool ok = write_all(fd, bytes, &error);
  if (ok && ::fchmod(fd, mode) != 0) ok = false, error = errno;
  if (ok && ::fsync(fd) != 0) ok = false, error = errno;
  if (ok && ::fstat(fd, &mine) != 0) ok = false, error = errno;
  if (::close(fd) != 0 && ok) ok = false, error = errno;
  // Where others may rename entries, the temporary name could now hold their file: renamed into place,
  // it would be reported as ours. What is there is left alone (it is not ours to remove).
  if (ok && (::fstatat(dir_fd, temp.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 || there.st_dev != mine.st_dev ||
             there.st_ino != mine.st_ino))
    return "the temporary file '" + temp + "' in '" + folder + "' was replaced while it was written (another user "
           "may rename files in that folder); nothing was renamed into place, the earlier file is kept: choose a "
           "folder only this user may write";
  if (ok && ::renameat(dir_fd, temp.c_str(), dir_fd, name.c_str()) != 0) ok = false, error = errno;
  if (!ok) {
    ::unlinkat(dir_fd, temp.c_str(), 0);
    return std::string("writing failed (") + std::strerror(error) + "); the earlier file, if any, is kept";
  }
  return "";
}

// The folder part of path ("." for a bare name) and the last component.
std::pair<std::string, std::string> split(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Why the link at (st) in the folder in could send a path elsewhere, or "": another user owns it, or
// can rename entries in its folder (swap it for theirs).
std::string link_refusal(const std::string& at, const struct stat& st, const struct stat& in) {
  if (!ours_or_roots(st.st_uid))
    return "'" + at + "' is a link owned by user " + std::to_string(st.st_uid) +
           ", which could point it anywhere; give a path without it";
  if (others_may_rename_in(in))
    return "'" + at + "' is a link in a folder other users may rename entries in, so they could swap it for "
           "one of theirs; give a path without it";
  return "";
}

// Opens folder (O_PATH) one component at a time, each with O_NOFOLLOW from the one before, so that no
// rename meanwhile redirects it (a check of the path followed by open(folder) could be raced). A link
// is followed only where this user or root owns it and it lies in a folder only they can rename it in;
// another user's could point anywhere, and one they could swap, too. -1 and *why otherwise. make:
// a missing component is made (0700) in the folder opened before it, so no link swapped in meanwhile
// can send the mkdir elsewhere.
int open_folder(const std::string& folder, std::string* why, bool make = false) {
  std::vector<std::string> todo;
  const auto push_front = [&todo](const std::string& path) {
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < path.size();) {
      const std::size_t j = std::min(path.find('/', i), path.size());
      if (j > i) parts.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());  // a stack: the next component last
  };
  const auto start = [](const std::string& path) {
    return ::open(!path.empty() && path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  };
  int fd = start(folder);
  push_front(folder);
  std::string shown = !folder.empty() && folder[0] == '/' ? "" : ".";
  const auto fail = [&](std::string w) {
    if (fd >= 0) ::close(fd);
    *why = std::move(w);
    return -1;
  };
  if (fd < 0) return fail(folder_refusal(folder, errno));
  for (int links = 0; !todo.empty();) {
    const std::string part = todo.back();
    todo.pop_back();
    if (part == ".") continue;
    struct stat st {};
    int next = ::openat(fd, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && make) {
      if (::mkdirat(fd, part.c_str(), 0700) != 0 && errno != EEXIST) return fail(folder_refusal(folder, errno));
      next = ::openat(fd, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next >= 0 && ::fstat(next, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd);
      fd = next;
      shown += "/" + part;
      continue;
    }
    const int e = next >= 0 ? ENOTDIR : errno;
    if (next >= 0) ::close(next);
    if (::fstatat(fd, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode))
      return fail(folder_refusal(folder, e));
    const std::string at = shown + "/" + part;
    struct stat in {};
    if (::fstat(fd, &in) != 0) return fail(folder_refusal(folder, errno));
    if (std::string w = link_refusal(at, st, in); !w.empty()) return fail(w);
    char target[4096];
    const ssize_t n = ::readlinkat(fd, part.c_str(), target, sizeof target);
    if (n <= 0 || std::size_t(n) >= sizeof target || ++links > 40)
      return fail("'" + at + "' is a link that cannot be followed; give the folder's own path");
    const std::string to(target, std::size_t(n));
    if (to[0] == '/') {
      ::close(fd);
      fd = start(to);
      if (fd < 0) return fail(folder_refusal(folder, errno));
    }
    push_front(to);
    if (to[0] == '/') shown.clear();  // a relative target goes on from the link's own folder
  }
  return fd;
}

}  // namespace

unsigned umask_from(const char* status_path) {  // read, not set: umask() would change it for every thread meanwhile
  std::ifstream f(status_path);
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Umask:", 0) == 0) return unsigned(std::strtoul(line.c_str() + 6, nullptr, 8)) & 0777;
  return 077;  // unknown: the owner alone, never wider than the user asked
}

int open_made_folder(const std::string& path, std::string* why) {
  const int at = open_folder(path, why, true);
  if (at < 0) return -1;
  // The folder the walk reached, not a second lookup by path that a swapped link could redirect.
  const int fd = ::openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int e = errno;
  ::close(at);
  if (fd < 0) *why = folder_refusal(path, e);
  return fd;
}

std::string make_folders(const std::string& path) {
  std::string why;
  const int fd = open_made_folder(path, &why);
  if (fd < 0) return why;
  ::close(fd);
  return "";
}

std::optional<std::string> kind_at(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return kind_of(st.st_mode);
}

std::string write_problem(const std::string& path) {
  if (path.empty()) return "the path is empty; give a file name";
  if (path.find('\0') != std::string::npos) return "the path holds a NUL character; give a file name without one";
  struct stat st {};
  const bool existed = ::lstat(path.c_str(), &st) == 0;
  if (existed) {
    if (std::string why = refusal(st); !why.empty()) return why;
    if (::access(path.c_str(), W_OK) != 0 && errno == EACCES)
      return "permission denied: the file is not writable by this user; choose another path";
  }
  const auto [folder, name] = split(path);
  if (name.empty()) return "the path names no file; give a file name";
  if (name.size() > NAME_MAX)  // the probe's shorter name would pass, and the write fail after the work
    return "the file name is " + std::to_string(name.size()) + " bytes long, more than the " +
           std::to_string(NAME_MAX) + " a folder's entry holds; choose a shorter name";
  std::string why;
  const int dir_fd = open_folder(folder, &why);
  if (dir_fd < 0) return why;
  // The write renames a new file over the old: in a sticky folder (/tmp) only the old file's owner, the
  // folder's or root may, so another user's file there would fail the write after all the work.
  struct stat dir_st {};
  if (existed && st.st_uid != ::geteuid() && ::geteuid() != 0 && ::fstat(dir_fd, &dir_st) == 0 &&
      (dir_st.st_mode & S_ISVTX) && dir_st.st_uid != ::geteuid()) {
    ::close(dir_fd);
    return "the file is another user's, in a folder where only its owner may replace it (sticky, as /tmp); "
           "choose another path";
  }
  // Making a file there is the only test that answers for every file system (/proc, read-only
  // mounts, ACLs): a fresh name, removed at once.
  const std::string probe = "." + name.substr(0, 64) + ".probe-" + random_suffix();
  const int fd = ::openat(dir_fd, probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) why = folder_refusal(folder, errno);
  else ::close(fd), ::unlinkat(dir_fd, probe.c_str(), 0);
  ::close(dir_fd);
  return why;
}

std::string try_write_file_atomically(const std::string& path, std::string_view bytes, file_access access) {
  if (path.empty()) return "the path is empty; give a file name";
  if (path.find('\0') != std::string::npos)  // the system would read the name to it: another file
    return "the path holds a NUL character; give a file name without one";
  if (std::string why = foreign_link_on(path); !why.empty()) return why;
  const auto [folder, name] = split(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0)
    if (std::string why = refusal(st); !why.empty()) return why;  // before the folder: a path ending in '/'
  std::string why;
  const int dir_fd = open_folder(folder, &why);
  if (dir_fd < 0) return why;
  why = write_at(dir_fd, folder, name, bytes, access);
  if (const int sync = why.empty() ? ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1; sync >= 0) {
    ::fsync(sync);  // the rename itself survives a crash
    ::close(sync);
  }
  ::close(dir_fd);
  return why;
}

void write_file_atomically(const std::string& path, std::string_view bytes, file_access access) {
  if (std::string why = try_write_file_atomically(path, bytes, access); !why.empty())
    RESIDENT_FAIL("cannot write '" + path + "': " + why);
}

std::string try_write_file_atomically_at(int dir_fd, const std::string& name, std::string_view bytes,
                                         file_access access) {
  if (name.find('/') != std::string::npos) return "'" + name + "' is not one path component";
  return write_at(dir_fd, "the cache folder", name, bytes, access);
}

namespace {
std::optional<std::string> read_open(int fd, std::size_t max_bytes, bool must_be_private, std::string* why) {
  auto no = [&](std::string w) -> std::optional<std::string> {
    if (fd >= 0) ::close(fd);
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  if (fd < 0) return no(errno == ELOOP ? "it is a symbolic link" : errno == ENOENT ? "it does not exist" : std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) return no(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return no("it is " + kind_of(st.st_mode) + ", not a regular file");
  if (must_be_private && st.st_uid != ::geteuid())
    return no("it belongs to user " + std::to_string(st.st_uid) + ", not to this user");
  if (must_be_private && (st.st_mode & 022) != 0) return no("others may write it");
  if (std::size_t(st.st_size) > max_bytes)
    return no("it holds " + std::to_string(st.st_size) + " bytes, more than " + std::to_string(max_bytes));
  std::string bytes;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return no(std::strerror(errno));
    if (n == 0) break;
    bytes.append(buf, std::size_t(n));
    if (bytes.size() > max_bytes) return no("it grew past " + std::to_string(max_bytes) + " bytes while read");
  }
  ::close(fd);
  return bytes;
}
}  // namespace

std::optional<std::string> read_private_file_at(int dir_fd, const std::string& name, std::size_t max_bytes,
                                                std::string* why) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  return read_open(fd, max_bytes, true, why);
}

std::optional<std::string> read_regular_file(const std::string& path, std::size_t max_bytes, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  return read_open(fd, max_bytes, false, why);
}

std::optional<std::string> read_private_file(const std::string& path, std::size_t max_bytes, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  return read_open(fd, max_bytes, true, why);
}

namespace {
// The path made absolute (against the working folder) and cut into its components.
std::vector<std::string> components(const std::string& path) {
  std::string whole = path;
  if (whole.empty() || whole[0] != '/') {
    std::error_code ec;
    whole = std::filesystem::current_path(ec).string() + "/" + path;
  }
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < whole.size();) {
    const std::size_t j = std::min(whole.find('/', i), whole.size());
    if (j > i) parts.push_back(whole.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}
}  // namespace

std::string foreign_link_on(const std::string& path) {
  std::string prefix;
  for (const std::string& part : components(path)) {
    const std::string parent = prefix.empty() ? "/" : prefix;
    prefix += "/" + part;
    struct stat st {}, in {};
    if (::lstat(prefix.c_str(), &st) != 0) break;  // what does not exist yet is made by this user
    if (!S_ISLNK(st.st_mode)) continue;
    if (::stat(parent.c_str(), &in) != 0) in.st_uid = uid_t(-1);  // the folder gone meanwhile: not ours
    if (std::string why = link_refusal(prefix, st, in); !why.empty()) return why;
  }
  return "";
}

std::string untrusted_path(const std::string& folder) {
  if (std::string why = foreign_link_on(folder); !why.empty()) return why;
  std::string why;  // every link on the way, those inside links' targets too
  const int fd = open_folder(folder, &why);
  if (fd < 0) return why;
  ::close(fd);
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(folder, ec);
  if (ec) return "'" + folder + "' cannot be resolved (" + ec.message() + ")";
  std::vector<std::string> prefixes{"/"};
  std::string at;
  for (const std::string& part : components(real.string())) prefixes.push_back(at += "/" + part);
  for (const std::string& prefix : prefixes) {
    struct stat st {};
    if (::stat(prefix.c_str(), &st) != 0) return "'" + prefix + "' cannot be read (" + std::strerror(errno) + ")";
    if (!ours_or_roots(st.st_uid))
      return "the folder '" + prefix + "' belongs to user " + std::to_string(st.st_uid);
    if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0)
      return "others may write the folder '" + prefix + "' (and it is not sticky), so they could rename or "
             "replace what is in it";
  }
  return "";
}

std::string untrusted_program(const std::string& path) {
  std::string at = path;
  for (int links = 0;; ++links) {
    const auto [folder, name] = split(at);
    if (std::string why = untrusted_path(folder); !why.empty()) return why;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return "'" + at + "' cannot be read (" + std::strerror(errno) + ")";
    if (!ours_or_roots(st.st_uid)) return "'" + at + "' belongs to user " + std::to_string(st.st_uid);
    if (S_ISREG(st.st_mode))
      return st.st_mode & 022 ? "others may write '" + at + "'" : "";
    char target[4096];
    const ssize_t n = S_ISLNK(st.st_mode) ? ::readlink(at.c_str(), target, sizeof target) : -1;
    if (n <= 0 || std::size_t(n) >= sizeof target || links == 40)
      return "'" + at + "' is " + (S_ISLNK(st.st_mode) ? "a link that cannot be followed" : kind_of(st.st_mode));
    const std::string to(target, std::size_t(n));
    at = to[0] == '/' ? to : folder + "/" + to;
  }
}

namespace {
// The private folders alive now, for remove_private_folders_now. Never destroyed: a signal during exit
// still finds it.
struct folder_registry {
  std::mutex mutex;
  std::set<std::string> paths;
};
folder_registry& registry() {
  static folder_registry* r = new folder_registry;
  return *r;
}
// A fork() child's copy of a private_dir is its parent's folder: neither its end nor a signal's
// cleanup in the child removes it (the parent may still be writing there).
void forget_parent_folders() { registry().paths.clear(); }
const int registry_guarded = guard_across_fork(registry().mutex, &forget_parent_folders, true);
}  // namespace

void remove_private_folders_now() noexcept {
  stop_programs_now();  // a compiler or a second process left running would write in them, even make them again
  folder_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const std::string& p : r.paths) {
    std::error_code ec;
    // A program still writing in it (a compiler) can add an entry between the listing and the rmdir.
    for (int again = 0; again < 20 && std::filesystem::symlink_status(p, ec).type() != std::filesystem::file_type::not_found;
         ++again)
      std::filesystem::remove_all(p, ec);
  }
}

private_dir::private_dir(const std::string& prefix) {
  std::vector<std::string> bases;
  if (const char* t = std::getenv("TMPDIR"); t && *t) bases.push_back(t);
  bases.push_back("/tmp");
  std::string refused;
  for (const auto& b : bases) {
    if (std::string why = untrusted_path(b); !why.empty()) {  // the folder made in it could be swapped
      refused += (refused.empty() ? "" : "; ") + b + ": " + why;
      continue;
    }
    std::error_code ec;
    std::string tmpl = std::filesystem::canonical(b, ec).string() + "/" + prefix + "-XXXXXX";
    if (!ec && ::mkdtemp(tmpl.data())) {  // 0700: no other user can enter, list or plant files in it
      path_ = tmpl;
      owner_ = ::getpid();
      try {
        std::lock_guard<std::mutex> lock(registry().mutex);
        registry().paths.insert(path_);
      } catch (...) {  // not registered: only a signal's cleanup misses it
      }
      return;
    }
    refused += (refused.empty() ? "" : "; ") + b + ": " + std::strerror(errno);
  }
  RESIDENT_FAIL("cannot make a private temporary folder (" + refused + "); set TMPDIR to a folder of this user's",
                error);
}

private_dir::~private_dir() {
  if (::getpid() != owner_) return;  // a fork() child's copy: the parent's folder
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().paths.erase(path_);
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // remove_all does not follow links
}

std::string private_dir::file(std::string_view name) const { return path_ + "/" + std::string(name); }

}  // namespace resident::detail
