// Call-graph inputs of a fifth attack (tests/test_held_out_attack5_call_graph.py): template recursion, constructors,
// references, CAS loops, memcpy, local tables of function pointers, lambdas, a recursion whose base case waits,
// block-scaled MMA in template and method callees. Each kernel's name says what it plants.
#include <cstdint>
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

// 1-2: template recursion, each level its own noinline function
template <int N> __device__ __noinline__ void chain_wait() { if constexpr (N == 0) { WAIT(); } else { chain_wait<N - 1>(); } }
template <int N> __device__ __noinline__ float chain_load(const float* x) { if constexpr (N == 0) { return x[threadIdx.x]; } else { return chain_load<N - 1>(x) + 1.f; } }
__global__ void pdl_template_chain_waits_then_load(const float* x, float* o) { chain_wait<3>(); o[threadIdx.x] = x[threadIdx.x]; }
__global__ void pdl_template_chain_loads_before_wait(const float* x, float* o) { float v = chain_load<3>(x); WAIT(); o[threadIdx.x] = v; }

// 3-4: constructors
struct Waiter { __device__ __noinline__ Waiter() { WAIT(); } };
struct Loader { float v; __device__ __noinline__ Loader(const float* x) : v(x[threadIdx.x]) {} };
__global__ void pdl_constructor_waits_then_load(const float* x, float* o) { Waiter w; o[threadIdx.x] = x[threadIdx.x]; }
__global__ void pdl_constructor_loads_before_wait(const float* x, float* o) { Loader l(x); WAIT(); o[threadIdx.x] = l.v; }

// 5: reference parameter to global written in a callee before the wait
__device__ __noinline__ void bump(float& r) { r += 1.f; }
__global__ void pdl_reference_store_in_callee_before_wait(float* o) { bump(o[threadIdx.x]); WAIT(); }

// 6: atomicCAS loop in a callee before the wait
__device__ __noinline__ void cas_max(int* p, int v) { int old = *p; while (old < v) { int seen = atomicCAS(p, old, v); if (seen == old) break; old = seen; } }
__global__ void pdl_cas_loop_in_callee_before_wait(int* p) { cas_max(p, threadIdx.x); WAIT(); }

// 7: device memcpy from global in a callee before the wait
__device__ __noinline__ void copy_in(float* dst, const float* src) { memcpy(dst, src, 16 * sizeof(float)); }
__global__ void pdl_memcpy_in_callee_before_wait(const float* x, float* o) { float buf[16]; copy_in(buf, x); WAIT(); o[threadIdx.x] = buf[threadIdx.x % 16]; }

// 8: callee waits only on block 0, then kernel loads
__device__ __noinline__ void wait_block0() { if (blockIdx.x == 0) WAIT(); }
__global__ void pdl_callee_waits_on_block_zero_then_load(const float* x, float* o) { wait_block0(); o[threadIdx.x] = x[threadIdx.x]; }

// 9: local table of two noinline functions, both loading, chosen at run time, before the wait
__device__ __noinline__ float first_of(const float* x) { return x[0]; }
__device__ __noinline__ float last_of(const float* x) { return x[31]; }
__global__ void pdl_local_table_call_before_wait(const float* x, float* o) {
  float (*table[2])(const float*) = {first_of, last_of};
  float v = table[threadIdx.x & 1](x); WAIT(); o[threadIdx.x] = v;
}
// 10: same table called after the wait
__global__ void pdl_local_table_call_after_wait(const float* x, float* o) {
  float (*table[2])(const float*) = {first_of, last_of};
  WAIT(); o[threadIdx.x] = table[threadIdx.x & 1](x);
}

// 11: the wait in a callee that is the tail of an expression, then a store
__device__ __noinline__ int waited(int v) { WAIT(); return v + 1; }
__global__ void pdl_wait_in_returned_value_then_store(float* o) { int v = waited(threadIdx.x); o[threadIdx.x] = v; }

// 12: loads in a callee of a callee reached only through a lambda (inlined) before the wait
__device__ __noinline__ float deep_load(const float* x) { return x[threadIdx.x] * 2.f; }
__global__ void pdl_lambda_calls_noinline_loader_before_wait(const float* x, float* o) { auto f = [&]() { return deep_load(x); }; float v = f(); WAIT(); o[threadIdx.x] = v; }

// 13: recursion whose base case waits and whose recursive case stores after the call
__device__ __noinline__ void rec_store(float* o, int n) { if (n == 0) { WAIT(); return; } rec_store(o, n - 1); o[n] = 1.f; }
__global__ void pdl_recursion_waits_at_the_base_then_stores(float* o, int n) { rec_store(o, n); }

// 14: KG103 spills in a template noinline callee
template <int N> __device__ __noinline__ float heavy(const float* x, int k) { float acc[N]; for (int i = 0; i < N; ++i) acc[i] = x[i * k]; float s = 0.f; for (int i = 0; i < N; ++i) s += acc[(i * 7 + k) % N] * acc[i]; return s; }
__global__ void template_callee_spills(const float* x, float* o, int k) { o[threadIdx.x] = heavy<96>(x, k); }

// 15-16: block-scaled MMA in a template noinline callee; the plain twin without it
template <int S> __device__ __noinline__ void scaled_t(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) {
  const unsigned t = threadIdx.x; float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {0, 0}, %11, {0, 0};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]), "r"(sf[0]), "r"(sf[S]));
  out[t] = d0 + d1 + d2 + d3;
}
__global__ void scaled_in_template_callee(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) { scaled_t<1>(a, b, sf, out); }
__global__ void scaled_expected_but_absent(const uint32_t* a, float* out) { out[threadIdx.x] = a[threadIdx.x]; }
// 17: block-scaled MMA through a member function pointer-free virtual-free struct method (noinline)
struct Tile { __device__ __noinline__ void run(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) { scaled_t<1>(a, b, sf, out); } };
__global__ void scaled_in_a_method_two_levels(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) { Tile t; t.run(a, b, sf, out); }
// 18: KG109 local array walked in a loop inside a callee of a callee
__device__ __noinline__ float walk(const float* x, int n) { float buf[64]; for (int i = 0; i < 64; ++i) buf[i] = x[i]; float s = 0; for (int i = 0; i < n; ++i) s += buf[(i * 13) & 63]; return s; }
__device__ __noinline__ float walk_via(const float* x, int n) { return walk(x, n) + 1.f; }
__global__ void local_array_loop_two_levels(const float* x, float* o, int n) { o[threadIdx.x] = walk_via(x, n); }
