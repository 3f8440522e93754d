// The kernel cache trusts only what this user made (src/jit/cache.cpp): a private folder, entries that
// are this user's regular files carrying a MAC under this user's key, all checked before anything is
// loaded. Each case plants what another local user could, and runs the cache child (one run-time stage,
// checked values, the cache's counts) in a process of its own.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace resident::jit::detail {
std::string hash_hex(const std::string& text);  // the cache's file names (src/jit/backend.hpp)
}

namespace rs = resident;
namespace rd = resident::detail;
namespace fs = std::filesystem;

namespace {

struct cache_dir {
  fs::path root, path;
  cache_dir() {
    std::string t = (fs::temp_directory_path() / "resident-cache-XXXXXX").string();
    EXPECT_NE(::mkdtemp(t.data()), nullptr);
    root = t;
    path = root / "a" / "jit";
  }
  ~cache_dir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  // The one kernel entry (its name ends in .so), or "".
  fs::path entry() const {
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".so") return e.path();
    return {};
  }
};

// Runs the cache child with its cache in dir, at most 60 s (a FIFO read would otherwise wait forever).
rd::program_result child(const fs::path& dir, const std::string& constant, const std::string& device = "cpu") {
  return rd::run_program({"timeout", "60", RESIDENT_JIT_CHILD, constant, device},
                         {{"RESIDENT_JIT_CACHE", dir.string()}});
}

std::string fresh_constant() { return std::to_string(rs::test::fresh_seed() % 100000); }

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST(jit_cache_trust, a_new_folder_and_its_files_are_private) {
  cache_dir c;
  const auto r = child(c.path, fresh_constant());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ok compiled=1 disk=0"), std::string::npos) << r.output;
  EXPECT_EQ(mode_of(c.path), 0700u);
  EXPECT_EQ(mode_of(c.path.parent_path()), 0700u);
  EXPECT_EQ(mode_of(c.path / "key"), 0600u);
  EXPECT_EQ(fs::file_size(c.path / "key"), 32u);
  ASSERT_FALSE(c.entry().empty());
  EXPECT_EQ(mode_of(c.entry()), 0600u);
}

