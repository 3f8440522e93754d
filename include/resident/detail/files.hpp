#pragma once
/// @file files.hpp
/// Internal: the one place resident writes files and starts programs (src/io). Files are written the
/// way OpenSSH and git write theirs: only over a regular file (a FIFO, device node, socket, directory or
/// link at the path is refused, naming it), aside in the target's folder (a fresh name made with
/// O_CREAT | O_EXCL | O_NOFOLLOW), flushed, then renamed into place, so a failed write keeps the earlier
/// file. Programs start through posix_spawn with an argument vector: no shell reads any of it.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace resident::detail {

/// Who may read a file resident writes.
enum class file_access {
  shared,  ///< 0666 less the umask (an existing file keeps its mode)
  secret,  ///< 0600: the owner alone (the NCCL id, the cache's key)
};

/// Why path cannot be written ("it is a FIFO (named pipe), not a regular file; ..."), or "" when it
/// can: its folder exists and takes new files, and what is at path, if anything, is a regular file
/// this user may replace. Creates nothing that stays.
std::string write_problem(const std::string& path);

/// Writes bytes to path, whole or not at all, with the given access. Returns "" when done, else why
/// not (as write_problem, or the write's own error); the earlier file is then untouched and nothing
/// else is left behind.
std::string try_write_file_atomically(const std::string& path, std::string_view bytes,
                                      file_access access = file_access::shared);
/// try_write_file_atomically, throwing. @throws invalid_argument "cannot write '<path>': <why>".
void write_file_atomically(const std::string& path, std::string_view bytes, file_access access = file_access::shared);

/// try_write_file_atomically inside the open folder dir_fd (the kernel cache keeps its folder open, so
/// that a path renamed behind it cannot redirect a write). name is one component.
std::string try_write_file_atomically_at(int dir_fd, const std::string& name, std::string_view bytes,
                                         file_access access);

/// What lies at path without following a final link: "a FIFO (named pipe)", "a directory", ...; ""
/// for a regular file, std::nullopt for nothing.
std::optional<std::string> kind_at(const std::string& path);

/// Reads the regular file `name` in the open folder dir_fd, opened O_NOFOLLOW | O_NONBLOCK (a link,
/// FIFO or device is never followed, waited on or read) when it is owned by this user, writable by no
/// one else, and at most max_bytes long. nullopt otherwise (*why says which, when given).
std::optional<std::string> read_private_file_at(int dir_fd, const std::string& name, std::size_t max_bytes,
                                                std::string* why = nullptr);

/// Reads a regular file (opened O_NOFOLLOW | O_NONBLOCK), at most max_bytes. nullopt and *why when the
/// path is missing, not a regular file, or larger.
std::optional<std::string> read_regular_file(const std::string& path, std::size_t max_bytes, std::string* why = nullptr);

/// The umask on the "Umask:" line of status_path (/proc/self/status for this process), read without
/// setting it (umask() changes it for every thread); 077 when the file cannot be read or has no such
/// line, so that a file is never made wider than the user asked.
unsigned umask_from(const char* status_path);

/// Makes the missing folders of path, each 0700, walking it as the writer does (one component at a
/// time, O_NOFOLLOW, only links no other user could swap): "" when path is a folder then, else why not.
std::string make_folders(const std::string& path);
/// make_folders, then the folder its walk reached opened (O_RDONLY | O_DIRECTORY | O_CLOEXEC): no second
/// lookup by path between making it and opening it. -1 and *why when it cannot be made or opened.
int open_made_folder(const std::string& path, std::string* why);

/// Why another user could swap what lies at or under folder, or "" when no one but this user and root
/// can: every folder on its canonical path is owned by this user or root and writable by no one else
/// (unless sticky, as /tmp is), and every link on the path as given passes foreign_link_on.
std::string untrusted_path(const std::string& folder);

