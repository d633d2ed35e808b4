// Addresses across call boundaries and through the thread's stack, for tests/test_held_out_attack_dataflow.py: a
// structure of a shared and a global pointer passed by value, a pointer a callee returns, a table of pointers in a
// stack array, selects of shared, stack and global addresses, loops that advance a pointer, two levels of callees,
// atomics through generic pointers, inline asm that makes an address, templates, cooperative groups; built with
// -O3, -G and -rdc=true. The `pdl_*` kernels are PDL kernels.
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __noinline__ void keep(float* p, float v) { *p = v; }
__device__ __noinline__ void fill(float* p, float* end, int step, float v) { for (; p < end; p += step) *p = v; }
struct Pair { float* s; float* g; };
__device__ __noinline__ void put_s(Pair p, float v) { *p.s = v; }
__device__ __noinline__ void put_g(Pair p, float v) { *p.g = v; }
__device__ __noinline__ float* at(float* b, int i) { return b + i; }
__device__ __noinline__ void inner(float* q, float v) { q[1] = v; }
__device__ __noinline__ void outer(float* p, float v) { inner(p + 2, v); }
__device__ __noinline__ void outer2(float* s, float* g, float v) { inner(s, v); }
__device__ __noinline__ void outer3(float* s, float* g, float v) { inner(g, v); }
__device__ __noinline__ void bump(int* c) { atomicAdd(c, 1); }
template <typename T> __device__ __noinline__ void tput(T* p, T v) { *p = v; }
__device__ __noinline__ void putpp(float** pp, float v) { **pp = v; }

