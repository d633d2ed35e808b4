// Call-graph paths under -rdc=true for tests/test_held_out_call_graph_paths.py: a call written in inline asm, a
// function pointer passed as a kernel's parameter, a wait reached through an alias (an extern name in the PTX).
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
extern "C" __device__ __noinline__ void wait_fn() { WAIT(); }
extern "C" __device__ __noinline__ void touch(float* y) { y[0] = 1.f; }
__global__ void keep_alive(float* y) { wait_fn(); touch(y); }
__global__ void pdl_call_written_in_inline_asm(const float* x, float* y) {
  asm volatile("{ call wait_fn, (); }" ::: "memory");
  y[threadIdx.x] = x[threadIdx.x];
}
__global__ void pdl_function_pointer_parameter(const float* x, float* y, void (*fp)(float*)) {
  fp(y);
  WAIT();
  y[threadIdx.x] = x[threadIdx.x];
}
extern "C" __device__ void wait_alias() __attribute__((alias("wait_fn")));
__global__ void pdl_waits_through_an_alias(const float* x, float* y) {
  wait_alias();
  y[threadIdx.x] = x[threadIdx.x];
}
