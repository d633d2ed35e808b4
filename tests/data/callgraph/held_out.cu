// More call-graph and state-space cases for the PTX analysis, compiled by tests/test_held_out_callgraph.py.
// Each kernel's name says what it plants; the test holds whether some path reaches a global access first.
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>

#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
using namespace nvcuda;

__constant__ float table[4];
struct alignas(64) Map { unsigned char bytes[128]; };  // a tensor map as a kernel parameter

// ---- callees that touch no global memory
__device__ __noinline__ void vshared(float v) {
  volatile __shared__ float s[64];
  s[threadIdx.x % 64] = v;
  s[(threadIdx.x + 1) % 64] += 1.f;
}
__device__ __noinline__ void cta_shared(float v) {
  __shared__ float s[32];
  asm volatile("st.shared::cta.f32 [%0], %1;" :: "r"((unsigned)__cvta_generic_to_shared(&s[threadIdx.x % 32])),
               "f"(v) : "memory");
}
__device__ __noinline__ void atom_shared() {
  __shared__ unsigned s;
  asm volatile("atom.shared::cta.add.u32 _, [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&s)) : "memory");
}
__device__ __noinline__ void cp_bookkeeping() {
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_all;" ::: "memory");
}
__device__ __noinline__ void dsmem_store(unsigned remote, unsigned v, unsigned bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];" :: "r"(remote), "r"(v),
               "r"(bar) : "memory");
}
__device__ __noinline__ void smem_to_dsmem(unsigned dst, unsigned src, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], 128, [%2];"
               :: "r"(dst), "r"(src), "r"(bar) : "memory");
}
__device__ __noinline__ float constant_only(int i) { return table[i & 3]; }
__device__ __noinline__ float local_only(int i, float v) {
  float a[32];
  for (int k = 0; k < 32; ++k) a[k] = v * k;
  return a[i & 31];
}