// A shared object whose constructor leaves a mark: dlopen runs it before any symbol is looked at.
std::string planted_object(const fs::path& dir, const fs::path& mark) {
  const fs::path src = dir / "planted.cpp", obj = dir / "planted.so";
  rd::write_file_atomically(src.string(),
                            "#include <fcntl.h>\n#include <unistd.h>\n"
                            "__attribute__((constructor)) static void planted() {\n"
                            "  int fd = open(\"" + mark.string() + "\", O_WRONLY | O_CREAT, 0644);\n"
                            "  if (fd >= 0) close(fd);\n}\n");
  const auto r = rd::run_program({"c++", "-shared", "-fPIC", "-o", obj.string(), src.string()});
  EXPECT_EQ(r.status, 0) << r.output;
  std::ifstream f(obj, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The case: an entry forged by whoever can write the folder. The unkeyed header of the old
// format, and the new one with a MAC made up: neither is loaded, so the planted code never runs.
TEST(jit_cache_trust, a_forged_entry_is_never_loaded) {
  cache_dir c;
  const std::string k = fresh_constant();
  ASSERT_EQ(child(c.path, k).status, 0);
  const fs::path entry = c.entry();
  ASSERT_FALSE(entry.empty());
  const std::string key = entry.stem().string();
  const fs::path mark = c.root / "planted-ran";
  const std::string object = planted_object(c.root, mark);
  ASSERT_FALSE(object.empty());
  const std::string forged[] = {
      "RSJIT1 " + key + " " + rs::jit::detail::hash_hex(object) + " " + std::to_string(object.size()) + "\n" + object,
      "RSJIT2 " + key + ".so " + std::string(64, 'a') + " " + std::to_string(object.size()) + "\n" + object};
  for (const std::string& bytes : forged) {
    rd::write_file_atomically(entry.string(), bytes, rd::file_access::secret);
    const auto r = child(c.path, k);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(mark)) << "the planted object's constructor ran";
  }
  const auto again = child(c.path, k);
  EXPECT_NE(again.output.find("ok compiled=0 disk=1 rejected=0"), std::string::npos) << again.output;
}

// CUDA kernels go through the same check before cuLibraryLoadData: the cubin of another chain, put
// under this chain's name with the old unkeyed header, is a miss (once it ran, giving wrong values).
TEST(jit_cache_trust, a_forged_cubin_is_never_loaded) {
  if (rs::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << rs::cuda_unavailable_reason();
  cache_dir c;
  const auto cubins = [&] {
    std::vector<fs::path> v;
    for (const auto& e : fs::directory_iterator(c.path))
      if (e.path().extension() == ".cubin") v.push_back(e.path());
    return v;
  };
  const std::string k = fresh_constant(), other = std::to_string(std::stoi(k) + 1);
  ASSERT_EQ(child(c.path, k, "cuda").status, 0);
  ASSERT_EQ(cubins().size(), 1u);
  const fs::path entry = cubins()[0];
  ASSERT_EQ(child(c.path, other, "cuda").status, 0);
  fs::path other_entry;
  for (const auto& e : cubins())
    if (e != entry) other_entry = e;
  ASSERT_FALSE(other_entry.empty());
  const std::string whole = rd::read_regular_file(other_entry.string(), std::size_t(64) << 20).value_or("");
  const std::string payload = whole.substr(whole.find('\n') + 1);
  rd::write_file_atomically(entry.string(),
                            "RSJIT1 " + entry.stem().string() + " " + rs::jit::detail::hash_hex(payload) + " " +
                                std::to_string(payload.size()) + "\n" + payload,
                            rd::file_access::secret);
  const auto r = child(c.path, k, "cuda");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << r.output;
  const auto again = child(c.path, k, "cuda");
  EXPECT_NE(again.output.find("ok compiled=0 disk=1 rejected=0"), std::string::npos) << again.output;
}

TEST(jit_cache_trust, a_fifo_a_link_or_a_huge_file_as_an_entry_is_a_miss) {
  cache_dir c;
  const std::string k = fresh_constant();
  ASSERT_EQ(child(c.path, k).status, 0);
  const fs::path entry = c.entry();
  ASSERT_FALSE(entry.empty());
  const auto plant = [&](auto&& make) {
    fs::remove(entry);
    make();
    const auto r = child(c.path, k);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(entry))) << "rewritten as a regular file";
  };
  plant([&] { ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0); });
  plant([&] { fs::create_symlink("/dev/zero", entry); });
  plant([&] {
    { std::ofstream(entry) << "RSJIT2"; }
    fs::resize_file(entry, std::uintmax_t(65) << 20);  // sparse: no disk used
  });
}

TEST(jit_cache_trust, an_entry_of_another_user_is_a_miss) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  cache_dir c;
  const std::string k = fresh_constant();
  ASSERT_EQ(child(c.path, k).status, 0);
  const fs::path entry = c.entry();
  ASSERT_EQ(::chown(entry.c_str(), 65534, 65534), 0);  // nobody: a whole, valid entry, but not ours
  const auto r = child(c.path, k);
  EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=1"), std::string::npos) << r.output;
}

// A folder others may write (a world-writable XDG_CACHE_HOME, a shared path) or that another user owns
// is refused with one warning; kernels go to a private folder of the process, nothing into the shared
// one.
TEST(jit_cache_trust, a_folder_others_can_write_or_own_is_refused_with_a_warning) {
  cache_dir c;
  fs::create_directories(c.path);
  ASSERT_EQ(::chmod(c.path.c_str(), 0777), 0);
  const std::string k = fresh_constant();
  for (int run = 0; run < 2; ++run) {
    const auto r = child(c.path, k);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=0"), std::string::npos) << r.output;
    const auto warn = r.output.find("resident: warning: the kernel cache folder '" + c.path.string() + "' is refused: "
                                    "other users may write it (mode 0777)");
    EXPECT_NE(warn, std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("resident: warning", warn + 1), std::string::npos) << "warned more than once";
  }
  EXPECT_TRUE(fs::is_empty(c.path)) << "the shared folder was written";
  if (::geteuid() != 0) return;
  ASSERT_EQ(::chmod(c.path.c_str(), 0700), 0);
  ASSERT_EQ(::chown(c.path.c_str(), 65534, 65534), 0);  // nobody's folder
  const auto r = child(c.path, k);
  EXPECT_NE(r.output.find("is refused: it belongs to user 65534"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(c.path));
}

// A cache folder still to be made inside another user's folder (root running with their HOME) is
// refused before anything is made there: folders of root's left in it turned that user's cache off.
TEST(jit_cache_trust, no_folder_is_made_inside_another_users) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a folder to another user needs root";
  cache_dir c;
  fs::create_directories(c.root / "home");
  ASSERT_EQ(::chown((c.root / "home").c_str(), 65534, 65534), 0);
  const auto r = child(c.root / "home" / ".cache" / "resident" / "jit", fresh_constant());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ok compiled=1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is refused"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(c.root / "home")) << "a folder was made in another user's";
}

