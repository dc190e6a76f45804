/**
 * The CodeMirror 6 side of the editor marks: one state field per editor that
 * holds the marks of the latest editor bundle, drawn as
 *
 * - line decorations and an underline for each compiler message
 *   (`jp-ktune-diag-{error,warning,note}`), with the messages on hover;
 * - a gutter beside the lines (`jp-ktune-gutter`): a severity dot for a
 *   message, a bar whose width is the line's share of the cell's samples,
 *   and a hover card of the line's stall reasons;
 * - with a pinned comparison (the bundle's `diff`, `diff.ts`), instead of the
 *   bars: each line's change of share of the stall samples, B against A
 *   (`jp-ktune-gutter-diff jp-ktune-diff-{worse,better,same}`), and the
 *   editor gets `jp-ktune-diff-mode`. A diff whose lines no longer read as
 *   profiled is refused (`diffRefusal`) and the plain bars are drawn.
 *
 * `ktuneMarks` is installed in every editor through JupyterLab's editor
 * extension registry; it draws nothing until `setMarks` puts a bundle in,
 * and `setMarks(view, null)` takes it out again. Positions map through
 * later edits, so a mark follows its line while the user types.
 */
import {
  type ChangeDesc,
  type Extension,
  MapMode,
  RangeSetBuilder,
  StateEffect,
  StateField,
  Text
} from '@codemirror/state';
import {
  Decoration,
  type DecorationSet,
  EditorView,
  gutter,
  GutterMarker,
  hoverTooltip,
  type Tooltip
} from '@codemirror/view';
import type { IEditorBundle } from './bundle';
import {
  diffEntries,
  diffKind,
  diffTitle,
  type IDiffEntry,
  type ILinesDiff,
  movedMost,
  points
} from './diff';
import {
  diagnosticRanges,
  gutterEntries,
  gutterTitle,
  type IDiagnosticRange,
  type IGutterEntry,
  stallLabel,
  worstSeverity
} from './ranges';

/** The pinned-vs-current difference an editor shows, or why it shows none. */
interface IDiffMarks {
  diff: ILinesDiff | null;
  diffs: IDiffEntry[];
  refused: string | null;
}

const NO_DIFF: IDiffMarks = { diff: null, diffs: [], refused: null };

/** What one editor shows: the placed diagnostics, gutter entries and difference. */
interface IMarks extends IDiffMarks {
  diagnostics: IDiagnosticRange[];
  entries: IGutterEntry[];
  decorations: DecorationSet;
}

const EMPTY: IMarks = { diagnostics: [], entries: [], decorations: Decoration.none, ...NO_DIFF };

/** Replace the marks of an editor (null removes them). */
export const setMarksEffect = StateEffect.define<IEditorBundle | null>();

function place(doc: Text, bundle: IEditorBundle): IMarks {
  const diagnostics = diagnosticRanges(doc, bundle.diagnostics, n => doc.line(n).text);
  let diff = NO_DIFF;
  if (bundle.diff) {
    const { entries, refused } = diffEntries(doc, bundle.diff);
    diff = { diff: entries.length ? bundle.diff : null, diffs: entries, refused };
  }
  return build(diagnostics, gutterEntries(doc, bundle.lines), diff);
}

/**
 * Marks after an edit: each follows its line; a mark whose line start was
 * deleted (the line removed, or the whole source replaced) is dropped rather
 * than piled onto a neighbouring line.
 */
function mapMarks(marks: IMarks, changes: ChangeDesc, doc: Text): IMarks {
  const lineStart = (pos: number): number | null => {
    const mapped = changes.mapPos(pos, -1, MapMode.TrackDel);
    return mapped !== null && doc.lineAt(mapped).from === mapped ? mapped : null;
  };
  const diagnostics: IDiagnosticRange[] = [];
  for (const d of marks.diagnostics) {
    const lineFrom = lineStart(d.lineFrom);
    if (lineFrom !== null) {
      const line = doc.lineAt(lineFrom);
      const from = Math.min(changes.mapPos(d.from, -1), line.to);
      diagnostics.push({ ...d, line: line.number, lineFrom, from: Math.max(from, lineFrom), to: line.to });
    }
  }
  const entries: IGutterEntry[] = [];
  for (const e of marks.entries) {
    const lineFrom = lineStart(e.lineFrom);
    if (lineFrom !== null) {
      entries.push({ ...e, line: doc.lineAt(lineFrom).number, lineFrom });
    }
  }
  const diffs: IDiffEntry[] = [];
  for (const e of marks.diffs) {
    const lineFrom = lineStart(e.lineFrom);
    if (lineFrom !== null) {
      diffs.push({ ...e, line: doc.lineAt(lineFrom).number, lineFrom });
    }
  }
  const diff = { diff: diffs.length ? marks.diff : null, diffs, refused: marks.refused };
  return diagnostics.length || entries.length || diffs.length
    ? build(diagnostics, entries, diff)
    : EMPTY;
}

