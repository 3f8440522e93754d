// Compiled by nvcc when the CUDA backend is in the build (a busy kernel times the events).
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "busy.hpp"
#include "support.hpp"

namespace rs = resident;

namespace {

struct env_guard {
  std::string old;
  bool had;
  explicit env_guard(const char* value) {
    const char* o = std::getenv("RESIDENT_DEVICE");
    had = o != nullptr;
    if (had) old = o;
    if (value)
      setenv("RESIDENT_DEVICE", value, 1);
    else
      unsetenv("RESIDENT_DEVICE");
  }
  ~env_guard() {
    if (had)
      setenv("RESIDENT_DEVICE", old.c_str(), 1);
    else
      unsetenv("RESIDENT_DEVICE");
  }
};

TEST(device, parses_names) {
  EXPECT_EQ(rs::parse_device("cpu"), rs::device::cpu());
  EXPECT_EQ(rs::parse_device("cuda"), rs::device::cuda(0));
  EXPECT_EQ(rs::parse_device("cuda:3"), rs::device::cuda(3));
  EXPECT_EQ(rs::device::cuda(2).name(), "cuda:2");
  EXPECT_EQ(rs::device::cpu().name(), "cpu");
  for (const char* bad : {"", "gpu:1", "cuda:", "cuda:-1", "cuda:1x", "CPU", "tpu", "cuda:01", "cuda:00", "cuda:99999999999"}) {
    try {
      rs::parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const rs::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("use cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(device, default_follows_environment) {
  {
    env_guard g("cpu");
    EXPECT_EQ(rs::default_device(), rs::device::cpu());
  }
  {
    env_guard g(nullptr);
    EXPECT_EQ(rs::default_device(), rs::cuda_device_count() > 0 ? rs::device::cuda(0) : rs::device::cpu());
  }
  {
    env_guard g("cuda:63");
    EXPECT_THROW(rs::default_device(), rs::device_unavailable);
  }
  {
    env_guard g("nonsense");
    EXPECT_THROW(rs::default_device(), rs::invalid_argument);
  }
}

TEST(device, unavailable_cuda_says_why) {
  if (rs::cuda_device_count() > 0) {
    rs::device too_far = rs::device::cuda(rs::cuda_device_count());
    try {
      rs::require(too_far);
      FAIL() << "require accepted " << too_far.name();
    } catch (const rs::device_unavailable& e) {
      EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_FALSE(rs::cuda_unavailable_reason().empty());
  try {
    rs::array<float> a(10, rs::device::cuda(0));
    FAIL() << "allocated on a CUDA device where none answers";
  } catch (const rs::device_unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << "the message should say what to do";
  }
}

// The error macros user code may raise with: the type asked for (invalid_argument by default), the
// message, and the raising file and line; a condition that holds throws nothing.
TEST(errors, expects_and_fail_raise_the_type_asked_with_file_and_line) {
  const int line = __LINE__ + 2;
  try {
    RESIDENT_EXPECTS(1 + 1 == 3, "arithmetic broke");
    ADD_FAILURE() << "no throw";
  } catch (const rs::invalid_argument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("arithmetic broke"), std::string::npos) << w;
    EXPECT_NE(w.find("test_device.cpp:" + std::to_string(line)), std::string::npos) << w;
  }
  EXPECT_NO_THROW(RESIDENT_EXPECTS(1 + 1 == 2, "never said"));
  EXPECT_THROW(RESIDENT_EXPECTS(false, "no such shape", shape_mismatch), rs::shape_mismatch);
  EXPECT_THROW(RESIDENT_FAIL("always"), rs::invalid_argument);
  EXPECT_THROW(RESIDENT_FAIL("elsewhere", device_mismatch), rs::device_mismatch);
  static_assert(std::is_base_of_v<rs::library_error, rs::cuda_error>, "a CUDA failure is a library's");
}

TEST(device, version_and_kinds) {
  const std::string v = std::to_string(RESIDENT_VERSION_MAJOR) + "." + std::to_string(RESIDENT_VERSION_MINOR) + "." +
                        std::to_string(RESIDENT_VERSION_PATCH);
  EXPECT_EQ(std::string(rs::version()), v) << "the library's version against its header's macros";
  EXPECT_EQ(rs::device::cpu().kind(), rs::device_kind::cpu);
  EXPECT_EQ(rs::device::cuda(1).kind(), rs::device_kind::cuda);
  EXPECT_EQ(rs::device::cuda(1).index(), 1);
}

TEST(device, cpu_properties) {
  auto p = rs::properties(rs::device::cpu());
  // The name is /proc/cpuinfo's first "model name" (read here on its own), else "host CPU".
  std::string model = "host CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      if (const auto c = line.find(':'); c != std::string::npos && c + 2 < line.size()) model = line.substr(c + 2);
      break;
    }
  EXPECT_EQ(p.name, model);
  EXPECT_GE(p.multiprocessors, 1);
  EXPECT_GT(p.memory_bytes, 0u);
}

using rs::test::backend;
using streams = backend;

TEST_P(streams, residency_limits_are_consistent) {
  const auto p = rs::properties(dev);
  EXPECT_GE(p.max_threads_per_multiprocessor, p.max_threads_per_block);
  EXPECT_GE(p.max_blocks_per_multiprocessor, 1);
  if (dev.is_cuda()) {
    EXPECT_GE(p.max_threads_per_multiprocessor, 1024);  // sm_70 and later
    EXPECT_GE(p.max_blocks_per_multiprocessor, 16);
  }
}

TEST_P(streams, events_time_and_order) {
  EXPECT_EQ(dev.name(), GetParam() == "cpu" ? "cpu" : "cuda:0");
  rs::stream s(dev);
  rs::event a(dev), b(dev);
  // Events around work of a known length (a thread busy for 30 ms: the GPU's global timer, the host's
  // steady clock) measure at least that, and nothing near seconds.
  a.record(s);
  rs::test::queue_busy(s, 30);
  b.record(s);
  b.synchronize();
  EXPECT_GE(elapsed_ms(a, b), 29.9);
  EXPECT_LT(elapsed_ms(a, b), 5000.0);
  auto host = rs::test::random_vector<float>(1 << 20, rs::test::fresh_seed());
  {
    auto x = rs::to_device(host, s.ref());
    EXPECT_EQ(x.to_host(), host);
  }
  // The time between two events is the time between the points the stream reached them: on an idle
  // stream, a host pause of 20 ms between the records shows from below (an event timed at its record
  // call, or a clock of the wrong unit, would not), and nothing near seconds.
  s.synchronize();
  rs::event c(dev), e(dev);
  c.record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  e.record(s);
  e.synchronize();
  EXPECT_GE(elapsed_ms(c, e), 19.0);
  EXPECT_LT(elapsed_ms(c, e), 5000.0);
  EXPECT_GE(elapsed_ms(a, e), elapsed_ms(c, e)) << "a was recorded before c";
  rs::stream moved = std::move(s);
  EXPECT_EQ(moved.device(), dev);
  moved.synchronize();
  rs::synchronize(dev);
}
// A moved-from stream or event throws on use (a moved-from CUDA stream once became the default
// stream silently); destroying it and assigning onto it stay safe.
TEST_P(streams, moved_from_streams_and_events_throw) {
  rs::stream s(dev);
  rs::stream t = std::move(s);
  EXPECT_NO_THROW(t.synchronize());
  try {
    (void)s.ref();
    ADD_FAILURE() << "ref() of a moved-from stream";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moved-from stream"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.synchronize(), rs::invalid_argument);
  EXPECT_THROW((void)static_cast<rs::stream_ref>(s), rs::invalid_argument);
  EXPECT_THROW(rs::array<float>(4, s), rs::invalid_argument);
  s = std::move(t);
  EXPECT_NO_THROW(s.synchronize());
  EXPECT_THROW(t.ref(), rs::invalid_argument);

  rs::event e(dev);
  rs::event f = std::move(e);
  EXPECT_NO_THROW(f.record(s));
  try {
    e.record(s);
    ADD_FAILURE() << "record() on a moved-from event";
  } catch (const rs::invalid_argument& x) {
    EXPECT_NE(std::string(x.what()).find("moved-from event"), std::string::npos) << x.what();
  }
  EXPECT_THROW(e.synchronize(), rs::invalid_argument);
  EXPECT_THROW(e.wait_on(s), rs::invalid_argument);
  EXPECT_THROW((void)elapsed_ms(e, f), rs::invalid_argument);
  EXPECT_THROW((void)elapsed_ms(f, e), rs::invalid_argument);
  e = std::move(f);
  EXPECT_NO_THROW(e.record(s));
  EXPECT_NO_THROW(e.synchronize());
  s.synchronize();
}

RESIDENT_BACKENDS(streams);

}  // namespace