// The key is the folder's secret: one others could read makes the folder
// untrusted.
TEST(jit_cache_trust, a_key_others_can_write_is_refused) {
  cache_dir c;
  ASSERT_EQ(child(c.path, fresh_constant()).status, 0);
  ASSERT_EQ(::chmod((c.path / "key").c_str(), 0644), 0);  // readable: anyone could forge a MAC
  const auto r = child(c.path, fresh_constant());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("its key file is not this user's private key"), std::string::npos) << r.output;
}

// NVRTC would look for a stage's `#include "x.h"` in the current folder (its source names no other): in
// a shared one, another user's header would be compiled into this user's kernel. NVRTC needs no GPU.
TEST(jit_trust, a_quoted_include_is_not_read_from_the_current_folder) {
  if (!rs::cuda_compiled) GTEST_SKIP() << "this build has no CUDA backend (no NVRTC)";
  cache_dir d;
  fs::create_directories(d.root);
  std::ofstream(d.root / "planted.h") << "#define PLANTED 1\n";
  const fs::path was = fs::current_path();
  fs::current_path(d.root);
  using E = rs::jit::element;
  const std::string text = rs::jit::map("#include \"planted.h\"\nfloat f(float v) { return v + PLANTED; }")
                               .kernel_source({E::f32}, E::f32, rs::device::cuda(0));
  EXPECT_THROW(rs::jit::detail::compile_cuda(text, 9, 0), rs::jit::compile_error);
  fs::current_path(was);
}

}  // namespace

// A folder above the cache that others may write (not sticky) lets them rename the cache folder aside
// and put their own in its place between runs: refused with one warning, nothing written under it.
TEST(jit_cache_trust, a_folder_above_the_cache_that_others_may_write_is_refused) {
  cache_dir c;
  fs::create_directories(c.path);
  ASSERT_EQ(::chmod((c.root / "a").c_str(), 0777), 0);
  const auto r = child(c.path, fresh_constant());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("is refused: others may write the folder '" + fs::canonical(c.root / "a").string() + "'"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=0"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(c.path)) << "the cache under a folder others may write was written";
}

// The folders above the cache are judged where it really is: a link of this user's to a folder inside
// one others may write (not sticky) is refused as that folder would be, nothing written through it.
TEST(jit_cache_trust, a_link_to_a_folder_under_one_others_may_write_is_refused) {
  cache_dir c;
  fs::create_directories(c.root / "shared" / "jit");
  ASSERT_EQ(::chmod((c.root / "shared").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((c.root / "shared" / "jit").c_str(), 0700), 0);
  fs::create_directories(c.path.parent_path());
  fs::create_directory_symlink(c.root / "shared" / "jit", c.path);
  const auto r = child(c.path, fresh_constant());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("is refused: others may write the folder '" + fs::canonical(c.root / "shared").string() + "'"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=0"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(c.root / "shared" / "jit")) << "the cache was written through the link";
}

// A cache folder that cannot be opened through its path (a link another user owns on the way) is never
// a disk cache turned off without a word: the warning says why, and a private folder caches kernels.
TEST(jit_cache_trust, a_path_through_another_users_link_is_refused_with_a_warning) {
  if (::geteuid() != 0) GTEST_SKIP() << "making another user's link needs root";
  cache_dir c;
  fs::create_directories(c.root / "real" / "jit");
  fs::create_directory_symlink(c.root / "real", c.root / "a");  // c.path is a/jit
  ASSERT_EQ(::lchown((c.root / "a").c_str(), 65534, 65534), 0);
  const auto r = child(c.path, fresh_constant());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resident: warning: the kernel cache folder '" + c.path.string() + "' is refused: '"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("is a link owned by user 65534"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok compiled=1 disk=0 rejected=0"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(c.root / "real" / "jit"));
}