/// Why another user could change the program at path, or "" when no one but this user and root can:
/// it is a regular file of theirs that no one else may write, reached through links of theirs, each in
/// a folder that passes untrusted_path.
std::string untrusted_program(const std::string& path);

/// Why the path as given passes through a link another user owns or could swap for theirs (it lies in
/// a folder they may rename entries in): followed, it would redirect the write or read there. "" if none.
std::string foreign_link_on(const std::string& path);

/// Reads a regular file owned by this user and writable by no one else (opened O_NOFOLLOW |
/// O_NONBLOCK), at most max_bytes. nullopt and *why otherwise.
std::optional<std::string> read_private_file(const std::string& path, std::size_t max_bytes, std::string* why = nullptr);

/// A fresh folder only this user can enter (mkdtemp, 0700) in $TMPDIR or /tmp, whichever no other user
/// can rename or replace it in (untrusted_path), at its canonical path; removed with everything in it
/// when the owner goes (a return or an exception). A signal that ends the process skips destructors:
/// a program that takes its signals removes them with remove_private_folders_now (the CLI does).
class private_dir {
 public:
  /// @throws error when no temporary folder takes one.
  explicit private_dir(const std::string& prefix = "resident");
  ~private_dir();
  private_dir(const private_dir&) = delete;
  private_dir& operator=(const private_dir&) = delete;
  const std::string& path() const noexcept { return path_; }
  /// path() + "/" + name.
  std::string file(std::string_view name) const;

 private:
  std::string path_;
  int owner_ = 0;  // the process that made it: a fork() child's copy leaves the folder to it
};

/// For a process about to end by a signal: stops the programs run_program started (stop_programs_now),
/// then removes every private_dir folder of this process with what is in it. For a program's signal
/// thread (sigwait), never a signal handler: it takes locks and allocates. The library itself takes
/// no signals.
void remove_private_folders_now() noexcept;

/// Kills (SIGKILL) the programs run_program started that are still running and waits until they are
/// gone. From then on the process is taken to be ending: a program started later is killed at once, and
/// run_program's calls in other threads do not return (their next steps could race the cleanup).
void stop_programs_now() noexcept;

/// A program's exit: its status (-1 when it could not start, 128 + N when signal N ended it) and what
/// it wrote on stdout and stderr together.
struct program_result {
  static constexpr int timed_out = -2;  ///< status of a program killed at its time limit
  /// Status of a program that ended while its exit status was taken elsewhere: SIGCHLD set to SIG_IGN
  /// (the kernel reaps children at once) or another thread's waitpid(-1). Its output is complete.
  static constexpr int status_lost = -3;
  int status = -1;                      ///< exit status, 128 + signal, -1 when it did not start
  int signal = 0;                       ///< the signal that ended it; 0 when it exited (status >= 128 too)
  std::string output;
};

/// Runs argv[0] (looked up by program_path, and passed as argv[0] by the absolute path found) with argv, the environment plus `env`
/// (name, value pairs), stdin from /dev/null, stdout and stderr captured through a private file; waits,
/// at most `seconds` when that is positive (then killed: status timed_out). The program starts in a
/// private folder of its own (TMPDIR, TMP and TEMP name it), with only the absolute entries of PATH,
/// CPATH, LD_LIBRARY_PATH and the compiler's other search paths: nothing it looks up comes from the
/// caller's current folder, so other paths in argv are absolute.
program_result run_program(const std::vector<std::string>& argv,
                           const std::vector<std::pair<std::string, std::string>>& env = {}, double seconds = 0);

/// The absolute path of the program name: name when it has a '/' (a relative one from the current
/// folder, now), else the first regular executable file
/// name in PATH's absolute entries (/usr/local/bin:/usr/bin:/bin when PATH is unset or empty). Empty
/// and relative entries are skipped: they name the current folder, where another user's program of
/// that name could lie. "" when there is none.
std::string program_path(const std::string& name);

/// Whether program_path finds name.
bool program_found(const std::string& name);

}  // namespace resident::detail
