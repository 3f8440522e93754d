// Run-time chains from source text: one kernel per call generated, compiled and cached at run time,
// from a file the host compiler builds (this one, on purpose). Checked against FP64 on both backends;
// generators against rs::random's fills; errors typed; the cache shared by threads and processes.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "resident/detail/files.hpp"
#include "resident/flow/flow.hpp"
#include "private_folder.hpp"
#include "support.hpp"

namespace rs = resident;
namespace fs = std::filesystem;
using rs::test::backend;

namespace {

// Every test binary run gets its own cache folder, so the counts below are this run's own.
const std::string cache_root = [] {
  const std::string dir = rs::test::private_folder("resident-jit-test", "cache");
  ::setenv("RESIDENT_JIT_CACHE", dir.c_str(), 1);
  return dir;
}();

using jit = backend;

const char* f1 = "float f1(float v) { return 1.5f * v + 0.5f; }";

const char* f2 = "float f2(float v) { return sqrtf(v * v + 1.0f); }";

const char* f3 = "// the seed's third function\nfloat f3(float v) { return 0.5f * sinf(v); }";

rs::jit::pipeline seed_chain() { return rs::jit::map(f1) | rs::jit::map(f2) | rs::jit::map(f3); }

// Float values into double, so a sum folds them in double.
rs::jit::pipeline widen() { return rs::jit::map("double widen(float v) { return v; }"); }

double seed_reference(double v) { return 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)); }

TEST_P(jit, the_seed_chain_is_one_kernel_matching_fp64) {
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(1000003)}) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto h = rs::test::random_vector<float>(n, seed);
    std::vector<double> ref(n);
    double ref_sum = 0;
    for (std::size_t i = 0; i < n; ++i) ref_sum += ref[i] = seed_reference(h[i]);
    rs::array<float> x = rs::to_device(h, dev);
    rs::array<float> y = rs::to_device(std::vector<float>(n, rs::test::poison<float>()), dev);
    rs::scoped_ledger l(dev);
    seed_chain()(x, y);
    EXPECT_EQ(l.delta().kernels, 1u) << "one kernel per call";
    const std::vector<float> terms = y.to_host();
    EXPECT_LT(rs::test::rel_error(terms, ref), 1e-6);
    // The sums add the terms y holds (>= 0.39 each; another kernel may round a term once more). A
    // float fold can see one term go missing over a few thousand terms: checked on a prefix of that
    // length; the whole length folds in double, where one term shows at any of these lengths.
    const std::size_t m = std::min<std::size_t>(n, 2048);
    const std::vector<float> head(terms.begin(), terms.begin() + std::ptrdiff_t(m));
    const auto [head_sum, head_abs] = rs::test::sum_and_abs(head);
    const rs::array<float> xm = rs::to_device(std::vector<float>(h.begin(), h.begin() + std::ptrdiff_t(m)), dev);
    const float s = (seed_chain() | rs::jit::sum()).result<float>(xm);
    const double f_tol = rs::test::sum_tolerance<float>(m, head_abs, rs::test::unit_roundoff<float>() * head_abs);
    EXPECT_TRUE(rs::test::sum_matches(s, head_sum, f_tol, 0.39)) << "float sum of " << m;
    const auto [all_sum, all_abs] = rs::test::sum_and_abs(terms);
    const double d = (seed_chain() | widen() | rs::jit::sum()).result<double>(x);
    const double d_tol = rs::test::sum_tolerance<double>(n, all_abs, rs::test::unit_roundoff<float>() * all_abs);
    EXPECT_TRUE(rs::test::sum_matches(d, all_sum, d_tol, 0.39)) << "double sum of " << n;
    EXPECT_NEAR(all_sum, ref_sum, 1e-6 * all_abs) << "the terms against FP64";
    seed_chain()(x);  // in place
    EXPECT_LT(rs::test::rel_error(x.to_host(), ref), 1e-6);
  }
}

TEST_P(jit, a_slice_off_the_vector_alignment_runs_scalar_and_right) {
  const auto seed = rs::test::fresh_seed();
  auto h = rs::test::random_vector<float>(4099, seed);
  rs::array<float> x = rs::to_device(h, dev);
  rs::array<float> y = rs::to_device(std::vector<float>(4099, rs::test::poison<float>()), dev);
  seed_chain()(x.slice(1, 4096), y.slice(2, 4096));
  auto out = y.to_host();
  EXPECT_EQ(out[0], rs::test::poison<float>());
  EXPECT_EQ(out[1], rs::test::poison<float>());
  EXPECT_EQ(out[4099 - 1], rs::test::poison<float>()) << "nothing past the slice";
  for (std::size_t i = 0; i < 4096; ++i) ASSERT_NEAR(out[i + 2], seed_reference(h[i + 1]), 1e-6) << i;
}

