// PTX as inline asm writes it into the module: comments, labels before statements on one line, several
// statements on a line and one over several, braces opening scopes whose labels are their own.
#include <cstdint>

#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")

// A wait commented out over several lines is no wait.
__global__ void wait_in_a_block_comment(const float* x, float* o) {
  asm volatile("/*\n\tgriddepcontrol.wait;\n\t*/" ::: "memory");
  o[0] = x[0];
}

// A comment before the wait on its line.
__global__ void comment_then_wait(const float* x, float* o) {
  asm volatile("/* the producer's results */ griddepcontrol.wait;" ::: "memory");
  o[0] = x[0];
}

// A comment that is all of its asm statement, then a load the kernel makes before the wait.
__global__ void note_then_load_before_wait(const float* x, float* o) {
  asm volatile("/* prologue */" ::: "memory");
  float v = x[0];
  WAIT();
  o[0] = v;
}

// A closing brace in a line comment ends no function.
__global__ void brace_in_a_line_comment(const float* x, float* o) {
  asm volatile("// } end of the prologue" ::: "memory");
  float v = x[0];
  WAIT();
  o[0] = v;
}

// An opening brace in a block comment opens nothing.
__global__ void brace_in_a_block_comment(const float* x, float* o) {
  asm volatile("/* { */" ::: "memory");
  float v = x[0];
  WAIT();
  o[0] = v;
}

// `/*` inside a line comment starts no block comment: the load after it is read.
__global__ void block_start_in_a_line_comment(const float* x, float* o) {
  asm volatile("// see /* below" ::: "memory");
  float v = x[0];
  WAIT();
  o[0] = v;
  asm volatile("// */" ::: "memory");
}

// `//` inside a block comment ends nothing: the wait after it is read.
__global__ void line_start_in_a_block_comment(const float* x, float* o) {
  asm volatile("/* see https://docs.nvidia.com // pdl */ griddepcontrol.wait;" ::: "memory");
  o[0] = x[0];
}

// A label and a load on one line: the load is read, and so is the loop it spins in.
__global__ void label_then_load_on_one_line(const unsigned* flag, unsigned* o) {
  unsigned v;
  asm volatile("{ .reg .pred p; RETRY: ld.global.u32 %0, [%1]; setp.eq.u32 p, %0, 0; @p bra RETRY; }"
               : "=r"(v) : "l"(flag) : "memory");
  WAIT();
  o[0] = v;
}

// A label and the wait on one line.
__global__ void label_then_wait_on_one_line(const float* x, float* o) {
  asm volatile("{ WAITHERE: griddepcontrol.wait; }" ::: "memory");
  o[0] = x[0];
}

// Two labels before one wait.
__global__ void two_labels_then_wait(const float* x, float* o) {
  asm volatile("{ FIRST: SECOND: griddepcontrol.wait; }" ::: "memory");
  o[0] = x[0];
}

// A load and the wait on one line, the load first.
__global__ void load_then_wait_on_one_line(const unsigned* p, unsigned* o) {
  unsigned v;
  asm volatile("ld.global.u32 %0, [%1]; griddepcontrol.wait;" : "=r"(v) : "l"(p) : "memory");
  o[0] = v;
}

// The wait and a load on one line, the wait first.
__global__ void wait_then_load_on_one_line(const unsigned* p, unsigned* o) {
  unsigned v;
  asm volatile("griddepcontrol.wait; ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  o[0] = v;
}

// A load written over three lines.
__global__ void load_over_three_lines(const unsigned* p, unsigned* o) {
  unsigned v;
  asm volatile("ld.global.u32\n\t\t%0,\n\t\t[%1];" : "=r"(v) : "l"(p) : "memory");
  WAIT();
  o[0] = v;
}

// The wait only where the kernel was launched with PDL: a scope's own label, in a helper inlined twice.
__device__ __forceinline__ void maybe_wait(unsigned use_pdl) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@!p bra SKIP;\n\tgriddepcontrol.wait;\n\tSKIP:\n\t}"
               :: "r"(use_pdl) : "memory");
}

// The first inlined copy's branch skips its own wait, not the second copy's: the load is reached unwaited.
__global__ void scoped_labels_skip_the_wait(const float* x, float* o, unsigned use_pdl) {
  maybe_wait(use_pdl);
  o[0] = x[0];
  maybe_wait(use_pdl + 1);
}

// Each copy branches to its own label, which stands before its wait: every path waits first.
__device__ __forceinline__ void wait_after_a_branch(unsigned c) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p bra DONE;\n\tDONE:\n\tgriddepcontrol.wait;\n\t}"
               :: "r"(c) : "memory");
}

__global__ void scoped_labels_each_wait(const float* x, float* o, unsigned c) {
  wait_after_a_branch(c);
  o[0] = x[0];
  wait_after_a_branch(c + 1);
}

// A spin loop over a global flag in one asm line, after the wait.
__global__ void spin_on_one_line_after_wait(const unsigned* flag, unsigned* o) {
  unsigned v;
  WAIT();
  asm volatile("{ .reg .pred p; SPIN: ld.volatile.global.u32 %0, [%1]; setp.eq.u32 p, %0, 0; @p bra SPIN; }"
               : "=r"(v) : "l"(flag) : "memory");
  o[0] = v;
}

// Block-scaled MMA commented out over several lines, a bf16 one in force: no block-scaled MMA.
__global__ void mma_block_scale_commented_out(const uint32_t* a, const uint32_t* b, float* out) {
  const unsigned t = threadIdx.x;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("/*\n\tmma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {0, 0}, %11, {0, 0};\n\t*/\n\t"
               "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]), "r"(a[0]),
                 "r"(b[0]));
  out[t] = d0 + d1 + d2 + d3;
}

// Block-scaled MMA after a label on its line.
__global__ void mma_block_scale_after_a_label(const uint32_t* a, const uint32_t* b, const uint32_t* sf,
                                              float* out) {
  const unsigned t = threadIdx.x;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("{ TILE: mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {0, 0}, %11, {0, 0}; }\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]), "r"(sf[0]),
                 "r"(sf[1]));
  out[t] = d0 + d1 + d2 + d3;
}
