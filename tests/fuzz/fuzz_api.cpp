// libFuzzer target: the input is a program of public API calls on the CPU backend (arrays of odd and
// huge sizes, slices, moves and moved-from objects, pipelines, launches, random fills, copies and
// transfers under each policy, flows, graphs, matmul, 2-D arrays). Every array has a host mirror
// computed in plain C++; after each call the arrays must equal their mirrors and the pool must hold
// exactly the live arrays; an exception must be a resident::error of the expected kind (or the user's
// own) and leave everything as it was; nothing may be left in the pool at the end.
//
// Probes of the defects it found (all fixed) are switchable: RESIDENT_FUZZ_KNOWN unset or 1 runs them all, 0
// none, a comma list (e.g. "size,nan") only those named (scripts/fuzz.sh and fuzz_ci.sh pass 0 unless
// told otherwise). Names: size (huge sizes), moved (moved-from array set_stream,
// flow/graph/stream/event/pinned_buffer/array2d), capture (a flow's graph replayed after the flow),
// throw (user functors throwing inside OpenMP loops), policy (transfer-policy scopes across threads),
// wrap (RNG offsets that wrap 2^64), range (uniform/normal parameters at the edges: results must stay in
// [low, high)), nan (NaN in min/max reductions), ledger (copies of 0 bytes and self-copies count
// nothing), padded (flow edges for 2-D arrays with ld > cols), unrecorded (elapsed_ms of an event never
// recorded), foreign (events and streams ordered against a stream of another device; a failed copy
// counted in the ledger), update_empty (graph::update of a graph holding nothing).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>

#include "fuzz_api.hpp"

using namespace fuzz_api;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool caching = rs::pool_caching(rs::device::cpu());
  const auto pool0 = rs::pool_stats(rs::device::cpu());
  {
    fuzz_state st(in);
    for (int ops = 0; ops < 48 && in.remaining_bytes() > 0; ++ops) {
      switch (in.ConsumeIntegralInRange<int>(0, 34)) {
        case 0: op_allocate<float>(st); break;
        case 1: op_allocate<double>(st); break;
        case 2: op_allocate<std::uint32_t>(st); break;
        case 3: op_upload<float>(st); break;
        case 4: op_upload<std::uint32_t>(st); break;
        case 5: op_download<float>(st); break;
        case 6: op_download<double>(st); break;
        case 7: op_copy_in<float>(st); break;
        case 8: op_copy_between<float>(st); break;
        case 9: op_copy_between<std::uint32_t>(st); break;
        case 10: op_move<float>(st); break;
        case 11: op_move<double>(st); break;
        case 12: op_map_in_place<float>(st); break;
        case 13: op_map_in_place<std::uint32_t>(st); break;
        case 14: op_map_out_of_place<float, float>(st); break;
        case 15: op_map_out_of_place<float, double>(st); break;
        case 16: op_zip<float, float>(st); break;
        case 17: op_zip<float, double>(st); break;
        case 18: op_reduce<float>(st); break;
        case 19: op_reduce<std::uint32_t>(st); break;
        case 20: op_fill_real<float>(st); break;
        case 21: op_fill_real<double>(st); break;
        case 22: op_fill_integers(st); break;
        case 23: op_generate_reduce(st); break;
        case 24: in.ConsumeBool() ? op_policy<float>(st) : op_policy<std::uint32_t>(st); break;
        case 25: op_flow(st); break;
        case 26: op_graph(st); break;
        case 27: in.ConsumeBool() ? op_matmul<float>(st) : op_matmul<double>(st); break;
        case 28: op_array2d(st); break;
        case 29: op_handles(st); break;
        case 30: in.ConsumeBool() ? op_huge(st) : op_policy_threads(st); break;
        case 31: in.ConsumeBool() ? op_throw(st) : op_flow_padded(st); break;
        case 32: op_launch(st); break;
        case 33: op_fill_int32(st); break;
        default: op_pool(st);
      }
      st.check_all("after a call");
    }
  }
  rs::set_pool_caching(rs::device::cpu(), caching);  // each input starts alike
  const auto pool1 = rs::pool_stats(rs::device::cpu());
  if (pool1.bytes_in_use != pool0.bytes_in_use || pool1.outstanding != pool0.outstanding)
    fail("the pool holds " + std::to_string(pool1.bytes_in_use - pool0.bytes_in_use) + " more bytes in " +
         std::to_string(pool1.outstanding - pool0.outstanding) + " more allocations after the input");
  return 0;
}
