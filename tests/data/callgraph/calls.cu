// Calls the earlier PTX call-graph cases do not make: recursion whose stack ptxas cannot size, a callee called from
// two branches, callees that print, assert or trap before the wait, libdevice calls, a file built with
// -maxrregcount whose kernel has a launch bound, two waits, stores through a pointer to shared memory.
#include <cassert>
#include <cstdio>

__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void launch_next() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__device__ __noinline__ float walk(const float* x, int depth) {
  float local[16];
  for (int i = 0; i < 16; ++i) local[i] = x[(depth * 16 + i) & 255];
  if (depth <= 0) return local[depth & 15];
  return local[(depth * 7) & 15] + walk(x, depth - 1);
}

__global__ void recursion_with_a_stack_array(const float* x, float* y, int n) {
  y[threadIdx.x] = walk(x, n);
}

__device__ __noinline__ float loads(const float* x, int i) { return x[i] * 3.f; }

__global__ void pdl_same_callee_before_the_wait_in_one_branch(const float* x, float* y, int n) {
  float v;
  if (n > 4) {
    v = loads(x, threadIdx.x);
    grid_wait();
  } else {
    grid_wait();
    v = loads(x, threadIdx.x + 1);
  }
  y[threadIdx.x] = v;
}

__global__ void pdl_same_callee_after_the_wait_in_both_branches(const float* x, float* y, int n) {
  grid_wait();
  float v = n > 4 ? loads(x, threadIdx.x) : loads(x, threadIdx.x + 1);
  y[threadIdx.x] = v;
}

__device__ __noinline__ void say(int v) { printf("tile %d\n", v); }
__device__ __noinline__ void check_positive(int v) { assert(v > 0); }
__device__ __noinline__ void stop_if(int v) { if (v < 0) __trap(); }
__device__ __noinline__ float smooth(float v) { float s, c; sincosf(v, &s, &c); return expf(s) + c; }
__device__ __noinline__ void release_dependents() { launch_next(); }

__global__ void pdl_printf_in_a_callee_before_the_wait(const float* x, float* y, int n) {
  say(n);
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x];
}

__global__ void pdl_assert_in_a_callee_before_the_wait(const float* x, float* y, int n) {
  check_positive(n);
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x];
}

__global__ void pdl_trap_in_a_callee_before_the_wait(const float* x, float* y, int n) {
  stop_if(n);
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x];
}

__global__ void pdl_libdevice_in_a_callee_before_the_wait(const float* x, float* y, int n) {
  float v = smooth((float)n);
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + v;
}

__global__ void pdl_launch_dependents_in_a_callee_then_the_wait(const float* x, float* y, int n) {
  release_dependents();
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + n;
}

__global__ void pdl_two_waits_with_a_load_between(const float* x, float* y, int n) {
  grid_wait();
  float v = loads(x, threadIdx.x);
  grid_wait();
  y[threadIdx.x] = v + n;
}

__global__ void pdl_printf_of_a_load_before_the_wait(const float* x, float* y, int n) {
  say((int)x[threadIdx.x]);
  grid_wait();
  y[threadIdx.x] = (float)n;
}

__global__ void pdl_store_through_a_shared_pointer_before_the_wait(const float* x, float* y, int n) {
  __shared__ float tile[256];
  float* p = tile + threadIdx.x;
  *p = (float)n;
  __syncthreads();
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + tile[(threadIdx.x + 1) & 255];
}

__device__ __noinline__ void keep(float* p, float v) { *p = v; }

__global__ void pdl_shared_pointer_stored_by_a_callee_before_the_wait(const float* x, float* y, int n) {
  __shared__ float tile[256];
  keep(tile + threadIdx.x, (float)n);
  __syncthreads();
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + tile[(threadIdx.x + 1) & 255];
}

__global__ void pdl_global_pointer_stored_by_a_callee_before_the_wait(const float* x, float* y, int n) {
  keep(y + threadIdx.x, (float)n);
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}

__global__ void pdl_stack_array_stored_by_a_callee_before_the_wait(const float* x, float* y, int n) {
  float scratch[4];
  keep(scratch + (threadIdx.x & 3), (float)n);
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + scratch[(threadIdx.x + 1) & 3];
}

__global__ void pdl_shared_or_global_pointer_stored_by_a_callee_before_the_wait(const float* x, float* y, int n) {
  __shared__ float tile[256];
  keep(n > 0 ? tile + threadIdx.x : y + threadIdx.x, (float)n);
  __syncthreads();
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + tile[(threadIdx.x + 1) & 255];
}

__global__ void pdl_atomic_on_a_local_copy_before_the_wait(const float* x, float* y, int n) {
  int counter = n;
  atomicAdd(&counter, 1);
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + counter;
}

__device__ __noinline__ float heavy(const float* x, int k) {
  float acc[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = x[i * k];
  float s = 0.f;
  for (int i = 0; i < 48; ++i) s += acc[(i * k) % 48] * acc[i];
  return s;
}

__global__ void __launch_bounds__(1024, 1) bounded_caller_of_a_heavy_callee(const float* x, float* y, int n) {
  y[threadIdx.x] = heavy(x, n);
}

__device__ float (*const table[2])(const float*, int) = {loads, heavy};

__global__ void call_through_a_table_in_constant_memory(const float* x, float* y, int n) {
  y[threadIdx.x] = table[n & 1](x, n);
}
