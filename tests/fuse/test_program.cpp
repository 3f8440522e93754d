// Run-time programs of built-in operations: one fused kernel from a file the host compiler builds
// (this one, on purpose), checked against FP64 on both backends; names round-trip; bad input is typed.
#include <cmath>

#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using programs = backend;

rs::program seed_program() {
  return rs::program{} | rs::op::affine(1.5, 0.5) | rs::op::square() | rs::op::add(1) | rs::op::sqrt() |
         rs::op::sin() | rs::op::mul(0.5);
}
double seed_reference(double v) { return 0.5 * std::sin(std::sqrt((1.5 * v + 0.5) * (1.5 * v + 0.5) + 1.0)); }

TEST_P(programs, the_seed_pipeline_as_one_kernel_matches_fp64) {
  for (std::size_t n : {std::size_t(1), std::size_t(1000003)}) {
    const auto seed = rs::test::fresh_seed();
    SCOPED_TRACE("n = " + std::to_string(n) + ", seed = " + std::to_string(seed));
    auto h = rs::test::random_vector<float>(n, seed);
    std::vector<double> ref(n);
    double ref_sum = 0;
    for (std::size_t i = 0; i < n; ++i) ref_sum += ref[i] = seed_reference(h[i]);
    rs::array<float> x = rs::to_device(h, dev);
    rs::array<float> y = rs::to_device(std::vector<float>(n, rs::test::poison<float>()), dev);
    rs::scoped_ledger l(dev);
    rs::run(seed_program(), x, y);
    EXPECT_EQ(l.delta().kernels, 1u) << "one kernel per call";
    const std::vector<float> terms = y.to_host();
    EXPECT_LT(rs::test::rel_error(terms, ref), 1e-6);
    // The float sum adds the terms y holds (>= 0.39 each; its kernel may round a term once more): over
    // 2048 terms a float fold's bound still sees one go missing. The whole length folds in double, on
    // the input in double, against FP64 (the double program's terms within a few ulps of it).
    const std::size_t m = std::min<std::size_t>(n, 2048);
    const auto [head_sum, head_abs] = rs::test::sum_and_abs(std::vector<float>(terms.begin(), terms.begin() + std::ptrdiff_t(m)));
    const float s = rs::run_sum(seed_program(), x.slice(0, m));
    EXPECT_TRUE(rs::test::sum_matches(
        s, head_sum, rs::test::sum_tolerance<float>(m, head_abs, rs::test::unit_roundoff<float>() * head_abs), 0.39));
    const rs::array<double> xd = rs::to_device(std::vector<double>(h.begin(), h.end()), dev);
    const double abs_sum = ref_sum;  // every term positive
    EXPECT_TRUE(rs::test::sum_matches(
        rs::run_sum(seed_program(), xd), ref_sum,
        rs::test::sum_tolerance<double>(n, abs_sum, 16 * rs::test::unit_roundoff<double>() * abs_sum), 0.39));
    rs::run(seed_program(), x);  // in place
    EXPECT_LT(rs::test::rel_error(x.to_host(), ref), 1e-6);
  }
}

// A float program's sum is held to the fused reductions' bound at any length: lanes kept in float
// drifted by 0.25% over 2^24 + 5 values of 0.1 (each lane's running total past 2^17).
TEST_P(programs, a_float_sum_keeps_the_fused_reductions_bound_at_any_length) {
  const std::size_t n = (std::size_t(1) << 24) + 5;
  const rs::array<float> x = rs::to_device(std::vector<float>(n, 0.1f), dev);
  const rs::program p = rs::program{} | rs::op::add(0.0) | rs::op::mul(1.0);
  const double want = double(n) * double(0.1f);  // exact: every partial total fits a double
  const float got = rs::run_sum(p, x);
  EXPECT_LE(std::fabs(double(got) - want), 40 * rs::test::unit_roundoff<float>() * want) << got;
  if (dev == rs::device::cpu()) {
    EXPECT_EQ(got, float(want)) << "the CPU adds in double, then rounds once";
  }
}

TEST_P(programs, every_operation_in_double_matches_the_library_math) {
  const auto seed = rs::test::fresh_seed();
  SCOPED_TRACE("seed = " + std::to_string(seed));
  auto h = rs::test::random_vector<double>(4099, seed, 0.25, 2.0);
  struct c {
    rs::op o;
    double (*f)(double, double, double);
  };
  const c cases[] = {
      {rs::op::add(2.5), [](double v, double a, double) { return v + a; }},
      {rs::op::mul(-3), [](double v, double a, double) { return v * a; }},
      {rs::op::affine(2, -1), [](double v, double a, double b) { return a * v + b; }},
      {rs::op::square(), [](double v, double, double) { return v * v; }},
      {rs::op::sqrt(), [](double v, double, double) { return std::sqrt(v); }},
      {rs::op::rsqrt(), [](double v, double, double) { return 1 / std::sqrt(v); }},
      {rs::op::exp(), [](double v, double, double) { return std::exp(v); }},
      {rs::op::log(), [](double v, double, double) { return std::log(v); }},
      {rs::op::sin(), [](double v, double, double) { return std::sin(v); }},
      {rs::op::cos(), [](double v, double, double) { return std::cos(v); }},
      {rs::op::tanh(), [](double v, double, double) { return std::tanh(v); }},
      {rs::op::abs(), [](double v, double, double) { return std::fabs(v - 1); }},
      {rs::op::neg(), [](double v, double, double) { return -v; }},
      {rs::op::recip(), [](double v, double, double) { return 1 / v; }},
      {rs::op::minimum(1), [](double v, double a, double) { return std::min(v, a); }},
      {rs::op::maximum(1), [](double v, double a, double) { return std::max(v, a); }},
      {rs::op::pow(1.5), [](double v, double a, double) { return std::pow(v, a); }},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.o.name());
    rs::program p = k.o.what == rs::op::code::abs ? rs::program{} | rs::op::add(-1) | k.o : rs::program{} | k.o;
    rs::array<double> x = rs::to_device(h, dev), y(h.size(), dev);
    rs::run(p, x, y);
    std::vector<double> ref(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) ref[i] = k.f(h[i], k.o.a, k.o.b);
    EXPECT_LT(rs::test::rel_error(y.to_host(), ref), 1e-14);
  }
}

