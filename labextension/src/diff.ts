/**
 * The pinned-vs-current per-line stall difference in the gutter (issue 38):
 * the editor bundle's optional `diff` section, checked, placed and put in
 * words. Pure functions, tested with jest.
 *
 * Python (`jupyter_ktune/editor_diff.py`) sends, per cell line, the line's
 * samples and its share of the cell's stall samples in A (the pinned config)
 * and in B (the current one), each of its own breakdown's total, so two
 * profiles of different length compare:
 *
 * ```json
 * "diff": {"a": "BLOCK=128", "b": "BLOCK=256", "a_total": 1000, "b_total": 800,
 *          "lines": {"9": {"samples": [600, 384], "share": [0.6, 0.48],
 *                          "text": "tl.store(y + offs, ...)",
 *                          "stalls": {"long_scoreboard": [0.42, 0.32]}}}}
 * ```
 *
 * The gutter shows `share B - share A` in percentage points ("+12pp" in the
 * error colour: the line takes more of B's stalls; "-8pp" in the success
 * colour: less), and the hover names both configs, the stall reasons that
 * moved most, and that it is a difference of shares of samples, not of time.
 * When a line's `text` no longer matches the editor (the cell was edited
 * after the run) the whole difference is refused, with the reason, rather
 * than drawn beside other code.
 */
import { stallLabel } from './ranges';

/** One line of the difference, as sent. */
export interface ILineDiff {
  samples: [number, number];
  share: [number, number];
  text: string | null;
  /** Per stall reason, its share of the cell's samples in A and in B. */
  stalls: Record<string, [number, number]>;
}

/** The checked `diff` section. */
export interface ILinesDiff {
  a: string;
  b: string;
  aTotal: number;
  bTotal: number;
  lines: Map<number, ILineDiff>;
}

/** One line of the difference placed in the document. */
export interface IDiffEntry extends ILineDiff {
  line: number;
  lineFrom: number;
  /** share B - share A, -1..1 */
  delta: number;
}

/** The part of `@codemirror/state`'s `Text` these functions read. */
export interface IDocText {
  readonly lines: number;
  line(n: number): { from: number; to: number; text: string };
}

/** Below this many percentage points a line counts as unchanged. */
export const SAME_BELOW_PP = 0.5;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isPair(value: unknown, max: number): value is [number, number] {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    value.every(v => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= max)
  );
}

/** Check a `diff` section: the section, or an error message (without the prefix). */
export function parseDiff(raw: unknown): ILinesDiff | string {
  if (!isRecord(raw) || !isRecord(raw.lines)) {
    return 'diff must be an object with lines';
  }
  const lines = new Map<number, ILineDiff>();
  for (const [key, d] of Object.entries(raw.lines)) {
    const line = Number(key);
    if (!Number.isInteger(line) || line < 1) {
      return `diff.lines key ${JSON.stringify(key)} is not a cell line`;
    }
    if (!isRecord(d) || !isPair(d.samples, Infinity) || !isPair(d.share, 1)) {
      return `diff.lines[${key}] needs samples [A, B] and shares [A, B] in 0..1`;
    }
    const stalls: Record<string, [number, number]> = {};
    for (const [reason, pair] of Object.entries(isRecord(d.stalls) ? d.stalls : {})) {
      if (!isPair(pair, 1)) {
        return `diff.lines[${key}].stalls.${reason} must be shares [A, B]`;
      }
      stalls[reason] = pair;
    }
    const text = typeof d.text === 'string' ? d.text : null;
    lines.set(line, { samples: d.samples, share: d.share, text, stalls });
  }
  const total = (v: unknown): number => (typeof v === 'number' && v >= 0 ? v : 0);
  return {
    a: typeof raw.a === 'string' ? raw.a : 'A',
    b: typeof raw.b === 'string' ? raw.b : 'B',
    aTotal: total(raw.a_total),
    bTotal: total(raw.b_total),
    lines
  };
}

/**
 * The difference placed in the document, sorted by line; or, when a line's
 * profiled text is not what the editor holds now, no entries and the reason.
 * Lines past the end of the cell are skipped.
 */
export function diffEntries(
  doc: IDocText,
  diff: ILinesDiff
): { entries: IDiffEntry[]; refused: string | null } {
  const entries: IDiffEntry[] = [];
  for (const [line, d] of diff.lines) {
    if (line > doc.lines) {
      continue;
    }
    const at = doc.line(line);
    if (d.text !== null && at.text.trim() !== d.text) {
      return {
        entries: [],
        refused:
          `no per-line difference shown: cell line ${line} changed since the breakdowns ` +
          '(run the cell and both breakdowns again)'
      };
    }
    entries.push({ ...d, line, lineFrom: at.from, delta: d.share[1] - d.share[0] });
  }
  return { entries: entries.sort((x, y) => x.line - y.line), refused: null };
}

/** Worse (the line takes more of B's stalls), better, or the same (under half a point). */
export function diffKind(delta: number): 'worse' | 'better' | 'same' {
  const pp = delta * 100;
  return Math.abs(pp) < SAME_BELOW_PP ? 'same' : pp > 0 ? 'worse' : 'better';
}

/** Signed percentage points: `+12pp`, `\u22128pp` (a minus sign), `0pp`. */
export function points(delta: number, digits = 0): string {
  const pp = delta * 100;
  if (diffKind(delta) === 'same' && digits === 0) {
    return '0pp';
  }
  const text = Math.abs(pp).toFixed(digits);
  return `${pp > 0 ? '+' : '\u2212'}${text}pp`;
}

/** The stall reasons whose share moved most on this line (largest change first). */
export function movedMost(
  entry: ILineDiff,
  n = 3
): { reason: string; a: number; b: number; delta: number }[] {
  return Object.entries(entry.stalls)
    .map(([reason, [a, b]]) => ({ reason, a, b, delta: b - a }))
    .filter(s => Math.abs(s.delta) * 100 >= 0.05)
    .sort((x, y) => Math.abs(y.delta) - Math.abs(x.delta) || x.reason.localeCompare(y.reason))
    .slice(0, n);
}

const pct = (share: number): string => `${(share * 100).toFixed(1)}%`;

/** The hover text of a line's difference (also the gutter marker's `title`). */
export function diffTitle(entry: IDiffEntry, diff: ILinesDiff): string {
  const rows = [
    `line ${entry.line}: ${points(entry.delta, 1)} of the cell's stall samples, B against A`,
    `  A (pinned) ${diff.a}: ${pct(entry.share[0])} (${entry.samples[0]} of ${diff.aTotal} samples)`,
    `  B (current) ${diff.b}: ${pct(entry.share[1])} (${entry.samples[1]} of ${diff.bTotal} samples)`
  ];
  const moved = movedMost(entry);
  if (moved.length) {
    rows.push(
      'moved most: ' +
        moved.map(s => `${stallLabel(s.reason)} ${points(s.delta, 1)}`).join(', ')
    );
  }
  rows.push(
    "a difference of shares of stall samples between two configs (each breakdown's cell " +
      'total is 100%), not of time'
  );
  return rows.join('\n');
}
