// RMSNorm forward in CUDA C++: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps), per row.
//
// Device code only, with no includes: it compiles with NVRTC (how the precision
// test builds it, for the GPU it runs on) or `nvcc -c`. One block of 256 threads
// per row; the sum of squares is reduced in fp32 across the block.
//
// The kernel is a programmatic-dependent-launch (PDL) consumer: its input is the
// previous kernel's output, so griddepcontrol.wait comes before any global memory
// access. Launched without PDL, the wait returns at once.

#define RMSNORM_THREADS 256

struct Bf16 {
    static __device__ __forceinline__ float load(const unsigned short* p, long long i) {
        return __uint_as_float(static_cast<unsigned int>(p[i]) << 16);
    }
    static __device__ __forceinline__ unsigned short round(float v) {
        unsigned short r;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
        return r;
    }
};

struct Fp16 {
    static __device__ __forceinline__ float load(const unsigned short* p, long long i) {
        float r;
        asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(p[i]));
        return r;
    }
    static __device__ __forceinline__ unsigned short round(float v) {
        unsigned short r;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
        return r;
    }
};

// The sum of v over the block, returned to every thread.
static __device__ __forceinline__ float block_sum(float v, float* partial) {
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < RMSNORM_THREADS / 32 ? partial[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

template <class T>
static __device__ __forceinline__ void rmsnorm_fwd(const unsigned short* __restrict__ x,
                                                   const unsigned short* __restrict__ w,
                                                   unsigned short* __restrict__ y, float* __restrict__ rstd,
                                                   int n_cols, float eps) {
    __shared__ float partial[RMSNORM_THREADS / 32];
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const long long base = static_cast<long long>(blockIdx.x) * n_cols;
    float squares = 0.0f;
    for (int c = threadIdx.x; c < n_cols; c += RMSNORM_THREADS) {
        const float v = T::load(x, base + c);
        squares = fmaf(v, v, squares);
    }
    const float r = rsqrtf(block_sum(squares, partial) / static_cast<float>(n_cols) + eps);
    // Every input is read: the next kernel may start its prologue.
    asm volatile("griddepcontrol.launch_dependents;");
    for (int c = threadIdx.x; c < n_cols; c += RMSNORM_THREADS) {
        y[base + c] = T::round(T::load(x, base + c) * r * T::load(w, c));
    }
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

extern "C" __global__ void __launch_bounds__(RMSNORM_THREADS)
rmsnorm_fwd_bf16(const unsigned short* x, const unsigned short* w, unsigned short* y, float* rstd, int n_cols,
                 float eps) {
    rmsnorm_fwd<Bf16>(x, w, y, rstd, n_cols, eps);
}

extern "C" __global__ void __launch_bounds__(RMSNORM_THREADS)
rmsnorm_fwd_fp16(const unsigned short* x, const unsigned short* w, unsigned short* y, float* rstd, int n_cols,
                 float eps) {
    rmsnorm_fwd<Fp16>(x, w, y, rstd, n_cols, eps);
}
