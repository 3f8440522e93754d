// DLPack exchange: zero copy both ways (pointer equality, a write on one side seen on the other, no
// transfer in the ledger), lifetimes in both orders, the stream handshake, and every tensor resident
// cannot use as it is refused with a typed error that leaves the tensor with its owner.
#include <cstring>
#include <numeric>

#include "busy.hpp"
#include "resident/interop/dlpack.hpp"
#include "support.hpp"

namespace rs = resident;
using rs::test::backend;

namespace {

using dlpack = backend;

// A tensor made the way another library makes one: its own memory and a deleter that says it ran.
struct foreign {
  std::vector<std::int64_t> shape, strides;
  rs::array<float> memory;
  DLManagedTensor t{};
  bool* deleted;
  static DLManagedTensor* make(rs::array<float> m, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                               bool* deleted, std::uint64_t byte_offset = 0, DLDataType dt = {kDLFloat, 32, 1}) {
    auto* f = new foreign{std::move(shape), std::move(strides), std::move(m), {}, deleted};
    f->t.dl_tensor.data = f->memory.data();
    f->t.dl_tensor.device = rs::dlpack_device(f->memory.device());
    f->t.dl_tensor.ndim = static_cast<std::int32_t>(f->shape.size());
    f->t.dl_tensor.dtype = dt;
    f->t.dl_tensor.shape = f->shape.data();
    f->t.dl_tensor.strides = f->strides.empty() ? nullptr : f->strides.data();
    f->t.dl_tensor.byte_offset = byte_offset;
    f->t.manager_ctx = f;
    f->t.deleter = [](DLManagedTensor* m) {
      auto* self = static_cast<foreign*>(m->manager_ctx);
      *self->deleted = true;
      delete self;
    };
    return &f->t;
  }
};

std::uint64_t transfers(rs::device d) {
  auto t = rs::ledger(d);
  return t.h2d_copies + t.d2h_copies + t.d2d_copies;
}

TEST_P(dlpack, export_shares_memory_and_frees_on_the_deleter) {
  auto host = rs::test::random_vector<float>(1003, rs::test::fresh_seed());
  rs::array<float> a = rs::to_device(host, dev);
  float* p = a.data();
  const auto before = transfers(dev);
  DLManagedTensor* t = rs::to_dlpack(std::move(a));
  EXPECT_THROW(a.view(), rs::invalid_argument);  // the tensor owns it now
  EXPECT_EQ(t->dl_tensor.data, p);
  EXPECT_EQ(t->dl_tensor.ndim, 1);
  EXPECT_EQ(t->dl_tensor.shape[0], 1003);
  EXPECT_EQ(t->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(t->dl_tensor.dtype.bits, 32);
  EXPECT_EQ(t->dl_tensor.device.device_type, dev.is_cuda() ? kDLCUDA : kDLCPU);
  {
    // Back into resident: the same memory, a pipeline writes it, the values are the pipeline's.
    auto b = rs::from_dlpack<float>(t);
    EXPECT_EQ(b.data(), p);
    (rs::map([] RESIDENT_HD(float v) { return 2 * v + 1; }))(b);
    std::vector<float> got(b.size(), rs::test::poison<float>());
    rs::copy_async(b.ref(), std::span<float>(got));
    rs::synchronize(dev);
    for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(got[i], 2 * host[i] + 1) << i;
  }  // b's destruction ran the deleter: the pool has the memory back (the fixture checks)
  EXPECT_EQ(transfers(dev) - before, 1u) << "only the explicit download may move bytes";
}

TEST_P(dlpack, empty_arrays_round_trip) {
  DLManagedTensor* t = rs::to_dlpack(rs::array<std::int32_t>(0, dev));
  EXPECT_EQ(t->dl_tensor.shape[0], 0);
  auto b = rs::from_dlpack<std::int32_t>(t);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.ref().size(), 0u);
}

TEST_P(dlpack, shared_export_outlives_either_side) {
  auto a = std::make_shared<rs::array<float>>(rs::to_device(std::vector<float>{1, 2, 3, 4}, dev));
  DLManagedTensor* t = rs::to_dlpack(a);
  a.reset();  // the producer lets go first: the tensor still holds the memory
  std::vector<float> got(4, rs::test::poison<float>());
  rs::copy_async(rs::as_array_ref<float>(t->dl_tensor, rs::default_stream(dev)), std::span<float>(got));
  rs::synchronize(dev);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 4}));
  t->deleter(t);

  auto c = std::make_shared<rs::array<float>>(rs::to_device(std::vector<float>{5, 6}, dev));
  DLManagedTensor* u = rs::to_dlpack(c);
  u->deleter(u);  // the consumer lets go first: the producer's array is intact
  EXPECT_EQ(c->to_host(), (std::vector<float>{5, 6}));
}

