// Run-time chains and programs streamed over host data (resident/jit/out_of_core.hpp): the untyped chunk
// loop of out_of_core, with each chunk's kernel the chain's own, on the loop's kernel stream.
#include "resident/jit/out_of_core.hpp"

#include <cmath>
#include <functional>
#include <cstring>
#include <limits>
#include <type_traits>
#include <string>

#include "backend/runtime.hpp"
#include "jit/backend.hpp"
#include "resident/memory/array.hpp"
#include "resident/out_of_core/detail/chunk_loop.hpp"

namespace resident::jit {
namespace detail {

// The chain's own calls on one chunk's operands (pipeline's friend).
struct streamed {
  static void run(const pipeline& p, const inputs& in, const operand& out) { p.run(in, out); }
  static void reduce(const pipeline& p, const inputs& in, element r, void* result, result_memory where) {
    p.reduce_into(in, 0, in.arrays[0].stream.device(), r, result, where);
  }
};

}  // namespace detail

namespace {

using kind = detail::part::kind;

// The common checks: 1 to 8 host inputs of one size (and the output's); returns the size.
std::size_t checked_size(const std::vector<host_operand>& in, const host_operand* out, const char* what) {
  RESIDENT_EXPECTS(!in.empty() && in.size() <= std::size_t(detail::max_inputs),
                   std::string(what) + ": give 1 to 8 host inputs, not " + std::to_string(in.size()));
  const std::size_t n = in[0].size;
  for (std::size_t i = 0; i < in.size(); ++i)
    RESIDENT_EXPECTS(in[i].size == n, std::string(what) + ": host input " + std::to_string(i) + " holds " +
                                          std::to_string(in[i].size) + " elements, input 0 " + std::to_string(n),
                     shape_mismatch);
  if (out)
    RESIDENT_EXPECTS(out->size == n, std::string(what) + ": the host output holds " + std::to_string(out->size) +
                                         " elements, the input " + std::to_string(n), shape_mismatch);
  return n;
}

void check_chain(const pipeline& chain, bool reduces, const char* what) {
  const auto& parts = chain.parts();
  if (!parts.empty() && (parts.front().what == kind::uniform || parts.front().what == kind::normal))
    RESIDENT_FAIL(std::string(what) + ": " + chain.name() + " starts with a generator, which reads no host data; "
                  "run it on a device array instead");
  const kind last = parts.empty() ? kind::map : parts.back().what;
  const bool red = last == kind::sum || last == kind::min || last == kind::max || last == kind::reduce;
  if (reduces && !red)
    RESIDENT_FAIL(std::string(what) + ": " + chain.name() + " has no reduction; end it with jit::sum(), min() or "
                  "max(), or stream it into a host output");
  if (!reduces && red)
    RESIDENT_FAIL(std::string(what) + ": " + chain.name() + " ends in a reduction, which returns a value: call "
                  "jit::out_of_core_reduce");
  if (last == kind::reduce)
    RESIDENT_FAIL(std::string(what) + ": " + chain.name() + " ends in reduce(op, init), whose init would join each "
                  "chunk's partial; stream it with sum, min or max, or stream the maps into a host array and reduce that");
}

std::vector<resident::detail::host_side> sides_of(const std::vector<host_operand>& in) {
  std::vector<resident::detail::host_side> s;
  for (const host_operand& h : in) s.push_back({h.data, detail::size_of(h.type)});
  return s;
}

inputs chunk_inputs(const std::vector<host_operand>& in, const resident::detail::chunk_view& v, stream_ref s) {
  inputs x;
  for (std::size_t i = 0; i < in.size(); ++i) x.arrays.push_back({(*v.inputs)[i], v.count, in[i].type, s});
  return x;
}

// The partials of a sum, min or max folded in T, NaN propagating (the loop's order: chunk order); float
// partials in double (a float partial is exact there), rounded once at the end.
template <class T>
void combine(kind k, const unsigned char* partials, std::size_t chunks, void* result) {
  using A = std::conditional_t<std::is_same_v<T, float>, double, T>;
  A acc{};
  if (k == kind::min) acc = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  if (k == kind::max) acc = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  for (std::size_t c = 0; c < chunks; ++c) {
    T v;
    std::memcpy(&v, partials + c * sizeof(T), sizeof(T));
    if (k == kind::sum) {
      if constexpr (std::is_integral_v<A>)  // wraps modulo 2^bits, as the chunks' own sums do
        acc = A(std::make_unsigned_t<A>(acc) + std::make_unsigned_t<A>(v));
      else
        acc = A(acc + A(v));
    }
    else if (k == kind::min) acc = (A(v) < acc || v != v) ? A(v) : acc;  // a NaN accumulator stays
    else acc = (A(v) > acc || v != v) ? A(v) : acc;
  }
  const T r = T(acc);
  std::memcpy(result, &r, sizeof(T));
}

// Progress once a chunk's results are on their way to the host (counted in the ledger), so that a
// progress callback that throws leaves the counts and the host arrays agreeing.
std::function<void(std::size_t)> landed(const out_of_core_progress& progress, std::size_t n) {
  if (!progress) return {};
  return [&progress, n, done = std::size_t(0)](std::size_t count) mutable {
    done += count;
    progress(done, n);
  };
}

}  // namespace

out_of_core_summary out_of_core(const pipeline& chain, const std::vector<host_operand>& in, const host_operand& out,
                      const out_of_core_options& o, const out_of_core_progress& progress) {
  check_chain(chain, false, "jit::out_of_core");
  const std::size_t n = checked_size(in, &out, "jit::out_of_core");
  std::vector<element> types;
  for (const host_operand& h : in) types.push_back(h.type);
  (void)chain.kernel_source(types, out.type, o.target);  // the types, named before anything is allocated
  const bool in_place = in.size() == 1 && in[0].type == out.type;
  resident::detail::chunk_loop loop(n, sides_of(in), {out.data, detail::size_of(out.type)}, in_place, 0, o);
  const stream_ref s = loop.kernel_stream();
  {
    // The kernel compiled or loaded on no elements (a map launches nothing), before any data moves.
    inputs none;
    for (element t : types) none.arrays.push_back({nullptr, 0, t, s});
    detail::streamed::run(chain, none, {nullptr, 0, out.type, s});
  }
  loop.run(
      [&](const resident::detail::chunk_view& v) {
        detail::streamed::run(chain, chunk_inputs(in, v, s), {v.output, v.count, out.type, s});
      },
      {}, landed(progress, n));
  return loop.summary();
}

out_of_core_summary out_of_core_reduce(const pipeline& chain, const std::vector<host_operand>& in, element r, void* result,
                             const out_of_core_options& o, const out_of_core_progress& progress) {
  check_chain(chain, true, "jit::out_of_core_reduce");
  RESIDENT_EXPECTS(result, "jit::out_of_core_reduce: give memory for the result");
  const std::size_t n = checked_size(in, nullptr, "jit::out_of_core_reduce");
  std::vector<element> types;
  for (const host_operand& h : in) types.push_back(h.type);
  (void)chain.kernel_source(types, r, o.target);
  // A float32 sum's chunks leave their double accumulators (no rounding a chunk), rounded once at the end.
  const kind k = chain.parts().back().what;
  const element partial = k == kind::sum && r == element::f32 ? element::f64 : r;
  const std::size_t rb = detail::size_of(partial);
  resident::detail::chunk_loop loop(n, sides_of(in), {}, false, rb, o);
  const stream_ref s = loop.kernel_stream();
  // One result slot per chunk in flight, in the pool on the loop's kernel stream (the host's memory on
  // the CPU, where the loop copies it out after each chunk).
  std::vector<array<unsigned char>> slots;
  std::vector<void*> results;
  if (n > 0)
    for (int k = 0; k < loop.depth(); ++k) {
      slots.emplace_back(16, s);
      results.push_back(slots.back().data());
    }
  const auto where =
      resident::detail::backend_of(s.device()).host_memory() ? detail::result_memory::host : detail::result_memory::device;
  loop.run(
      [&](const resident::detail::chunk_view& v) {
        detail::streamed::reduce(chain, chunk_inputs(in, v, s), partial, slots[std::size_t(v.slot)].data(), where);
      },
      results, landed(progress, n));
  const auto* partials = static_cast<const unsigned char*>(loop.host_results());
  const std::size_t chunks = loop.summary().chunks;
  switch (r) {
    case element::f32:
      if (partial == element::f64) {
        double total = 0;
        combine<double>(k, partials, chunks, &total);
        const float rounded = float(total);
        std::memcpy(result, &rounded, sizeof rounded);
      } else {
        combine<float>(k, partials, chunks, result);
      }
      break;
    case element::f64: combine<double>(k, partials, chunks, result); break;
    case element::i32: combine<std::int32_t>(k, partials, chunks, result); break;
    case element::u32: combine<std::uint32_t>(k, partials, chunks, result); break;
    case element::i64: combine<std::int64_t>(k, partials, chunks, result); break;
    case element::u64: combine<std::uint64_t>(k, partials, chunks, result); break;
  }
  return loop.summary();
}

out_of_core_summary out_of_core(const program& p, const host_operand& in, const host_operand& out, const out_of_core_options& o,
                      const out_of_core_progress& progress) {
  const std::size_t n = checked_size({in}, &out, "jit::out_of_core(program)");
  RESIDENT_EXPECTS(in.type == out.type && (in.type == element::f32 || in.type == element::f64),
                   std::string("jit::out_of_core(program): programs run on float or double arrays of one type; got ") +
                       type_name(in.type) + " into " + type_name(out.type));
  const std::size_t eb = detail::size_of(in.type);
  resident::detail::chunk_loop loop(n, {{in.data, eb}}, {out.data, eb}, true, 0, o);
  const stream_ref s = loop.kernel_stream();
  loop.run(
      [&](const resident::detail::chunk_view& v) {
        if (in.type == element::f32)
          resident::run(p, array_ref<float>(static_cast<float*>((*v.inputs)[0]), v.count, s),
              array_ref<float>(static_cast<float*>(v.output), v.count, s));
        else
          resident::run(p, array_ref<double>(static_cast<double*>((*v.inputs)[0]), v.count, s),
              array_ref<double>(static_cast<double*>(v.output), v.count, s));
      },
      {}, landed(progress, n));
  return loop.summary();
}

}  // namespace resident::jit
