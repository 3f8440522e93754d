// The CUDA flavor of a run-time chain's kernel text (generate.cpp writes the rest): vector loads and
// stores, the reduction's strided loop, the block folds, the kernel and its entries.
#include <string>

#include "jit/backend.hpp"
#include "jit/kernel_text.hpp"

namespace resident::jit::detail {
namespace {

// A reduction's vectors: rs_reduce_vectors folds U vectors j0, j0 + step, ... (those below nv when
// Checked) into one accumulator per lane (independent chains of the operator), every load issued
// before the first use and read through the read-only path (nothing a reduction reads is written while
// it runs). rs_reduce_all strides the grid over the nv vectors, U a thread a trip: the trips whose U
// vectors all lie below nv unchecked, the last one checked. I: the indices' type, the entry's: 32 bits
// in rs_kernel_32 (launched where every index a thread forms is below 2^32), whose loop then fits 32
// registers a thread (full occupancy in blocks of 256), 64 bits in rs_kernel.
std::string cuda_reduce_vectors(const chain& c, const loop_text& t, const std::string& Vn) {
  std::string vload, vcall, decl;
  for (std::size_t k = 0; k < c.nin; ++k) {
    const std::string T = type_name(c.sig.in[k]), ks = std::to_string(k);
    decl += "  rs_vec<" + T + "> r" + ks + "[U];\n";
    vload += "      r" + ks + "[u] = rs_load_nc<" + T + ">(in" + ks + " + (unsigned long long)j * " + Vn + ");\n";
    vcall += (k ? ", " : "") + std::string("r") + ks + "[u].v[l]";
  }
  return "template <class T> RS_FN rs_vec<T> rs_load_nc(const T* p) {\n"
         "  union { uint4 w; rs_vec<T> v; } u;\n  u.w = __ldg((const uint4*)p);\n  return u.v;\n}\n"
         "template <int U, bool Checked, class I>\n"
         "RS_FN void rs_reduce_vectors(const rs_args& a, I j0, I step, I nv, rs_maybe* acc) {\n" + t.loads + decl +
         "#pragma unroll\n"
         "  for (int u = 0; u < U; ++u) {\n"
         "    const I j = j0 + I(u) * step;\n"
         "    if (!Checked || j < nv) {\n" + vload + "    }\n  }\n"
         + (c.wide ? "  rs_value part = rs_value(-0.0);\n" : "") +
         "#pragma unroll\n"
         "  for (int u = 0; u < U; ++u) {\n"
         "    const I j = j0 + I(u) * step;\n"
         "    if (!Checked || j < nv) {\n" +
         "#pragma unroll\n      for (int l = 0; l < " + Vn + "; ++l) " +
         (c.wide ? "part = part + rs_chain(a, " + vcall + ");\n" : "rs_fold(acc[l], rs_chain(a, " + vcall + "));\n") +
         "    }\n  }\n" +
         // A float32 sum: the trip's few values in float32, in order, then one conversion into the
         // double accumulator (adding them pairwise took 40 registers, not 32, and ran 5% slower at
         // 2^28 on an H200).
         (c.wide ? "  rs_fold(acc[0], rs_acc(part));\n" : "") +
         "}\n"
         "template <class I>\n"
         "RS_FN void rs_reduce_all(const rs_args& a, unsigned long long nv_, rs_maybe* acc) {\n"
         "  const I tid = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);\n"
         "  const I stride = I(gridDim.x) * I(blockDim.x), nv = I(nv_);\n"
         "  const I step = stride * RS_UNROLL, reach = stride * (RS_UNROLL - 1);\n"
         "  I j = tid;\n"
         "  for (; j + reach < nv; j += step) rs_reduce_vectors<RS_UNROLL, false, I>(a, j, stride, nv, acc);\n"
         "  if (j < nv) rs_reduce_vectors<RS_UNROLL, true, I>(a, j, stride, nv, acc);\n"
         "}\n";
}

// The 16-byte vector type and its store; with vector loads (vn values a vector), rs_vectors: U
// vectors j0, j0 + step, ... (those below nv), all loads issued before the first use.
std::string cuda_vectors(const chain& c, const loop_text& t, const std::string& Vn, bool vector_loads) {
  std::string s = "template <class T> struct __align__(16) rs_vec { T v[" + Vn + "]; };\n"
       // One 16-byte store (nvcc splits a store of the struct into one per element).
       "template <class T> RS_FN void rs_store(rs_vec<T>* p, const rs_vec<T>& o) {\n"
       "  union { rs_vec<T> v; unsigned w[4]; } u;\n  u.v = o;\n"
       "  asm volatile(\"st.global.v4.b32 [%0], {%1, %2, %3, %4};\" :: \"l\"(p), \"r\"(u.w[0]), \"r\"(u.w[1]), "
       "\"r\"(u.w[2]), \"r\"(u.w[3]) : \"memory\");\n}\n";
  if (!vector_loads) return s;
  if (c.red) return s + cuda_reduce_vectors(c, t, Vn);
  std::string vload, vcall, decl;
  for (std::size_t k = 0; k < c.nin; ++k) {
    const std::string T = type_name(c.sig.in[k]), ks = std::to_string(k);
    decl += "  rs_vec<" + T + "> r" + ks + "[U];\n";
    vload += "      r" + ks + "[u] = ((const rs_vec<" + T + ">*)in" + ks + ")[j];\n";
    vcall += (k ? ", " : "") + std::string("r") + ks + "[u].v[l]";
  }
  s += "template <int U, class I>\nRS_FN void rs_vectors(const rs_args& a, I j0, I step, I nv) {\n" + t.loads + decl +
       "#pragma unroll\n"
       "  for (int u = 0; u < U; ++u) {\n"
       "    const I j = j0 + u * step;\n"
       "    if (j < nv) {\n" + vload + "    }\n  }\n"
       "#pragma unroll\n"
       "  for (int u = 0; u < U; ++u) {\n"
       "    const I j = j0 + u * step;\n"
       "    if (j < nv) {\n";
  s += "      rs_vec<" + c.O + "> o;\n"
         "#pragma unroll\n      for (int l = 0; l < " + Vn + "; ++l) o.v[l] = rs_chain(a, " + vcall + ");\n"
         "      rs_store((rs_vec<" + c.O + ">*)out + j, o);\n";
  s += "    }\n  }\n}\n";
  return s;
}

// The arrays' elements through the chain: the vector path (when every array's elements are one size),
// then element by element.
std::string cuda_array_loop(const chain& c, const loop_text& t, const std::string& Vn, bool same) {
  std::string s = "  unsigned long long done = 0;\n";
  if (same) {
    s += "  const unsigned long long nv = n / " + Vn + ";\n";
    if (!c.red)
      // Maps: tiles of RS_TILE * blockDim.x vectors, one per block of a flat grid, each thread
      // taking RS_TILE of them blockDim.x apart (coalesced loads). Only
      // this vector path: a striding one beside it (RS_UNROLL vectors in flight) would raise the
      // whole kernel's register count and cut its occupancy below the compiled map's.
      // The grid has a block per tile (run_cuda): no loop, no test beyond rs_vectors' own, and the
      // scalar tail is the last block's: a map is issue-bound enough that a thread's fixed
      // instructions show.
      // I: the entry's index type (32 bits in rs_kernel_32, launched where every vector index fits:
      // fewer instructions a thread, which shows at the GPU's power cap).
      s += "  if (a.vec) {\n"
           "    const I tile = (I)blockDim.x * RS_TILE;\n"
           "    rs_vectors<RS_TILE, I>(a, (I)blockIdx.x * tile + threadIdx.x, (I)blockDim.x, (I)nv);\n"
           "    if (blockIdx.x != gridDim.x - 1) return;\n"
           "    for (unsigned long long i = nv * " + Vn + " + threadIdx.x; i < n; i += blockDim.x) " + t.use +
           "rs_chain(a, " + t.call + "));\n"
           "    return;\n  }\n";
    else
      // Reductions: one wave striding, RS_UNROLL vectors in flight per thread, indexed by the entry's I.
      s += "  if (a.vec) {\n    rs_reduce_all<I>(a, nv, acc);\n    done = nv * " + Vn + ";\n  }\n";
  }
  s += "  for (unsigned long long i = done + tid; i < n; i += stride) " + t.use + "rs_chain(a, " + t.call + "));\n";
  return s;
}

// A reduction kernel's end: each block folds its threads' values in shared memory (a fixed tree, so
// the operator's order is the same every run), the last block to finish folds the blocks' partials
// (in a fixed order too, for a given grid).
const char* cuda_block_fold = R"(  __shared__ rs_maybe shared[RS_BLOCK];
  __shared__ bool last;
  shared[threadIdx.x] = acc[0];
  __syncthreads();
  for (int w = RS_BLOCK / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) shared[threadIdx.x] = rs_combine(shared[threadIdx.x], shared[threadIdx.x + w]);
    __syncthreads();
  }
  rs_maybe* partials = (rs_maybe*)a.partials;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = shared[0];
    __threadfence();
    last = atomicAdd(a.counters + 1, 1ull) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Every thread of the last block folds the partials of blocks t, t + RS_BLOCK, ... (written by other
  // blocks: volatile), then the same tree as above: a fixed order for a given grid, and a few loads a
  // thread rather than one thread loading them all.
  rs_maybe m; m.value = rs_value(); m.valid = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += RS_BLOCK) {
    const volatile rs_maybe* p = partials + b;
    rs_maybe q; q.valid = p->valid; q.value = p->value;
    m = rs_combine(m, q);
  }
  shared[threadIdx.x] = m;
  __syncthreads();
  for (int w = RS_BLOCK / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) shared[threadIdx.x] = rs_combine(shared[threadIdx.x], shared[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    rs_acc r = rs_init(a.a);
    if (shared[0].valid) r = rs_op(r, shared[0].value);
    *(rs_result*)a.out = rs_result(r);
    a.counters[1] = 0;
  }
}
)";