TEST_P(jit, zipped_arrays_of_two_types_feed_a_two_argument_stage) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed = " + std::to_string(seed));
  const std::size_t n = 100003;
  auto ha = rs::test::random_vector<double>(n, seed);
  auto hb = rs::test::random_vector<double>(n, seed + 1);
  std::vector<std::int32_t> hk(n);
  for (std::size_t i = 0; i < n; ++i) hk[i] = std::int32_t(i % 7) - 3;
  rs::array<double> a = rs::to_device(ha, dev), b = rs::to_device(hb, dev);
  rs::array<std::int32_t> k = rs::to_device(hk, dev);
  rs::array<double> y = rs::to_device(std::vector<double>(n, rs::test::poison<double>()), dev);
  auto p = rs::jit::map("double axpb(double x, double w, int k) { return x * w + k; }") |
           rs::jit::map("double sq(const double& v) { return v * v; }");
  p(rs::jit::zip(a, b, k), y);
  std::vector<double> ref(n);
  double ref_max = -INFINITY;
  for (std::size_t i = 0; i < n; ++i) {
    ref[i] = (ha[i] * hb[i] + hk[i]) * (ha[i] * hb[i] + hk[i]);
    ref_max = std::max(ref_max, ref[i]);
  }
  EXPECT_LT(rs::test::rel_error(y.to_host(), ref), 1e-15);
  // The device may contract x * w + k into an fma: the largest value an ulp or so from the host's.
  EXPECT_NEAR((p | rs::jit::max()).result<double>(rs::jit::zip(a, b, k)), ref_max, 1e-14 * std::fabs(ref_max));
}

TEST_P(jit, min_max_and_a_user_reduction_fold_every_value) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed = " + std::to_string(seed));
  const std::size_t n = 300007;
  auto h = rs::test::random_vector<float>(n, seed, -5, 5);
  rs::array<float> x = rs::to_device(h, dev);
  auto ident = rs::jit::map("float id(float v) { return v; }");
  EXPECT_EQ((ident | rs::jit::min()).result<float>(x), *std::min_element(h.begin(), h.end()));
  EXPECT_EQ(rs::jit::max().result<float>(x), *std::max_element(h.begin(), h.end()));
  // The largest |v|, by an operator from source with a helper function before it.
  auto absmax = rs::jit::reduce(R"(
      float mag(float v) { return v < 0 ? -v : v; }
      float absmax(float a, float b) { return mag(a) > mag(b) ? mag(a) : mag(b); })", 0.0);
  double ref = 0;
  for (float v : h) ref = std::max(ref, std::fabs(double(v)));
  EXPECT_EQ(absmax.result<float>(x), float(ref));
  // A NaN anywhere makes min and max NaN, as the compiled reductions do.
  h[n / 3] = NAN;
  rs::array<float> xn = rs::to_device(h, dev);
  EXPECT_TRUE(std::isnan(rs::jit::min().result<float>(xn)));
  EXPECT_TRUE(std::isnan(rs::jit::max().result<float>(xn)));
  // Integers sum exactly.
  std::vector<std::int64_t> hi(n);
  std::int64_t isum = 0;
  for (std::size_t i = 0; i < n; ++i) isum += hi[i] = std::int64_t(i * 2654435761u % 1000003) - 500000;
  rs::array<std::int64_t> xi = rs::to_device(hi, dev);
  EXPECT_EQ(rs::jit::sum().result<std::int64_t>(xi), isum);
}

template <class W>
void expect_wrapping_sums_exact(rs::device dev) {
  // Wrapping unsigned sums of random words are exact in any order: a block's partial lost or folded
  // twice by the last block changes them. Lengths up to more blocks than the last block has threads
  // (each of its threads then folds several partials), vector and scalar paths. Words of 4 bytes are
  // handed over in slots, of 8 through partials and counters (cuda_shape_of).
  const std::size_t most = dev.is_cuda() ? (std::size_t(3) << 22) + 7 : (std::size_t(1) << 20) + 7;
  std::vector<W> h(most + 1);
  std::mt19937_64 g(rs::test::fresh_seed());
  for (auto& v : h) v = W(g());
  rs::array<W> x = rs::to_device(h, dev);
  for (std::size_t n : {std::size_t(1), std::size_t(1000), (std::size_t(1) << 20) + 3, most / 3, most}) {
    for (std::size_t off : {std::size_t(0), std::size_t(1)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset " + std::to_string(off) + ", " +
                   std::to_string(sizeof(W)) + "-byte words");
      W want = 0;
      for (std::size_t i = off; i < off + n; ++i) want += h[i];
      EXPECT_EQ(rs::jit::sum().result<W>(x.slice(off, n)), want);
      // Again on the same stream: the slots or counters were left zero.
      EXPECT_EQ(rs::jit::sum().result<W>(x.slice(off, n)), want);
    }
  }
}

TEST_P(jit, sums_fold_every_block_once_up_to_a_full_wave) {
  expect_wrapping_sums_exact<std::uint64_t>(dev);
  expect_wrapping_sums_exact<std::uint32_t>(dev);
}

TEST_P(jit, a_stage_that_throws_is_a_stage_error_and_the_next_call_runs) {
  // The host compiles a C++ stage as written, throw included: it ends as a stage_error naming the
  // chain, not an exception of the stage's own type (or none nanobind knows) through the library.
  if (dev.is_cuda()) GTEST_SKIP() << "a GPU kernel cannot throw: NVRTC refuses the text";
  rs::array<float> x = rs::to_device(std::vector<float>(1000, 1.f), dev);
  for (const char* text : {"float thrower(float v) { if (v > 0.f) throw 1; return v; }",
                           "float thrower(float v) { if (v > 0.f) throw std::range_error(\"past\"); return v; }"}) {
    const std::string src = std::string("#include <stdexcept>\n") + text;
    EXPECT_THROW(rs::jit::map(src, "thrower")(x), rs::stage_error) << text;
    EXPECT_THROW((void)(rs::jit::map(src, "thrower") | rs::jit::sum()).result<float>(x), rs::stage_error) << text;
  }
  EXPECT_EQ((rs::jit::map("float same(float v) { return v; }") | rs::jit::sum()).result<float>(x), 1000.f);
}

