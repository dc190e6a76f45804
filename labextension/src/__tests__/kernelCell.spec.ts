import {
  backendOf,
  GrammarTable,
  isKernelCell,
  kernelCellSources,
  mimeFor,
  parseGrammarTable,
  prepareCode
} from '../kernelCell';

const CPP_MIME = 'text/x-c++src';
const PYTHON_MIME = 'text/x-ipython';

/** The built-ins' table as `GET ktune/backends` answers it. */
const BUILT_IN: GrammarTable = {
  default: 'cuda',
  backends: { cuda: CPP_MIME, triton: PYTHON_MIME, pallas: PYTHON_MIME }
};

describe('mimeFor', () => {
  it('highlights a cuda cell as C++ (the default backend)', () => {
    expect(mimeFor('%%kernel scale --inputs inputs\n__global__ void f() {}', BUILT_IN)).toBe(
      CPP_MIME
    );
    expect(mimeFor('%%kernel scale --backend cuda\n', BUILT_IN)).toBe(CPP_MIME);
    expect(mimeFor('%%kernel', BUILT_IN)).toBe(CPP_MIME);
  });

  it('highlights triton and pallas cells as Python', () => {
    const add = '%%kernel add --backend triton\n@triton.jit\ndef add(): pass';
    expect(mimeFor(add, BUILT_IN)).toBe(PYTHON_MIME);
    expect(mimeFor('%%kernel add --backend=pallas --out y', BUILT_IN)).toBe(PYTHON_MIME);
    expect(mimeFor('%%kernel add -b triton', BUILT_IN)).toBe(PYTHON_MIME);
  });

  it('leaves other cells to the notebook', () => {
    expect(mimeFor('print(1)', BUILT_IN)).toBeNull();
    expect(mimeFor('%%kernels x', BUILT_IN)).toBeNull();
    expect(mimeFor(' %%kernel x', BUILT_IN)).toBeNull();
    expect(mimeFor('x = 1\n%%kernel x', BUILT_IN)).toBeNull();
    expect(mimeFor('%%kernel x --backend fortran', BUILT_IN)).toBeNull();
    expect(mimeFor('%%kernel x --backend toString', BUILT_IN)).toBeNull(); // not Object's
  });

  it('leaves every cell to the notebook while there is no table', () => {
    expect(mimeFor('%%kernel scale', null)).toBeNull();
    expect(mimeFor('%%kernel add --backend triton', null)).toBeNull();
  });

  it('takes a new backend and a new default from the table alone', () => {
    const table: GrammarTable = {
      default: 'zig',
      backends: { ...BUILT_IN.backends, zig: 'text/x-zig', mojo: PYTHON_MIME }
    };
    expect(mimeFor('%%kernel k --backend mojo\ndef k(): pass', table)).toBe(PYTHON_MIME);
    expect(mimeFor('%%kernel k', table)).toBe('text/x-zig');
    expect(mimeFor('%%kernel k -b cuda', table)).toBe(CPP_MIME);
    expect(mimeFor('%%kernel k --backend mojo', BUILT_IN)).toBeNull();
  });

  it('reads only the first line, and the last --backend wins as in argparse', () => {
    expect(mimeFor('%%kernel x\n# --backend triton', BUILT_IN)).toBe(CPP_MIME);
    expect(backendOf('%%kernel x --backend triton --backend cuda', 'cuda')).toBe('cuda');
    expect(backendOf("%%kernel x --backend 'triton'", 'cuda')).toBe('triton');
    expect(backendOf('%%kernel x', 'zig')).toBe('zig');
    expect(isKernelCell('%%kernel\tx')).toBe(true);
  });
});

describe('parseGrammarTable', () => {
  it('keeps the string entries of the server answer', () => {
    const answer = { default: 'cuda', backends: { cuda: CPP_MIME, bad: 3, no: '' } };
    expect(parseGrammarTable(answer)).toEqual({ default: 'cuda', backends: { cuda: CPP_MIME } });
  });

  it('refuses what is not a table', () => {
    expect(parseGrammarTable(null)).toBeNull();
    expect(parseGrammarTable('cuda')).toBeNull();
    expect(parseGrammarTable({ backends: {} })).toBeNull();
    expect(parseGrammarTable({ default: 'cuda', backends: null })).toBeNull();
  });
});

describe('kernelCellSources', () => {
  it('keeps the %%kernel cells, leading blank lines dropped', () => {
    const cells = ['x = 1', '\n%%kernel k --backend triton\nbody', '%%kernelish', '%%kernel'];
    expect(kernelCellSources(cells)).toEqual(['%%kernel k --backend triton\nbody', '%%kernel']);
    expect(kernelCellSources(['import numpy'])).toEqual([]);
  });
});

describe('prepareCode', () => {
  it('carries the cells as one JSON string literal, inside a try', () => {
    const cells = ['%%kernel q -b triton\ns = "a\\\\b"\n# µs'];
    const code = prepareCode(cells);
    const lines = code.split('\n');
    expect(lines).toHaveLength(4); // the cells' newlines are escaped inside the literal
    expect(lines[0]).toBe('try:');
    expect(lines[2]).toBe('except Exception:');
    const literal = /prepare_json\((".*")\)$/.exec(lines[1]);
    expect(literal).not.toBeNull();
    expect(JSON.parse(JSON.parse(literal![1]))).toEqual(cells);
  });
});
