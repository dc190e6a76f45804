/**
 * Which language a `%%kernel` cell is written in, from its first line.
 *
 * Pure functions, no JupyterLab imports: the highlighting plugin
 * (`highlight.ts`) calls `mimeFor` on every edit of a cell's first line.
 *
 * The backend comes from the magic line's `--backend NAME`, `--backend=NAME`
 * or `-b NAME` flag, else the table's default (as in `jupyter_ktune/spec.py`).
 * Each backend's grammar is data, not code here: the table comes from the
 * server (`GET ktune/backends`, built from the Python backend registry, each
 * backend's `editor_mime`), so a new backend needs no change in this file.
 * A backend name the table lacks (a typo the magic will reject, or a backend
 * that failed to load) leaves the cell to the notebook's own language.
 */

/** The backends' editor grammars, as `GET ktune/backends` answers. */
export interface GrammarTable {
  /** The backend of a cell whose magic line names none. */
  default: string;
  /** Backend name -> the mime type of its cells' JupyterLab language. */
  backends: Record<string, string>;
}

const MAGIC = /^%%kernel(?:[ \t]|$)/;

/** True when the source is a `%%kernel` cell (the magic on its first line). */
export function isKernelCell(source: string): boolean {
  return MAGIC.test(source);
}

/**
 * The backend named on the first line of a `%%kernel` cell (`defaultBackend`
 * when it names none), or null when the source is not a `%%kernel` cell.
 */
export function backendOf(source: string, defaultBackend: string): string | null {
  if (!isKernelCell(source)) {
    return null;
  }
  const newline = source.indexOf('\n');
  const first = newline < 0 ? source : source.slice(0, newline);
  const words = first.trim().split(/\s+/).slice(1);
  let backend = defaultBackend;
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    if (word === '--backend' || word === '-b') {
      backend = words[i + 1] ?? backend;
      i++;
    } else if (word.startsWith('--backend=')) {
      backend = word.slice('--backend='.length);
    }
  }
  return backend.replace(/^["']|["']$/g, '');
}

/**
 * The editor mime type for a cell: its backend's grammar from `table` for a
 * `%%kernel` cell, null for anything else, for a backend the table lacks, and
 * while there is no table (the notebook's language applies).
 */
export function mimeFor(source: string, table: GrammarTable | null): string | null {
  if (table === null) {
    return null;
  }
  const backend = backendOf(source, table.default);
  if (backend === null || !Object.prototype.hasOwnProperty.call(table.backends, backend)) {
    return null;
  }
  return table.backends[backend];
}

/**
 * The table from the server's JSON, or null when it is not one (an older or
 * foreign server): its string entries only, so a bad entry cannot reach a
 * cell model's mime type.
 */
export function parseGrammarTable(data: unknown): GrammarTable | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const { default: fallback, backends } = data as Record<string, unknown>;
  if (typeof fallback !== 'string' || typeof backends !== 'object' || backends === null) {
    return null;
  }
  const grammars: Record<string, string> = {};
  for (const [name, mime] of Object.entries(backends)) {
    if (typeof mime === 'string' && mime) {
      grammars[name] = mime;
    }
  }
  return { default: fallback, backends: grammars };
}

/** The `%%kernel` cells among a notebook's code cell sources (leading blank lines dropped). */
export function kernelCellSources(sources: Iterable<string>): string[] {
  const cells: string[] = [];
  for (const source of sources) {
    const trimmed = source.replace(/^\s+/, '');
    if (isKernelCell(trimmed)) {
      cells.push(trimmed);
    }
  }
  return cells;
}

/**
 * The Python a kernel runs, silently, to open the backends of `cells`
 * (`jupyter_ktune.prepare`): the cells travel as JSON text in a string
 * literal (a JSON string is a valid Python string literal), no name is left
 * in the notebook's namespace, and any failure (jupyter_ktune not installed
 * in this kernel, an older version) is swallowed: the cells report their own
 * errors when they run.
 */
export function prepareCode(cells: string[]): string {
  const literal = JSON.stringify(JSON.stringify(cells));
  return [
    'try:',
    `    __import__("jupyter_ktune.prepare").prepare.prepare_json(${literal})`,
    'except Exception:',
    '    pass'
  ].join('\n');
}
