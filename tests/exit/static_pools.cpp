// Exits with arrays still alive in static storage and pools full of cached blocks: the process must end
// cleanly (no crash in static destruction, no leak report under ASan). Run 100 times by CTest.
#include "resident/resident.hpp"

namespace rs = resident;

static rs::array<float> kept;  // destroyed after main; the pools outlive it (pool_keepalive)

int main() {
  const rs::device d = rs::default_device();
  kept = rs::array<float>(1000, d);
  rs::random::fill_uniform(kept, 1);
  {
    rs::array<double> scratch(4096, d);  // freed into the pool's cache before exit
    (rs::map([] RESIDENT_HD(float v) { return double(v); }))(kept, scratch.slice(0, 1000));
  }
  return rs::reduce(rs::maximum{}, 0.f)(kept) < 1.f ? 0 : 1;
}
