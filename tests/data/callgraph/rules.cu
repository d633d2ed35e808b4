// More call-graph cases for the rules that read it (tests/test_held_out_call_graph_rules.py compiles this with
// nvcc and reads the PTX and the ptxas log). Each kernel's name says what it plants.
#include <cassert>
#include <cstdint>
#include <cstdio>

#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

// ---- recursion and mutual recursion
__device__ __noinline__ float wait_then_recurse(const float* x, int n) {
  WAIT();
  return n <= 0 ? x[0] : wait_then_recurse(x, n - 1) + x[n];
}
__device__ __noinline__ void recurse_then_wait(int n) {
  if (n > 0) recurse_then_wait(n - 1);
  WAIT();
}
__device__ __noinline__ float loads_then_recurses(const float* x, int n) {
  float v = x[n];
  return n <= 0 ? v : v + loads_then_recurses(x, n - 1);
}
__device__ __noinline__ float mutual_loader(const float* x, int n);
__device__ __noinline__ float mutual_waiter(const float* x, int n) {
  WAIT();
  return n <= 0 ? 0.f : mutual_loader(x, n - 1);
}
__device__ __noinline__ float mutual_loader(const float* x, int n) {
  float v = x[n];
  return n <= 0 ? v : v + mutual_waiter(x, n - 1);
}

__global__ void recursion_waits_first(const float* x, float* o, int n) { o[0] = wait_then_recurse(x, n); }
__global__ void recursion_waits_after_its_calls(const float* x, float* o, int n) { recurse_then_wait(n); o[0] = x[0]; }
__global__ void recursion_after_a_callee_wait(const float* x, float* o, int n) { recurse_then_wait(n); o[0] = loads_then_recurses(x, n); }
__global__ void mutual_recursion_entered_at_the_waiter(const float* x, float* o, int n) { o[0] = mutual_waiter(x, n); }
__global__ void mutual_recursion_entered_at_the_loader(const float* x, float* o, int n) { o[0] = mutual_loader(x, n); }

// ---- calls in loops
__device__ __noinline__ float load_at(const float* x, int i) { return x[i]; }
__device__ __noinline__ void wait_now() { WAIT(); }
__device__ __noinline__ void wait_if(int c) { if (c) WAIT(); }
__device__ __noinline__ void wait_at_least_once(int n) { do { WAIT(); } while (--n > 0); }
__device__ __noinline__ void wait_maybe_never(int n) { while (n-- > 0) WAIT(); }

__global__ void loads_in_a_loop_then_waits(const float* x, float* o, int n) {
  float v = 0.f;
  for (int i = 0; i < n; ++i) v += load_at(x, i);
  WAIT();
  o[0] = v;
}
__global__ void waits_first_in_every_iteration(const float* x, float* o, int n) {
  float v = 0.f;
  for (int i = 0; i < n; ++i) { wait_now(); v += load_at(x, i); }
  o[0] = v;
}
__global__ void waits_on_the_last_iteration(const float* x, float* o, int n) {
  float v = 0.f;
  for (int i = 0; i < n; ++i) { v += load_at(x, i); wait_if(i == n - 1); }
  WAIT();
  o[0] = v;
}
__global__ void wait_in_a_loop_after_a_load(const float* x, float* o, int n) {
  float v = 0.f;
  for (int i = 0; i < n; ++i) { v += load_at(x, i); WAIT(); }
  o[0] = v;
}
__global__ void callee_waits_at_least_once(const float* x, float* o, int n) { wait_at_least_once(n); o[0] = x[0]; }
__global__ void callee_may_never_wait(const float* x, float* o, int n) { wait_maybe_never(n); WAIT(); o[0] = x[0]; }

// ---- waits of callees
__device__ __noinline__ void predicated_wait(int c) {
  asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p griddepcontrol.wait; }" :: "r"(c) : "memory");
}
__device__ __noinline__ float wait_and_load(const float* x) { WAIT(); return x[threadIdx.x]; }
__device__ __forceinline__ void inlined_wait() { WAIT(); }

__global__ void callee_waits_under_its_own_predicate(const float* x, float* o, int c) { predicated_wait(c); o[0] = x[0]; WAIT(); }
__global__ void callee_waits_then_returns_a_load(const float* x, float* o) { float v = wait_and_load(x); o[0] = v + x[1]; }
__global__ void first_callee_waits_only_sometimes(const float* x, float* o, int c) { wait_if(c); o[0] = load_at(x, 0); WAIT(); }
__global__ void one_thread_waits(const float* x, float* o) {
  if (threadIdx.x == 0) wait_now();
  __syncthreads();
  WAIT();
  o[threadIdx.x] = load_at(x, threadIdx.x);
}
__global__ void only_one_thread_calls_the_wait(const float* x, float* o) {
  if (threadIdx.x == 0) wait_now();
  __syncthreads();
  o[threadIdx.x] = x[threadIdx.x];
}
__global__ void inlined_wait_then_noinline_load(const float* x, float* o) { inlined_wait(); o[0] = load_at(x, 0); }

