__device__ float far_load(const float* x, int i) { return x[i] * 3.f; }
__device__ void far_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ float far_spill(const float* x, int i, int j) {
    float acc[96];
    for (int k = 0; k < 96; ++k) acc[k] = x[i + k];
    for (int k = 0; k < 96; ++k) acc[(k * 7 + j) % 96] += acc[(k+j)%96];
    float s = 0; for (int k = 0; k < 96; ++k) s += acc[k]; return s;
}
