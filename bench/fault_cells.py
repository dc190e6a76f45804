"""The cells bench/fault_injection.py sweeps: each variant plants one fault, chosen by ``K``.

Phase 1: ``K % 16`` (the table in fault_injection's docstring); phase 4: ``K % 5`` picks a wrong
kernel a verdict must name (:data:`VERDICT_KINDS`). :data:`EXPECTED` is the class of
``fault_confusion`` each planted fault must be given.
"""

CUDA_SRC = """// ktune: K in range(0, %(n)d)
// ktune: grid = cdiv(n, 256); block = 256; smem = 300000 if K %% 16 == 5 else 0
// ktune: bytes = 8 * n
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
#if K %% 16 == 7
  this line is not C++;
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if K %% 16 == 1
  if (i == 0) { float* bad = (float*)0x10; bad[i] = 1.0f; }    // illegal address
#endif
#if K %% 16 == 3
  while (*(volatile const float*)(x + i) >= 0.0f) { }          // never ends (x >= 0)
#endif
#if K %% 16 == 13
  if (i == 0) __trap();                                        // sticky launch failure
#endif
  y[i] = 2.0f * x[i];
#if K %% 16 == 9
  if (i == 3) y[i] = __int_as_float(0x7fc00000);               // NaN
#endif
#if K %% 16 == 11
  y[i] = 3.0f * x[i];                                          // wrong
#endif
}
"""
GPU_FAULTS = {1: "illegal address", 3: "infinite loop", 5: "too much shared memory",
              7: "compile error", 9: "NaN output", 11: "wrong output", 13: "trap"}
FAKE_FAULTS = {1: "crash (abort)", 3: "infinite loop", 5: "fatal fault", 7: "compile error",
               9: "NaN output", 11: "wrong output", 13: "out of resources",
               15: "out of memory"}
# the class of bench/fault_confusion.py each planted fault must be given
EXPECTED = {"healthy": "correct", "illegal address": "device lost", "infinite loop": "kernel hang",
            "too much shared memory": "out of resources", "compile error": "compile error",
            "NaN output": "wrote NaN/Inf", "wrong output": "wrong output", "trap": "device lost",
            "crash (abort)": "crash", "fatal fault": "device lost",
            "out of resources": "out of resources", "out of memory": "out of memory",
            "inputs need 1 TiB": "out of memory", "writes NaN": "wrote NaN/Inf",
            "writes past the end": "wrote past the end",
            "writes before the start": "wrote before the start",
            "clobbers an input": "changed an input", "slow reference": "slow reference",
            "Interrupt mid-run": "interrupted, next reply in step"}
VERDICT_KINDS = {0: "healthy", 1: "writes NaN", 2: "writes past the end",
                 3: "writes before the start", 4: "clobbers an input"}
VERDICT_SRC = {"cuda": """// ktune: K in range(0, 20)
// ktune: grid = cdiv(n, 256); block = 256
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = 2.0f * x[i];
#if K % 5 == 1
  if (i == 3) y[i] = sqrtf(-x[i]);             // NaN from arithmetic (x > 0)
#endif
#if K % 5 == 2
  if (i < 24) y[n + i] = 1.0f;                 // 24 elements past the end of y
#endif
#if K % 5 == 3
  if (i < 8) y[i - 300] = 1.0f;                // 8 elements, 300 before the start of y
#endif
#if K % 5 == 4
  if (i < 10) ((float*)x)[i] = 0.0f;           // clobbers the input x
#endif
}
""", "fake": """# ktune: K in range(0, 20)
def scale(x, y, n):
    f = K % 5
    y[:] = 2 * x
    if f == 1:
        y[3] = np.sqrt(-x[3])                     # NaN from arithmetic (x > 0)
    if f == 2:                                    # y + n ... y + n + 23 (a raw pointer's reach)
        np.lib.stride_tricks.as_strided(y, (n + 24,))[n:] = 7.0
    if f == 3:                                    # y - 300 ... y - 293
        whole = y
        while whole.base is not None:
            whole = whole.base
        at = (y.ctypes.data - whole.ctypes.data) // y.itemsize
        whole[at - 300:at - 292] = 3.0
    if f == 4:
        x[:10] = 0.0                              # in place
"""}
HEALTHY_SRC = {"cuda": """// ktune: K in range(0, 40)
// ktune: grid = cdiv(n, 256); block = 256
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 0.0f * K;
}
""", "fake": """# ktune: K in range(0, 40)
import time
def scale(x, y, n):
    time.sleep(0.002)
    y[:] = 2 * x
"""}
