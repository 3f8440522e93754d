// A deliberate bug for the sanitizers to find: one read one element past the end of a pooled array.
// The pool rounds blocks up, so the read lands inside memory the pool owns and nothing crashes on its
// own; only the tools can see it. compute-sanitizer memcheck (GPU) and AddressSanitizer (CPU, which the
// host pool poisons beyond each request) must report it: CTest and the GPU check script expect failure.
//
// usage: planted_oob cpu|cuda
#include <cstdio>
#include <string>

#include "resident/resident.hpp"

namespace rs = resident;

struct read_past_end {
  const float* in;
  std::size_t n;
  float* out;
  RESIDENT_HD void operator()(rs::thread_index) const { out[0] = in[n]; }  // in[n] is one past the end
};

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "cpu";
  const rs::device d = which == "cuda" ? rs::device::cuda(0) : rs::device::cpu();
  const std::size_t n = 1000;  // 4000 bytes: the pool's block holds 4096
  rs::array<float> a(n, d), out(1, d);
  rs::random::fill_uniform(a, 1);
  rs::launch(rs::default_stream(d), {rs::dims(1), rs::dims(1)}, read_past_end{a.data(), n, out.data()});
  rs::synchronize(d);
  std::printf("planted_oob: read %g past the end of a pooled array on %s without a report\n", double(out.to_host()[0]),
              d.name().c_str());
  return 0;
}
