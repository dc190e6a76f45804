/**
 * The editor bundle: what the `%%kernel` magic sends for the cell editor.
 *
 * Python (`jupyter_ktune/editor.py`) displays it beside the cell's result as
 * the MIME type `application/vnd.jupyter-ktune.editor+json`:
 *
 * ```json
 * {
 *   "version": 1,
 *   "backend": "cuda",
 *   "diagnostics": [{"line": 7, "column": 3, "severity": "error", "message": "..."}],
 *   "lines": {"9": {"samples": 340, "stalls": {"long_scoreboard": 210, "wait": 40}}}
 * }
 * ```
 *
 * Line numbers are cell lines: line 1 is the `%%kernel` line, so they are the
 * editor's own line numbers. `column` is 1-based or null. `lines` holds the
 * per-line samples (cycles or PC samples) and stall reasons of the cycle
 * breakdown; it may be empty. Two optional keys: `diff`, the pinned-vs-current
 * per-line stall difference that the gutter shows instead of the bars
 * (`diff.ts`), and `note`, a line for the output's note. This module parses
 * and checks a bundle, with no JupyterLab imports, so it is tested with jest.
 */
import { type ILinesDiff, parseDiff } from './diff';

/** The MIME type of the editor bundle. */
export const EDITOR_MIME = 'application/vnd.jupyter-ktune.editor+json';

/** The bundle version this extension reads. */
export const BUNDLE_VERSION = 1;

export type Severity = 'error' | 'warning' | 'note';

/** One compiler message on a cell line. */
export interface IDiagnostic {
  line: number;
  column: number | null;
  severity: Severity;
  message: string;
}

/** Per-line profile data: total samples and the samples of each stall reason. */
export interface ILineData {
  samples: number;
  stalls: Record<string, number>;
}

/** A checked bundle. */
export interface IEditorBundle {
  version: number;
  backend: string;
  diagnostics: IDiagnostic[];
  lines: Map<number, ILineData>;
  /** The pinned-vs-current difference, or null (plain marks). */
  diff: ILinesDiff | null;
  /** A line for the output's note ('' for none). */
  note: string;
}

/** The outcome of parsing: a bundle, or the reason it was refused. */
export type ParseResult =
  | { kind: 'ok'; bundle: IEditorBundle }
  | { kind: 'error'; error: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function isLine(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1;
}

function severityOf(value: unknown): Severity | null {
  if (value === 'error' || value === 'fatal' || value === 'fatal error') {
    return 'error';
  }
  if (value === 'warning') {
    return 'warning';
  }
  if (value === 'note' || value === 'remark' || value === 'info') {
    return 'note';
  }
  return null;
}

const fail = (error: string): ParseResult => ({
  kind: 'error',
  error: `[ktune] editor bundle: ${error}`
});

/**
 * Check a bundle received from the kernel. Returns the bundle, or an error
 * that starts with `[ktune]` for the note in the cell output.
 */
export function parseBundle(data: unknown): ParseResult {
  if (!isRecord(data)) {
    return fail('expected an object');
  }
  const version = data.version ?? BUNDLE_VERSION;
  if (version !== BUNDLE_VERSION) {
    return fail(
      `version ${String(version)} is not ${BUNDLE_VERSION}; update jupyter-ktune's labextension`
    );
  }
  const backend = typeof data.backend === 'string' ? data.backend : '';

  const diagnostics: IDiagnostic[] = [];
  const rawDiagnostics = data.diagnostics ?? [];
  if (!Array.isArray(rawDiagnostics)) {
    return fail('diagnostics must be a list');
  }
  for (const [i, raw] of rawDiagnostics.entries()) {
    if (!isRecord(raw)) {
      return fail(`diagnostics[${i}] must be an object`);
    }
    if (!isLine(raw.line)) {
      return fail(`diagnostics[${i}].line must be a cell line (1 or more)`);
    }
    const severity = severityOf(raw.severity);
    if (severity === null) {
      return fail(`diagnostics[${i}].severity ${JSON.stringify(raw.severity)} is unknown`);
    }
    if (typeof raw.message !== 'string') {
      return fail(`diagnostics[${i}].message must be text`);
    }
    const column = isLine(raw.column) ? raw.column : null;
    diagnostics.push({ line: raw.line, column, severity, message: raw.message });
  }

  const lines = new Map<number, ILineData>();
  const rawLines = data.lines ?? {};
  if (!isRecord(rawLines)) {
    return fail('lines must be an object keyed by cell line');
  }
  for (const [key, raw] of Object.entries(rawLines)) {
    const line = Number(key);
    if (!isLine(line)) {
      return fail(`lines key ${JSON.stringify(key)} is not a cell line`);
    }
    if (!isRecord(raw) || !isCount(raw.samples)) {
      return fail(`lines[${key}].samples must be a count`);
    }
    const stalls: Record<string, number> = {};
    const rawStalls = raw.stalls ?? {};
    if (!isRecord(rawStalls)) {
      return fail(`lines[${key}].stalls must be an object`);
    }
    for (const [reason, count] of Object.entries(rawStalls)) {
      if (!isCount(count)) {
        return fail(`lines[${key}].stalls.${reason} must be a count`);
      }
      stalls[reason] = count;
    }
    lines.set(line, { samples: raw.samples, stalls });
  }
  let diff: ILinesDiff | null = null;
  if (data.diff !== undefined && data.diff !== null) {
    const parsed = parseDiff(data.diff);
    if (typeof parsed === 'string') {
      return fail(parsed);
    }
    diff = parsed;
  }
  const note = typeof data.note === 'string' ? data.note : '';
  return {
    kind: 'ok',
    bundle: { version: BUNDLE_VERSION, backend, diagnostics, lines, diff, note }
  };
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The one-line note the renderer shows in the cell output. */
export function summaryText(bundle: IEditorBundle): string {
  const parts: string[] = [];
  const errors = bundle.diagnostics.filter(d => d.severity === 'error').length;
  const others = bundle.diagnostics.length - errors;
  if (bundle.diagnostics.length) {
    const detail =
      errors && others ? ` (${plural(errors, 'error')}, ${others} other)` : '';
    parts.push(`${plural(bundle.diagnostics.length, 'compiler message')}${detail}`);
  }
  if (bundle.diff) {
    parts.push(
      `the per-line stall share difference of ${bundle.diff.b} (current) against ` +
        `${bundle.diff.a} (pinned)`
    );
  } else if (bundle.lines.size) {
    parts.push(`per-line samples for ${plural(bundle.lines.size, 'line')}`);
  }
  const note = bundle.note ? ` (${bundle.note})` : '';
  if (!parts.length) {
    return `nothing to mark in the editor${note}`;
  }
  return `${parts.join(' and ')} marked in the editor${note}`;
}