TEST_P(dlpack, two_dimensional_export_carries_the_leading_dimension) {
  rs::array2d<double> m(3, 4, dev, 6);
  DLManagedTensor* t = rs::to_dlpack(std::move(m));
  EXPECT_EQ(t->dl_tensor.ndim, 2);
  EXPECT_EQ(t->dl_tensor.shape[0], 3);
  EXPECT_EQ(t->dl_tensor.shape[1], 4);
  EXPECT_EQ(t->dl_tensor.strides[0], 6);
  EXPECT_EQ(t->dl_tensor.strides[1], 1);
  EXPECT_EQ(t->dl_tensor.dtype.bits, 64);
  // Padded rows are strided: resident refuses to flatten them in place.
  EXPECT_THROW(rs::as_array_ref<double>(t->dl_tensor, rs::default_stream(dev)), rs::invalid_argument);
  t->deleter(t);
}

TEST_P(dlpack, imports_offsets_and_contiguous_shapes) {
  std::vector<float> h(24);
  std::iota(h.begin(), h.end(), 0.f);
  bool deleted = false;
  // A 2 x 3 x 4 tensor starting 0 bytes in, then a view 4 elements in with extent-1 strides anywhere.
  DLManagedTensor* t = foreign::make(rs::to_device(h, dev), {2, 3, 4}, {12, 4, 1}, &deleted);
  {
    auto a = rs::from_dlpack<float>(t, rs::default_stream(dev));
    EXPECT_EQ(a.size(), 24u);
    EXPECT_EQ(rs::array_ref<float>(a.ref()).size(), 24u);
  }
  EXPECT_TRUE(deleted);
  deleted = false;
  DLManagedTensor* v = foreign::make(rs::to_device(h, dev), {1, 20}, {99, 1}, &deleted, 4 * sizeof(float));
  {
    auto a = rs::from_dlpack<float>(v);
    std::vector<float> got(20, rs::test::poison<float>());
    rs::copy_async(a.ref(), std::span<float>(got));
    rs::synchronize(dev);
    EXPECT_EQ(got, std::vector<float>(h.begin() + 4, h.end()));
  }
  EXPECT_TRUE(deleted);
}

TEST_P(dlpack, what_cannot_be_used_in_place_is_refused_and_stays_with_its_owner) {
  auto fresh = [&](std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, bool* del,
                   std::uint64_t off = 0, DLDataType dt = {kDLFloat, 32, 1}) {
    return foreign::make(rs::array<float>(16, dev), std::move(shape), std::move(strides), del, off, dt);
  };
  struct bad {
    const char* what;
    std::vector<std::int64_t> shape, strides;
    std::uint64_t offset;
    DLDataType dt;
  };
  const bad cases[] = {{"float64 for float32", {16}, {}, 0, {kDLFloat, 64, 1}},
                       {"int32 for float32", {16}, {}, 0, {kDLInt, 32, 1}},
                       {"two lanes", {8}, {}, 0, {kDLFloat, 32, 2}},
                       {"strided", {8}, {2}, 0, {kDLFloat, 32, 1}},
                       {"transposed", {4, 4}, {1, 4}, 0, {kDLFloat, 32, 1}},
                       {"negative extent", {-1}, {}, 0, {kDLFloat, 32, 1}},
                       {"misaligned", {3}, {}, 2, {kDLFloat, 32, 1}},
                       {"offset past any address", {16}, {}, std::uint64_t(1) << 63, {kDLFloat, 32, 1}},
                       {"offset wrapping around", {16}, {}, ~std::uint64_t(0) - 3, {kDLFloat, 32, 1}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    bool deleted = false;
    DLManagedTensor* t = fresh(c.shape, c.strides, &deleted, c.offset, c.dt);
    EXPECT_THROW(rs::from_dlpack<float>(t), rs::invalid_argument);
    EXPECT_FALSE(deleted) << "a refused tensor stays its owner's";
    t->deleter(t);
    EXPECT_TRUE(deleted);
  }
  // Extents whose product passes 2^63 - 1 elements: no int64 index reaches them (and for bytes the
  // byte count itself does not overflow, so only the element count can refuse them).
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{std::int64_t(1) << 32, (std::int64_t(1) << 32) - 1},
                                          std::vector<std::int64_t>{std::int64_t(1) << 32, (std::int64_t(1) << 31) + 1}}) {
    bool deleted = false;
    DLManagedTensor* t = fresh(shape, {}, &deleted, 0, {kDLUInt, 8, 1});
    EXPECT_THROW(rs::from_dlpack<std::uint8_t>(t), rs::invalid_argument);
    EXPECT_FALSE(deleted);
    t->deleter(t);
  }
  bool deleted = false;
  DLManagedTensor* t = fresh({16}, {}, &deleted);
  t->dl_tensor.device = {kDLCUDAManaged, 0};
  EXPECT_THROW(rs::from_dlpack<float>(t), rs::invalid_argument);
  t->dl_tensor.device = {kDLOpenCL, 0};
  EXPECT_THROW(rs::from_dlpack<float>(t), rs::invalid_argument);
  t->dl_tensor.device = rs::dlpack_device(dev);
  const rs::device other = dev.is_cuda() ? rs::device::cpu() : rs::device::cuda(0);
  if (other.is_cpu() || rs::cuda_device_count() > 0) {
    EXPECT_THROW(rs::from_dlpack<float>(t, rs::default_stream(other)), rs::device_mismatch);
  }
  EXPECT_FALSE(deleted);
  t->deleter(t);
  EXPECT_THROW(rs::from_dlpack<float>(nullptr), rs::invalid_argument);
  EXPECT_EQ(rs::dlpack_dtype_name({6, 8, 1}), "bool8");  // NumPy's and PyTorch's bool, named in messages
  rs::array<float> gone(4, dev);
  rs::array<float> taker = std::move(gone);
  EXPECT_THROW(rs::to_dlpack(std::move(gone)), rs::invalid_argument);
}

