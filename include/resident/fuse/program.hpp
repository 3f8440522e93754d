#pragma once
/// @file program.hpp
/// Element-wise chains chosen at run time: a `program` of built-in operations (read from a
/// configuration, built by the Python package, composed with |) runs as ONE fused kernel, like a
/// compile-time pipeline, from code compiled by any compiler: the kernels are instantiated inside the
/// library. Each element is read once, the operations applied in registers, the result written once.
///
///   auto p = rs::program{} | rs::op::affine(1.5, 0.5) | rs::op::square() | rs::op::add(1) |
///            rs::op::sqrt() | rs::op::sin() | rs::op::mul(0.5);  // the seed's three functions
///   rs::run(p, x, y);                  // y[i] = p(x[i]), one kernel on y's stream
///   float s = rs::run_sum(p, x);       // the sum of p(x[i]), one pass, synchronizes

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "resident/memory/array.hpp"

namespace resident {

/// One built-in element-wise operation; `a` and `b` are its constants (in the array's precision).
struct op {
  /// What the operation computes from v.
  enum class code : std::uint8_t {
    add,     ///< v + a
    mul,     ///< v * a
    affine,  ///< a * v + b
    square,  ///< v * v
    sqrt,    ///< sqrt(v)
    rsqrt,   ///< 1 / sqrt(v)
    exp,     ///< e^v
    log,     ///< ln(v)
    sin,     ///< sin(v)
    cos,     ///< cos(v)
    tanh,    ///< tanh(v)
    abs,     ///< |v|
    neg,     ///< -v
    recip,   ///< 1 / v
    minimum, ///< min(v, a)
    maximum, ///< max(v, a)
    pow,     ///< v^a
  };
  code what = code::add;  ///< the operation
  double a = 0;           ///< its first constant
  double b = 0;           ///< its second constant

  /// v + c
  static op add(double c) { return {code::add, c, 0}; }
  /// v * c
  static op mul(double c) { return {code::mul, c, 0}; }
  /// a * v + b
  static op affine(double a, double b) { return {code::affine, a, b}; }
  /// v * v
  static op square() { return {code::square}; }
  /// sqrt(v)
  static op sqrt() { return {code::sqrt}; }
  /// 1 / sqrt(v)
  static op rsqrt() { return {code::rsqrt}; }
  /// e^v
  static op exp() { return {code::exp}; }
  /// ln(v)
  static op log() { return {code::log}; }
  /// sin(v)
  static op sin() { return {code::sin}; }
  /// cos(v)
  static op cos() { return {code::cos}; }
  /// tanh(v)
  static op tanh() { return {code::tanh}; }
  /// |v|
  static op abs() { return {code::abs}; }
  /// -v
  static op neg() { return {code::neg}; }
  /// 1 / v
  static op recip() { return {code::recip}; }
  /// min(v, c)
  static op minimum(double c) { return {code::minimum, c, 0}; }
  /// max(v, c)
  static op maximum(double c) { return {code::maximum, c, 0}; }
  /// v^c
  static op pow(double c) { return {code::pow, c, 0}; }

  /// "affine(1.5, 0.5)", for messages. @throws invalid_argument for a code outside the enumeration.
  std::string name() const;
  /// Parses a name as name() prints it ("sqrt", "add(1)", "affine(1.5, 0.5)").
  /// @throws invalid_argument naming the operations and their constants.
  static op parse(const std::string& text);
};

/// A chain of operations applied in order to each element. Up to max_ops operations.
class program {
 public:
  /// The most operations one program holds (they travel to the kernel as its parameters).
  static constexpr std::size_t max_ops = 16;

  /// The empty program (the identity).
  program() = default;
  /// The operations in order. @throws invalid_argument when there are more than max_ops.
  explicit program(std::vector<op> ops);
  /// The operations in order.
  const std::vector<op>& ops() const noexcept { return ops_; }
  /// "affine(1.5, 0.5) | sqrt | ...", or "identity".
  std::string name() const;

  /// This program followed by o. @throws invalid_argument past max_ops, or for an unknown code.
  friend program operator|(program p, op o);
  /// This program followed by q.
  friend program operator|(program p, const program& q);

 private:
  std::vector<op> ops_;
};

/// y[i] = p(x[i]) for float or double arrays of one size on one device, as ONE kernel (one loop on
/// the CPU) on y's stream, after x's queued work. x and y may be the same memory (in place).
/// Instantiated in the library for float and double.
/// @throws shape_mismatch, device_mismatch.
template <class T>
void run(const program& p, array_ref<T> x, array_ref<T> y);

/// The sum of p(x[i]) as x's type, in one pass (one kernel), returned to the host: float values added
/// as the fused reductions add them (in double on the CPU; docs/python.md gives the bounds). Synchronizes.
/// Instantiated in the library for float and double.
template <class T>
T run_sum(const program& p, array_ref<T> x);

namespace detail {
template <array_like A>
array_ref<typename std::remove_cvref_t<A>::value_type> ref_of(const A& a) {
  a.check_live();
  return {a.data(), a.size(), a.stream()};
}
}  // namespace detail

/// run() on arrays, slices or anything array-like. @throws as run; invalid_argument on a moved-from array.
template <array_like A, array_like B>
void run(const program& p, const A& x, B&& y) {
  run(p, detail::ref_of(x), detail::ref_of(y));
}
/// In place: x[i] = p(x[i]).
template <array_like A>
void run(const program& p, A&& x) {
  auto r = detail::ref_of(x);
  run(p, r, r);
}
/// run_sum() on arrays, slices or anything array-like.
template <array_like A>
auto run_sum(const program& p, const A& x) {
  return run_sum(p, detail::ref_of(x));
}

}  // namespace resident
