import { EditorState, Text } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { type IEditorBundle, parseBundle, summaryText } from '../bundle';
import {
  diffEntries,
  diffKind,
  diffTitle,
  type ILinesDiff,
  movedMost,
  parseDiff,
  points
} from '../diff';
import { currentMarks, hoverCard, ktuneMarks, setMarks } from '../marks';

const source = [
  '%%kernel scale_t --backend triton',
  '@triton.jit',
  'def scale_t(x, y, n, BLOCK: tl.constexpr):',
  '    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)',
  '    tl.store(y + offs, 2.0 * tl.load(x + offs))'
];
const cell = Text.of(source);

/** The `diff` section as Python sends it: line 4 fell from 60 % to 25 %, line 5 rose. */
const rawDiff = {
  a: 'BLOCK=128',
  b: 'BLOCK=256',
  a_total: 1000,
  b_total: 800,
  lines: {
    '4': {
      samples: [600, 200],
      share: [0.6, 0.25],
      text: 'offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)',
      stalls: { long_scoreboard: [0.42, 0.125], wait: [0.1, 0.075] }
    },
    '5': {
      samples: [400, 600],
      share: [0.4, 0.75],
      text: 'tl.store(y + offs, 2.0 * tl.load(x + offs))',
      stalls: { math: [0.3, 0.5] }
    },
    '3': { samples: [2, 2], share: [0.002, 0.0025], stalls: {} }
  }
};
const rawBundle = {
  version: 1,
  backend: 'triton',
  diagnostics: [],
  lines: {
    '4': { samples: 200, stalls: { long_scoreboard: 100 } },
    '5': { samples: 600, stalls: { math: 400 } }
  },
  diff: rawDiff
};

function parsed(raw: unknown = rawBundle): IEditorBundle {
  const p = parseBundle(raw);
  if (p.kind !== 'ok') {
    throw new Error(p.error);
  }
  return p.bundle;
}

function diffOf(): ILinesDiff {
  const d = parseDiff(rawDiff);
  if (typeof d === 'string') {
    throw new Error(d);
  }
  return d;
}

describe('parseDiff', () => {
  it('reads both configs, the totals and each line', () => {
    const d = diffOf();
    expect([d.a, d.b, d.aTotal, d.bTotal]).toEqual(['BLOCK=128', 'BLOCK=256', 1000, 800]);
    expect(d.lines.get(4)?.share).toEqual([0.6, 0.25]);
    expect(d.lines.get(3)?.text).toBeNull();
  });

  it('refuses shares outside 0..1 and keys that are not cell lines', () => {
    const bad = { ...rawDiff, lines: { '4': { samples: [1, 2], share: [1.5, 0.1] } } };
    expect(parseDiff(bad)).toMatch(/shares \[A, B\] in 0..1/);
    expect(parseDiff({ ...rawDiff, lines: { '0': rawDiff.lines['3'] } })).toMatch(/not a cell line/);
    const p = parseBundle({ ...rawBundle, diff: bad });
    expect(p.kind === 'error' && p.error).toMatch(/^\[ktune\] editor bundle: diff.lines\[4\]/);
  });

  it('is optional: a bundle without it has no diff', () => {
    const { diff: _diff, ...plain } = rawBundle;
    expect(parsed(plain).diff).toBeNull();
    expect(parsed().diff?.lines.size).toBe(3);
  });
});

describe('diffEntries', () => {
  it('places each line with its change of share, B - A', () => {
    const { entries, refused } = diffEntries(cell, diffOf());
    expect(refused).toBeNull();
    expect(entries.map(e => e.line)).toEqual([3, 4, 5]);
    expect(entries[1].delta).toBeCloseTo(-0.35);
    expect(entries[2].delta).toBeCloseTo(0.35);
    expect(entries[1].lineFrom).toBe(cell.line(4).from);
  });

  it('refuses the whole difference when a line no longer reads as profiled', () => {
    const edited = Text.of([...source.slice(0, 4), '    tl.store(y + offs, 3.0 * tl.load(x + offs))']);
    const { entries, refused } = diffEntries(edited, diffOf());
    expect(entries).toEqual([]);
    expect(refused).toMatch(/cell line 5 changed since the breakdowns/);
  });

  it('skips lines past the end of the cell', () => {
    const short = Text.of(source.slice(0, 4));
    expect(diffEntries(short, diffOf()).entries.map(e => e.line)).toEqual([3, 4]);
  });
});

