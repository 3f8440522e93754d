// The fuzz_api target's operations on arrays: allocation, uploads and downloads, copies, moves,
// 2-D arrays, moved-from handles, huge sizes and the pool.
#include "fuzz_api.hpp"

namespace fuzz_api {

// ---- operations -----------------------------------------------------------------------------------

template <class T>
void op_allocate(fuzz_state& st) {
  auto& s = st.pick<T>();
  st.allocate(s, st.pick_size());
}

template <class T>
void op_upload(fuzz_state& st) {
  auto& s = st.pick<T>();
  const std::size_t n = st.pick_size();
  std::vector<T> h = st.host_data<T>(n);
  const int how = st.in.ConsumeIntegralInRange<int>(0, 4);
  const auto before = rs::ledger(rs::device::cpu());
  std::optional<rs::array<T>> a;
  attempt("to_device", expect::ok, [&] {
    switch (how) {
      case 0: a = rs::to_device(h, rs::device::cpu()); break;
      case 1: a = rs::to_device(std::span<const T>(h), st.pick_stream(), rs::staging::none); break;
      case 2: a = rs::to_device(h, st.pick_stream(), rs::staging::chunked); break;
      case 3: {
        rs::pinned_buffer<T> p(n);
        if (p.size() != n) fail("pinned_buffer(n) has another size");
        std::copy(h.begin(), h.end(), p.begin());
        a = rs::to_device(p, st.pick_stream());
        a->stream().synchronize();
        break;
      }
      default: a = rs::to_device(std::span<const T>(h), rs::device::cpu());
    }
  });
  const auto delta = rs::ledger(rs::device::cpu()) - before;
  if (delta.h2d_bytes != n * sizeof(T))
    fail("to_device of " + std::to_string(n * sizeof(T)) + " bytes counted " + std::to_string(delta.h2d_bytes));
  if (probe("ledger") && delta.h2d_copies != (n ? 1u : 0u))
    fail("to_device of " + std::to_string(n) + " elements counted " + std::to_string(delta.h2d_copies) + " copies");
  s.a = std::move(*a);
  s.ref = std::move(h);
  s.moved = false;
}

template <class T>
void op_download(fuzz_state& st) {
  auto& s = st.pick<T>();
  const std::size_t n = s.ref.size();
  const int how = st.in.ConsumeIntegralInRange<int>(0, 3);
  const std::size_t m = how != 3 && st.in.ConsumeIntegralInRange<int>(0, 3) == 0 ? st.pick_size() : n;
  const expect e = s.moved ? expect::invalid : (m != n ? expect::shape : expect::ok);
  std::vector<T> out(m, fuzz_state::poison<T>());
  const std::vector<T> untouched = out;
  const auto before = rs::ledger(rs::device::cpu());
  const bool ok = attempt("to_host", e, [&] {
    if (how == 0) {
      s.a.to_host(std::span<T>(out), st.in.ConsumeBool() ? rs::staging::chunked : rs::staging::none);
    } else if (how == 1) {
      rs::pinned_buffer<T> p(m);
      std::copy(out.begin(), out.end(), p.begin());
      s.a.to_host_async(p);
      s.a.stream().synchronize();
      std::copy(p.begin(), p.end(), out.begin());
    } else if (how == 2) {
      rs::copy_async(s.a, std::span<T>(out));
      s.a.stream().synchronize();
    } else {
      out = s.a.to_host();
    }
  });
  const std::vector<T>& want = e == expect::ok ? s.ref : untouched;
  for (std::size_t i = 0; i < m; ++i)
    if (!same(out[i], want[i])) fail("to_host: element " + std::to_string(i) + " is " + show(double(out[i])));
  const auto delta = rs::ledger(rs::device::cpu()) - before;
  if (ok && delta.d2h_bytes != n * sizeof(T))
    fail("to_host of " + std::to_string(n * sizeof(T)) + " bytes counted " + std::to_string(delta.d2h_bytes));
  if (!ok && (delta.d2h_bytes || delta.d2h_copies)) fail("a refused to_host counted a transfer");
}

template <class T>
void op_copy_in(fuzz_state& st) {
  auto& s = st.pick<T>();
  auto r = pick_range(st, s);
  if (!r) return;
  const std::size_t m = st.in.ConsumeIntegralInRange<int>(0, 3) == 0 ? st.pick_size() : r->second;
  std::vector<T> h = st.host_data<T>(m);
  const bool whole = r->first == 0 && r->second == s.ref.size();
  const bool as_array = whole && st.in.ConsumeBool();
  const expect e = s.moved ? expect::invalid : (m != r->second ? expect::shape : expect::ok);
  const bool ok = attempt("copy into an array", e, [&] {
    if (as_array)
      rs::copy(std::span<const T>(h), s.a, st.in.ConsumeBool() ? rs::staging::chunked : rs::staging::none);
    else
      rs::copy_async(std::span<const T>(h), s.a.slice(r->first, r->second));
  });
  if (ok) std::copy(h.begin(), h.end(), s.ref.begin() + std::ptrdiff_t(r->first));
}

template <class T>
void op_copy_between(fuzz_state& st) {
  auto& a = st.pick<T>();
  auto& b = st.pick<T>();
  const auto before = rs::ledger(rs::device::cpu());
  if (st.in.ConsumeBool()) {
    const expect e =
        (a.moved || b.moved) ? expect::invalid : (a.ref.size() != b.ref.size() ? expect::shape : expect::ok);
    if (attempt("copy(array, array)", e, [&] { rs::copy(a.a, b.a); })) {
      b.ref = a.ref;
      const auto delta = rs::ledger(rs::device::cpu()) - before;
      if (probe("ledger") && (&a == &b || a.ref.empty()) && (delta.d2d_bytes || delta.d2d_copies))
        fail("copy(a, a) or a copy of 0 bytes counted " + std::to_string(delta.d2d_copies) + " copies of " +
             std::to_string(delta.d2d_bytes) + " bytes");
    }
  } else {
    std::optional<rs::array<T>> c;
    if (attempt("copy_to", a.moved ? expect::invalid : expect::ok, [&] { c = rs::copy_to(a.a, rs::device::cpu()); })) {
      b.a = std::move(*c);
      b.ref = a.ref;
      b.moved = false;
    }
  }
}

template <class T>
void op_move(fuzz_state& st) {
  auto& a = st.pick<T>();
  auto& b = st.pick<T>();
  if (&a == &b) {
    auto& alias = b;
    a.a = std::move(alias.a);  // self-move: a no-op
    return;
  }
  if (st.in.ConsumeBool()) {
    b.a = std::move(a.a);
  } else {
    rs::array<T> t(std::move(a.a));
    b.a = std::move(t);
  }
  b.ref = std::move(a.ref);
  b.moved = a.moved;
  a.ref.clear();
  a.moved = true;
  // Every use of the moved-from array is a clear error.
  attempt("view of a moved-from array", expect::invalid, [&] { (void)a.a.view(); });
  attempt("slice of a moved-from array", expect::invalid, [&] { (void)a.a.slice(0, 0); });
  attempt("map on a moved-from array", expect::invalid, [&] { rs::map(square{})(a.a); });
  attempt("reduce of a moved-from array", expect::invalid, [&] { (void)(rs::reduce(rs::plus{}, T(0)))(a.a); });
  attempt("copy from a moved-from array", expect::invalid, [&] {
    rs::array<T> c(0, rs::device::cpu());
    rs::copy(a.a, c);
  });
  if (probe("moved")) attempt("set_stream of a moved-from array", expect::invalid, [&] { a.a.set_stream(st.side); });
}

// The pool's controls between calls: trimming and caching must not disturb live arrays.
void op_pool(fuzz_state& st) {
  const rs::device cpu = rs::device::cpu();
  if (st.in.ConsumeBool()) {
    rs::trim_pool(cpu);
  } else {
    const bool on = st.in.ConsumeBool();
    rs::set_pool_caching(cpu, on);
    if (rs::pool_caching(cpu) != on) fail("pool_caching does not say what set_pool_caching set");
  }
}

// 2-D arrays: to_device, to_host with ld > cols, views, moved-from.
void op_array2d(fuzz_state& st) {
  auto& in = st.in;
  const std::size_t rows = in.ConsumeIntegralInRange<std::size_t>(0, 20),
                    cols = in.ConsumeIntegralInRange<std::size_t>(0, 20);
  std::size_t ld = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<std::size_t>(0, 30);
  std::optional<rs::array2d<float>> a;
  const bool bad_ld = ld != 0 && ld < cols;
  if (!attempt("array2d(" + std::to_string(rows) + ", " + std::to_string(cols) + ", ld " + std::to_string(ld) + ")",
               bad_ld ? expect::invalid : expect::ok, [&] { a.emplace(rows, cols, rs::device::cpu(), ld); }))
    return;
  const std::size_t l = ld ? ld : cols;
  if (a->ld() != l || a->rows() != rows || a->cols() != cols || a->storage().size() != rows * l)
    fail("array2d: wrong shape");
  std::vector<float> all = st.host_data<float>(rows * l);
  rs::copy(std::span<const float>(all), a->storage());
  std::vector<float> packed = a->to_host();
  if (packed.size() != rows * cols) fail("array2d::to_host: wrong size");
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      if (!same(packed[r * cols + c], all[r * l + c])) fail("array2d::to_host: wrong element");
  const auto v = a->view();
  if (v.rows() != rows || v.cols() != cols || v.ld() != l) fail("array2d::view: wrong shape");
  const std::size_t m = in.ConsumeBool() ? rows * cols : rows * cols + 1;
  std::vector<float> h(m, 2.5f);
  std::optional<rs::array2d<float>> b;
  if (attempt("to_device(span, rows, cols)", m == rows * cols ? expect::ok : expect::shape,
              [&] { b.emplace(rs::to_device(std::span<const float>(h), rows, cols, rs::device::cpu())); }))
    if (b->to_host() != h) fail("to_device(span, rows, cols): wrong values");
  if (in.ConsumeBool()) {
    rs::array2d<float> c(std::move(*a));
    if (c.rows() != rows || c.cols() != cols) fail("array2d move: the shape did not move");
    if (probe("moved")) {
      if (a->rows() != 0 || a->cols() != 0 || a->size() != 0)
        fail("a moved-from array2d still reports " + std::to_string(a->rows()) + " x " + std::to_string(a->cols()));
      attempt("view of a moved-from array2d", expect::invalid, [&] { (void)a->view(); });
      attempt("to_host of a moved-from array2d", expect::invalid, [&] { (void)a->to_host(); });
    }
  }
}

// Streams, events, pinned buffers: plain use and moved-from objects.
void op_handles(fuzz_state& st) {
  auto& in = st.in;
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: {
      auto& s = st.pick<float>();
      if (s.moved) return;
      attempt("set_stream to another device", expect::device,
              [&] { s.a.set_stream(rs::stream_ref(rs::device::cuda(0), nullptr)); });
      attempt("set_stream", expect::ok, [&] { s.a.set_stream(st.pick_stream()); });
      break;
    }
    case 1: {
      rs::event e0(rs::device::cpu()), e1(rs::device::cpu());
      e0.record(st.side);
      if (auto& s = st.pick<float>(); !s.moved) {
        rs::map(square{})(s.a);
        for (float& v : s.ref) v = square{}(v);
      }
      e1.record(st.side);
      e1.synchronize();
      e1.wait_on(rs::default_stream(rs::device::cpu()));
      const double ms = elapsed_ms(e0, e1);
      if (!(ms >= 0)) fail("elapsed_ms between two recorded events is " + show(ms));
      if (probe("moved") && in.ConsumeBool()) {
        rs::event e2(std::move(e0));
        attempt("record on a moved-from event", expect::invalid, [&] { e0.record(st.side); });
        attempt("elapsed_ms of a moved-from event", expect::invalid, [&] { (void)elapsed_ms(e0, e1); });
      }
      if (probe("unrecorded") && in.ConsumeBool()) {  // CUDA refuses an event never recorded
        rs::event fresh(rs::device::cpu());
        attempt("elapsed_ms from an event never recorded", expect::invalid, [&] { (void)elapsed_ms(fresh, e1); });
        attempt("elapsed_ms to an event never recorded", expect::invalid, [&] { (void)elapsed_ms(e1, fresh); });
      }
      if (probe("foreign") && in.ConsumeBool()) {  // a stream of another device cannot be ordered this way
        const rs::stream_ref gpu(rs::device::cuda(0), nullptr);
        attempt("event::record on a stream of another device", expect::resident_error, [&] { e0.record(gpu); });
        attempt("event::wait_on by a stream of another device", expect::resident_error, [&] { e1.wait_on(gpu); });
        attempt("stream_ref::wait_for a stream of another device", expect::resident_error,
                [&] { rs::default_stream(rs::device::cpu()).wait_for(gpu); });
      }
      break;
    }
    case 2: {
      rs::stream s(rs::device::cpu());
      rs::array<float> a(in.ConsumeIntegralInRange<std::size_t>(0, 50), s);
      s.synchronize();
      if (probe("moved") && in.ConsumeBool()) {
        rs::stream t(std::move(s));
        attempt("synchronize a moved-from stream", expect::invalid, [&] { s.synchronize(); });
        attempt("an array on a moved-from stream", expect::invalid, [&] { rs::array<float> b(3, s); });
        a.set_stream(t);
      }
      break;
    }
    case 3: {
      const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 50);
      rs::pinned_buffer<double> p(n);
      if (p.size() != n || (n && !p.data())) fail("pinned_buffer(n): wrong size or no memory");
      for (std::size_t i = 0; i < n; ++i) p[i] = double(i);
      rs::pinned_buffer<double> q = std::move(p);
      if (q.size() != n) fail("pinned_buffer move: the size did not move");
      if (p.size() != 0 || p.data() != nullptr) fail("a moved-from pinned_buffer is not empty");
      if (probe("moved") && in.ConsumeBool())
        attempt("to_device of a moved-from pinned_buffer", expect::maybe, [&] {
          if (rs::to_device(p, rs::default_stream(rs::device::cpu())).size() != 0)
            fail("a moved-from pinned_buffer uploaded elements");
        });
      break;
    }
    case 4: {
      // An array on a device this build cannot use.
      attempt("array on cuda:0", expect::resident_error, [&] { rs::array<float> a(4, rs::device::cuda(0)); });
      auto& s = st.pick<float>();
      if (s.moved) return;
      rs::array_ref<float> foreign(s.a.data(), s.a.size(), rs::stream_ref(rs::device::cuda(0), nullptr));
      attempt("map into an array on another device", expect::device, [&] { rs::map(square{})(s.a, foreign); });
      attempt("zip with an array on another device", expect::device, [&] { (void)rs::zip(s.a, foreign); });
      const expect refused = s.ref.empty() ? expect::maybe : expect::resident_error;  // nothing to do: either
      attempt("a pipeline on another device's array", refused, [&] { rs::map(square{})(foreign); });
      attempt("a random fill on another device's array", refused, [&] { rs::random::fill_uniform(foreign, 1); });
      if (probe("foreign")) {  // a copy this build cannot make is not counted as made
        // A device this build lacks has no ledger to read: refused, never zeros.
        attempt("the ledger of cuda:0", expect::resident_error, [&] { (void)rs::ledger(rs::device::cuda(0)); });
        const std::vector<float> h(s.ref.size(), 1.f);
        const auto before = rs::ledger(rs::device::cpu());
        attempt("copy_async to another device's array", s.ref.empty() ? expect::maybe : expect::resident_error,
                [&] { rs::copy_async(std::span<const float>(h), foreign); });
        const auto delta = rs::ledger(rs::device::cpu()) - before;
        if (delta.h2d_copies || delta.h2d_bytes || delta.d2d_copies)
          fail("a refused copy to cuda:0 counted " + std::to_string(delta.h2d_bytes) + " bytes in the ledger");
      }
      break;
    }
    default: {
      if (!probe("moved")) return;
      rs::flow f(rs::device::cpu());
      rs::flow g(std::move(f));
      attempt("add to a moved-from flow", expect::invalid, [&] { f.add("x", [](rs::stream_ref) {}); });
      attempt("run a moved-from flow", expect::invalid, [&] { f.run(); });
      attempt("size of a moved-from flow", expect::ok, [&] { (void)f.size(); });
      f = std::move(g);
      f.run();
    }
  }
}