TEST_P(jit, a_float_sum_stays_within_a_pairwise_sums_bound_over_long_arrays) {
  // NumPy's pairwise sum of n float32 values errs by about (16 + log2(n / 128)) units of roundoff times
  // sum |x|. A chain's sum of float32 keeps under 40 such units at any n: it adds in double, a GPU
  // thread a trip's few values in float32 first, and the partials fold in a tree. A fold of float32
  // lanes over many values in order (as the host's once did, and a GPU's past 2^24 values) errs by
  // more the more values a lane folds. An odd n takes the vector loop's checked trip and the tail.
  const double u = rs::test::unit_roundoff<float>();
  std::vector<std::size_t> sizes{std::size_t(1) << 24};
  if (dev.is_cuda()) sizes.push_back((std::size_t(1) << 27) + 5);  // hundreds of values a GPU lane
  for (std::size_t n : sizes) {
    std::vector<float> tenth(n, 0.1f), spread(n);
    for (std::size_t i = 0; i < n; ++i) spread[i] = float(-2.0 + 4.0 * double(i) / double(n - 1));
    for (const auto* h : {&tenth, &spread}) {
      double want = 0, abs = 0;
      for (float v : *h) want += v, abs += std::fabs(v);
      const rs::array<float> x = rs::to_device(*h, dev);
      const float got = rs::jit::sum().result<float>(x);
      EXPECT_LE(std::fabs(double(got) - want), 40 * u * abs) << "n " << n << ", sum " << want << ", got " << got;
      const float chained = (rs::jit::map("float same(float v) { return v; }") | rs::jit::sum()).result<float>(x);
      EXPECT_LE(std::fabs(double(chained) - want), 40 * u * abs) << "n " << n << ", sum " << want << ", got " << chained;
    }
  }
  // A generator's sum: its values are those of rs::random, summed here in double.
  const std::size_t n = dev.is_cuda() ? (std::size_t(1) << 26) + 3 : std::size_t(1) << 22;
  rs::array<float> values(n, rs::device::cpu());
  rs::random::fill_uniform(values, 11, 0, 0.f, 1.f);
  double want = 0;
  for (float v : values.to_host()) want += v;
  const float got = (rs::jit::uniform<float>(11, 0, 0.0, 1.0) | rs::jit::sum()).result<float>(n, dev);
  EXPECT_LE(std::fabs(double(got) - want), 40 * u * want) << "uniform: sum " << want << ", got " << got;
}

TEST_P(jit, generators_give_the_values_of_rs_random) {
  for (std::uint64_t offset : {std::uint64_t(0), std::uint64_t(3), ~std::uint64_t(0) - 5}) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("seed = " + std::to_string(seed) + ", offset = " + std::to_string(offset));
    const std::size_t n = 10007;
    // The compiled fills run on the CPU (this file is built by the host compiler): rs::random gives the
    // same values on every device.
    const rs::device cpu = rs::device::cpu();
    rs::array<float> want(n, cpu), got(n, dev);
    rs::array<double> wantd(n, cpu), gotd(n, dev);
    rs::random::fill_uniform(want, seed, offset, -2.f, 3.f);
    rs::jit::uniform<float>(seed, offset, -2.f, 3.f)(got);
    EXPECT_EQ(got.to_host(), want.to_host()) << "uniform float";
    rs::random::fill_normal(want, seed, offset, 1.f, 2.f);
    rs::jit::normal<float>(seed, offset, 1.f, 2.f)(got);
    EXPECT_EQ(got.to_host(), want.to_host()) << "normal float";
    rs::random::fill_uniform(wantd, seed, offset, -1.0, 0.5);
    rs::jit::uniform<double>(seed, offset, -1.0, 0.5)(gotd);
    EXPECT_EQ(gotd.to_host(), wantd.to_host()) << "uniform double";
    rs::random::fill_normal(wantd, seed, offset);
    rs::jit::normal<double>(seed, offset)(gotd);
    EXPECT_EQ(gotd.to_host(), wantd.to_host()) << "normal double";
  }
  // A generator through a stage into a reduction: the mean of 2u - 1 over [0, 1) is near 0.
  auto p = rs::jit::uniform<float>(7) | rs::jit::map("float c(float u) { return 2.0f * u - 1.0f; }") | rs::jit::sum();
  EXPECT_LT(std::fabs(p.result<float>(std::size_t(1) << 20, dev)) / double(1 << 20), 5e-3);
}

TEST_P(jit, empty_arrays_run_nothing_and_reductions_give_their_init) {
  rs::array<float> x(0, dev), y(0, dev);
  rs::scoped_ledger l(dev);
  seed_chain()(x, y);
  EXPECT_EQ(l.delta().kernels, 0u);
  EXPECT_EQ(rs::jit::sum().result<float>(x), 0.f);
  EXPECT_EQ(rs::jit::min().result<float>(x), INFINITY);
  EXPECT_EQ(rs::jit::reduce("float m(float a, float b) { return a * b; }", 1.0).result<float>(x), 1.f);
}

