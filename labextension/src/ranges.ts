/**
 * Where the editor marks go: pure functions from a bundle and the cell's
 * text to document ranges, tested with jest on `@codemirror/state`'s `Text`.
 *
 * Bundle lines are cell lines (1 = the `%%kernel` line), which are the
 * editor's line numbers. A line past the end of the cell (the cell was
 * shortened after the run) is skipped, never an error.
 */
import type { IDiagnostic, ILineData, Severity } from './bundle';

/** The part of `@codemirror/state`'s `Text` these functions read. */
export interface IDocLines {
  readonly lines: number;
  line(n: number): { from: number; to: number };
}

/** One diagnostic placed in the document. */
export interface IDiagnosticRange {
  line: number;
  /** Start of the underline: the column when given, else the line's first non-blank. */
  from: number;
  /** End of the underline: the end of the line (equal to `from` on an empty line). */
  to: number;
  lineFrom: number;
  severity: Severity;
  message: string;
}

const SEVERITY_ORDER: Record<Severity, number> = { error: 0, warning: 1, note: 2 };

/** The worst severity of a list (error before warning before note). */
export function worstSeverity(severities: Severity[]): Severity {
  return severities.reduce<Severity>(
    (worst, s) => (SEVERITY_ORDER[s] < SEVERITY_ORDER[worst] ? s : worst),
    'note'
  );
}

/**
 * Document ranges for the diagnostics, sorted by position (CodeMirror wants
 * decorations in order). `text(n)` gives line n's text, to skip indentation.
 */
export function diagnosticRanges(
  doc: IDocLines,
  diagnostics: IDiagnostic[],
  text: (line: number) => string
): IDiagnosticRange[] {
  const out: IDiagnosticRange[] = [];
  for (const d of diagnostics) {
    if (d.line > doc.lines) {
      continue;
    }
    const line = doc.line(d.line);
    const length = line.to - line.from;
    const indent = /^\s*/.exec(text(d.line))?.[0].length ?? 0;
    const column = d.column !== null ? d.column - 1 : indent;
    const from = line.from + Math.min(Math.max(column, 0), length);
    const to = line.to;
    out.push({
      line: d.line,
      from,
      to,
      lineFrom: line.from,
      severity: d.severity,
      message: d.message
    });
  }
  return out.sort((a, b) => a.from - b.from || a.line - b.line);
}

/** One line of the per-line gutter. */
export interface IGutterEntry {
  line: number;
  lineFrom: number;
  samples: number;
  /** This line's share of all samples in the cell, 0..1. */
  share: number;
  /** Stall reasons, largest first, with their share of this line's samples. */
  stalls: { reason: string; samples: number; share: number }[];
}

/**
 * Gutter entries for the lines that exist in the document, sorted by line.
 * Shares are of the cell's total samples; an empty map gives no entries.
 */
export function gutterEntries(doc: IDocLines, lines: Map<number, ILineData>): IGutterEntry[] {
  let total = 0;
  for (const data of lines.values()) {
    total += data.samples;
  }
  const out: IGutterEntry[] = [];
  for (const [line, data] of lines) {
    if (line > doc.lines) {
      continue;
    }
    const stalls = Object.entries(data.stalls)
      .map(([reason, samples]) => ({
        reason,
        samples,
        share: data.samples > 0 ? samples / data.samples : 0
      }))
      .sort((a, b) => b.samples - a.samples || a.reason.localeCompare(b.reason));
    out.push({
      line,
      lineFrom: doc.line(line).from,
      samples: data.samples,
      share: total > 0 ? data.samples / total : 0,
      stalls
    });
  }
  return out.sort((a, b) => a.line - b.line);
}

/** A stall reason as words: `long_scoreboard` -> `long scoreboard`. */
export function stallLabel(reason: string): string {
  return reason.replace(/_/g, ' ');
}

/** The hover text of a gutter entry (also its `title`). */
export function gutterTitle(entry: IGutterEntry): string {
  const head = `line ${entry.line}: ${entry.samples} samples (${(entry.share * 100).toFixed(1)}% of the cell)`;
  const rows = entry.stalls.map(
    s => `${stallLabel(s.reason)}: ${s.samples} (${(s.share * 100).toFixed(0)}%)`
  );
  return [head, ...rows].join('\n');
}
