// The four steps of every GPU program, as the seed tutorial lists them: copy the data in, configure
// the launch, launch, copy the result back. resident makes each step one explicit call, and the ledger
// shows that nothing else crossed between host and device.
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <vector>

#include "resident/resident.hpp"

namespace rs = resident;

int main() {
  try {
    const rs::device d = rs::default_device();
    const std::size_t n = 1 << 20;
    std::vector<float> a(n), b(n);
    std::mt19937 g(std::random_device{}());
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (std::size_t i = 0; i < n; ++i) a[i] = u(g), b[i] = u(g);

    // 1. Copy in: two explicit uploads.
    rs::array<float> x = rs::to_device(a, d), y = rs::to_device(b, d);
    rs::array<float> out(n, d);

    // 2. Configure: [blocks, threads] like Numba's kernel[blocks, threads]; 256 threads per block and
    //    enough blocks to give every element a thread.
    const unsigned threads = 256, blocks = unsigned((n + threads - 1) / threads);
    const rs::launch_config cfg{rs::dims(blocks), rs::dims(threads)};

    // 3. Launch: each thread adds one pair. Asynchronous on a GPU: the host continues at once.
    rs::launch(rs::default_stream(d), cfg,
               [] RESIDENT_HD(rs::thread_index t, rs::array_view<const float> p, rs::array_view<const float> q,
                              rs::array_view<float> r) {
                 const std::size_t i = t.global_x();
                 if (i < r.size()) r[i] = p[i] + q[i];
               },
               x.view(), y.view(), out.view());

    // 4. Copy back: one explicit download (it waits for the kernel).
    std::vector<float> c = out.to_host();

    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(c[i]) - (double(a[i]) + b[i])));
    std::printf("%zu additions on %s with [%u, %u]; max error %.1e\n%s", n, d.name().c_str(), blocks, threads, worst,
                (std::ostringstream() << rs::ledger()).str().c_str());
    return worst <= 1e-6 ? 0 : 1;
  } catch (const rs::error& e) {
    std::fprintf(stderr, "host_device_flow: %s\n", e.what());
    return 1;
  }
}