TEST_P(jit, misuse_is_a_typed_error_before_anything_compiles) {
  rs::array<float> x(16, dev), y(15, dev);
  rs::array<double> d(16, dev);
  const auto before = rs::jit::stats().compiled;
  EXPECT_THROW(seed_chain()(x, y), rs::shape_mismatch);
  try {
    seed_chain()(d, d);
    ADD_FAILURE() << "a double array into a float stage";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1 (f1) takes (float) but the arrays hold (double)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((rs::jit::map(f1) | rs::jit::map("double g(double v) { return v; }"))(x, x), rs::invalid_argument);
  EXPECT_THROW(seed_chain()(x, d), rs::invalid_argument);                  // float values into a double array
  EXPECT_THROW((seed_chain() | rs::jit::sum())(x, y), rs::invalid_argument);  // a reduction needs result<>
  EXPECT_THROW(seed_chain().result<float>(x), rs::invalid_argument);       // no reduction
  EXPECT_THROW((seed_chain() | rs::jit::min()).result<double>(x), rs::invalid_argument);  // only a sum widens
  EXPECT_THROW((seed_chain() | rs::jit::sum()).result<std::int64_t>(x), rs::invalid_argument);
  EXPECT_THROW(rs::jit::map("return v;"), rs::invalid_argument);
  EXPECT_THROW(rs::jit::map("std::string f(float v) { return {}; }"), rs::invalid_argument);
  EXPECT_THROW(rs::jit::map(f1, "nope"), rs::invalid_argument);
  EXPECT_THROW(rs::jit::sum() | rs::jit::map(f1), rs::invalid_argument);
  EXPECT_THROW(rs::jit::map(f1) | rs::jit::uniform<float>(1), rs::invalid_argument);
  EXPECT_THROW(rs::jit::uniform<float>(1, 0, 1.f, 1.f), rs::invalid_argument);
  // Bounds that differ as given but round to one float: named as given, not "swap them".
  rs::test::expect_invalid([] { rs::jit::uniform<float>(1, 0, 16777216.0, 16777217.0); },
                           "low 16777216 and high 16777217 are both 16777216 as float");
  rs::test::expect_invalid([] { rs::jit::uniform<float>(1, 0, 1.0, 1.00000001); }, "are both 1 as float");
  EXPECT_NO_THROW(rs::jit::uniform<double>(1, 0, 1.0, 1.00000001));
  EXPECT_THROW(rs::jit::normal<float>(1, 0, 0.f, -1.f), rs::invalid_argument);
  EXPECT_THROW(rs::jit::map("float two(float a, float b) { return a + b; }")(x, x), rs::invalid_argument);
  rs::array<float> moved = std::move(x);
  EXPECT_THROW(seed_chain()(x, moved), rs::invalid_argument);
  EXPECT_THROW(seed_chain()(moved, x), rs::invalid_argument);
  EXPECT_THROW(rs::jit::sum().result<float>(x), rs::invalid_argument);
  EXPECT_EQ(rs::jit::stats().compiled, before) << "every misuse refused before compiling";
}

TEST_P(jit, stage_text_is_read_as_the_compiler_reads_it) {
  rs::array<float> y = rs::to_device(std::vector<float>(100, 1.f), dev);
  // Braces and slashes inside literals are not code: the last function is still g.
  rs::jit::map("float h(float v) { const char* s = \"}//\"; (void)s; return v * 100.0f; }\n"
               "float g(float v) { char c = '{'; (void)c; return v + 1.0f; }")(y);
  for (float v : y.to_host()) ASSERT_EQ(v, 2.f);
  // A preprocessor line before the function is not part of its return type.
  rs::jit::map("#define TWO 2.0f\nfloat g(float v) { return v * TWO; }")(y);
  for (float v : y.to_host()) ASSERT_EQ(v, 4.f);
  if (!dev.is_cuda()) {  // NVRTC has no host headers to include
    try {
      rs::jit::map("#include <no_such_header_here.h>\nfloat g(float v) { return v; }")(y);
      ADD_FAILURE() << "compiled";
    } catch (const rs::jit::compile_error& e) {
      EXPECT_NE(e.log().find("no_such_header_here.h"), std::string::npos) << e.log();
    }
  }
  if (!dev.is_cuda()) {  // a standard header included by a stage (NVRTC has none of the host's)
    rs::jit::map("#include <array>\n#include <algorithm>\n"
                 "float g(float v) { std::array<float, 2> a{v, 5.0f}; return std::max(a[0], a[1]); }")(y);
    for (float v : y.to_host()) ASSERT_EQ(v, 5.f);
    try {
      rs::jit::map("float g(float v) { return v; }\n#include <array>\nfloat h(float v) { return undefined_name; }")(y);
      ADD_FAILURE() << "compiled";
    } catch (const rs::jit::compile_error& e) {
      EXPECT_NE(e.log().find("stage 1:3:"), std::string::npos) << e.log();
    }
  }
  // Attributes are not part of a type; a message quotes the text as written.
  rs::jit::map("[[nodiscard]] float g(float v) { return v + 1.0f; }")(y);
  // The alternative tokens <% %> <: :> are brackets, as the compiler reads them.
  rs::array<float> z = rs::to_device(std::vector<float>(5, 1.f), dev);
  rs::jit::map("float h(float v) <% return v; %>\nfloat g(float v) <% float a<:1:> = {v}; return a<:0:> + 1.0f; %>")(z);
  for (float v : z.to_host()) ASSERT_EQ(v, 2.f);
  try {
    rs::jit::map("extern \"C\" float g(float v) { return v; }");
    ADD_FAILURE() << "accepted";
  } catch (const rs::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'extern \"C\" float'"), std::string::npos) << e.what();
  }
  // Text the compiler cannot take whole, and types the chain cannot pass, are refused before compiling.
  const auto before = rs::jit::stats().compiled;
  for (const char* bad : {"float g(float v) { return v; ", "float g(float v) { return v; } }",
                          "float g(float v) { return v; } /* unterminated", "float g(float v) { return v + (1.0f; }",
                          "float g(float v) { const char* s = \"open; return v; }"}) {
    try {
      rs::jit::map(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const rs::invalid_argument& e) {
      EXPECT_EQ(dynamic_cast<const rs::jit::compile_error*>(&e), nullptr) << bad;
    }
  }
  for (const char* bad : {"float g(float* v) { return *v; }", "float g(float& v) { return v += 1.0f; }",
                          "float* g(float v) { return nullptr; }", "float g(float v[]) { return v[0]; }"}) {
    try {
      rs::jit::map(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const rs::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("by value"), std::string::npos) << e.what();
    }
  }
  rs::jit::map("float g(const float& v) { return v; }")(y);  // a const reference is a value
  EXPECT_EQ(rs::jit::stats().compiled - before, 1u);
}

TEST_P(jit, an_output_partly_over_an_input_is_refused_before_any_work) {
  std::vector<float> h(1000);
  for (int i = 0; i < 1000; ++i) h[std::size_t(i)] = float(i);
  rs::array<float> x = rs::to_device(h, dev);
  const auto p = rs::jit::map("float g(float v) { return v + 0.5f; }");
  auto a = x.slice(0, 999);
  auto b = x.slice(1, 999);
  EXPECT_THROW(p(a, b), rs::invalid_argument);
  EXPECT_THROW(p(b, a), rs::invalid_argument);
  EXPECT_THROW(rs::jit::map("float s(float a, float b) { return a + b; }")(rs::jit::zip(x.slice(0, 10), x.slice(5, 10)),
                                                                         x.slice(5, 10)),
               rs::invalid_argument);
  EXPECT_EQ(x.to_host(), h) << "the caller's data untouched";
  p(a, a);  // exactly in place is allowed
  EXPECT_EQ(x.to_host()[998], 998.5f);
}

TEST_P(jit, a_reduction_start_its_type_cannot_hold_is_refused) {
  rs::array<int> xi = rs::to_device(std::vector<int>(10, 3), dev);
  rs::array<float> xf = rs::to_device(std::vector<float>(10, 3.f), dev);
  const char* imin = "int m(int a, int b) { return a < b ? a : b; }";
  const auto before = rs::jit::stats().compiled;
  for (double bad : {1e20, -3e9, 2.5, double(NAN)})
    EXPECT_THROW(rs::jit::reduce(imin, bad).result<int>(xi), rs::invalid_argument) << bad;
  EXPECT_THROW(rs::jit::reduce("float m(float a, float b) { return a + b; }", 1e300).result<float>(xf),
               rs::invalid_argument);
  EXPECT_EQ(rs::jit::stats().compiled, before);
  EXPECT_EQ(rs::jit::reduce(imin, 2147483647.0).result<int>(xi), 3);
}

TEST_P(jit, a_compile_error_carries_the_log_with_the_stage_line) {
  rs::array<float> x(16, dev);
  const std::string bad = "float broken(float v) {\n  float w = v * 2.0f;\n  return w + undefined_name;\n}";
  try {
    (rs::jit::map(f1) | rs::jit::map(bad))(x);
    ADD_FAILURE() << "compiled";
  } catch (const rs::jit::compile_error& e) {
    EXPECT_NE(e.log().find("undefined_name"), std::string::npos) << e.log();
    // gcc writes "stage 2:3:", NVRTC "stage 2(3)": line 3 of the second stage's own text.
    EXPECT_TRUE(e.log().find("stage 2:3:") != std::string::npos || e.log().find("stage 2(3)") != std::string::npos)
        << e.log();
  }
  // The cache kept nothing of it: the same text fails again, and a good chain still runs.
  EXPECT_THROW((rs::jit::map(f1) | rs::jit::map(bad))(x), rs::jit::compile_error);
  rs::array<float> y = rs::to_device(std::vector<float>(16, 1.f), dev);
  rs::jit::map(f1)(y);
  for (float v : y.to_host()) EXPECT_EQ(v, 2.f);
}

// A generator's count whose bytes pass PTRDIFF_MAX is refused before any work, as generate's is.
TEST_P(jit, a_generator_count_past_the_byte_count_is_refused) {
  auto p = rs::jit::uniform<float>(1) | rs::jit::sum();
  for (std::size_t n : {SIZE_MAX, std::size_t(1) << 62}) EXPECT_THROW(p.result<float>(n, dev), rs::invalid_argument);
}

// A stage's macros end with it; one it would change that came before it (the prelude's) is refused at
// its line, as it could not be restored for the stages after.
TEST_P(jit, a_stage_changing_a_macro_from_before_it_is_refused_and_its_own_end_with_it) {
  rs::array<float> x = rs::to_device(std::vector<float>{1.f, 2.f}, dev);
  try {
    rs::jit::map("float f(float v) { return v; }\n#undef RESIDENT_HD\n#define RESIDENT_HD")(x);
    ADD_FAILURE() << "compiled";
  } catch (const rs::jit::compile_error& e) {
    EXPECT_NE(e.log().find("stage 1 #undefs RESIDENT_HD, a macro defined before it"), std::string::npos) << e.log();
    EXPECT_TRUE(e.log().find("stage 1:2:") != std::string::npos || e.log().find("stage 1(2)") != std::string::npos)
        << e.log();
  }
  (rs::jit::map("#define K 3.0f\nfloat g(float v) { return v * K; }") |
   rs::jit::map("#define K 2.0f\nfloat h(float v) { return v + K; }") | rs::jit::map("#define sqrtf(v) v\nfloat i(float v) { return sqrtf(v); }") |
   rs::jit::map("float r(float v) { return sqrtf(v); }"))(x);
  const std::vector<float> got = x.to_host();
  EXPECT_NEAR(got[0], std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(got[1], std::sqrt(8.0), 1e-6);
}

TEST_P(jit, two_threads_compiling_one_new_stage_compile_it_once) {
  // A text no earlier run compiled: the constant is fresh.
  const auto c = rs::test::fresh_seed() % 1000000;
  const std::string text = "float k(float v) { return v + " + std::to_string(c) + ".0f; }";
  const auto before = rs::jit::stats().compiled;
  std::vector<float> out[2];
  std::thread t[2];
  for (int i = 0; i < 2; ++i)
    t[i] = std::thread([&, i] {
      rs::array<float> y = rs::to_device(std::vector<float>(1000, float(i)), dev);
      rs::jit::map(text)(y);
      out[i] = y.to_host();
    });
  for (auto& th : t) th.join();
  EXPECT_EQ(rs::jit::stats().compiled - before, 1u);
  for (int i = 0; i < 2; ++i)
    for (float v : out[i]) ASSERT_EQ(v, float(i) + float(c));
}

extern "C" float twice_plus_one(float v) { return 2.0f * v + 1.0f; }

extern "C" float bigger(float a, float b) { return a > b ? a : b; }

const char* bigger_cuda = "extern \"C\" __device__ float bigger(float a, float b) { return a > b ? a : b; }";

const char* twice_plus_one_cuda = "extern \"C\" __device__ float twice_plus_one(float v) { return 2.0f * v + 1.0f; }";

TEST_P(jit, an_external_stage_fuses_with_source_stages_in_one_kernel) {
  using E = rs::jit::element;
  std::string ltoir;  // on a GPU: LTO-IR for its architecture, as Numba makes it for Python stages
  if (dev.is_cuda()) {
    const auto p = rs::properties(dev);
    ltoir = rs::jit::detail::ltoir_of(twice_plus_one_cuda, p.cc_major, p.cc_minor);
  }
  auto ext = rs::jit::external("twice_plus_one", {E::f32}, E::f32, ltoir, reinterpret_cast<const void*>(&twice_plus_one));
  auto p = rs::jit::map(f1) | ext | rs::jit::map(f3);
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed = " + std::to_string(seed));
  const std::size_t n = 100003;
  auto h = rs::test::random_vector<float>(n, seed);
  rs::array<float> x = rs::to_device(h, dev);
  rs::array<float> y = rs::to_device(std::vector<float>(n, rs::test::poison<float>()), dev);
  rs::scoped_ledger l(dev);
  p(x, y);
  EXPECT_EQ(l.delta().kernels, 1u);
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) ref[i] = 0.5 * std::sin(2.0 * (1.5 * h[i] + 0.5) + 1.0);
  EXPECT_LT(rs::test::rel_error(y.to_host(), ref), 1e-6);
  // An external reduction operator folds every value, in the same one kernel.
  std::string op_ltoir;
  if (dev.is_cuda()) {
    const auto pr = rs::properties(dev);
    op_ltoir = rs::jit::detail::ltoir_of(bigger_cuda, pr.cc_major, pr.cc_minor);
  }
  auto biggest = rs::jit::external_reduce("bigger", E::f32, -1e30, op_ltoir, reinterpret_cast<const void*>(&bigger));
  float want = -1e30f;
  for (float v : h) want = std::max(want, 1.5f * v + 0.5f);
  rs::scoped_ledger l2(dev);
  EXPECT_EQ((rs::jit::map(f1) | biggest).result<float>(x), want);
  EXPECT_EQ(l2.delta().kernels, 1u);
  // A stage without the backend's code is refused by name before compiling.
  auto bare = rs::jit::external("twice_plus_one", {E::f32}, E::f32, {}, nullptr);
  EXPECT_THROW(bare(x, y), rs::invalid_argument);
  EXPECT_THROW(rs::jit::external("", {E::f32}, E::f32, {}, nullptr), rs::invalid_argument);
  EXPECT_THROW(rs::jit::external("g", {}, E::f32, {}, nullptr), rs::invalid_argument);
}

// Every element within tol of the FP64 reference (relative, or absolute near 0); a stale or unwritten
// element is far off, so a kernel that ran before its predecessor's results fails here.
template <class T>
void expect_each_near(const std::vector<T>& out, const std::vector<double>& ref, double tol, const char* what) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(double(out[i]) - ref[i]) <= tol * (1.0 + std::fabs(ref[i]))) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " elements off, the first at " << first
                     << " (" << (bad ? double(out[first]) : 0.0) << ", want " << (bad ? ref[first] : 0.0) << ")";
}