// A built-in reduction of 4-byte values ends so instead (cuda_shape_of): the block's values folded by
// warp shuffles, then each block but the last stores its partial and a flag in one 8-byte slot (seen
// whole or not at all; no fence, no atomic); the last block by index, dispatched after every other,
// waits for each slot, folds the partials in index order and leaves the slots zero. The fence and the
// atomic per block were a short sum's largest fixed cost (docs/measurements.md, runs 43-45); the
// compiled reductions hand over the same way (fuse/detail/cuda/block_fold.cuh).
const char* cuda_slot_fold = R"(  rs_value mine = acc[0].value;
  __shared__ rs_value warp_total[RS_BLOCK / 32];
  __shared__ rs_value own;
  mine = rs_block_fold(mine, warp_total);
  unsigned long long* slots = (unsigned long long*)a.partials;
  const unsigned last = gridDim.x - 1;
  if (blockIdx.x != last) {
    if (threadIdx.x == 0) {
      union { rs_value v; unsigned u; } bits;
      bits.v = mine;
      rs_store_slot(slots + blockIdx.x, (1ull << 32) | bits.u);
    }
    return;
  }
  if (threadIdx.x == 0) own = mine;
  __syncthreads();
  rs_value p = rs_start().value;
  for (unsigned first = threadIdx.x; first < gridDim.x; first += 8 * RS_BLOCK) {
    unsigned long long w[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned b = first + unsigned(k) * RS_BLOCK;
      w[k] = b < last ? rs_load_slot(slots + b) : 0;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned b = first + unsigned(k) * RS_BLOCK;
      if (b > last) break;
      rs_value v = own;
      if (b < last) {
        while ((w[k] >> 32) == 0) w[k] = rs_load_slot(slots + b);
        union { unsigned u; rs_value v; } bits;
        bits.u = unsigned(w[k]);
        v = bits.v;
        slots[b] = 0;
      }
      p = rs_op(p, v);
    }
  }
  __syncthreads();  // warp_total is reused
  p = rs_block_fold(p, warp_total);
  if (threadIdx.x == 0) *(rs_result*)a.out = rs_result(rs_op(rs_init(a.a), p));
}
)";

