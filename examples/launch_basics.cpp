// The seed tutorial's first programs in resident: a kernel launched as [1, 2] and as [2, 4], each
// thread printing its block index, thread index and global index. Launches are asynchronous: the
// host goes on at once, and synchronize() waits for the device to finish (and flushes its printf).
#include <cstdio>
#include <sstream>

#include "resident/resident.hpp"

namespace rs = resident;

struct print_index {
  RESIDENT_HD void operator()(rs::thread_index t) const {
    std::printf("block %u, thread %u, global index %zu\n", t.block.x, t.thread.x, t.global_x());
  }
};

int main() {
  try {
    const rs::device d = rs::default_device();
    const rs::stream_ref s = rs::default_stream(d);
    std::printf("running on %s\n", d.name().c_str());

    std::printf("-- kernel[1, 2]\n");
    rs::launch(s, {rs::dims(1), rs::dims(2)}, print_index{});
    rs::synchronize(d);  // without this the host could print its next line before the device prints

    std::printf("-- kernel[2, 4]\n");
    rs::launch(s, {rs::dims(2), rs::dims(4)}, print_index{});
    std::printf("(the host reaches this line before waiting on the kernel)\n");
    rs::synchronize(d);

    std::printf("%s", (std::ostringstream() << rs::ledger()).str().c_str());
    return 0;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "launch_basics: %s\n", e.what());
    return 1;
  }
}