// ---- callees that do
__device__ __noinline__ float tex_read(cudaTextureObject_t t) { return tex1Dfetch<float>(t, threadIdx.x); }
__device__ __noinline__ float surf_read(cudaSurfaceObject_t s) { float v; surf1Dread(&v, s, threadIdx.x * 4); return v; }
__device__ __noinline__ float wmma_load(const half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> f;
  wmma::load_matrix_sync(f, a, 16);
  return __half2float(f.x[0]);
}
__device__ __noinline__ unsigned relaxed_global(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __noinline__ unsigned acquire_generic(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __noinline__ unsigned asm_block_load(const unsigned* p) {
  unsigned v;
  asm volatile("{\n\t.reg .b32 t;\n\tld.global.u32 t, [%1];\n\tmov.b32 %0, t;\n}" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __noinline__ void tma_load(void* smem, const void* map, uint64_t* bar) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
               :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(map), "r"(0),
                  "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}
template <typename T> __device__ __noinline__ T tget(const T* x) { return x[threadIdx.x]; }
template <typename F> __device__ __noinline__ float apply_fn(F f) { return f(threadIdx.x); }
__device__ __noinline__ float load1(const float* x) { return x[1]; }
__device__ __forceinline__ float inline_wrapper(const float* x) { return load1(x) + 1.f; }

// ---- callees that wait
__device__ __noinline__ void gds() { cudaGridDependencySynchronize(); }
__device__ __noinline__ float load_then_gds(const float* x) { float v = x[0]; cudaGridDependencySynchronize(); return v; }
__device__ __forceinline__ void inline_wait() { WAIT(); }
__device__ __noinline__ void noinline_with_inlined_wait() { inline_wait(); }
__device__ __noinline__ void asm_block_wait() { asm volatile("{\n\tgriddepcontrol.wait;\n}" ::: "memory"); }

struct Base { __device__ virtual float get(const float* x) { return x[0]; } };
struct Derived : Base { __device__ float get(const float* x) override { return x[1]; } };

// ---- PDL kernels
__global__ void volatile_shared_before_wait(const float* x, float* o) { vshared(1.f); WAIT(); o[0] = x[0]; }
__global__ void shared_cta_before_wait(const float* x, float* o) { cta_shared(1.f); WAIT(); o[0] = x[0]; }
__global__ void shared_atomic_before_wait(const float* x, float* o) { atom_shared(); WAIT(); o[0] = x[0]; }
__global__ void cp_bookkeeping_before_wait(const float* x, float* o) { cp_bookkeeping(); WAIT(); o[0] = x[0]; }
__global__ void dsmem_store_before_wait(const float* x, float* o, unsigned r) { dsmem_store(r, 1u, r); WAIT(); o[0] = x[0]; }
__global__ void smem_to_dsmem_before_wait(const float* x, float* o, unsigned r) { smem_to_dsmem(r, r, r); WAIT(); o[0] = x[0]; }
__global__ void constant_before_wait(const float* x, float* o) { float v = constant_only(threadIdx.x); WAIT(); o[0] = v + x[0]; }
__global__ void local_before_wait(const float* x, float* o, int i) { float v = local_only(i, 2.f); WAIT(); o[0] = v + x[0]; }
__global__ void params_before_wait(const float* x, float* o, int n) { int m = n * 2 + 1; WAIT(); o[m] = x[m]; }
__global__ void param_pointer_deref_before_wait(const float* x, float* o) { float v = *x; WAIT(); o[0] = v; }
__global__ void texture_before_wait(cudaTextureObject_t t, float* o) { float v = tex_read(t); WAIT(); o[0] = v; }
__global__ void texture_after_wait(cudaTextureObject_t t, float* o) { WAIT(); o[0] = tex_read(t); }
__global__ void surface_before_wait(cudaSurfaceObject_t s, float* o) { float v = surf_read(s); WAIT(); o[0] = v; }
__global__ void wmma_before_wait(const half* a, float* o) { float v = wmma_load(a); WAIT(); o[0] = v; }
__global__ void relaxed_global_before_wait(const unsigned* p, unsigned* o) { unsigned v = relaxed_global(p); WAIT(); o[0] = v; }
__global__ void acquire_generic_before_wait(const unsigned* p, unsigned* o) { unsigned v = acquire_generic(p); WAIT(); o[0] = v; }
__global__ void asm_block_load_before_wait(const unsigned* p, unsigned* o) { unsigned v = asm_block_load(p); WAIT(); o[0] = v; }
__global__ void tma_before_wait(const __grid_constant__ Map map, float* o) {
  __shared__ alignas(128) float s[32]; __shared__ uint64_t bar; tma_load(s, &map, &bar); WAIT(); o[0] = s[0]; }
__global__ void tma_after_wait(const __grid_constant__ Map map, float* o) {
  __shared__ alignas(128) float s[32]; __shared__ uint64_t bar; WAIT(); tma_load(s, &map, &bar); o[0] = s[0]; }
__global__ void template_before_wait(const float* x, float* o) { float v = tget<float>(x); WAIT(); o[0] = v; }
__global__ void lambda_before_wait(const float* x, float* o) { float v = apply_fn([x](int i) { return x[i]; }); WAIT(); o[0] = v; }
__global__ void lambda_after_wait(const float* x, float* o) { WAIT(); o[0] = apply_fn([x](int i) { return x[i]; }); }
__global__ void forceinline_calls_noinline_before_wait(const float* x, float* o) { float v = inline_wrapper(x); WAIT(); o[0] = v; }
__global__ void gds_in_callee(const float* x, float* o) { gds(); o[0] = x[0]; }
__global__ void load_then_gds_in_callee(const float* x, float* o) { o[0] = load_then_gds(x); }
__global__ void inlined_wait_in_noinline(const float* x, float* o) { noinline_with_inlined_wait(); o[0] = x[0]; }
__global__ void asm_block_wait_in_callee(const float* x, float* o) { asm_block_wait(); o[0] = x[0]; }
__global__ void wait_after_syncthreads_loop(const float* x, float* o, int n) {
  for (int i = 0; i < n; ++i) __syncthreads();
  WAIT(); o[0] = x[0]; }
__global__ void load_in_loop_before_wait(const float* x, float* o, int n) {
  float acc = 0.f;
  for (int i = 0; i < n; ++i) { acc += x[i]; __syncthreads(); }
  WAIT(); o[0] = acc; }
__global__ void wait_first_in_loop(const float* x, float* o, int n) {
  float acc = 0.f;
  for (int i = 0; i < n; ++i) { WAIT(); acc += x[i]; }
  WAIT(); o[0] = acc; }
__global__ void virtual_before_wait(const float* x, float* o, int c) {
  Derived d; Base b; Base* p = c ? static_cast<Base*>(&d) : &b; float v = p->get(x); WAIT(); o[0] = v; }
__global__ void virtual_after_wait(const float* x, float* o, int c) {
  WAIT(); Derived d; Base b; Base* p = c ? static_cast<Base*>(&d) : &b; o[0] = p->get(x); }