describe('words', () => {
  it('signs percentage points, with a minus sign, and calls under half a point the same', () => {
    expect(points(0.12)).toBe('+12pp');
    expect(points(-0.08)).toBe('\u22128pp');
    expect(points(0.004)).toBe('0pp');
    expect(points(-0.35, 1)).toBe('\u221235.0pp');
    expect([diffKind(0.12), diffKind(-0.08), diffKind(0.004)]).toEqual(['worse', 'better', 'same']);
  });

  it('names the stall reasons that moved most, largest first', () => {
    const line4 = diffOf().lines.get(4)!;
    expect(movedMost(line4).map(s => s.reason)).toEqual(['long_scoreboard', 'wait']);
  });

  it('says both configs, the shares and that it is a difference of shares, not of time', () => {
    const [, line4] = diffEntries(cell, diffOf()).entries;
    const title = diffTitle(line4, diffOf());
    expect(title).toMatch(/^line 4: \u221235\.0pp of the cell's stall samples, B against A/);
    expect(title).toContain('A (pinned) BLOCK=128: 60.0% (600 of 1000 samples)');
    expect(title).toContain('B (current) BLOCK=256: 25.0% (200 of 800 samples)');
    expect(title).toContain('moved most: long scoreboard \u221229.5pp, wait \u22122.5pp');
    expect(title).toContain('difference of shares of stall samples between two configs');
    expect(title).toContain('not of time');
  });

  it('summarises the diff mode in the output note', () => {
    expect(summaryText(parsed())).toBe(
      'the per-line stall share difference of BLOCK=256 (current) against BLOCK=128 (pinned) ' +
        'marked in the editor'
    );
    const { diff: _diff, ...plain } = rawBundle;
    expect(summaryText(parsed({ ...plain, note: 'no difference: why' }))).toBe(
      'per-line samples for 2 lines marked in the editor (no difference: why)'
    );
  });
});

describe('the gutter in an editor', () => {
  let view: EditorView;

  beforeEach(() => {
    view = new EditorView({
      state: EditorState.create({ doc: source.join('\n'), extensions: [ktuneMarks] }),
      parent: document.body
    });
  });

  afterEach(() => view.destroy());

  const gutterTexts = (): string[] =>
    Array.from(view.dom.querySelectorAll('.jp-ktune-gutter-diff')).map(n => n.textContent ?? '');

  it('shows the signed change per line, coloured by kind, instead of the bars', () => {
    setMarks(view, parsed());
    expect(currentMarks(view)).toMatchObject({ diffs: 3, lines: 2, refused: null });
    expect(view.dom.classList.contains('jp-ktune-diff-mode')).toBe(true);
    expect(gutterTexts()).toEqual(['0pp', '\u221235pp', '+35pp']);
    const worse = view.dom.querySelector('.jp-ktune-gutter-diff.jp-ktune-diff-worse');
    const better = view.dom.querySelector('.jp-ktune-gutter-diff.jp-ktune-diff-better');
    expect(worse?.textContent).toBe('+35pp');
    expect(better?.textContent).toBe('\u221235pp');
    expect(view.dom.querySelectorAll('.jp-ktune-gutter-bar')).toHaveLength(0);
    const marker = better!.parentElement as HTMLElement;
    expect(marker.title).toContain('A (pinned) BLOCK=128');
  });

  it('keeps the plain bars without a diff, and after an unpin (a plain bundle)', () => {
    const { diff: _diff, ...plain } = rawBundle;
    setMarks(view, parsed());
    setMarks(view, parsed(plain));
    expect(gutterTexts()).toEqual([]);
    expect(view.dom.querySelectorAll('.jp-ktune-gutter-bar')).toHaveLength(2);
    expect(view.dom.classList.contains('jp-ktune-diff-mode')).toBe(false);
  });

  it('draws the plain bars and says why when the cell changed since the breakdowns', () => {
    view.dispatch({
      changes: { from: view.state.doc.line(5).from + 23, to: view.state.doc.line(5).from + 26, insert: '3.0' }
    });
    setMarks(view, parsed());
    expect(currentMarks(view)).toMatchObject({ diffs: 0, lines: 2 });
    expect(currentMarks(view).refused).toMatch(/cell line 5 changed/);
    expect(gutterTexts()).toEqual([]);
  });

  it('follows its line through an edit above it', () => {
    setMarks(view, parsed());
    view.dispatch({ changes: { from: view.state.doc.line(2).from, insert: '# a new line\n' } });
    const lines = Array.from(view.dom.querySelectorAll('.jp-ktune-gutter-marker')).map(
      n => (n as HTMLElement).dataset.ktuneDiff
    );
    expect(lines).toEqual(['0pp', '\u221235pp', '+35pp']);
    expect(currentMarks(view).diffs).toBe(3);
  });

  it('hover card: both configs, the shares, the reasons that moved most', () => {
    const [, line4] = diffEntries(cell, diffOf()).entries;
    const card = hoverCard(null, [], line4, diffOf());
    expect(card.querySelector('.jp-ktune-diff-better')?.textContent).toBe(
      "\u221235.0pp of the cell's stall samples, B against A"
    );
    const rows = Array.from(card.querySelectorAll('tr')).map(r => r.textContent);
    expect(rows[0]).toContain('A (pinned) BLOCK=128');
    expect(rows[1]).toBe('share60.0%25.0%\u221235.0pp');
    expect(rows[3]).toBe('long scoreboard42.0%12.5%\u221229.5pp');
    expect(card.textContent).toContain('not of time');
  });
});
