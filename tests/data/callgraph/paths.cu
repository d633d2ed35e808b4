// Call-graph paths for tests/test_held_out_call_graph_paths.py: spills reached through pointers, weak and
// deep callees, a leaf shared by kernels that spill and do not, callees that never return or leave the thread,
// a wait in one branch of a callee, a pointer table of call chains, loads in a loop of a callee.
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define SPILLY(name) \
  __device__ __noinline__ float name(const float* x, int n) { \
    float acc[96]; \
    for (int i = 0; i < 96; ++i) acc[i] = x[i * n]; \
    float s = 0.f; \
    for (int j = 0; j < n; ++j) s += acc[(j * 7) % 96] * acc[(j * 13) % 96]; \
    return s; \
  }
SPILLY(spill_a)
__device__ __noinline__ float small_b(const float* x, int n) { return x[n] * 2.f; }
__device__ float (*table[2])(const float*, int) = {spill_a, small_b};
__global__ void __launch_bounds__(1024) spill_via_pointer(const float* x, float* out, int n) {
  out[threadIdx.x] = table[n & 1](x, n);
}
SPILLY(leaf5)
__device__ __noinline__ float d4(const float* x, int n) { return leaf5(x, n) + 1.f; }
__device__ __noinline__ float d3(const float* x, int n) { return d4(x, n + 1) * 2.f; }
__device__ __noinline__ float d2(const float* x, int n) { return d3(x, n + 2) - 1.f; }
__device__ __noinline__ float d1(const float* x, int n) { return d2(x, n + 3) + 3.f; }
__global__ void __launch_bounds__(1024) spill_five_deep(const float* x, float* out, int n) {
  out[threadIdx.x] = d1(x, n);
}
__device__ __noinline__ __attribute__((weak)) float weak_spill(const float* x, int n) {
  float acc[96];
  for (int i = 0; i < 96; ++i) acc[i] = x[i * n];
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += acc[(j * 7) % 96] * acc[(j * 13) % 96];
  return s;
}
__global__ void __launch_bounds__(1024) spill_weak_callee(const float* x, float* out, int n) {
  out[threadIdx.x] = weak_spill(x, n);
}
__device__ __noinline__ float tiny(const float* x, int n) { return x[n] + 1.f; }
__global__ void __launch_bounds__(1024) caller_spills_callee_not(const float* x, float* out, int n) {
  float acc[96];
  for (int i = 0; i < 96; ++i) acc[i] = x[i * n];
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += acc[(j * 7) % 96] * acc[(j * 13) % 96];
  out[threadIdx.x] = s + tiny(x, n);
}
__global__ void __launch_bounds__(1024) clean_helper_twice(const float* x, float* out, int n) {
  out[threadIdx.x] = tiny(x, n) + tiny(x, n + 1);
}
SPILLY(spill_c)
__global__ void __launch_bounds__(1024) spill_helper_once(const float* x, float* out, int n) {
  out[threadIdx.x] = spill_c(x, n);
}
__global__ void __launch_bounds__(1024) spill_helper_twice(const float* x, float* out, int n) {
  out[threadIdx.x] = spill_c(x, n) + spill_c(x, n + 1);
}
__device__ __noinline__ float shared_leaf(const float* x, int n) { return x[n] * 3.f; }
SPILLY(spill_d)
__device__ __noinline__ float mid_spills(const float* x, int n) { return spill_d(x, n) + shared_leaf(x, n); }
__device__ __noinline__ float mid_clean(const float* x, int n) { return shared_leaf(x, n) + 1.f; }
__global__ void __launch_bounds__(1024) shares_a_leaf_and_spills(const float* x, float* out, int n) {
  out[threadIdx.x] = mid_spills(x, n);
}
__global__ void __launch_bounds__(1024) shares_a_leaf_without_spills(const float* x, float* out, int n) {
  out[threadIdx.x] = mid_clean(x, n);
}
// PDL
[[noreturn]] __device__ __noinline__ void die(float* p) { p[0] = 1.f; __trap(); }
__global__ void pdl_noreturn_callee_before_wait(const float* x, float* y, int n) {
  if (n < 0) die(y);
  WAIT();
  y[threadIdx.x] = x[threadIdx.x];
}
__global__ void pdl_noreturn_callee_after_wait(const float* x, float* y, int n) {
  WAIT();
  if (n < 0) die(y);
  y[threadIdx.x] = x[threadIdx.x];
}
__device__ __noinline__ void leave_if_negative(int n) { if (n < 0) asm volatile("exit;"); }
__global__ void pdl_exit_helper_then_wait(const float* x, float* y, int n) {
  leave_if_negative(n);
  WAIT();
  y[threadIdx.x] = x[threadIdx.x];
}
__device__ __noinline__ void store_then_exit(float* y, int n) { y[n] = 0.f; asm volatile("exit;"); }
__global__ void pdl_store_then_exit_in_callee(const float* x, float* y, int n) {
  if (n < 0) store_then_exit(y, n);
  WAIT();
  y[threadIdx.x] = x[threadIdx.x];
}
__device__ __noinline__ void wait_if(int n) { if (n > 0) WAIT(); }
__global__ void pdl_callee_waits_in_one_branch_kernel_waits_again(const float* x, float* y, int n) {
  wait_if(n);
  WAIT();
  y[threadIdx.x] = x[threadIdx.x];
}
__global__ void pdl_callee_waits_in_one_branch_then_store(const float* x, float* y, int n) {
  wait_if(n);
  y[threadIdx.x] = 1.f;
}
__device__ __noinline__ float loader(const float* x, int n) { return x[n]; }
__device__ __noinline__ float calls_loader(const float* x, int n) { return loader(x, n) + 1.f; }
__device__ __noinline__ float pure_twice(const float* x, int n) { return 2.f * n; }
__device__ float (*chain_table[2])(const float*, int) = {calls_loader, pure_twice};
__global__ void pdl_pointer_to_a_chain_before_wait(const float* x, float* y, int n) {
  float v = chain_table[n & 1](x, n);
  WAIT();
  y[threadIdx.x] = v;
}
__global__ void pdl_pointer_to_a_chain_after_wait(const float* x, float* y, int n) {
  WAIT();
  y[threadIdx.x] = chain_table[n & 1](x, n);
}
__device__ __noinline__ float loop_loads(const float* x, int n) { float s = 0.f; for (int i = 0; i < n; ++i) s += x[i]; return s; }
__global__ void pdl_wait_after_a_loop_that_loads_in_a_callee(const float* x, float* y, int n) {
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += loop_loads(x + i, 4);
  WAIT();
  y[threadIdx.x] = s;
}
__device__ __noinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__global__ void pdl_launch_dependents_in_a_callee_before_the_store(const float* x, float* y) {
  WAIT();
  launch_dependents();
  y[threadIdx.x] = x[threadIdx.x];
}
