// What touches global memory before the wait, among instructions the earlier cases do not write: cache
// maintenance (discard makes the lines' values indeterminate: a write; prefetches and priorities read nothing
// into the program), tensor-map writes, streaming loads and stores, block-scope atomics, address arithmetic,
// timers and sleep, a grid-wide barrier.
#include <cooperative_groups.h>
#include <cstdint>

struct alignas(64) TensorMap { unsigned char bytes[128]; };

#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

__global__ void discard_before_wait(float* o) {
  asm volatile("discard.global.L2 [%0], 128;" :: "l"(o) : "memory");
  WAIT();
  o[threadIdx.x] = 1.f;
}

__global__ void tensormap_replace_before_wait(void* tmap, float* o, uint64_t address) {
  asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;" :: "l"(tmap), "l"(address)
               : "memory");
  WAIT();
  o[threadIdx.x] = 1.f;
}

__global__ void bulk_prefetch_before_wait(const float* x, float* o) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], 256;" :: "l"(x) : "memory");
  WAIT();
  o[threadIdx.x] = x[threadIdx.x];
}

__global__ void tensor_prefetch_before_wait(const __grid_constant__ TensorMap map, float* o) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];"
               :: "l"(reinterpret_cast<uint64_t>(&map)), "r"(0), "r"(0) : "memory");
  WAIT();
  o[threadIdx.x] = 1.f;
}

__global__ void prefetch_before_wait(const float* x, float* o) {
  asm volatile("prefetch.global.L2::evict_last [%0];" :: "l"(x) : "memory");
  WAIT();
  o[threadIdx.x] = x[threadIdx.x];
}

__global__ void tensormap_prefetch_before_wait(const __grid_constant__ TensorMap map, float* o) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(&map)) : "memory");
  WAIT();
  o[threadIdx.x] = 1.f;
}

__global__ void priority_and_policy_before_wait(const float* x, float* o) {
  uint64_t policy;
  asm volatile("applypriority.global.L2::evict_normal [%0], 128;" :: "l"(x) : "memory");
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  WAIT();
  o[threadIdx.x] = x[threadIdx.x] + (float)(policy & 1);
}

__global__ void streaming_load_before_wait(const float* x, float* o) {
  float v = __ldcs(x + threadIdx.x);
  WAIT();
  o[threadIdx.x] = v;
}

__global__ void streaming_store_before_wait(float* o) {
  __stcs(o + threadIdx.x, 1.f);
  WAIT();
}

__global__ void block_scope_atomic_before_wait(float* o) {
  atomicAdd_block(o, 1.f);
  WAIT();
}

__global__ void address_arithmetic_before_wait(const float* x, float* o) {
  unsigned is_global;
  size_t where;
  asm volatile("{ .reg .pred p; isspacep.global p, %2; selp.u32 %0, 1, 0, p; cvta.to.global.u64 %1, %2; }"
               : "=r"(is_global), "=l"(where) : "l"(x));
  WAIT();
  o[threadIdx.x] = x[threadIdx.x] + (float)(is_global + (where & 1));
}

__global__ void timers_and_sleep_before_wait(const float* x, float* o) {
  long long start = clock64();
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  __nanosleep(100);
  __threadfence();
  WAIT();
  o[threadIdx.x] = x[threadIdx.x] + (float)((start + now) & 1);
}

__global__ void grid_barrier_before_wait(const float* x, float* o) {
  cooperative_groups::this_grid().sync();
  WAIT();
  o[threadIdx.x] = x[threadIdx.x];
}

__global__ void struct_copy_before_wait(const float4* x, float4* o) {
  float4 v = x[threadIdx.x];
  WAIT();
  o[threadIdx.x] = v;
}
