// Misuse that once passed quietly: a rank without a world size, a device index that names no device
// (a negative one read the CPU's ledger), and the CPU multi-rank message in a build that has MPI.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "resident/detail/files.hpp"
#include "resident/dist/detail/mpi.hpp"
#include "resident/dist/detail/nccl.hpp"
#include "resident/dist/dist.hpp"
#include "resident/resident.hpp"
#include "support.hpp"

namespace rs = resident;
namespace dist = resident::dist;

namespace {

// Environment variables set for one scope, restored after.
struct scoped_env {
  std::map<std::string, std::optional<std::string>> saved;
  void set(const char* name, const char* value) {
    if (!saved.count(name)) {
      const char* old = std::getenv(name);
      saved[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~scoped_env() {
    for (auto& [n, v] : saved)
      if (v) ::setenv(n.c_str(), v->c_str(), 1);
      else ::unsetenv(n.c_str());
  }
};

void clear_launchers(scoped_env& env) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                        "MV2_COMM_WORLD_SIZE", "RESIDENT_WORLD_SIZE", "RESIDENT_RANK", "RESIDENT_LOCAL_RANK",
                        "RESIDENT_LOCAL_SIZE", "RESIDENT_RENDEZVOUS"})
    env.set(v, nullptr);
}

TEST(launcher_misuse, a_rank_without_a_world_size_is_refused) {
  scoped_env env;
  clear_launchers(env);
  env.set("RESIDENT_RANK", "1");
  rs::test::expect_invalid([] { (void)dist::communicator::from_launcher(rs::device::cpu()); },
                           "RESIDENT_RANK is '1' but no world size is set: set RESIDENT_WORLD_SIZE");
  env.set("RESIDENT_RANK", "0");
  rs::test::expect_invalid([] { (void)dist::communicator::from_launcher(rs::device::cpu()); },
                           "no world size is set");
  env.set("RESIDENT_RANK", nullptr);
  EXPECT_EQ(dist::communicator::from_launcher(rs::device::cpu()).size(), 1);  // nothing set: a world of one
}

TEST(launcher_misuse, cpu_ranks_without_mpirun_say_what_this_build_needs) {
  scoped_env env;
  clear_launchers(env);
  env.set("RESIDENT_WORLD_SIZE", "2");
  env.set("RESIDENT_RANK", "1");
  try {
    (void)dist::communicator::from_launcher(rs::device::cpu());
    ADD_FAILURE() << "two CPU ranks without MPI's launcher were accepted";
  } catch (const rs::invalid_argument& e) {
    const std::string m = e.what();
    if (dist::detail::mpi::available()) {
      EXPECT_NE(m.find("this build has MPI; start the program with mpirun"), std::string::npos) << m;
      EXPECT_EQ(m.find("build resident with MPI"), std::string::npos) << m;
    } else {
      EXPECT_NE(m.find("build resident with MPI"), std::string::npos) << m;
    }
  }
}

// Every count, repetition or size of a public helper: zero or negative refused where it means nothing,
// an overflowing size refused before any allocation, each as invalid_argument (never std::length_error).
TEST(count_misuse, repetitions_warm_ups_and_batches_out_of_range_are_refused_before_the_region_runs) {
  const rs::stream_ref s = rs::default_stream(rs::device::cpu());
  int ran = 0;
  auto region = [&] { ++ran; };
  EXPECT_THROW(rs::time_region(s, 0, 0, region), rs::invalid_argument);
  EXPECT_THROW(rs::time_region(s, -1, 0, region), rs::invalid_argument);
  EXPECT_THROW(rs::time_region(s, 1, -1, region), rs::invalid_argument);
  EXPECT_THROW(rs::time_batched(s, 1, 0, 0, region), rs::invalid_argument);
  EXPECT_THROW(rs::time_batched(s, 1, 0, -3, region), rs::invalid_argument);
  EXPECT_EQ(ran, 0);
  const rs::timing t = rs::time_batched(s, 3, 1, 2, region);
  EXPECT_EQ(t.ms.size(), 3u);
  EXPECT_EQ(ran, 2 * (3 + 1));
}

TEST(count_misuse, sizes_that_overflow_the_byte_count_are_refused_before_allocating) {
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  const rs::device cpu = rs::device::cpu();
  EXPECT_THROW(rs::array<float>(max, cpu), rs::invalid_argument);
  EXPECT_THROW(rs::array<double>(max / 4, cpu), rs::invalid_argument);
  EXPECT_THROW(rs::pinned_buffer<float>(max / 2), rs::invalid_argument);
  EXPECT_THROW(rs::array2d<float>(max, 2, cpu), rs::invalid_argument);
  EXPECT_THROW(rs::flow(cpu, 0), rs::invalid_argument);
  EXPECT_THROW(rs::flow(cpu, -1), rs::invalid_argument);
  EXPECT_THROW(rs::flow(cpu, std::numeric_limits<int>::max()), rs::invalid_argument);
  EXPECT_THROW((dist::sharded_array<float>(max, std::vector<rs::device>{cpu, cpu})), rs::invalid_argument);
  rs::array<float> a(8, cpu);
  EXPECT_THROW((void)a.slice(4, max), rs::invalid_argument);
  EXPECT_THROW((void)(rs::generate([](std::size_t i) { return float(i); }) | rs::reduce(rs::plus{}, 0.0))(max, a.stream()),
               rs::invalid_argument);
  std::vector<float> in(8), out(8);
  for (int depth : {-1, 17, 1000}) {
    rs::out_of_core_options o;
    o.depth = depth;
    EXPECT_THROW(rs::out_of_core(rs::map([](float v) { return v; }), in, out, o), rs::invalid_argument) << depth;
  }
}

TEST(device_misuse, a_device_that_does_not_exist_is_a_typed_error_in_queries_too) {
  const int n = rs::cuda_device_count();
  // A negative index once read the CPU's slot of the ledger.
  rs::test::expect_invalid([] { (void)rs::ledger(rs::device::cuda(-1)); }, "is negative");
  EXPECT_THROW(rs::scoped_ledger(rs::device::cuda(-1)), rs::invalid_argument);
  EXPECT_THROW(rs::require(rs::device::cuda(-1)), rs::device_unavailable);
  EXPECT_THROW((void)rs::pool_stats(rs::device::cuda(-1)), rs::device_unavailable);
  EXPECT_THROW(rs::trim_pool(rs::device::cuda(-1)), rs::device_unavailable);
  // One past the count: not a device of this machine, though within the table.
  EXPECT_THROW((void)rs::ledger(rs::device::cuda(n)), rs::device_unavailable);
  EXPECT_THROW(rs::scoped_ledger(rs::device::cuda(n)), rs::device_unavailable);
  EXPECT_THROW((void)rs::pool_stats(rs::device::cuda(n)), rs::device_unavailable);
  EXPECT_NO_THROW((void)rs::ledger(rs::device::cpu()));
}

// The rendezvous file between GPU ranks (RESIDENT_RENDEZVOUS): a FIFO at the path is refused at once,
// not waited on past the timeout; a directory is refused by name and leaves no temporary file beside it.
using rendezvous = rs::test::backend;

TEST_P(rendezvous, a_fifo_or_a_directory_at_the_path_is_refused_at_once) {
  if (dev.is_cpu()) GTEST_SKIP() << "the rendezvous file joins GPU ranks";
  scoped_env env;
  clear_launchers(env);
  std::string base = "/tmp/resident-rendezvous-XXXXXX";
  ASSERT_NE(::mkdtemp(base.data()), nullptr);
  const std::string fifo = base + "/fifo", folder = base + "/folder";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
  env.set("RESIDENT_WORLD_SIZE", "2");
  env.set("RESIDENT_RANK", "1");
  env.set("RESIDENT_RENDEZVOUS", fifo.c_str());
  const auto start = std::chrono::steady_clock::now();
  rs::test::expect_invalid([&] { (void)dist::communicator::from_launcher(dev, std::chrono::milliseconds(20000)); },
                           "is a FIFO (named pipe), not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  env.set("RESIDENT_RANK", "0");
  env.set("RESIDENT_RENDEZVOUS", folder.c_str());
  rs::test::expect_invalid([&] { (void)dist::communicator::from_launcher(dev, std::chrono::milliseconds(3000)); },
                           "it is a directory");
  std::size_t entries = 0;
  for (auto it = std::filesystem::directory_iterator(base); it != std::filesystem::directory_iterator(); ++it) ++entries;
  EXPECT_EQ(entries, 2u) << "a temporary file was left beside the directory";
  std::filesystem::remove_all(base);
}

RESIDENT_BACKENDS(rendezvous);

}  // namespace

// Ranks other than 0 read the rendezvous file by the rule rank 0 writes it by: a link another user owns
// on the path, or one in a folder others may rename entries in, is refused, not followed to an id of
// their choosing.
TEST(launcher_misuse, the_rendezvous_is_not_read_through_a_link_another_user_could_point) {
  namespace fs = std::filesystem;
  std::string t = (fs::temp_directory_path() / "resident-rendezvous-XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  const fs::path d = t;
  fs::create_directories(d / "real");
  std::string id_file("resident", 8);
  id_file.append(sizeof(dist::detail::nccl::unique_id), 'i');
  rs::detail::write_file_atomically((d / "real/id").string(), id_file, rs::detail::file_access::secret);
  const auto read = [](const fs::path& p) { return dist::detail::receive_id(p.string(), std::chrono::milliseconds(50)); };
  EXPECT_EQ(read(d / "real/id")[0], 'i');  // the file itself: read
  fs::create_directories(d / "shared");
  ASSERT_EQ(::chmod((d / "shared").c_str(), 0777), 0);
  fs::create_directory_symlink(d / "real", d / "shared/via");  // this user's, but others could swap it
  rs::test::expect_invalid([&] { read(d / "shared/via/id"); },
                                                    "in a folder other users may rename entries in");
  if (::geteuid() == 0) {
    fs::create_directory_symlink(d / "real", d / "theirs");
    ASSERT_EQ(::lchown((d / "theirs").c_str(), 65534, 65534), 0);
    rs::test::expect_invalid([&] { read(d / "theirs/id"); }, "owned by user 65534");
  }
  std::error_code ec;
  fs::remove_all(d, ec);
}
