// The one file writer and program starter (resident/detail/files.hpp), the profile's JSON through it,
// and the MAC the kernel cache verifies with: what a careless user or another local user can put at a
// path resident writes is refused by name, never followed, replaced or waited on.
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "resident/detail/files.hpp"
#include "resident/detail/hmac.hpp"
#include "resident/resident.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace rs = resident;
namespace rd = resident::detail;
namespace fs = std::filesystem;

namespace {

// A fresh folder for one test, removed after it.
struct test_dir {
  fs::path path;
  test_dir() {
    std::string t = (fs::temp_directory_path() / "resident-security-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    path = t;
  }
  ~test_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  std::size_t count() const {
    std::size_t n = 0;
    for (auto it = fs::directory_iterator(path); it != fs::directory_iterator(); ++it) ++n;
    return n;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A UNIX socket bound at path (kept open while the test runs).
int make_socket(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << path;
  return s;
}

TEST(files, a_regular_file_is_replaced_whole_and_nothing_else_is_left) {
  test_dir d;
  const std::string p = d / "out.json";
  { std::ofstream(p) << "earlier"; }
  ::chmod(p.c_str(), 0640);
  rd::write_file_atomically(p, "new content\n");
  EXPECT_EQ(read_all(p), "new content\n");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "an existing file keeps its mode";
  EXPECT_EQ(d.count(), 1u) << "no temporary file left";
}

// Folders are made one component at a time from the folder opened before (mkdirat), so a link another
// user could swap in between is judged, never followed by a mkdir of the whole path (the kernel cache's
// folders: a race put one, owned by this user, in a folder of the other user's choosing).
TEST(files, folders_are_made_through_judged_folders_only) {
  test_dir d;
  fs::create_directories(d / "target");
  fs::create_directories(d / "open");
  fs::permissions(d / "open", fs::perms::all);  // 0777, not sticky: anyone could swap an entry of it
  fs::create_directory_symlink(d / "target", d / "open/l");
  const std::string w = rd::make_folders(d / "open/l/a/b");
  EXPECT_NE(w.find("other users may rename entries in"), std::string::npos) << w;
  EXPECT_FALSE(fs::exists(d / "target/a")) << "a folder was made through the link";
  EXPECT_EQ(rd::make_folders(d / "own/a/b"), "");
  EXPECT_TRUE(fs::is_directory(d / "own/a/b"));
  EXPECT_EQ(fs::status(d / "own/a").permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(rd::make_folders(d / "own/a/b"), "");  // there already: nothing to make
  rd::write_file_atomically(d / "file", "x");
  EXPECT_NE(rd::make_folders(d / "file/a"), "");  // a file on the way
}

TEST(files, a_path_holding_a_nul_character_is_refused) {
  test_dir d;
  const std::string path = d / std::string("a\0b.json", 8);
  EXPECT_NE(rd::try_write_file_atomically(path, "x").find("NUL character"), std::string::npos);
  EXPECT_NE(rd::write_problem(path).find("NUL character"), std::string::npos);
  EXPECT_EQ(d.count(), 0u);
}

TEST(files, a_secret_is_written_0600) {
  test_dir d;
  const std::string p = d / "id";
  { std::ofstream(p) << "old"; }
  ::chmod(p.c_str(), 0644);
  rd::write_file_atomically(p, "secret", rd::file_access::secret);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(files, what_is_not_a_regular_file_is_refused_by_name_and_left_alone) {
  test_dir d;
  const std::string fifo = d / "fifo", sock = d / "sock", link = d / "link", target = d / "target",
                    folder = d / "folder";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int s = make_socket(sock);
  { std::ofstream(target) << "keep"; }
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  fs::create_directory(folder);
  const auto start = std::chrono::steady_clock::now();
  rs::test::expect_invalid([&] { rd::write_file_atomically(fifo, "x"); }, "it is a FIFO (named pipe), not a regular file");
  rs::test::expect_invalid([&] { rd::write_file_atomically(sock, "x"); }, "it is a socket, not a regular file");
  rs::test::expect_invalid([&] { rd::write_file_atomically(link, "x"); }, "it is a symbolic link");
  rs::test::expect_invalid([&] { rd::write_file_atomically(folder, "x"); }, "it is a directory");
  rs::test::expect_invalid([&] { rd::write_file_atomically(d / "missing/x", "x"); }, "does not exist");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "nothing waited on the FIFO";
  EXPECT_EQ(rd::kind_at(fifo).value_or("?"), "a FIFO (named pipe)");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_socket(sock));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_all(target), "keep") << "the link was followed";
  EXPECT_EQ(d.count(), 5u) << "no temporary file left";
  for (const std::string& p : {fifo, sock, link, folder}) EXPECT_NE(rd::write_problem(p), "") << p;
  EXPECT_EQ(rd::write_problem(target), "");
  ::close(s);
}

// The RESIDENT_PROFILE_JSON=/dev/full, without touching /dev: a character device made in a test
// folder (root only), with /dev/null's numbers.
TEST(files, a_device_node_is_refused_not_replaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a device node needs root";
  test_dir d;
  const std::string dev = d / "full";
  ASSERT_EQ(::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  rs::test::expect_invalid([&] { rd::write_file_atomically(dev, "x"); }, "it is a character device");
  rs::profile_report r;
  rs::test::expect_invalid([&] { r.save_json(dev); }, "could not write the profile to");
  struct stat st {};
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced by a regular file";
}

TEST(files, the_profile_json_refuses_a_fifo_at_once) {
  test_dir d;
  const std::string fifo = d / "p.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  rs::profile_report r;
  rs::test::expect_invalid([&] { r.save_json(fifo); }, "it is a FIFO (named pipe)");
  EXPECT_TRUE(fs::is_fifo(fifo)) << "the FIFO was replaced";
  EXPECT_EQ(d.count(), 1u);
}

// A write that fails midway (here: past the file-size limit, as `ulimit -f` sets it) keeps the earlier
// file and leaves no temporary one. Run in a child: the limit is the process's.
TEST(files, a_failed_write_keeps_the_earlier_file) {
  test_dir d;
  const std::string p = d / "out.json";
  { std::ofstream(p) << "earlier"; }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    const std::string why = rd::try_write_file_atomically(p, std::string(1 << 20, 'x'));
    ::_exit(why.find("writing failed") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the write did not report its failure";
  EXPECT_EQ(read_all(p), "earlier");
  EXPECT_EQ(d.count(), 1u) << "a temporary file was left";
}

TEST(files, a_private_folder_is_0700_and_gone_on_every_path_out) {
  std::string path;
  try {
    const rd::private_dir p("resident-test");
    path = p.path();
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    rd::write_file_atomically(p.file("a"), "x");
    throw std::runtime_error("leaving early");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(path));
}

// A temporary folder made where another user could rename it aside and plant their own (a TMPDIR that
// others may write and is not sticky) is made in /tmp instead; the path is canonical (a relative TMPDIR
// starting with '<' was read by gnuplot as a command).
TEST(files, a_private_folder_is_never_made_where_others_could_swap_it) {
  test_dir d;
  const std::string open_to_all = d / "shared";
  fs::create_directories(open_to_all);
  ASSERT_EQ(::chmod(open_to_all.c_str(), 0777), 0);
  EXPECT_NE(rd::untrusted_path(open_to_all).find("others may write"), std::string::npos);
  const std::string sticky = d / "sticky";
  fs::create_directories(sticky);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  EXPECT_EQ(rd::untrusted_path(sticky), "");
  const char* was = std::getenv("TMPDIR");
  const std::string saved = was ? was : "";
  ::setenv("TMPDIR", open_to_all.c_str(), 1);
  {
    const rd::private_dir p("resident-test");
    EXPECT_EQ(p.path().rfind(open_to_all, 0), std::string::npos) << p.path();
    EXPECT_EQ(p.path().front(), '/');
  }
  ::setenv("TMPDIR", sticky.c_str(), 1);
  {
    const rd::private_dir p("resident-test");
    EXPECT_EQ(p.path().rfind(fs::canonical(sticky).string(), 0), 0u) << p.path();
  }
  was ? ::setenv("TMPDIR", saved.c_str(), 1) : ::unsetenv("TMPDIR");
}

// The programs resident starts (the host compiler above all, whose objects become the kernel it loads)
// write their own temporary files in a private folder, not in a TMPDIR others may write; a value the
// caller gives wins.
TEST(files, programs_started_keep_their_temporary_files_private) {
  test_dir d;
  const std::string open_to_all = d / "shared";
  fs::create_directories(open_to_all);
  ASSERT_EQ(::chmod(open_to_all.c_str(), 0777), 0);
  const char* was = std::getenv("TMPDIR");
  const std::string saved = was ? was : "";
  ::setenv("TMPDIR", open_to_all.c_str(), 1);
  const auto r = rd::run_program({"sh", "-c", "echo \"[$TMPDIR][$TMP][$TEMP]\"; stat -c %a \"$TMPDIR\""});
  const auto given = rd::run_program({"sh", "-c", "echo \"[$TMPDIR]\""}, {{"TMPDIR", "/given"}});
  was ? ::setenv("TMPDIR", saved.c_str(), 1) : ::unsetenv("TMPDIR");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string tmp = r.output.substr(1, r.output.find(']') - 1);
  EXPECT_EQ(tmp.find(open_to_all), std::string::npos) << r.output;
  EXPECT_NE(tmp.find("resident-run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[" + tmp + "][" + tmp + "][" + tmp + "]\n700\n"), std::string::npos) << r.output;
  EXPECT_NE(given.output.find("[/given]"), std::string::npos) << given.output;
}

// An existing file of this user's keeps its permissions but never set-user-ID; one of another user's
// is replaced as a new file would be (its mode, 0666 say, is not copied).
TEST(files, a_replaced_file_keeps_only_its_own_permission_bits) {
  test_dir d;
  const std::string p = d / "tool";
  rd::write_file_atomically(p, "a");
  ASSERT_EQ(::chmod(p.c_str(), 04755), 0);
  rd::write_file_atomically(p, "b");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  if (::geteuid() != 0) return;
  const std::string theirs = d / "theirs.json";
  rd::write_file_atomically(theirs, "a");
  ASSERT_EQ(::chmod(theirs.c_str(), 0666), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  rd::write_file_atomically(theirs, "b");
  ASSERT_EQ(::stat(theirs.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0002, 0u) << "another user's mode was copied";
}

// The umask is read, never set (that would change it for every thread); where it cannot be read the
// writer takes 077, the owner alone, not 022.
TEST(files, a_umask_that_cannot_be_read_is_taken_as_077) {
  test_dir d;
  EXPECT_EQ(rd::umask_from((d / "missing").c_str()), 077u);
  rd::write_file_atomically(d / "no-line", "Name:\tx\n");
  EXPECT_EQ(rd::umask_from((d / "no-line").c_str()), 077u);
  rd::write_file_atomically(d / "status", "Name:\tx\nUmask:\t0027\n");
  EXPECT_EQ(rd::umask_from((d / "status").c_str()), 027u);
}

// A secret (the rendezvous id, the cache's key) is not written where another user may rename it aside
// or swap it: a folder others may write that is not sticky. A shared file still is.
TEST(files, a_secret_is_refused_in_a_folder_others_may_rename_in) {
  test_dir d;
  fs::create_directories(d / "shared");
  ASSERT_EQ(::chmod((d / "shared").c_str(), 0777), 0);
  const std::string why = rd::try_write_file_atomically(d / "shared/id", "x", rd::file_access::secret);
  EXPECT_NE(why.find("other users may rename or replace files in the folder"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(d / "shared/id"));
  EXPECT_EQ(rd::try_write_file_atomically(d / "shared/out.json", "x"), "");
  fs::create_directories(d / "sticky");
  ASSERT_EQ(::chmod((d / "sticky").c_str(), 01777), 0);
  EXPECT_EQ(rd::try_write_file_atomically(d / "sticky/id", "x", rd::file_access::secret), "");
}

// Where others may rename entries, the temporary name can be swapped for their file while the bytes
// are written: the writer sees that what is there is not the file it wrote and renames nothing.
TEST(files, a_temporary_file_swapped_before_the_rename_is_not_put_in_place) {
  test_dir d;
  const int watch = ::inotify_init1(IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(::inotify_add_watch(watch, d.path.c_str(), IN_CREATE), 0);
  std::thread other_user([&] {  // at the temporary file's creation: renamed aside, theirs in its place
    alignas(inotify_event) char buf[4096];
    const ssize_t n = ::read(watch, buf, sizeof buf);
    if (n < ssize_t(sizeof(inotify_event))) return;
    const std::string temp = reinterpret_cast<inotify_event*>(buf)->name;
    ::rename((d / temp).c_str(), (d / "aside").c_str());
    rd::write_file_atomically(d / "theirs", "theirs");
    ::rename((d / "theirs").c_str(), (d / temp).c_str());
  });
  const std::string why = rd::try_write_file_atomically(d / "out.json", std::string(std::size_t(64) << 20, 'x'));
  other_user.join();
  ::close(watch);
  EXPECT_NE(why.find("was replaced while it was written"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(d / "out.json")) << "the other user's file was renamed into place";
}

// A link another user owns on the way to a file is not followed (it could point anywhere); neither
// is another user's file read as private.
TEST(files, a_link_another_user_owns_on_the_path_is_refused) {
  if (::geteuid() != 0) GTEST_SKIP() << "making another user's link needs root";
  test_dir d;
  fs::create_directories(d / "real");
  const std::string link = d / "via";
  fs::create_directory_symlink(d / "real", link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  EXPECT_THROW(rd::write_file_atomically(link + "/out.json", "x"), rs::invalid_argument);
  EXPECT_FALSE(fs::exists(d / "real/out.json"));
  EXPECT_NE(rd::untrusted_path(link).find("owned by user 65534"), std::string::npos);
  const std::string planted = d / "planted";
  rd::write_file_atomically(planted, "x");
  ASSERT_EQ(::chown(planted.c_str(), 65534, 65534), 0);
  std::string why;
  EXPECT_FALSE(rd::read_private_file(planted, 100, &why));
  EXPECT_NE(why.find("belongs to user 65534"), std::string::npos) << why;
}

// The folder is opened one component at a time (O_NOFOLLOW): this user's links are followed (relative,
// absolute, chained, then ".."), but not one in a folder others may rename entries in, where they could
// swap it for theirs between a check of the path and the open.
TEST(files, links_are_followed_only_where_no_one_else_could_swap_them) {
  test_dir d;
  fs::create_directories(d / "a/b");
  fs::create_directory_symlink("a/b", d / "rel");
  fs::create_directory_symlink(d / "rel", d / "abs");
  rd::write_file_atomically(d / "abs/../b/x.json", "1");
  EXPECT_EQ(read_all(d / "a/b/x.json"), "1");
  EXPECT_EQ(rd::write_problem(d / "abs/y.json"), "");
  fs::create_directories(d / "open");
  fs::permissions(d / "open", fs::perms::all);  // 0777, not sticky
  fs::create_directory_symlink(d / "a", d / "open/via");
  const std::string why = rd::try_write_file_atomically(d / "open/via/x.json", "2");
  EXPECT_NE(why.find("a link in a folder other users may rename entries in"), std::string::npos) << why;
  EXPECT_NE(rd::write_problem(d / "open/via/x.json"), "");
  EXPECT_FALSE(fs::exists(d / "a/x.json"));
  EXPECT_NE(rd::untrusted_path(d / "open/via").find("rename entries in"), std::string::npos);
  // A link whose target passes through such a link: judged at every hop, not only the path as given.
  fs::create_directory_symlink(d / "open/via", d / "nest");
  EXPECT_NE(rd::untrusted_path(d / "nest").find("rename entries in"), std::string::npos);
  rd::write_file_atomically(d / "a/prog", "#!/bin/sh\n");
  EXPECT_NE(rd::untrusted_program(d / "nest/prog").find("rename entries in"), std::string::npos);
  EXPECT_EQ(rd::untrusted_program(d / "a/prog"), "");
  fs::permissions(d / "open", fs::perms::all | fs::perms::sticky_bit);
  EXPECT_EQ(rd::try_write_file_atomically(d / "open/via/x.json", "3"), "");
  EXPECT_EQ(read_all(d / "a/x.json"), "3");
}

// Another user swaps a folder on the path for a link to this user's folder and back, as fast as they
// can: the write lands in the folder named, or is refused, never in the other folder.
TEST(files, a_folder_swapped_for_a_link_during_the_write_does_not_redirect_it) {
  test_dir d;
  fs::create_directories(d / "victim");
  rd::write_file_atomically(d / "victim/results.json", "original");
  fs::create_directories(d / "shared/out");
  fs::permissions(d / "shared", fs::perms::all);
  fs::create_directory_symlink(d / "victim", d / "shared/out.alt");
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    const std::string a = d / "shared/out", b = d / "shared/out.alt";
    while (!stop) ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
  });
  int written = 0;
  for (int i = 0; i < 3000; ++i) written += rd::try_write_file_atomically(d / "shared/out/results.json", "new").empty();
  stop = true;
  swapper.join();
  EXPECT_EQ(read_all(d / "victim/results.json"), "original");
  EXPECT_GT(written, 0);  // the real folder was taken whenever it was there
}

// A program resident runs on its own (the compiler the library was built with) is one no other user
// could have put there or change: a regular file of this user's or root's, writable by no one else,
// reached through links of theirs in folders no one else can rename entries in.
TEST(files, a_program_others_could_change_or_plant_is_untrusted) {
  test_dir d;
  const std::string cxx = d / "c++";
  rd::write_file_atomically(cxx, "#!/bin/sh\n");
  fs::permissions(cxx, fs::perms::owner_all);
  EXPECT_EQ(rd::untrusted_program(cxx), "");
  fs::create_symlink("c++", d / "cc");
  fs::create_directories(d / "bin");
  fs::create_symlink(d / "cc", d / "bin/g++");
  EXPECT_EQ(rd::untrusted_program(d / "bin/g++"), "");
  fs::permissions(cxx, fs::perms::owner_all | fs::perms::others_write);
  EXPECT_NE(rd::untrusted_program(d / "bin/g++").find("others may write"), std::string::npos);
  fs::permissions(cxx, fs::perms::owner_all);
  fs::permissions(d / "bin", fs::perms::all);  // a link in a folder anyone may rename entries in
  EXPECT_NE(rd::untrusted_program(d / "bin/g++").find("others may write the folder"), std::string::npos);
  EXPECT_NE(rd::untrusted_program(d / "missing").find("cannot be read"), std::string::npos);
  if (fs::exists("/usr/bin/c++")) {
    EXPECT_EQ(rd::untrusted_program("/usr/bin/c++"), "");
  }
}

// A program past its time limit is killed and says so (bench guide's examples run with one).
// An empty or relative PATH entry (a trailing ':', "." or "bin") names the current folder: a gnuplot or
// c++ another user left there ran in place of the one meant. Only absolute entries are searched.
TEST(files, programs_are_found_only_in_absolute_path_entries) {
  test_dir d;
  const std::string mark = d / "ran", tool = "resident-test-tool";
  fs::create_directories(d / "bin");
  for (const std::string& at : {d / tool, d / ("bin/" + tool)}) {
    rd::write_file_atomically(at, "#!/bin/sh\ntouch " + mark + "\n");
    ASSERT_EQ(::chmod(at.c_str(), 0755), 0);
  }
  const fs::path was = fs::current_path();
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
  fs::current_path(d.path);
  for (const char* path : {"/usr/bin:/bin:", ":/usr/bin:/bin", "/usr/bin::/bin", "/usr/bin:.:/bin", "/usr/bin:bin"}) {
    ::setenv("PATH", path, 1);
    EXPECT_FALSE(rd::program_found(tool)) << path;
    EXPECT_EQ(rd::run_program({tool}).status, -1) << path;
    EXPECT_TRUE(rd::program_found("sh")) << path;
  }
  EXPECT_FALSE(fs::exists(mark)) << "a program in the current folder ran";
  ::setenv("PATH", (d.path.string() + ":/usr/bin:/bin").c_str(), 1);  // an absolute entry: found and run
  EXPECT_EQ(rd::program_path(tool), d / tool);
  EXPECT_EQ(rd::run_program({tool}).status, 0);
  EXPECT_TRUE(fs::exists(mark));
  fs::current_path(was);
  old_path ? ::setenv("PATH", saved.c_str(), 1) : ::unsetenv("PATH");
}

// What a started program looks up in turn (g++ its `as` through PATH, its headers through CPATH, the
// loader its libraries through LD_LIBRARY_PATH) must not come from the current folder either: a shared
// one held another user's `as`, run as this user, whose kernel then went into the cache. Programs start
// in their private folder, with only the absolute entries of those variables.
TEST(files, programs_started_look_up_nothing_in_the_current_folder) {
  test_dir d;
  const std::string mark = d / "ran", tool = "resident-test-helper";
  rd::write_file_atomically(d / tool, "#!/bin/sh\ntouch " + mark + "\n");
  ASSERT_EQ(::chmod((d / tool).c_str(), 0755), 0);
  const fs::path was = fs::current_path();
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* name : {"PATH", "CPATH", "LD_LIBRARY_PATH", "LD_RUN_PATH"}) {
    const char* v = std::getenv(name);
    saved.emplace_back(name, v ? v : std::string("\x01unset"));
  }
  fs::current_path(d.path);
  ::setenv("CPATH", ":rel/inc:/opt/inc::.", 1);
  ::setenv("LD_LIBRARY_PATH", ".", 1);
  ::setenv("LD_RUN_PATH", ":rel", 1);  // ld writes it into a kernel as its RUNPATH
  std::vector<rd::program_result> r;
  for (const char* path : {":/usr/bin:/bin", "/usr/bin:.:/bin", "", "."}) {
    ::setenv("PATH", path, 1);
    r.push_back(rd::run_program({"/bin/sh", "-c", tool + "; echo \"[$(pwd)][$PATH][$CPATH][${LD_LIBRARY_PATH-none}][${LD_RUN_PATH-none}]\""}));
  }
  fs::current_path(was);
  for (const auto& [name, value] : saved) value == "\x01unset" ? ::unsetenv(name.c_str()) : ::setenv(name.c_str(), value.c_str(), 1);
  EXPECT_FALSE(fs::exists(mark)) << "a program in the current folder ran";
  for (const auto& x : r) {
    EXPECT_EQ(x.status, 0) << x.output;
    EXPECT_NE(x.output.find("/resident-run"), std::string::npos) << "not started in its private folder: " << x.output;
    EXPECT_NE(x.output.find("][/opt/inc][none][none]"), std::string::npos) << x.output;
  }
  EXPECT_NE(r[0].output.find("][/usr/bin:/bin]["), std::string::npos) << r[0].output;
  EXPECT_NE(r[2].output.find("][/usr/local/bin:/usr/bin:/bin]["), std::string::npos) << r[2].output;
  // A program named with a relative path is the caller's, found from the caller's folder, and gets
  // that path made absolute as its argv[0] (g++ finds its cc1plus from argv[0]).
  rd::write_file_atomically(d / "zero", "#!/bin/sh\necho \"[$0]\"\ntouch " + mark + "\n");
  ASSERT_EQ(::chmod((d / "zero").c_str(), 0755), 0);
  const auto rel = rd::run_program({fs::relative(d / "zero").string()});
  EXPECT_EQ(rel.status, 0);
  const std::string zero = rel.output.substr(1, rel.output.find(']') - 1);
  EXPECT_EQ(zero.front(), '/') << rel.output;
  EXPECT_TRUE(fs::equivalent(zero, d / "zero")) << rel.output;
  EXPECT_TRUE(fs::exists(mark));
}

TEST(files, a_program_past_its_time_limit_is_stopped) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = rd::run_program({"sleep", "30"}, {}, 0.3);
  EXPECT_EQ(r.status, rd::program_result::timed_out);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_EQ(rd::run_program({"true"}, {}, 30).status, 0);
}

TEST(files, programs_start_without_a_shell) {
  test_dir d;
  const std::string mark = d / "ran";
  // Each of these would run `touch` if a shell read the argument or the environment value.
  const auto r = rd::run_program({"echo", "$(touch " + mark + ")", "'; touch " + mark + "; '"},
                                 {{"RESIDENT_TEST_VALUE", "`touch " + mark + "`"}});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("$(touch"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(mark));
  const auto env = rd::run_program({"env"}, {{"RESIDENT_TEST_VALUE", "a b"}});
  EXPECT_NE(env.output.find("RESIDENT_TEST_VALUE=a b\n"), std::string::npos);
  EXPECT_EQ(rd::run_program({"/no/such/program"}).status, -1);
  EXPECT_EQ(rd::run_program({"sh", "-c", "exit 7"}).status, 7);
  EXPECT_TRUE(rd::program_found("sh"));
  EXPECT_FALSE(rd::program_found("no-such-program-resident"));
}

// FIPS 180-4 examples and RFC 4231's HMAC-SHA256 test cases 1, 2, 4 and 6.
TEST(hmac, sha256_and_hmac_match_the_published_vectors) {
  EXPECT_EQ(rd::hex(rd::sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(rd::hex(rd::sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(rd::hex(rd::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(rd::hex(rd::sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(rd::hex(rd::hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(rd::hex(rd::hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += char(i);
  EXPECT_EQ(rd::hex(rd::hmac_sha256(key4, std::string(50, '\xcd'))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(rd::hex(rd::hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_TRUE(rd::equal_in_constant_time("abc", "abc"));
  EXPECT_FALSE(rd::equal_in_constant_time("abc", "abd"));
  EXPECT_FALSE(rd::equal_in_constant_time("abc", "ab"));
}

}  // namespace
