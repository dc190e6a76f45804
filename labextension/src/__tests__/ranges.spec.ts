import { Text } from '@codemirror/state';
import type { IDiagnostic, ILineData } from '../bundle';
import {
  diagnosticRanges,
  gutterEntries,
  gutterTitle,
  stallLabel,
  worstSeverity
} from '../ranges';

const cell = Text.of([
  '%%kernel scale --backend cuda',
  '#include <ktune.cuh>',
  '__global__ void scale(float* y) {',
  '    y[0] = q;',
  '',
  '}'
]);
const text = (n: number) => cell.line(n).text;

const diag = (line: number, column: number | null, severity: IDiagnostic['severity'] = 'error') => ({
  line,
  column,
  severity,
  message: `m${line}`
});

describe('diagnosticRanges', () => {
  it('puts a message on its cell line (line 1 is the %%kernel line)', () => {
    const [r] = diagnosticRanges(cell, [diag(4, null)], text);
    expect(r.line).toBe(4);
    expect(r.lineFrom).toBe(cell.line(4).from);
    expect(cell.sliceString(r.from, r.to)).toBe('y[0] = q;'); // the indentation is skipped
  });

  it('starts the underline at the column (1-based)', () => {
    const [r] = diagnosticRanges(cell, [diag(4, 12)], text);
    expect(cell.sliceString(r.from, r.to)).toBe('q;');
  });

  it('clips a column past the end, and keeps empty lines', () => {
    const [past, empty] = diagnosticRanges(cell, [diag(4, 99), diag(5, null)], text);
    expect(past.from).toBe(cell.line(4).to);
    expect(empty.from).toBe(empty.to);
    expect(empty.lineFrom).toBe(cell.line(5).from);
  });

  it('skips lines past the end of the cell and sorts by position', () => {
    const rs = diagnosticRanges(cell, [diag(6, null), diag(40, null), diag(2, 1, 'warning')], text);
    expect(rs.map(r => r.line)).toEqual([2, 6]);
  });
});

describe('gutterEntries', () => {
  const lines = new Map<number, ILineData>([
    [4, { samples: 300, stalls: { wait: 40, long_scoreboard: 200, math_pipe_throttle: 60 } }],
    [2, { samples: 100, stalls: {} }],
    [60, { samples: 100, stalls: {} }]
  ]);

  it('gives each existing line its share of the samples and its stalls, largest first', () => {
    const es = gutterEntries(cell, lines);
    expect(es.map(e => e.line)).toEqual([2, 4]);
    expect(es[1].share).toBeCloseTo(300 / 500);
    expect(es[1].stalls.map(s => s.reason)).toEqual(['long_scoreboard', 'math_pipe_throttle', 'wait']);
    expect(es[1].stalls[0].share).toBeCloseTo(200 / 300);
    expect(es[1].lineFrom).toBe(cell.line(4).from);
  });

  it('draws nothing without data', () => {
    expect(gutterEntries(cell, new Map())).toEqual([]);
  });

  it('words the hover text', () => {
    const [, e] = gutterEntries(cell, lines);
    expect(gutterTitle(e)).toBe(
      'line 4: 300 samples (60.0% of the cell)\n' +
        'long scoreboard: 200 (67%)\nmath pipe throttle: 60 (20%)\nwait: 40 (13%)'
    );
    expect(stallLabel('long_scoreboard')).toBe('long scoreboard');
  });
});

describe('worstSeverity', () => {
  it('orders error, warning, note', () => {
    expect(worstSeverity(['note', 'warning'])).toBe('warning');
    expect(worstSeverity(['note', 'error', 'warning'])).toBe('error');
    expect(worstSeverity([])).toBe('note');
  });
});
