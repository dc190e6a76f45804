import { EDITOR_MIME, parseBundle, summaryText } from '../bundle';

const good = {
  version: 1,
  backend: 'cuda',
  diagnostics: [
    { line: 7, column: 3, severity: 'error', message: 'identifier "q" is undefined' },
    { line: 9, column: null, severity: 'warning', message: 'variable "t" was declared but never referenced' }
  ],
  lines: {
    '8': { samples: 300, stalls: { long_scoreboard: 200, wait: 40 } },
    '9': { samples: 100, stalls: {} }
  }
};

function ok(data: unknown) {
  const parsed = parseBundle(data);
  if (parsed.kind !== 'ok') {
    throw new Error(parsed.error);
  }
  return parsed.bundle;
}

function error(data: unknown): string {
  const parsed = parseBundle(data);
  if (parsed.kind !== 'error') {
    throw new Error('expected an error');
  }
  return parsed.error;
}

describe('parseBundle', () => {
  it('reads the documented shape', () => {
    const b = ok(good);
    expect(EDITOR_MIME).toBe('application/vnd.jupyter-ktune.editor+json');
    expect(b.backend).toBe('cuda');
    expect(b.diagnostics).toHaveLength(2);
    expect(b.diagnostics[0]).toEqual({
      line: 7,
      column: 3,
      severity: 'error',
      message: 'identifier "q" is undefined'
    });
    expect(b.diagnostics[1].column).toBeNull();
    expect(b.lines.get(8)).toEqual({ samples: 300, stalls: { long_scoreboard: 200, wait: 40 } });
  });

  it('accepts an empty bundle and missing parts', () => {
    const b = ok({ version: 1 });
    expect(b.diagnostics).toEqual([]);
    expect(b.lines.size).toBe(0);
    expect(summaryText(b)).toBe('nothing to mark in the editor');
  });

  it('maps compiler severities', () => {
    const b = ok({
      diagnostics: [
        { line: 1, severity: 'fatal error', message: 'a' },
        { line: 2, severity: 'remark', message: 'b' }
      ]
    });
    expect(b.diagnostics.map(d => d.severity)).toEqual(['error', 'note']);
  });

  it('refuses bad bundles with a [ktune] message', () => {
    expect(error(null)).toMatch(/^\[ktune\] editor bundle: expected an object/);
    expect(error({ version: 2 })).toMatch(/version 2/);
    expect(error({ diagnostics: {} })).toMatch(/diagnostics must be a list/);
    expect(error({ diagnostics: [{ line: 0, severity: 'error', message: '' }] })).toMatch(
      /line must be a cell line/
    );
    expect(error({ diagnostics: [{ line: 2, severity: 'oops', message: '' }] })).toMatch(
      /severity "oops"/
    );
    expect(error({ diagnostics: [{ line: 2, severity: 'error' }] })).toMatch(/message/);
    expect(error({ lines: { x: { samples: 1 } } })).toMatch(/"x" is not a cell line/);
    expect(error({ lines: { '3': { samples: -1 } } })).toMatch(/samples must be a count/);
    expect(error({ lines: { '3': { samples: 1, stalls: { wait: 'a' } } } })).toMatch(
      /stalls.wait/
    );
  });
});

describe('summaryText', () => {
  it('counts what it marks', () => {
    expect(summaryText(ok(good))).toBe(
      '2 compiler messages (1 error, 1 other) and per-line samples for 2 lines marked in the editor'
    );
    expect(
      summaryText(ok({ diagnostics: [{ line: 2, severity: 'error', message: 'x' }] }))
    ).toBe('1 compiler message marked in the editor');
  });
});