function build(
  diagnostics: IDiagnosticRange[],
  entries: IGutterEntry[],
  diff: IDiffMarks = NO_DIFF
): IMarks {
  const builder = new RangeSetBuilder<Decoration>();
  // line decorations first at each position, then marks, as RangeSetBuilder wants them sorted
  const items: { from: number; to: number; deco: Decoration }[] = [];
  const byLine = new Map<number, IDiagnosticRange[]>();
  for (const d of diagnostics) {
    byLine.set(d.line, [...(byLine.get(d.line) ?? []), d]);
  }
  for (const [, ds] of byLine) {
    const severity = worstSeverity(ds.map(d => d.severity));
    items.push({
      from: ds[0].lineFrom,
      to: ds[0].lineFrom,
      deco: Decoration.line({
        class: `jp-ktune-diag-line jp-ktune-diag-${severity}`,
        attributes: { 'data-ktune-line': String(ds[0].line) }
      })
    });
  }
  for (const d of diagnostics) {
    if (d.to > d.from) {
      items.push({
        from: d.from,
        to: d.to,
        deco: Decoration.mark({
          class: `jp-ktune-diag-mark jp-ktune-diag-${d.severity}`,
          attributes: { title: `${d.severity}: ${d.message}` }
        })
      });
    }
  }
  items.sort(
    (a, b) =>
      a.from - b.from ||
      a.deco.startSide - b.deco.startSide ||
      a.to - b.to
  );
  for (const item of items) {
    builder.add(item.from, item.to, item.deco);
  }
  return { diagnostics, entries, decorations: builder.finish(), ...diff };
}

const marksField = StateField.define<IMarks>({
  create: () => EMPTY,
  update(marks, tr) {
    for (const effect of tr.effects) {
      if (effect.is(setMarksEffect)) {
        return effect.value === null ? EMPTY : place(tr.state.doc, effect.value);
      }
    }
    if (!tr.docChanged || marks === EMPTY) {
      return marks;
    }
    return mapMarks(marks, tr.changes, tr.state.doc);
  },
  provide: field => [
    EditorView.decorations.from(field, marks => marks.decorations),
    // a wider gutter for the difference's text
    EditorView.editorAttributes.from(field, (marks): Record<string, string> =>
      marks.diffs.length ? { class: 'jp-ktune-diff-mode' } : {}
    )
  ]
});

class KtuneGutterMarker extends GutterMarker {
  constructor(
    readonly entry: IGutterEntry | null,
    readonly diagnostics: IDiagnosticRange[],
    readonly change: IDiffEntry | null = null,
    readonly diff: ILinesDiff | null = null
  ) {
    super();
  }

  eq(other: KtuneGutterMarker): boolean {
    return (
      other.entry === this.entry &&
      other.diagnostics === this.diagnostics &&
      other.change === this.change
    );
  }

  toDOM(): HTMLElement {
    const node = document.createElement('div');
    node.className = 'jp-ktune-gutter-marker';
    const titles: string[] = [];
    if (this.diagnostics.length) {
      const severity = worstSeverity(this.diagnostics.map(d => d.severity));
      const dot = document.createElement('span');
      dot.className = `jp-ktune-gutter-dot jp-ktune-diag-${severity}`;
      node.appendChild(dot);
      titles.push(...this.diagnostics.map(d => `${d.severity}: ${d.message}`));
    }
    if (this.change && this.diff) {
      const text = document.createElement('span');
      text.className = `jp-ktune-gutter-diff jp-ktune-diff-${diffKind(this.change.delta)}`;
      text.textContent = points(this.change.delta);
      node.appendChild(text);
      node.dataset.ktuneDiff = points(this.change.delta);
      titles.push(diffTitle(this.change, this.diff));
    } else if (this.entry) {
      const bar = document.createElement('span');
      bar.className = 'jp-ktune-gutter-bar';
      bar.style.width = `${Math.max(2, Math.round(this.entry.share * 100))}%`;
      node.appendChild(bar);
      node.dataset.ktuneSamples = String(this.entry.samples);
      titles.push(gutterTitle(this.entry));
    }
    node.title = titles.join('\n');
    return node;
  }
}

function lineOf(doc: Text, pos: number): number {
  return doc.lineAt(pos).number;
}

const marksGutter = gutter({
  class: 'jp-ktune-gutter',
  lineMarker(view, block) {
    const marks = view.state.field(marksField, false);
    if (!marks || marks === EMPTY) {
      return null;
    }
    const line = lineOf(view.state.doc, block.from);
    const entry = marks.entries.find(e => lineOf(view.state.doc, e.lineFrom) === line) ?? null;
    const ds = marks.diagnostics.filter(d => lineOf(view.state.doc, d.lineFrom) === line);
    const change = marks.diffs.find(e => lineOf(view.state.doc, e.lineFrom) === line) ?? null;
    return entry || ds.length || change
      ? new KtuneGutterMarker(entry, ds, change, marks.diff)
      : null;
  },
  lineMarkerChange: update =>
    update.startState.field(marksField, false) !== update.state.field(marksField, false)
});

