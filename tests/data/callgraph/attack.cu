// Call-graph edge cases for the PTX analysis: tests/test_ptx_call_graph.py compiles this with nvcc and reads
// the PTX and the ptxas log. Each kernel's name says what it plants.
#include <cstdint>

#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

__device__ __noinline__ void wait_always() { WAIT(); }
__device__ __noinline__ void wait_some(int c) { if (c) WAIT(); }
__device__ __noinline__ void wait_both(int c, float* p) { if (c) { WAIT(); p[1] = 1.f; } else { WAIT(); } }
__device__ __noinline__ void wait_unless(int c) { if (c) return; WAIT(); }
__device__ __noinline__ void wait_then_load(const float* x, float* o) { WAIT(); o[0] = x[0]; }
__device__ __noinline__ void load_then_wait(const float* x, float* o) { float v = x[0]; WAIT(); o[0] = v; }
__device__ __noinline__ float load(const float* x, int i) { return x[i]; }
__device__ __noinline__ void store(float* o, float v) { o[threadIdx.x] = v; }
__device__ __noinline__ void red_add(float* o, float v) { atomicAdd(o, v); }
__device__ __noinline__ float ldg(const float* x) { return __ldg(x + threadIdx.x); }
__device__ __noinline__ float generic(const float* x) { float v; asm volatile("ld.f32 %0, [%1];" : "=f"(v) : "l"(x)); return v; }
__device__ __noinline__ void shared_only(float v) { __shared__ float s[32]; s[threadIdx.x % 32] = v; __syncthreads(); }
__device__ __noinline__ void bulk_copy(void* smem, const void* gmem, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 128, [%2];"
               :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem), "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}
