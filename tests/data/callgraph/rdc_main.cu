__device__ float far_spill(const float* x, int i, int j);
__device__ float far_load(const float* x, int i);
__device__ void far_wait();

__global__ void pdl_far_load_before_wait(const float* x, float* out) {
    int i = threadIdx.x;
    float v = far_load(x, i);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    out[i] = v;
}
__global__ void pdl_far_wait_then_store(const float* x, float* out) {
    int i = threadIdx.x;
    far_wait();
    out[i] = x[i];
}
__global__ void far_spilling(const float* x, float* out, int j) {
    int i = threadIdx.x;
    out[i] = far_spill(x, i, j);
}
