// The metal-cpu runner: executes a grid of Metal threadgroups on the CPU.
//
// One std::thread per Metal thread of a threadgroup; the threads are created once and run the
// groups one after another (group g + 1 starts when every thread has finished group g, at the
// group barrier), so threadgroup memory declared `static` in the kernel is one group's at a
// time. Each thread's lane, SIMD group and barrier are set in tilecore_shim::self.
#pragma once
#include <metal_stdlib>  // includes the standard headers before its keyword macros

namespace tilecore_shim {

// fn(ctx, tid, bid) runs Metal thread tid of threadgroup bid. Not a template: it is compiled
// once, into the precompiled shim's object, instead of once per kernel (its std::thread,
// std::barrier and std::vector code were most of a small kernel's clang++ optimizer time).
__attribute__((noinline)) inline int run_grid_fn(unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                                                 void (*fn)(void*, uint3, uint3), void* ctx) {
  if (threads == 0 || threads > 1024) return 1;
  std::barrier<> group((std::ptrdiff_t)threads);
  std::vector<std::unique_ptr<SimdGroup>> simd;
  for (unsigned first = 0; first < threads; first += 32)
    simd.emplace_back(new SimdGroup((std::ptrdiff_t)std::min(32u, threads - first)));
  const unsigned long total = (unsigned long)gx * gy * gz;
  std::vector<os_thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      self.lane = t % 32;
      self.simd = simd[t / 32].get();
      self.group = &group;
      for (unsigned long g = 0; g < total; ++g) {
        const uint3 bid = uint3((uint)(g % gx), (uint)((g / gx) % gy), (uint)(g / ((unsigned long)gx * gy)));
        fn(ctx, uint3(t, 0u, 0u), bid);
        group.arrive_and_wait();  // the next group reuses threadgroup memory
      }
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}

// body(tid, bid) runs Metal thread tid of threadgroup bid: the kernel's side is one call
// through a function pointer per thread and group.
template <class Body>
inline int run_grid(unsigned gx, unsigned gy, unsigned gz, unsigned threads, Body body) {
  return run_grid_fn(gx, gy, gz, threads,
                     [](void* ctx, uint3 tid, uint3 bid) { (*static_cast<Body*>(ctx))(tid, bid); }, &body);
}

}  // namespace tilecore_shim
