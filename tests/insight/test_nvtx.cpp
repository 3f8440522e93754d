// NVTX ranges, seen the way Nsight Systems sees them: this binary is its own injection library (NVTX's
// static injection, InitializeInjectionNvtx2_fnptr), so every range resident opens comes here with
// its domain, message and payload. Ranges are host-side: the CPU backend opens the same ones.
#include <cstdint>

// NVTX's static injection: this file defines it (so NVTX must not add its weak empty one here), and
// every NVTX call in the process finds it at its first use.
extern "C" {
int resident_test_nvtx_initialize(const void* (*get_export_table)(std::uint32_t));
int (*InitializeInjectionNvtx2_fnptr)(const void* (*)(std::uint32_t)) = &resident_test_nvtx_initialize;
}
#define NVTX_STATIC_INJECTION_IMPL
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "support.hpp"

namespace rs = resident;

namespace {

struct seen_range {
  std::string domain;
  std::string message;
  std::uint64_t payload = 0;
};

std::mutex g_m;
std::vector<seen_range> g_ranges;
int g_depth = 0;  // pushes minus pops in the resident domain
struct domain_record {
  std::string name;
};
std::vector<domain_record*> g_domains;
std::vector<std::string*> g_strings;  // registered strings: their handles point here
int g_registrations = 0;

nvtxDomainHandle_t NVTX_API create_domain(const char* name) {
  std::lock_guard lock(g_m);
  g_domains.push_back(new domain_record{name});
  return reinterpret_cast<nvtxDomainHandle_t>(g_domains.back());
}
nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t, const char* text) {
  std::lock_guard lock(g_m);
  g_strings.push_back(new std::string(text));
  ++g_registrations;
  return reinterpret_cast<nvtxStringHandle_t>(g_strings.back());
}
int NVTX_API push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::lock_guard lock(g_m);
  seen_range r;
  r.domain = d ? reinterpret_cast<domain_record*>(d)->name : "(default)";
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) r.message = a->message.ascii;
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered)
    r.message = *reinterpret_cast<const std::string*>(a->message.registered);
  if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) r.payload = a->payload.ullValue;
  g_ranges.push_back(r);
  if (r.domain == "resident") ++g_depth;
  return 0;
}
int NVTX_API pop(nvtxDomainHandle_t d) {
  std::lock_guard lock(g_m);
  if (d && reinterpret_cast<domain_record*>(d)->name == "resident") --g_depth;
  return 0;
}

}  // namespace

extern "C" int resident_test_nvtx_initialize(NvtxGetExportTableFunc_t get_table) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&create_domain);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  *table[NVTX_CBID_CORE2_DomainRegisterStringA] = reinterpret_cast<NvtxFunctionPointer>(&register_string);
  return 1;
}

namespace {

// Ranges in the resident domain seen while f runs.
template <class F>
std::vector<seen_range> ranges_of(F&& f) {
  {
    std::lock_guard lock(g_m);
    g_ranges.clear();
  }
  f();
  std::lock_guard lock(g_m);
  std::vector<seen_range> r;
  for (auto& x : g_ranges)
    if (x.domain == "resident") r.push_back(x);
  return r;
}
bool has(const std::vector<seen_range>& v, const std::string& message, std::uint64_t payload = ~0ull) {
  return std::any_of(v.begin(), v.end(), [&](const seen_range& r) {
    return r.message == message && (payload == ~0ull || r.payload == payload);
  });
}
std::string listing(const std::vector<seen_range>& v) {
  std::string s;
  for (auto& r : v) s += r.message + " (" + std::to_string(r.payload) + ")\n";
  return s;
}

struct twice {
  RESIDENT_HD float operator()(float v) const { return 2.f * v; }
};

}  // namespace


TEST(nvtx, transfers_allocations_and_calls_open_named_ranges_with_their_bytes) {
  const rs::device d = rs::device::cpu();
  const std::vector<float> h(1000, 0.5f);
  rs::array<float> x;
  auto v = ranges_of([&] { x = rs::to_device(h, d); });
  EXPECT_TRUE(has(v, "to_device", 4000)) << listing(v);
  EXPECT_TRUE(has(v, "host-to-device", 4000)) << listing(v);
  EXPECT_TRUE(has(v, "pool allocate", 4000)) << listing(v);

  v = ranges_of([&] { (void)x.to_host(); });
  EXPECT_TRUE(has(v, "to_host", 4000)) << listing(v);
  EXPECT_TRUE(has(v, "device-to-host", 4000)) << listing(v);

  v = ranges_of([&] {
    rs::detail::call_scope s("map<twice>", x.stream(), {4000, 4000, 1000, 1, x.data(), x.data()});
    rs::map(twice{})(x);
  });
  EXPECT_TRUE(has(v, "map<twice>", 8000)) << listing(v);
  std::lock_guard lock(g_m);
  EXPECT_EQ(g_depth, 0) << "every range was closed";
}

// Fixed names (transfers, pool allocations) are registered once in the domain, not copied per call;
// the hook reports the attached tool.
TEST(nvtx, fixed_names_are_registered_once) {
  EXPECT_TRUE(rs::detail::nvtx_state() == std::string_view("tool attached"));
  const rs::device d = rs::device::cpu();
  const std::vector<float> h(64, 1.f);
  (void)rs::to_device(h, d);  // registers "host-to-device" and "pool allocate" if not done yet
  int before = 0;
  {
    std::lock_guard lock(g_m);
    before = g_registrations;
  }
  std::vector<seen_range> v = ranges_of([&] {
    for (int i = 0; i < 5; ++i) (void)rs::to_device(h, d);
  });
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [](const seen_range& r) { return r.message == "host-to-device"; }), 5)
      << listing(v);
  std::lock_guard lock(g_m);
  EXPECT_EQ(g_registrations, before) << "no string registered again";
  EXPECT_GE(g_registrations, 2);
}

TEST(nvtx, flow_stages_and_graphs_are_named) {
  const rs::device d = rs::device::cpu();
  auto a = rs::to_device(std::vector<float>(256, 1.f), d);
  auto v = ranges_of([&] {
    rs::flow f(d);
    f.add("scale by two", [&](rs::stream_ref) { rs::map(twice{})(a); }, rs::access{}.writes(a));
    f.run();
  });
  EXPECT_TRUE(has(v, "scale by two")) << listing(v);

  const rs::stream_ref s = rs::default_stream(d);
  v = ranges_of([&] {
    rs::graph g = rs::graph::capture(s, [&] { rs::map(twice{})(a); });
    g.replay(s);
    g.replay(s);
  });
  EXPECT_TRUE(has(v, "graph capture")) << listing(v);
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [](const seen_range& r) { return r.message == "graph replay"; }), 2)
      << listing(v);
  std::lock_guard lock(g_m);
  EXPECT_EQ(g_depth, 0) << "every range was closed";
}