// Run-time kernels back to back on one stream, each reading what the one before wrote (or writing what
// it read), without a host synchronization between them: on GPUs with programmatic dependent launch
// each kernel is scheduled while its predecessor runs and must wait for its results. The same with
// compiled kernels (rs::program) before and after run-time ones.
TEST_P(jit, chained_calls_on_one_stream_read_their_predecessors_results) {
  const std::size_t n = std::size_t(1) << 22;
  const rs::device cpu = rs::device::cpu();
  auto A = rs::jit::map(f1), B = rs::jit::map(f2), C = rs::jit::map(f3);
  auto f1d = [](double v) { return 1.5 * v + 0.5; };
  auto f2d = [](double v) { return std::sqrt(v * v + 1.0); };
  auto f3d = [](double v) { return 0.5 * std::sin(v); };
  const rs::program twice_minus_one = rs::program{} | rs::op::affine(2, -1);
  const rs::program seed_program = rs::program{} | rs::op::affine(1.5, 0.5) | rs::op::square() | rs::op::add(1) |
                                   rs::op::sqrt() | rs::op::sin() | rs::op::mul(0.5);
  const std::vector<float> poison(n, rs::test::poison<float>());
  const double tol = 1e-5;
  for (int round = 0; round < 3; ++round) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("round " + std::to_string(round) + ", seed = " + std::to_string(seed));
    // The input from the run-time generator, its values those of rs::random (computed on the CPU).
    rs::array<float> want(n, cpu);
    rs::random::fill_uniform(want, seed, 0, -2.f, 3.f);
    const std::vector<float> h = want.to_host();
    rs::array<float> x = rs::to_device(poison, dev), y = rs::to_device(poison, dev), z = rs::to_device(poison, dev);
    std::vector<double> rx(n), ry(n), rz(n);

    // Run-time kernels only.
    rs::jit::uniform<float>(seed, 0, -2.f, 3.f)(x);  // x = u
    A(x, y);                                          // y = f1(x): reads the generator's output
    B(y, z);                                          // z = f2(y)
    C(z, x);                                          // x = f3(z): overwrites what A read
    A(x);                                             // x = f1(x), in place
    const double s1 = (B | widen() | rs::jit::sum()).result<double>(x);
    for (std::size_t i = 0; i < n; ++i) {
      ry[i] = f1d(h[i]);
      rz[i] = f2d(ry[i]);
      rx[i] = f1d(f3d(rz[i]));
    }
    expect_each_near(y.to_host(), ry, tol, "y = f1(u)");
    expect_each_near(z.to_host(), rz, tol, "z = f2(y)");
    const std::vector<float> hx = x.to_host();
    expect_each_near(hx, rx, tol, "x = f1(f3(z))");
    // The sum of f2 over the x the kernels left (checked above), its terms as B's map computes them
    // on dev (a reduction kernel may round a term once more): each >= 1, so one term missing shows.
    rs::array<float> w = rs::to_device(poison, dev);
    B(x, w);
    const auto [ref_s1, abs_s1] = rs::test::sum_and_abs(w.to_host());
    EXPECT_TRUE(rs::test::sum_matches(
        s1, ref_s1, rs::test::sum_tolerance<double>(n, abs_s1, rs::test::unit_roundoff<float>() * abs_s1), 1.0))
        << "sum of f2(x)";

    // Compiled, then run-time, then compiled, in both orders, reductions of both kinds last.
    x = rs::to_device(h, dev);
    y = rs::to_device(poison, dev);
    z = rs::to_device(poison, dev);
    rs::run(seed_program, x, y);     // compiled: y = seed(x)
    C(y, z);                         // run-time reads it: z = f3(y)
    rs::run(twice_minus_one, z, x);  // compiled reads that: x = 2z - 1, overwriting what seed read
    A(x, y);                         // run-time: y = f1(x), overwriting what C read
    const float s2 = rs::run_sum(twice_minus_one, y);  // compiled reduction of the run-time output
    B(y, z);                                           // run-time: z = f2(y)
    const double s3 = (C | widen() | rs::jit::sum()).result<double>(z);  // run-time reduction
    for (std::size_t i = 0; i < n; ++i) {
      const double seeded = seed_reference(h[i]);
      rx[i] = 2 * f3d(seeded) - 1;
      ry[i] = f1d(rx[i]);
      rz[i] = f2d(ry[i]);
    }
    expect_each_near(x.to_host(), rx, tol, "x = 2 f3(seed(u)) - 1");
    const std::vector<float> hy = y.to_host(), hz = z.to_host();
    expect_each_near(hy, ry, tol, "y = f1(x)");
    expect_each_near(hz, rz, tol, "z = f2(y)");
    // The sums of the values the kernels left (checked above): 2y - 1 as the host rounds it (2y is exact), f3's terms
    // as C's map computes them on dev. The compiled sum folds in float over 2^22 terms: its bound is the
    // worst case of such a fold (gamma_n), which a race that reads y before it is written (poison, -12345)
    // exceeds; the run-time sum folds in double and sees one term of f3 (>= 0.39) go missing.
    std::vector<float> t2(n);
    for (std::size_t i = 0; i < n; ++i) t2[i] = 2 * hy[i] - 1;
    const auto [ref_s2, abs_s2] = rs::test::sum_and_abs(t2);
    C(z, w);  // f3's terms as dev computes them
    const auto [ref_s3, abs_s3] = rs::test::sum_and_abs(w.to_host());
    EXPECT_NEAR(s2, ref_s2, rs::test::sum_tolerance<float>(n, abs_s2)) << "compiled sum of 2y - 1";
    EXPECT_TRUE(rs::test::sum_matches(
        s3, ref_s3, rs::test::sum_tolerance<double>(n, abs_s3, rs::test::unit_roundoff<float>() * abs_s3), 0.39))
        << "run-time sum of f3(z)";
  }
}

