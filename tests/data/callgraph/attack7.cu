// Calls through a register whose every value is a function of the module (a ternary of two function names, a
// pointer set once), and the forms around it that must keep their findings.
__device__ __noinline__ void waits() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __noinline__ void waits_too() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __noinline__ void does_nothing() { asm volatile("" ::: "memory"); }
__device__ __noinline__ void stores(float* g) { g[threadIdx.x] = 5.0f; }
__device__ __noinline__ void stores_too(float* g) { g[threadIdx.x + 1] = 6.0f; }
typedef void (*action)();
typedef void (*writer)(float*);
__device__ action hook;

__global__ void pdl_ternary_of_two_waiters_then_store(float* g, int f) {
  (f ? waits : waits_too)();
  g[threadIdx.x] = 1.0f;
}
__global__ void pdl_ternary_of_a_waiter_and_a_no_op_then_store(float* g, int f) {
  (f ? waits : does_nothing)();
  g[threadIdx.x] = 1.0f;
}
__global__ void pdl_ternary_of_two_writers_before_wait(float* g, int f) {
  (f ? stores : stores_too)(g);
  waits();
}
__global__ void pdl_ternary_of_two_writers_after_wait(float* g, int f) {
  waits();
  (f ? stores : stores_too)(g);
}
__global__ void pdl_pointer_from_memory_then_store(float* g) {
  hook();
  g[threadIdx.x] = 1.0f;
}
__global__ void pdl_pointer_argument_then_store(float* g, action a) {
  a();
  g[threadIdx.x] = 1.0f;
}
__global__ void sets_the_hook() { hook = waits; }