// Huge sizes: refused with a typed error, nothing allocated.
void op_huge(fuzz_state& st) {
  if (!probe("size")) return;
  const std::size_t big[] = {std::size_t(-1),         std::size_t(-1) - 255, std::size_t(-1) / 4,
                             std::size_t(-1) / 4 + 1, std::size_t(-1) / 8,   (std::size_t(1) << 61) + 1,
                             std::size_t(1) << 62,    std::size_t(1) << 50};
  const std::size_t n = big[st.in.ConsumeIntegralInRange<int>(0, 7)];
  switch (st.in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      attempt("array<uint8_t>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::array<std::uint8_t> a(n, rs::device::cpu()); });
      break;
    case 1:
      attempt("array<float>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::array<float> a(n, rs::device::cpu()); });
      break;
    case 2:
      attempt("array<double>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::array<double> a(n, st.side); });
      break;
    case 3:
      attempt("pinned_buffer<double>(" + std::to_string(n) + ")", expect::resident_error,
              [&] { rs::pinned_buffer<double> p(n); });
      break;
    case 4: {
      const std::size_t r = std::size_t(1) << st.in.ConsumeIntegralInRange<int>(20, 40);
      attempt("array2d(" + std::to_string(r) + ", " + std::to_string(n / r) + ")", expect::resident_error,
              [&] { rs::array2d<float> a(r, n / r + 1, rs::device::cpu()); });
      break;
    }
    default: {  // rows * cols wraps to the size of the host buffer
      const std::size_t r = std::size_t(1) << st.in.ConsumeIntegralInRange<int>(1, 63);
      const std::size_t c = (std::size_t(1) << 63) / (r / 2);
      std::vector<float> h(r * c);
      attempt(
          "to_device(span of " + std::to_string(h.size()) + ", " + std::to_string(r) + ", " + std::to_string(c) + ")",
          expect::invalid, [&] { (void)rs::to_device(std::span<const float>(h), r, c, rs::device::cpu()); });
    }
  }
}

// The instances the interpreter calls.
template void op_allocate<float>(fuzz_state&);
template void op_allocate<double>(fuzz_state&);
template void op_allocate<std::uint32_t>(fuzz_state&);
template void op_upload<float>(fuzz_state&);
template void op_upload<std::uint32_t>(fuzz_state&);
template void op_download<float>(fuzz_state&);
template void op_download<double>(fuzz_state&);
template void op_copy_in<float>(fuzz_state&);
template void op_copy_between<float>(fuzz_state&);
template void op_copy_between<std::uint32_t>(fuzz_state&);
template void op_move<float>(fuzz_state&);
template void op_move<double>(fuzz_state&);

}  // namespace fuzz_api