// ---- what a call returns
struct pair { float a, b; };
__device__ __noinline__ const float* advance(const float* p, int k) { return p + k * 3; }
__device__ __noinline__ pair two_loads(const float* x) { return pair{x[threadIdx.x], x[threadIdx.x + 1]}; }
__device__ __noinline__ pair two_values(float v) { return pair{v * 2.f, v + 1.f}; }

__global__ void pointer_arithmetic_before_wait(const float* x, float* o, int k) {
  const float* p = advance(x, k);
  WAIT();
  o[0] = *p;
}
__global__ void struct_of_loads_before_wait(const float* x, float* o) { pair p = two_loads(x); WAIT(); o[0] = p.a + p.b; }
__global__ void struct_of_values_before_wait(const float* x, float* o) { pair p = two_values(threadIdx.x); WAIT(); o[0] = p.a + p.b + x[0]; }

// ---- function pointers
typedef float (*pure_fn)(float);
__device__ __noinline__ float twice(float v) { return v * 2.f; }
__device__ __noinline__ float halve(float v) { return v * .5f; }
__constant__ pure_fn pure_table[2] = {twice, halve};

__global__ void pure_pointer_call_before_wait(const float* x, float* o, int k) {
  float v = pure_table[k & 1](threadIdx.x);
  WAIT();
  o[0] = v + x[0];
}
__global__ void pure_pointer_call_after_wait(const float* x, float* o, int k) {
  WAIT();
  o[0] = pure_table[k & 1](x[0]);
}

// ---- helpers shared by kernels with different verdicts
__device__ __noinline__ float shared_leaf(const float* x) { return x[threadIdx.x]; }
__device__ __noinline__ float shared_mid(const float* x) { return shared_leaf(x) * 2.f; }
__global__ void shares_the_leaf_directly_before_wait(const float* x, float* o) { float v = shared_leaf(x); WAIT(); o[0] = v; }
__global__ void shares_the_leaf_through_mid_after_wait(const float* x, float* o) { WAIT(); o[0] = shared_mid(x); }
__global__ void shares_the_leaf_after_a_waiting_callee(const float* x, float* o) { wait_now(); o[0] = shared_mid(x); }

// ---- deep chains
#define LINK(n, m) __device__ __noinline__ float c##n(const float* x) { return c##m(x) + 1.f; }
__device__ __noinline__ float c20(const float* x) { return x[threadIdx.x]; }
LINK(19, 20) LINK(18, 19) LINK(17, 18) LINK(16, 17) LINK(15, 16) LINK(14, 15) LINK(13, 14) LINK(12, 13)
LINK(11, 12) LINK(10, 11) LINK(9, 10) LINK(8, 9) LINK(7, 8) LINK(6, 7) LINK(5, 6) LINK(4, 5) LINK(3, 4) LINK(2, 3)
LINK(1, 2)
__device__ __noinline__ void w20() { WAIT(); }
#define WLINK(n, m) __device__ __noinline__ void w##n() { w##m(); }
WLINK(19, 20) WLINK(18, 19) WLINK(17, 18) WLINK(16, 17) WLINK(15, 16) WLINK(14, 15) WLINK(13, 14) WLINK(12, 13)
WLINK(11, 12) WLINK(10, 11) WLINK(9, 10) WLINK(8, 9) WLINK(7, 8) WLINK(6, 7) WLINK(5, 6) WLINK(4, 5) WLINK(3, 4)
WLINK(2, 3) WLINK(1, 2)

__global__ void twenty_levels_down_before_wait(const float* x, float* o) { float v = c1(x); WAIT(); o[0] = v; }
__global__ void wait_twenty_levels_down(const float* x, float* o) { w1(); o[0] = c1(x); }

// ---- names that need escaping
__device__ __noinline__ float load$dollar(const float* x) { return x[threadIdx.x + 2]; }
namespace {
__device__ __noinline__ float anonymous_load(const float* x) { return x[threadIdx.x + 3]; }
}
namespace outer { namespace inner {
template <typename T, int N> __device__ __noinline__ T nested_load(const T* x) { return x[threadIdx.x + N]; }
} }
__global__ void dollar_in_the_name_before_wait(const float* x, float* o) { float v = load$dollar(x); WAIT(); o[0] = v; }
__global__ void anonymous_namespace_before_wait(const float* x, float* o) { float v = anonymous_load(x); WAIT(); o[0] = v; }
__global__ void nested_template_before_wait(const float* x, float* o) {
  float v = outer::inner::nested_load<float, 4>(x);
  WAIT();
  o[0] = v;
}

// ---- the device runtime's functions: their code is not in the PTX, their effect is known
__global__ void assert_before_wait(const float* x, float* o, int n) { assert(n > 0); WAIT(); o[0] = x[0]; }
__global__ void printf_before_wait(const float* x, float* o, int n) {
  if (threadIdx.x == 0) printf("n = %d\n", n);
  WAIT();
  o[0] = x[0];
}
__global__ void heap_before_wait(const float* x, float* o) {
  float* t = (float*)malloc(16);
  WAIT();
  if (t) { t[0] = x[0]; o[0] = t[0]; free(t); }
}
