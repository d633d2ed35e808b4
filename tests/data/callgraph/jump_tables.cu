// Switches nvcc turns into jump tables (`-jtd 10`: PTX `brx.idx` over a `.branchtargets` list):
// tests/test_held_out_call_graph_rules.py compiles this and follows every target of each jump.
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

__device__ __noinline__ float pick(int k, float v, const float* x) {
  switch (k) {
    case 0: return v * 1.5f;
    case 1: return v + 2.0f;
    case 2: return v - 3.0f;
    case 3: return v * v;
    case 4: return v / 5.0f;
    case 5: return x[threadIdx.x];
    case 6: return __expf(v);
    case 7: return __logf(v);
    case 8: return v * 9.0f + 1.f;
    case 9: return -v;
    default: return 0.f;
  }
}

__global__ void case_loads_in_a_callee_before_wait(int k, const float* x, float* o) {
  float v = pick(k, threadIdx.x, x);
  WAIT();
  o[threadIdx.x] = v;
}

__global__ void case_loads_in_the_kernel_before_wait(const float* x, float* o, int n) {
  float acc = 0.f;
  for (int i = 0; i < n; ++i) {
    switch (i & 15) {
      case 0: acc += 1.f; break;
      case 1: acc -= 2.f; break;
      case 2: acc *= 3.f; break;
      case 3: acc += 2.f * i; break;
      case 4: acc = fmaxf(acc, i); break;
      case 5: acc = fminf(acc, i); break;
      case 6: acc += x[i]; break;
      case 7: acc -= i * i; break;
      case 8: acc += 3.f; break;
      case 9: acc += sqrtf(i); break;
      case 10: acc -= 5.f; break;
      case 11: acc *= 0.5f; break;
      default: break;
    }
  }
  WAIT();
  o[threadIdx.x] = acc;
}

__global__ void switch_after_the_wait(int k, const float* x, float* o) {
  WAIT();
  o[threadIdx.x] = pick(k, threadIdx.x, x);
}
