// The three kinds of memory a kernel uses, on one job: the sum of every block of 256 floats
// (a block reduction; the host adds the block sums). The same tree of pairwise additions runs
//   1. in global memory: the block's values copied to a scratch array in device memory, halved there;
//   2. in shared memory: the block's values in the on-chip memory its threads share, halved there;
//   3. in registers first: each thread adds 16 values in a register, then the shared-memory tree.
// Phases separated by block-wide barriers (launch_phases) give the same code on the CPU backend.
#include <cmath>
#include <cstdio>

#include "guide.hpp"

namespace rs = resident;

constexpr unsigned block = 256;
constexpr unsigned per_thread = 16;  // values each thread adds in a register (variant 3)

// Variant 1: scratch[i] lives in device memory; the barrier between phases orders it within a block.
struct load_global {
  rs::array_view<float> x, scratch;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared) const {
    const std::size_t i = t.global_x();
    scratch[i] = i < x.size() ? x[i] : 0.f;
  }
};
struct halve_global {
  rs::array_view<float> scratch;
  unsigned half;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared) const {
    const std::size_t base = std::size_t(t.block.x) * block;
    if (t.thread.x < half) scratch[base + t.thread.x] += scratch[base + t.thread.x + half];
  }
};
struct write_global {
  rs::array_view<float> scratch, sums;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared) const {
    if (t.thread.x == 0) sums[t.block.x] = scratch[std::size_t(t.block.x) * block];
  }
};

// Variants 2 and 3: the tree in shared memory; `per` values per thread summed in a register first.
struct load_shared {
  rs::array_view<float> x;
  unsigned per;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    const std::size_t base = std::size_t(t.block.x) * block * per + t.thread.x;
    float acc = 0.f;
    for (unsigned k = 0; k < per; ++k) {  // neighbouring threads read neighbouring elements
      const std::size_t i = base + std::size_t(k) * block;
      if (i < x.size()) acc += x[i];
    }
    sh.as<float>()[t.thread.x] = acc;
  }
};
struct halve_shared {
  unsigned half;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    if (t.thread.x < half) sh.as<float>()[t.thread.x] += sh.as<float>()[t.thread.x + half];
  }
};
struct write_shared {
  rs::array_view<float> sums;
  RESIDENT_HD void operator()(rs::thread_index t, rs::block_shared sh) const {
    if (t.thread.x == 0) sums[t.block.x] = sh.as<float>()[0];
  }
};

int main() {
  try {
    const rs::device d = rs::default_device();
    const rs::stream_ref s = rs::default_stream(d);
    const std::size_t n = guide::elements(d, std::size_t(1) << 26, std::size_t(1) << 20);
    auto x = guide::random_array(n, d, guide::fresh_seed());
    double ref = 0;
    for (float v : x.to_host()) ref += v;

    const unsigned blocks = unsigned(n / block), blocks16 = unsigned(n / (block * per_thread));
    rs::array<float> scratch(n, d), sums(blocks, d), sums16(blocks16, d);
    auto total = [](const rs::array<float>& a) {
      double t = 0;
      for (float v : a.to_host()) t += v;
      return t;
    };
    guide::report r("memory_kinds", d);
    auto check = [&](const char* what, double got) {
      if (std::abs(got - ref) > 1e-4 * (std::abs(ref) + std::sqrt(double(n)))) {
        std::fprintf(stderr, "memory_kinds: %s summed to %.6f, FP64 says %.6f\n", what, got, ref);
        std::exit(1);
      }
    };
    const auto poison = rs::map([] RESIDENT_HD(float) { return std::nanf(""); });
    poison(sums);
    poison(sums16);
    const auto sv = scratch.view();
    const double global_ms = r.time(s, [&] {
      rs::launch_phases(s, {rs::dims(blocks), rs::dims(block)}, load_global{x.view(), sv}, halve_global{sv, 128},
                        halve_global{sv, 64}, halve_global{sv, 32}, halve_global{sv, 16}, halve_global{sv, 8},
                        halve_global{sv, 4}, halve_global{sv, 2}, halve_global{sv, 1}, write_global{sv, sums.view()});
    });
    check("global memory", total(sums));
    r.add("global memory tree", global_ms, "scratch array in device memory");
    poison(sums);

    auto shared_tree = [&](rs::array<float>& out, unsigned per, unsigned grid) {
      rs::launch_phases(s, {rs::dims(grid), rs::dims(block), block * sizeof(float)}, load_shared{x.view(), per},
                        halve_shared{128}, halve_shared{64}, halve_shared{32}, halve_shared{16}, halve_shared{8},
                        halve_shared{4}, halve_shared{2}, halve_shared{1}, write_shared{out.view()});
    };
    const double shared_ms = r.time(s, [&] { shared_tree(sums, 1, blocks); });
    check("shared memory", total(sums));
    r.add("shared memory tree", shared_ms, "one value per thread, tree on chip");
    const double reg_ms = r.time(s, [&] { shared_tree(sums16, per_thread, blocks16); });
    check("registers", total(sums16));
    r.add("registers, then shared", reg_ms, "16 values per thread in a register first");

    r.print("Summing " + std::to_string(n) + " floats in blocks, three kinds of memory",
            "each halving step in global memory is a round trip to device memory; in shared memory it stays "
            "on chip; and a register holds a running sum with no traffic at all, so fewer, busier threads "
            "leave the tree only 1/16 of the work.",
            "on the CPU backend shared memory is an ordinary buffer per block and every level of cache serves "
            "both trees alike; the register version runs one phase of sixteen additions instead of sixteen phases.");
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "memory_kinds: %s\n", e.what());
    return 1;
  }
}