/** The hover card of a line: its compiler messages and its stall reasons, or
 * with a pinned comparison the line's change of share and the reasons that
 * moved most. */
export function hoverCard(
  entry: IGutterEntry | null,
  diagnostics: IDiagnosticRange[],
  change: IDiffEntry | null = null,
  diff: ILinesDiff | null = null
): HTMLElement {
  const card = document.createElement('div');
  card.className = 'jp-ktune-hover-card';
  for (const d of diagnostics) {
    const row = document.createElement('div');
    row.className = `jp-ktune-hover-diag jp-ktune-diag-${d.severity}`;
    row.textContent = `${d.severity}: ${d.message}`;
    card.appendChild(row);
  }
  if (change && diff) {
    card.appendChild(diffCard(change, diff));
  } else if (entry) {
    const head = document.createElement('div');
    head.className = 'jp-ktune-hover-head';
    head.textContent = `${entry.samples} samples, ${(entry.share * 100).toFixed(1)}% of the cell`;
    card.appendChild(head);
    const table = document.createElement('table');
    for (const stall of entry.stalls) {
      const tr = table.insertRow();
      tr.insertCell().textContent = stallLabel(stall.reason);
      tr.insertCell().textContent = String(stall.samples);
      tr.insertCell().textContent = `${(stall.share * 100).toFixed(0)}%`;
    }
    card.appendChild(table);
  }
  return card;
}

function diffCard(change: IDiffEntry, diff: ILinesDiff): HTMLElement {
  const box = document.createElement('div');
  box.className = 'jp-ktune-hover-diff';
  const head = document.createElement('div');
  head.className = `jp-ktune-hover-head jp-ktune-diff-${diffKind(change.delta)}`;
  head.textContent = `${points(change.delta, 1)} of the cell's stall samples, B against A`;
  box.appendChild(head);
  const table = document.createElement('table');
  const row = (cells: string[]): void => {
    const tr = table.insertRow();
    for (const c of cells) {
      tr.insertCell().textContent = c;
    }
  };
  const pct = (v: number): string => `${(v * 100).toFixed(1)}%`;
  row(['', `A (pinned) ${diff.a}`, `B (current) ${diff.b}`, 'B \u2212 A']);
  row(['share', pct(change.share[0]), pct(change.share[1]), points(change.delta, 1)]);
  row(['samples', `${change.samples[0]} of ${diff.aTotal}`, `${change.samples[1]} of ${diff.bTotal}`, '']);
  for (const s of movedMost(change)) {
    row([stallLabel(s.reason), pct(s.a), pct(s.b), points(s.delta, 1)]);
  }
  box.appendChild(table);
  const what = document.createElement('div');
  what.className = 'jp-ktune-hover-what';
  what.textContent =
    "a difference of shares of stall samples between two configs (each breakdown's cell " +
    'total is 100%), not of time';
  box.appendChild(what);
  return box;
}

const marksHover = hoverTooltip((view, pos): Tooltip | null => {
  const marks = view.state.field(marksField, false);
  if (!marks || marks === EMPTY) {
    return null;
  }
  const line = lineOf(view.state.doc, pos);
  const entry = marks.entries.find(e => lineOf(view.state.doc, e.lineFrom) === line) ?? null;
  const ds = marks.diagnostics.filter(d => lineOf(view.state.doc, d.lineFrom) === line);
  const change = marks.diffs.find(e => lineOf(view.state.doc, e.lineFrom) === line) ?? null;
  if (!entry && !ds.length && !change) {
    return null;
  }
  return {
    pos: view.state.doc.line(line).from,
    above: true,
    create: () => ({ dom: hoverCard(entry, ds, change, marks.diff) })
  };
});

/** The extension every editor gets: the field, the gutter and the hover card. */
export const ktuneMarks: Extension = [marksField, marksGutter, marksHover];

/** Show a bundle's marks in an editor, or remove them with null. */
export function setMarks(view: EditorView, bundle: IEditorBundle | null): void {
  if (view.state.field(marksField, false) === undefined) {
    view.dispatch({ effects: StateEffect.appendConfig.of(ktuneMarks) });
  }
  view.dispatch({ effects: setMarksEffect.of(bundle) });
}

/** The marks an editor shows now (for tests and the renderer's checks). */
export function currentMarks(view: EditorView): {
  diagnostics: number;
  lines: number;
  diffs: number;
  refused: string | null;
} {
  const marks = view.state.field(marksField, false) ?? EMPTY;
  return {
    diagnostics: marks.diagnostics.length,
    lines: marks.entries.length,
    diffs: marks.diffs.length,
    refused: marks.refused
  };
}