__global__ void pdl_selp_two_tiles(const float* x, float* y, int n) {
  __shared__ float a[256], b[256];
  keep(n > 0 ? a + threadIdx.x : b + threadIdx.x, 1.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x] + b[threadIdx.x];
}
__global__ void pdl_selp_tile_or_stack_or_global(const float* x, float* y, int n) {
  __shared__ float a[256]; float buf[4];
  float* p = n > 3 ? a + threadIdx.x : (n > 1 ? buf + (n & 3) : y + threadIdx.x);
  keep(p, 1.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x] + buf[threadIdx.x & 3];
}
__global__ void pdl_selp_tile_or_stack(const float* x, float* y, int n) {
  __shared__ float a[256]; float buf[4];
  keep(n > 3 ? a + threadIdx.x : buf + (n & 3), 1.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x] + buf[threadIdx.x & 3];
}
__global__ void pdl_loop_fill_tile(const float* x, float* y, int n) {
  __shared__ float a[1024];
  fill(a + threadIdx.x, a + 1024, blockDim.x, 0.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x];
}
__global__ void pdl_loop_fill_global(const float* x, float* y, int n) {
  fill(y + threadIdx.x, y + n, blockDim.x, 0.f);
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
__global__ void pdl_struct_shared_field_written(const float* x, float* y, int n) {
  __shared__ float a[256];
  Pair p{a + threadIdx.x, y + threadIdx.x};
  put_s(p, 1.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_struct_global_field_written(const float* x, float* y, int n) {
  __shared__ float a[256];
  Pair p{a + threadIdx.x, y + threadIdx.x};
  put_g(p, 1.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_returned_shared_pointer(const float* x, float* y, int n) {
  __shared__ float a[256];
  *at(a, threadIdx.x) = 2.f;
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_returned_global_pointer(const float* x, float* y, int n) {
  *at(y, threadIdx.x) = 2.f;
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
__global__ void pdl_two_levels_shared(const float* x, float* y, int n) {
  __shared__ float a[256];
  outer(a + (threadIdx.x & 63), 3.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x];
}
__global__ void pdl_two_levels_global(const float* x, float* y, int n) {
  outer(y + threadIdx.x, 3.f);
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
__global__ void pdl_two_levels_passes_shared_of_two(const float* x, float* y, int n) {
  __shared__ float a[256];
  outer2(a + (threadIdx.x & 63), y, 3.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x];
}
__global__ void pdl_two_levels_passes_global_of_two(const float* x, float* y, int n) {
  __shared__ float a[256];
  outer3(a + (threadIdx.x & 63), y + threadIdx.x, 3.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x];
}
__global__ void pdl_atomic_shared_counter(const float* x, float* y, int n) {
  __shared__ int c;
  bump(&c);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + c;
}
__global__ void pdl_atomic_global_counter(const float* x, int* y, int n) {
  bump(y);
  grid_wait();
  y[threadIdx.x + 1] += (int)x[threadIdx.x];
}
__global__ void pdl_asm_cvta_shared(const float* x, float* y, int n) {
  __shared__ float a[256];
  float* p;
  unsigned long long s = (unsigned long long)__cvta_generic_to_shared(a + threadIdx.x);
  asm("cvta.shared.u64 %0, %1;" : "=l"(p) : "l"(s));
  keep(p, 4.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_asm_mov_global(const float* x, float* y, int n) {
  float* p;
  asm("mov.b64 %0, %1;" : "=l"(p) : "l"(y + threadIdx.x));
  keep(p, 4.f);
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
__global__ void pdl_restrict_load_before(const float* __restrict__ x, float* __restrict__ y, int n) {
  float v = __ldg(x + threadIdx.x);
  grid_wait();
  y[threadIdx.x] = v;
}
__global__ void pdl_restrict_shared_only(const float* __restrict__ x, float* __restrict__ y, int n) {
  __shared__ float a[256];
  a[threadIdx.x] = n;
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_cg_block_sync_shared(const float* x, float* y, int n) {
  __shared__ float a[256];
  cg::thread_block b = cg::this_thread_block();
  a[b.thread_rank()] = n;
  b.sync(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_cg_memcpy_async_before(const float* x, float* y, int n) {
  __shared__ float a[256];
  cg::thread_block b = cg::this_thread_block();
  cg::memcpy_async(b, a, x, sizeof(float) * 256);
  cg::wait(b);
  grid_wait();
  y[threadIdx.x] = a[threadIdx.x];
}
__global__ void pdl_template_shared_int(const float* x, float* y, int n) {
  __shared__ int a[256];
  tput<int>(a + threadIdx.x, n);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_template_global_double(const float* x, double* y, int n) {
  tput<double>(y + threadIdx.x, 1.0);
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
__global__ void pdl_pointer_to_pointer_shared(const float* x, float* y, int n) {
  __shared__ float a[256];
  float* p = a + threadIdx.x;
  putpp(&p, 5.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_pointer_to_pointer_global(const float* x, float* y, int n) {
  float* p = y + threadIdx.x;
  putpp(&p, 5.f);
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
__global__ void pdl_dynamic_shared_via_callee(const float* x, float* y, int n) {
  extern __shared__ float dyn[];
  keep(dyn + threadIdx.x, 6.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + dyn[threadIdx.x ^ 1];
}
__global__ void pdl_loop_pointer_switches_to_global(const float* x, float* y, int n) {
  __shared__ float a[256];
  float* p = a + threadIdx.x;
  for (int i = 0; i < n; ++i) { keep(p, (float)i); if (i == 3) p = y + threadIdx.x; }
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[threadIdx.x ^ 1];
}
__global__ void pdl_table_of_shared_pointers_in_registers(const float* x, float* y, int n) {
  __shared__ float a[256], b[256];
  float* ps[2] = {a, b};
  keep(ps[n & 1] + threadIdx.x, 7.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + a[threadIdx.x] + b[threadIdx.x];
}
__global__ void pdl_no_access_only_math(const float* x, float* y, int n) {
  float v = sinf((float)n) * 3.f;
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + v;
}

static __device__ float lut[4] = {1.f, 2.f, 3.f, 4.f};  // only read here; the host may still hand out its address
static __device__ float written_lut[4] = {1.f, 2.f, 3.f, 4.f};
__device__ float visible_lut[4] = {1.f, 2.f, 3.f, 4.f};
static __device__ float leaked_lut[4] = {1.f, 2.f, 3.f, 4.f};

__global__ void writes_the_table(const float* x) { written_lut[threadIdx.x & 3] = x[threadIdx.x]; }

__global__ void pdl_reads_a_private_table(const float* x, float* y, int n) {
  float v = lut[n & 3];
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + v;
}
__global__ void pdl_reads_a_written_table(const float* x, float* y, int n) {
  float v = written_lut[n & 3];
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + v;
}
__global__ void pdl_reads_a_visible_table(const float* x, float* y, int n) {
  float v = visible_lut[n & 3];
  grid_wait();
  y[threadIdx.x] = x[threadIdx.x] + v;
}
__global__ void pdl_reads_a_table_a_helper_writes(const float* x, float* y, int n) {
  float v = leaked_lut[n & 3];
  grid_wait();
  keep(leaked_lut + (threadIdx.x & 3), x[threadIdx.x]);
  y[threadIdx.x] = v;
}

__device__ __noinline__ void put_g_ref(Pair& p, float v) { *p.g = v; }
__device__ __noinline__ Pair make(float* s, float* g) { return Pair{s + 1, g + 1}; }
__device__ __noinline__ float* pick(float* a, float* b, int c) { return c ? a : b; }
__device__ __noinline__ float* at2(float* b, int i) { return at(b, i + 1); }
__global__ void pdl_struct_by_reference_global(const float* x, float* y, int n) {
  __shared__ float a[256];
  Pair p{a, y + threadIdx.x};
  put_g_ref(p, 1.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_returned_struct_global_field(const float* x, float* y, int n) {
  __shared__ float a[256];
  Pair p = make(a, y);
  *p.g = 1.f;
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_returned_struct_shared_field(const float* x, float* y, int n) {
  __shared__ float a[256];
  Pair p = make(a, y);
  *p.s = 1.f;
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_returned_pick_of_shared_and_global(const float* x, float* y, int n) {
  __shared__ float a[256];
  *pick(a, y, n) = 1.f;
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_stack_slot_overwritten_with_global(const float* x, float* y, int n) {
  __shared__ float a[256];
  float* p[2] = {a, a};
  p[n & 1] = y;
  keep(p[(n >> 1) & 1] + threadIdx.x, 2.f);
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_loop_reassigns_to_global(const float* x, float* y, int n) {
  __shared__ float a[256];
  float* p = a;
  for (int i = 0; i < n; ++i) { p = (i == 3) ? y : p; keep(p + threadIdx.x, 1.f); }
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_returned_two_levels_shared(const float* x, float* y, int n) {
  __shared__ float a[256];
  *at2(a, threadIdx.x & 63) = 1.f;
  __syncthreads(); grid_wait();
  y[threadIdx.x] += x[threadIdx.x] + a[1];
}
__global__ void pdl_returned_two_levels_global(const float* x, float* y, int n) {
  *at2(y, threadIdx.x) = 1.f;
  grid_wait();
  y[threadIdx.x] += x[threadIdx.x];
}