TEST_P(programs, bad_input_is_typed) {
  rs::program p;
  for (std::size_t i = 0; i < rs::program::max_ops; ++i) p = p | rs::op::neg();
  EXPECT_THROW(p | rs::op::neg(), rs::invalid_argument);
  const rs::op unknown{static_cast<rs::op::code>(200), 0, 0};
  EXPECT_THROW(rs::program{} | unknown, rs::invalid_argument);
  rs::array<float> x(10, dev), y(11, dev);
  EXPECT_THROW(rs::run(rs::program{}, x, y), rs::shape_mismatch);
  rs::array<float> gone(3, dev), taker = std::move(gone);
  EXPECT_THROW(rs::run(rs::program{}, gone), rs::invalid_argument);
  if (dev.is_cuda()) {
    rs::array<float> z(10, rs::device::cpu());
    EXPECT_THROW(rs::run(rs::program{}, x, z), rs::device_mismatch);
  }
}

// pow(v, 2) is v * v, as a compiled program's (its constant exponent 2 folds there): the interpreter's
// vector pow gave values an ulp away on some inputs.
TEST_P(programs, pow_of_two_is_the_square) {
  const auto h = rs::test::random_vector<float>(100003, rs::test::fresh_seed(), -1e3, 1e3);
  auto x = rs::to_device(h, dev);
  rs::run(rs::program{} | rs::op::pow(2), x, x);
  const auto got = x.to_host();
  for (std::size_t i = 0; i < h.size(); ++i) ASSERT_EQ(got[i], h[i] * h[i]) << i << " of " << h[i];
}

TEST_P(programs, empty_arrays_run_nothing) {
  rs::array<double> x(0, dev), y(0, dev);
  rs::scoped_ledger l(dev);
  rs::run(seed_program(), x, y);
  rs::run(seed_program(), y);
  EXPECT_EQ(rs::run_sum(seed_program(), x), 0.0);
  EXPECT_EQ(l.delta().h2d_bytes + l.delta().d2h_bytes, 0u);
}

TEST(program_names, round_trip_and_parse_errors) {
  const rs::program p = seed_program() | rs::op::pow(0.25) | rs::op::maximum(-1e300);
  rs::program q;
  std::string name = p.name(), part;
  for (std::size_t at = 0; at != std::string::npos;) {
    const auto bar = name.find(" | ", at);
    part = name.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
    q = q | rs::op::parse(part);
    at = bar == std::string::npos ? bar : bar + 3;
  }
  EXPECT_EQ(q.name(), p.name());
  for (std::size_t i = 0; i < p.ops().size(); ++i) {
    EXPECT_EQ(q.ops()[i].what, p.ops()[i].what);
    EXPECT_EQ(q.ops()[i].a, p.ops()[i].a);
    EXPECT_EQ(q.ops()[i].b, p.ops()[i].b);
  }
  EXPECT_EQ(rs::program{}.name(), "identity");
  for (const char* bad : {"", "sqrtt", "sqrt(1)", "add", "add()", "add(x)", "affine(1)", "affine(1, 2) ", "add(1"})
    EXPECT_THROW(rs::op::parse(bad), rs::invalid_argument) << bad;
  // The text's end is its size: what follows a NUL is not left unread, and the message shows it.
  for (const std::string& bad : {std::string("add(1\0junk)", 11), std::string("affine(2, 3\0 x)", 16)}) {
    try {
      rs::op::parse(bad);
      ADD_FAILURE() << "accepted a NUL";
    } catch (const rs::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("\\x00"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the operations are"), std::string::npos) << e.what();
    }
  }
  // As strtod read them: blanks and a '+' before a number, infinities, below the range; past the range
  // refused (strtod's silent inf), as op::add(10**400) is from Python.
  EXPECT_EQ(rs::op::parse("affine( +1.5 , -2)").b, -2.0);
  EXPECT_EQ(rs::op::parse("add(inf)").a, HUGE_VAL);
  EXPECT_EQ(rs::op::parse("add(-inf)").a, -HUGE_VAL);
  for (const char* past : {"add(-1e999)", "affine(1, 1e400)"})
    rs::test::expect_invalid([&] { (void)rs::op::parse(past); }, "is beyond the range of a double");
  EXPECT_EQ(rs::op::parse("add(-1e-999)").a, 0.0);
  EXPECT_TRUE(std::signbit(rs::op::parse("add(-1e-999)").a));
  EXPECT_THROW(rs::op::parse("add(+-1)"), rs::invalid_argument);
  EXPECT_THROW(rs::op::parse("affine(1,5, 0,5)"), rs::invalid_argument);  // a comma decimal is two numbers
}

RESIDENT_BACKENDS(programs);

}  // namespace