__device__ __noinline__ void async_copy(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ float inlined_load(const float* x) { return x[threadIdx.x]; }
__device__ __noinline__ float rec(const float* x, int n) { return n <= 0 ? x[0] : rec(x, n - 1) + 1.f; }
__device__ __noinline__ void rec_wait(int n) { if (n == 0) { WAIT(); return; } rec_wait(n - 1); }
__device__ __noinline__ float mut_b(const float* x, int n);
__device__ __noinline__ float mut_a(const float* x, int n) { return n <= 0 ? 0.f : mut_b(x, n - 1) * 2.f; }
__device__ __noinline__ float mut_b(const float* x, int n) { return n <= 0 ? x[n] : mut_a(x, n - 1) + 1.f; }
__device__ __noinline__ float defined_after(const float* x);
__device__ __noinline__ float d1(const float* x) { return load(x, 1); }
__device__ __noinline__ float d2(const float* x) { return d1(x) + 1.f; }
__device__ __noinline__ float d3(const float* x) { return d2(x) + 1.f; }
__device__ __noinline__ float d4(const float* x) { return d3(x) + 1.f; }
__device__ __noinline__ void launch_next() { asm volatile("griddepcontrol.launch_dependents;"); }
typedef float (*loader)(const float*, int);
typedef void (*action)();
__device__ loader pick_loader(int c) { return c ? load : nullptr; }

// ---- PDL: accesses and waits through calls
__global__ void recursion_before_wait(const float* x, float* o, int n) { float v = rec(x, n); WAIT(); o[0] = v; }
__global__ void recursion_after_wait(const float* x, float* o, int n) { WAIT(); o[0] = rec(x, n); }
__global__ void mutual_before_wait(const float* x, float* o, int n) { float v = mut_a(x, n); WAIT(); o[0] = v; }
__global__ void mutual_after_wait(const float* x, float* o, int n) { WAIT(); o[0] = mut_a(x, n); }
__global__ void twice_after_wait(const float* x, float* o) { WAIT(); o[0] = load(x, 0) + load(x, 1); }
__global__ void twice_first_before(const float* x, float* o) { float v = load(x, 0); WAIT(); o[0] = v + load(x, 1); }
__global__ void callee_waits_in_one_branch(const float* x, float* o, int c) { wait_some(c); o[0] = x[0]; }
__global__ void callee_waits_in_both_branches(const float* x, float* o, int c) { wait_both(c, o); o[0] = x[0]; }
__global__ void callee_returns_early_unwaited(const float* x, float* o, int c) { wait_unless(c); o[0] = x[0]; }
__global__ void wait_call_in_one_branch(const float* x, float* o, int c) { if (c) wait_always(); o[0] = x[0]; }
__global__ void pointer_before_wait(const float* x, float* o, int c) { loader f = pick_loader(c); float v = f(x, 0); WAIT(); o[0] = v; }
__global__ void pointer_after_wait(const float* x, float* o, int c) { WAIT(); loader f = pick_loader(c); o[0] = f(x, 0); }
__global__ void pointer_to_waiting_function(const float* x, float* o, action* table) { table[threadIdx.x & 1](); o[0] = x[0]; }
__global__ void inlined_before_wait(const float* x, float* o) { float v = inlined_load(x); WAIT(); o[0] = v; }
__global__ void cp_async_before_wait(const float* x, float* o) { __shared__ float s[32]; async_copy(s, x); WAIT(); o[0] = s[0]; }
__global__ void bulk_copy_before_wait(const float* x, float* o) { __shared__ alignas(128) float s[32]; __shared__ uint64_t bar; bulk_copy(s, x, &bar); WAIT(); o[0] = s[0]; }
__global__ void store_before_wait(float* o) { store(o, 1.f); WAIT(); }
__global__ void red_before_wait(float* o) { red_add(o, 1.f); WAIT(); }
__global__ void red_after_wait(float* o) { WAIT(); red_add(o, 1.f); }
__global__ void ldg_before_wait(const float* x, float* o) { float v = ldg(x); WAIT(); o[0] = v; }
__global__ void generic_before_wait(const float* x, float* o) { float v = generic(x); WAIT(); o[0] = v; }
__global__ void shared_only_before_wait(const float* x, float* o) { shared_only(1.f); WAIT(); o[0] = x[0]; }
__global__ void defined_after_use(const float* x, float* o) { float v = defined_after(x); WAIT(); o[0] = v; }
__global__ void callee_waits_then_loads(const float* x, float* o) { wait_then_load(x, o); }
__global__ void callee_loads_then_waits(const float* x, float* o) { load_then_wait(x, o); }
__global__ void five_levels_down(const float* x, float* o) { float v = d4(x); WAIT(); o[0] = v; }
__global__ void wait_only_through_recursion(const float* x, float* o, int n) { rec_wait(n); o[0] = x[0]; }
__global__ void shared_helper_waits_first(const float* x, float* o) { WAIT(); o[0] = d2(x); }
__global__ void shared_helper_loads_first(const float* x, float* o) { float v = d2(x); WAIT(); o[0] = v; }
__global__ void launch_in_callee(const float* x, float* o) { WAIT(); o[0] = x[0]; launch_next(); }
__global__ void only_wait_in_callee(const float* x, float* o) { wait_always(); o[0] = x[0]; }

__device__ __noinline__ float defined_after(const float* x) { return x[threadIdx.x]; }

// ---- resources: spills of what is called
__device__ __noinline__ float spill(const float* x, int n) {
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) acc[i] = x[i];
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = acc[i] * x[j + i] + acc[(i + 1) % 96];
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 96; ++i) s += acc[i];
  return s;
}
__device__ __noinline__ float spill_via(const float* x, int n) { return spill(x, n) * 2.f; }
__global__ void __launch_bounds__(1024) spill_called_twice(const float* x, float* o, int n) { o[0] = spill(x, n) + spill(x + 1, n); }
__global__ void __launch_bounds__(1024) spill_two_levels(const float* x, float* o, int n) { o[0] = spill_via(x, n); }
__global__ void __launch_bounds__(1024) spill_not_called(const float* x, float* o, int n) { o[0] = load(x, n); }
__global__ void recursion_stack(const float* x, float* o, int n) { o[0] = rec(x, n); }

// ---- MMA through calls
__device__ __noinline__ void scaled_tile(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) {
  const unsigned t = threadIdx.x;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {0, 0}, %11, {0, 0};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]), "r"(sf[0]), "r"(sf[1]));
  out[t] = d0 + d1 + d2 + d3;
}
__device__ __noinline__ void scaled_via(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) { scaled_tile(a, b, sf, out); }
typedef void (*tile_fn)(const uint32_t*, const uint32_t*, const uint32_t*, float*);
__device__ tile_fn tiles[1] = {scaled_tile};
__global__ void mma_two_levels(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) { scaled_via(a, b, sf, out); }
__global__ void mma_through_pointer(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) { tiles[0](a, b, sf, out); }
__global__ void mma_not_called(const uint32_t* a, float* out) { out[0] = (float)a[0]; }
