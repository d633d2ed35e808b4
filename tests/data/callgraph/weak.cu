// Separate compilation (-rdc=true): templates instantiated as `.weak` functions shared by kernels with
// different verdicts, and an `.extern` function called before and after the wait
// (tests/test_held_out_call_graph_rules.py).
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

template <int N> __device__ __noinline__ float tload(const float* x) { return x[threadIdx.x + N]; }
template <int N> __device__ __noinline__ void twait() { WAIT(); }
extern __device__ float ext_pure(float v);

__global__ void weak_before_wait(const float* x, float* o) { float v = tload<1>(x); WAIT(); o[0] = v; }
__global__ void weak_after_wait(const float* x, float* o) { WAIT(); o[0] = tload<1>(x); }
__global__ void weak_wait_first(const float* x, float* o) { twait<2>(); o[0] = tload<1>(x); }
__global__ void extern_after_wait(const float* x, float* o) { WAIT(); o[0] = ext_pure(x[0]); }
__global__ void extern_before_wait(const float* x, float* o) { float v = ext_pure(threadIdx.x); WAIT(); o[0] = v + x[0]; }
