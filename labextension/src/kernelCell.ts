/**
 * Which language a `%%kernel` cell is written in, from its first line.
 *
 * Pure functions, no JupyterLab imports: the highlighting plugin
 * (`highlight.ts`) calls `mimeFor` on every edit of a cell's first line.
 *
 * The backend comes from the magic line's `--backend NAME`, `--backend=NAME`
 * or `-b NAME` flag and defaults to `cuda`, as in `jupyter_ktune/spec.py`.
 * CUDA cells are CUDA C++ and get JupyterLab's C++ grammar; Triton and
 * Pallas cells are Python. Any other backend name (a typo the magic will
 * reject) leaves the cell to the notebook's own language.
 */

/** The mime type of JupyterLab's built-in C++ language (`@codemirror/lang-cpp`). */
export const CPP_MIME = 'text/x-c++src';

/** The mime type of JupyterLab's IPython language. */
export const PYTHON_MIME = 'text/x-ipython';

/** The backend a `%%kernel` cell uses when its magic line names none. */
export const DEFAULT_BACKEND = 'cuda';

const LANGUAGE_OF_BACKEND: Record<string, string> = {
  cuda: CPP_MIME,
  triton: PYTHON_MIME,
  pallas: PYTHON_MIME
};

const MAGIC = /^%%kernel(?:[ \t]|$)/;

/** True when the source is a `%%kernel` cell (the magic on its first line). */
export function isKernelCell(source: string): boolean {
  return MAGIC.test(source);
}

/**
 * The backend named on the first line of a `%%kernel` cell, or null when the
 * source is not a `%%kernel` cell.
 */
export function backendOf(source: string): string | null {
  if (!isKernelCell(source)) {
    return null;
  }
  const newline = source.indexOf('\n');
  const first = newline < 0 ? source : source.slice(0, newline);
  const words = first.trim().split(/\s+/).slice(1);
  let backend = DEFAULT_BACKEND;
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
 * The editor mime type for a cell: C++ for a CUDA `%%kernel` cell, Python for
 * Triton and Pallas, null for anything else (the notebook's language applies).
 */
export function mimeFor(source: string): string | null {
  const backend = backendOf(source);
  if (backend === null) {
    return null;
  }
  return LANGUAGE_OF_BACKEND[backend] ?? null;
}