using dlpack_cuda = backend;  // GPU-only cases: the `.gpu` CTest entry

TEST_P(dlpack_cuda, the_consumer_stream_waits_for_the_producer) {
  // A busy kernel of 100 ms and maps queued on the producer's stream, then the array exported to a
  // consumer on another stream: the consumer's copy sees the maps' values, with no host
  // synchronization between them (one that does not wait copies the values from before the maps).
  const std::size_t n = std::size_t(1) << 22;
  rs::stream producer(dev), consumer(dev);
  auto host = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::array<float> a = rs::to_device(host, producer.ref());
  rs::test::queue_busy(producer.ref(), 100);
  for (int k = 0; k < 8; ++k) (rs::map([] RESIDENT_HD(float v) { return v + 1.f; }))(a);
  DLManagedTensor* t = rs::to_dlpack(std::move(a), consumer.ref());
  {
    auto b = rs::from_dlpack<float>(t, consumer.ref());
    std::vector<float> got(n, rs::test::poison<float>());
    rs::copy_async(b.ref(), std::span<float>(got));
    consumer.synchronize();
    for (std::size_t i = 0; i < n; ++i) {  // every element: a copy that overtook the map is off somewhere
      float want = host[i];
      for (int k = 0; k < 8; ++k) want += 1.f;
      ASSERT_EQ(got[i], want) << i;
    }
  }
  producer.synchronize();
}

using dlpack_cpu = backend;  // the CPU backend's rule: the `cpu` CTest entry

TEST_P(dlpack_cpu, cpu_runs_in_issue_order_an_export_holds_the_final_values_at_once) {
  // Work runs as it is issued on the CPU: the tensor a consumer receives already holds the producer's
  // last values, read straight from its memory with no synchronization; and the consumer's writes are
  // in the array the moment they are issued.
  const std::size_t n = std::size_t(1) << 20;
  rs::stream producer(dev), consumer(dev);
  auto host = rs::test::random_vector<float>(n, rs::test::fresh_seed());
  rs::array<float> a = rs::to_device(host, producer.ref());
  for (int k = 0; k < 8; ++k) (rs::map([] RESIDENT_HD(float v) { return v + 1.f; }))(a);
  DLManagedTensor* t = rs::to_dlpack(std::move(a), consumer.ref());
  const auto* data = static_cast<const float*>(t->dl_tensor.data);
  std::size_t off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float want = host[i];
    for (int k = 0; k < 8; ++k) want += 1.f;
    off += data[i] != want;
  }
  EXPECT_EQ(off, 0u) << "elements of the export not yet final";
  auto b = rs::from_dlpack<float>(t, consumer.ref());
  (rs::map([] RESIDENT_HD(float v) { return 2.f * v; }))(b);
  off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float want = host[i];
    for (int k = 0; k < 8; ++k) want += 1.f;
    off += b.data()[i] != 2.f * want;
  }
  EXPECT_EQ(off, 0u) << "elements of the consumer's map not yet written";
}

RESIDENT_BACKENDS(dlpack);
RESIDENT_CUDA_ONLY(dlpack_cuda);
RESIDENT_CPU_ONLY(dlpack_cpu);

}  // namespace