// clear_memory_cache empties the in-memory table: a new chain of the same source then loads from the
// disk cache (nothing compiles); before it, the table served it. stats() counts each.
TEST_P(jit, clearing_the_memory_cache_sends_a_new_chain_to_the_disk_cache) {
  const std::string src = "float thrice_plus_one(float v) { return 3.0f * v + 1.0f; }";
  rs::array<float> x = rs::to_device(std::vector<float>(1000, 1.f), dev);
  rs::jit::map(src)(x);  // compiled (the cache folder is this run's own)
  const rs::jit::cache_stats s0 = rs::jit::stats();
  rs::jit::map(src)(x);  // a new chain: the in-memory table has its kernel
  const rs::jit::cache_stats s1 = rs::jit::stats();
  EXPECT_EQ(s1.memory_hits - s0.memory_hits, 1u);
  EXPECT_EQ(s1.compiled, s0.compiled);
  EXPECT_EQ(s1.disk_loads, s0.disk_loads);
  rs::jit::clear_memory_cache();
  rs::jit::map(src)(x);  // the table is empty: the disk serves it
  const rs::jit::cache_stats s2 = rs::jit::stats();
  EXPECT_EQ(s2.disk_loads - s1.disk_loads, 1u);
  EXPECT_EQ(s2.compiled, s1.compiled) << "nothing compiles again";
  EXPECT_EQ(s2.memory_hits, s1.memory_hits);
  EXPECT_EQ(x.to_host(), std::vector<float>(1000, 40.f)) << "three runs of 3 v + 1 from 1";
}