// The slot fold's pieces: a block's values folded in a fixed order (each warp by shuffles, then the
// first warp over the warps' totals; the total in thread 0), and the slots' relaxed 8-byte accesses.
const char* cuda_slot_helpers = R"(RS_FN rs_value rs_warp_fold(rs_value v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = rs_op(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}
RS_FN rs_value rs_block_fold(rs_value v, rs_value* warp_total) {
  v = rs_warp_fold(v);
  if (threadIdx.x % 32 == 0) warp_total[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) v = rs_warp_fold(threadIdx.x < RS_BLOCK / 32 ? warp_total[threadIdx.x] : rs_start().value);
  return v;
}
RS_FN unsigned long long rs_load_slot(const unsigned long long* p) {
  unsigned long long w;
#if __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
#else
  w = *(const volatile unsigned long long*)p;
#endif
  return w;
}
RS_FN void rs_store_slot(unsigned long long* p, unsigned long long w) {
#if __CUDA_ARCH__ >= 700
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
#else
  *(volatile unsigned long long*)p = w;
#endif
}
)";

}  // namespace

// The CUDA kernel: a grid-stride loop over the generator's blocks or the arrays' elements, one
// kernel a call; a reduction ends in the block fold. A reduction over vectors has its body once, as
// a template of the vector index type, and two entries (cuda_shape_of).
std::string cuda_kernel(const chain& c, const loop_text& t) {
  // Vector loads: every array's elements the same size, 16-byte vectors of V of them.
  std::size_t esize = size_of(c.gen ? c.gen->result : c.sig.in[0]);
  bool same = true;
  for (element e : c.sig.in) same = same && size_of(e) == esize;
  if (!c.red) same = same && size_of(c.sig.out) == esize;
  const std::string Vn = std::to_string(16 / esize);
  const cuda_shape shape = cuda_shape_of(c.parts, c.sig);
  std::string s = cuda_vectors(c, t, Vn, same && !c.gen);
  if (shape.slots) s += cuda_slot_helpers;
  s += shape.index32 ? "template <class I>\nRS_FN void rs_body(const rs_args& a) {\n"
                     : "extern \"C\" __global__ void __launch_bounds__(RS_BLOCK) rs_kernel(rs_args a) {\n";
  s += "  rs_dependent_launch_prologue();\n"
       "  const unsigned long long n = a.n;\n"
       "  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
       "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n";
  s += t.loads;
  if (c.red) s += "  rs_maybe acc[" + Vn + "];\n#pragma unroll\n  for (int l = 0; l < " + Vn + "; ++l) acc[l] = rs_start();\n";
  if (c.gen) s += t.gen_loop + "  for (unsigned long long b = tid; b < blocks; b += stride) {\n" + t.gen_body + "  }\n";
  else s += cuda_array_loop(c, t, Vn, same);
  if (c.red) s += "#pragma unroll\n  for (int l = 1; l < " + Vn + "; ++l) acc[0] = rs_combine(acc[0], acc[l]);\n";
  s += !c.red ? "}\n" : shape.slots ? cuda_slot_fold : cuda_block_fold;
  if (shape.index32)
    s += "extern \"C\" __global__ void __launch_bounds__(RS_BLOCK) rs_kernel(rs_args a) { rs_body<unsigned long long>(a); }\n"
         "extern \"C\" __global__ void __launch_bounds__(RS_BLOCK) rs_kernel_32(rs_args a) { rs_body<unsigned>(a); }\n";
  return s;
}

}  // namespace resident::jit::detail
