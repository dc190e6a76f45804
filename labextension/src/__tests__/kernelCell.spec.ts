import { backendOf, CPP_MIME, isKernelCell, mimeFor, PYTHON_MIME } from '../kernelCell';

describe('mimeFor', () => {
  it('highlights a cuda cell as C++ (the default backend)', () => {
    expect(mimeFor('%%kernel scale --inputs inputs\n__global__ void f() {}')).toBe(CPP_MIME);
    expect(mimeFor('%%kernel scale --backend cuda\n')).toBe(CPP_MIME);
    expect(mimeFor('%%kernel')).toBe(CPP_MIME);
  });

  it('highlights triton and pallas cells as Python', () => {
    expect(mimeFor('%%kernel add --backend triton\n@triton.jit\ndef add(): pass')).toBe(
      PYTHON_MIME
    );
    expect(mimeFor('%%kernel add --backend=pallas --out y')).toBe(PYTHON_MIME);
    expect(mimeFor('%%kernel add -b triton')).toBe(PYTHON_MIME);
  });

  it('leaves other cells to the notebook', () => {
    expect(mimeFor('print(1)')).toBeNull();
    expect(mimeFor('%%kernels x')).toBeNull();
    expect(mimeFor(' %%kernel x')).toBeNull();
    expect(mimeFor('x = 1\n%%kernel x')).toBeNull();
    expect(mimeFor('%%kernel x --backend fortran')).toBeNull();
  });

  it('reads only the first line, and the last --backend wins as in argparse', () => {
    expect(mimeFor('%%kernel x\n# --backend triton')).toBe(CPP_MIME);
    expect(backendOf('%%kernel x --backend triton --backend cuda')).toBe('cuda');
    expect(backendOf("%%kernel x --backend 'triton'")).toBe('triton');
    expect(isKernelCell('%%kernel\tx')).toBe(true);
  });
});