RESIDENT_BACKENDS(jit);

// NVRTC needs no GPU: every kind of kernel the chains generate compiles for the GPUs the library
// targets, on any machine of a CUDA build.
TEST(jit_kernels, every_kind_of_chain_compiles_with_nvrtc) {
  if (!rs::cuda_compiled) GTEST_SKIP() << "this build has no CUDA backend (no NVRTC)";
  using E = rs::jit::element;
  const rs::device gpu = rs::device::cuda(0);
  // index32: a second entry indexing vectors in 32 bits (reductions over arrays of one element size,
  // maps whose arrays all have one);
  // slots: partials handed over in slots (built-in reductions of 4-byte values).
  struct kase {
    rs::jit::pipeline p;
    std::vector<E> in;
    E out;
    bool index32, slots;
  };
  const kase cases[] = {
      {seed_chain(), {E::f32}, E::f32, true, false},
      {rs::jit::map("double w(float a) { return a; }"), {E::f32}, E::f64, false, false},
      {rs::jit::pipeline(), {E::f32}, E::f32, true, false},  // the empty chain: a copy
      {seed_chain() | rs::jit::sum(), {E::f32}, E::f32, true, true},
      {rs::jit::map("double f(double a, int k) { return a * k; }") | rs::jit::max(), {E::f64, E::i32}, E::f64, false,
       false},
      {rs::jit::normal<float>(1) | rs::jit::map(f3), {}, E::f32, false, false},
      {rs::jit::uniform<double>(1) | rs::jit::reduce("double m(double a, double b) { return a < b ? a : b; }", 1.0),
       {}, E::f64, false, false},
      {rs::jit::sum(), {E::u64}, E::u64, true, false},
      {rs::jit::sum(), {E::u32}, E::u32, true, true},
      {rs::jit::map("int f(float a, int k) { return k; }") | rs::jit::min(), {E::f32, E::i32}, E::i32, true, true},
      {rs::jit::reduce("float m(float a, float b) { return a < b ? a : b; }", 1.0), {E::f32}, E::f32, true, false},
      {rs::jit::uniform<float>(1) | rs::jit::sum(), {}, E::f32, false, true},
  };
  for (int cc : {80, 90}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(c.p.name() + " for sm_" + std::to_string(cc));
      std::string image;
      const std::string text = c.p.kernel_source(c.in, c.out, gpu);
      // Programmatic dependent launch: the kernel waits for its predecessor first thing (sm_90 and later),
      // in its one body: rs_kernel's, or where there are two entries the body both call.
      const auto body = text.find(c.index32 ? "rs_body(const rs_args& a) {\n" : "rs_kernel(rs_args a) {\n");
      ASSERT_NE(body, std::string::npos) << text;
      EXPECT_EQ(text.find("rs_dependent_launch_prologue();", body), text.find('\n', body) + 3) << text;
      EXPECT_NE(text.find("griddepcontrol.wait;"), std::string::npos);
      EXPECT_EQ(text.find("rs_kernel_32(rs_args a)") != std::string::npos, c.index32) << text;
      EXPECT_EQ(text.find("rs_store_slot(") != std::string::npos, c.slots) << text;
      ASSERT_NO_THROW(image = rs::jit::detail::compile_cuda(text, cc / 10, cc % 10));
      EXPECT_GT(image.size(), 1000u);
    }
  }
  // An external stage's LTO-IR linked into the kernel by nvJitLink.
  auto ext = rs::jit::external("twice_plus_one", {E::f32}, E::f32, rs::jit::detail::ltoir_of(twice_plus_one_cuda, 9, 0),
                               nullptr);
  for (const auto& p : {rs::jit::map(f1) | ext | rs::jit::map(f3), ext | rs::jit::sum()}) {
    const std::string image = rs::jit::detail::link_cuda(p.kernel_source({E::f32}, E::f32, gpu), p.parts(), 9, 0);
    EXPECT_GT(image.size(), 1000u);
  }
  try {
    rs::jit::detail::compile_cuda(
        (rs::jit::map(f1) | rs::jit::map("float g(float v) {\n  return v + nope;\n}")).kernel_source({E::f32}, E::f32, gpu),
        9, 0);
    ADD_FAILURE() << "compiled";
  } catch (const rs::jit::compile_error& e) {
    EXPECT_NE(e.log().find("stage 2(2)"), std::string::npos) << e.log();
  }
}

}  // namespace
