// RESIDENT_PROFILE=1 on a whole program: the report at exit takes time linear in the calls and call
// sites, so it is written soon after the program's work (it once kept a program busy for minutes).
#include <chrono>
#include <string>

#include "resident/detail/files.hpp"
#include "resident/resident.hpp"
#include "support.hpp"

namespace rd = resident::detail;

namespace {

using profile_exit = resident::test::backend;

TEST_P(profile_exit, the_report_of_a_whole_program_is_written_within_a_second_or_two) {
  // The bound: 1 s after the work on a GPU (as the issue asks); 3 s on the CPU, whose copy rate is
  // measured at exit on a machine its tests share.
  const double bound_s = dev.is_cuda() ? 1.0 : 3.0;
  const auto r = rd::run_program({"timeout", "600", PROFILE_EXIT_CHILD, dev.name(), "20000"}, {{"RESIDENT_PROFILE", "1"}});
  const auto end = std::chrono::steady_clock::now();
  ASSERT_EQ(r.status, 0) << r.output;
  const auto at = r.output.find("work done at ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const long long done_ns = std::stoll(r.output.substr(at + 13));
  const double exit_s = double(std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count() -
                               done_ns) / 1e9;
  EXPECT_NE(r.output.find("resident profile: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("20000"), std::string::npos) << "the small calls' row";
  EXPECT_LT(exit_s, bound_s) << "the report took " << exit_s << " s after the work";
  std::printf("profile report written %.3f s after the work on %s\n", exit_s, dev.name().c_str());
}

RESIDENT_BACKENDS(profile_exit);

}  // namespace
