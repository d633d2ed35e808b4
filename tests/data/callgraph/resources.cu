#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// static __shared__ inside a noinline callee
__device__ __noinline__ float smem_callee(const float* x, int i) {
    __shared__ float tile[8192];
    tile[threadIdx.x] = x[i];
    __syncthreads();
    return tile[(threadIdx.x + 1) % blockDim.x];
}
__global__ void static_smem_in_callee(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = smem_callee(x, i);
}
// dynamic shared memory in a callee
extern __shared__ float dyn[];
__device__ __noinline__ float dyn_callee(const float* x, int i) {
    dyn[threadIdx.x] = x[i];
    __syncthreads();
    return dyn[(threadIdx.x + 1) % blockDim.x];
}
__global__ void dynamic_smem_in_callee(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = dyn_callee(x, i);
}
// a local stack frame but no spill (address taken array passed by pointer)
__device__ __noinline__ float sum_frame(const float* v, int n) {
    float s = 0; for (int k = 0; k < n; ++k) s += v[k]; return s;
}
__device__ __noinline__ float frame_callee(const float* x, int i, int n) {
    float buf[16];
    for (int k = 0; k < 16; ++k) buf[k] = x[i + k];
    return sum_frame(buf, n);
}
__global__ void local_frame_no_spill(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = frame_callee(x, i, n);
}
// forceinline chain
__device__ __forceinline__ float fi3(const float* x, int i) { return x[i] * 2.f; }
__device__ __forceinline__ float fi2(const float* x, int i) { return fi3(x, i) + 1.f; }
__device__ __forceinline__ float fi1(const float* x, int i) { return fi2(x, i) * fi2(x, i + 1); }
__global__ void forceinline_chain(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = fi1(x, i);
}
// template callee, two instantiations, two kernels; one spills
template <int N>
__device__ __noinline__ float tmpl(const float* x, int i, int j) {
    float acc[N];
    for (int k = 0; k < N; ++k) acc[k] = x[i + k];
    for (int k = 0; k < N; ++k) acc[(k * 7 + j) % N] += acc[k];
    float s = 0; for (int k = 0; k < N; ++k) s += acc[k]; return s;
}
__global__ void tmpl_small(const float* x, float* out, int j) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = tmpl<4>(x, i, j);
}
__global__ void tmpl_big(const float* x, float* out, int j) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = tmpl<200>(x, i, j);
}
// grid sync in a callee
__device__ __noinline__ void grid_barrier() { cg::this_grid().sync(); }
__global__ void grid_sync_in_callee(float* out) {
    out[threadIdx.x] = 1.f; grid_barrier(); out[threadIdx.x] += 1.f;
}
// register-hungry callee under launch bounds
__device__ __noinline__ float hungry(const float* x, int i) {
    float r[64];
#pragma unroll
    for (int k = 0; k < 64; ++k) r[k] = x[i + k * 1024];
    float s = 0;
#pragma unroll
    for (int k = 0; k < 64; ++k) s += r[k] * r[63 - k];
    return s;
}
__global__ void __launch_bounds__(512, 2) hungry_bounded(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; out[i] = hungry(x, i);
}
// PDL: a wait in a callee's loop; a wait helper used before a load in one kernel and after it in another
__device__ __noinline__ void wait_in_loop(int n) {
    for (int k = 0; k < n; ++k) asm volatile("griddepcontrol.wait;" ::: "memory");
}
__global__ void pdl_wait_in_callee_loop(const float* x, float* out, int n) {
    wait_in_loop(n); out[threadIdx.x] = x[threadIdx.x];
}
__device__ __noinline__ void dep_sync() { cudaGridDependencySynchronize(); }
__global__ void pdl_helper_wait_then_load(const float* x, float* out) {
    dep_sync(); out[threadIdx.x] = x[threadIdx.x];
}
__global__ void pdl_load_then_helper_wait(const float* x, float* out) {
    float v = x[threadIdx.x]; dep_sync(); out[threadIdx.x] = v;
}
__device__ __noinline__ float pdl_lambda_body(const float* x, int i) {
    auto f = [&](int j) { return x[j] * 2.f; };
    return f(i);
}
__global__ void pdl_lambda_load_before_wait(const float* x, float* out) {
    float v = pdl_lambda_body(x, threadIdx.x);
    cudaGridDependencySynchronize();
    out[threadIdx.x] = v;
}
__device__ __noinline__ float rec_sum(const float* x, int n, int d) {
    float buf[8];
    for (int k = 0; k < 8; ++k) buf[k] = x[(n + k) & 255];
    float s = buf[d & 7];
    return d > 0 ? s + rec_sum(x, n + 1, d - 1) : s;
}
__global__ void recursive_stack(const float* x, float* out, int d) {
    out[threadIdx.x] = rec_sum(x, threadIdx.x, d);
}
struct Op { __device__ virtual float apply(float v) const { return v; } };
struct Heavy : Op {
    __device__ float apply(float v) const override {
        float a[32];
        for (int k = 0; k < 32; ++k) a[k] = v * k;
        float s = 0; for (int k = 0; k < 32; ++k) s += a[(k * 5 + (int)v) & 31];
        return s;
    }
};
__global__ void virtual_heavy(const float* x, float* out) {
    Heavy h; const Op* op = &h;
    if (threadIdx.x & 1) { Op o; op = &o; out[threadIdx.x] = op->apply(x[threadIdx.x]); }
    else out[threadIdx.x] = op->apply(x[threadIdx.x]);
}
