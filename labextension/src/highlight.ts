/**
 * `%%kernel` highlighting: a code cell whose first line is `%%kernel ...`
 * gets the language of its backend by setting the cell model's mime type.
 * Which language that is, is the backend's own fact (`editor_mime` in the
 * Python registry): the table is fetched once, at activation, from the server
 * extension (`GET {baseUrl}ktune/backends`, `jupyter_ktune/server.py`), and
 * applied to the open cells when it arrives. Until it arrives, and for good
 * if the request fails (the server extension is not enabled, an older
 * server), `%%kernel` cells keep the notebook's language.
 *
 * The notebook resets every code cell's mime type to the kernel language when
 * `language_info` changes (kernel start or change, reload), so each cell is
 * watched: on every source change and every mime-type change the wanted mime
 * is applied again. A cell that stops being a `%%kernel` cell gets the
 * notebook's mime back, but only when the current mime is the one we set, so
 * other extensions' choices are left alone.
 */
import type { ICellModel } from '@jupyterlab/cells';
import { URLExt } from '@jupyterlab/coreutils';
import type { INotebookTracker, Notebook, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { GrammarTable, mimeFor, parseGrammarTable } from './kernelCell';

/** The route of the server extension, under the server's base URL. */
export const BACKENDS_PATH = 'ktune/backends';

/** The backends' grammars; null until the server answers (or if it never does). */
let grammars: GrammarTable | null = null;

/** The mime each watched cell model was given by us (absent: none). */
const ours = new WeakMap<ICellModel, string>();
const watched = new WeakSet<ICellModel>();

/** Give one cell the mime its source asks for. */
export function applyMime(model: ICellModel, notebookMime: string): void {
  if (model.type !== 'code') {
    return;
  }
  const wanted = mimeFor(model.sharedModel.getSource(), grammars);
  if (wanted !== null) {
    ours.set(model, wanted);
    if (model.mimeType !== wanted) {
      model.mimeType = wanted;
    }
  } else if (ours.has(model)) {
    const mine = ours.get(model);
    ours.delete(model);
    if (model.mimeType === mine && mine !== notebookMime) {
      model.mimeType = notebookMime;
    }
  }
}

function watchCell(notebook: Notebook, model: ICellModel): void {
  if (model.type !== 'code' || watched.has(model)) {
    return;
  }
  watched.add(model);
  const apply = (): void => applyMime(model, notebook.codeMimetype);
  model.sharedModel.changed.connect((_, change) => {
    if (change.sourceChange) {
      apply();
    }
  });
  model.mimeTypeChanged.connect(apply);
  apply();
}

function watchModel(notebook: Notebook): void {
  const model = notebook.model;
  if (!model) {
    return;
  }
  for (const cell of model.cells) {
    watchCell(notebook, cell);
  }
  model.cells.changed.connect((_, change) => {
    for (const cell of change.newValues) {
      watchCell(notebook, cell);
    }
  });
}

function watchPanel(panel: NotebookPanel): void {
  const notebook = panel.content;
  watchModel(notebook);
  notebook.modelChanged.connect(() => watchModel(notebook));
}

/** The table from the server, or null (said in the console) when there is none. */
export async function fetchGrammars(
  settings: ServerConnection.ISettings
): Promise<GrammarTable | null> {
  const url = URLExt.join(settings.baseUrl, BACKENDS_PATH);
  const kept = "%%kernel cells keep the notebook's language";
  try {
    const response = await ServerConnection.makeRequest(url, {}, settings);
    if (!response.ok) {
      console.warn(`jupyter-ktune: ${url} answered ${response.status}; ${kept}`);
      return null;
    }
    return parseGrammarTable(await response.json());
  } catch (reason) {
    console.warn(`jupyter-ktune: ${url} failed (${reason}); ${kept}`);
    return null;
  }
}

/** Give every open notebook's cells the mime their source asks for, now. */
function applyAll(tracker: INotebookTracker): void {
  tracker.forEach(panel => {
    const notebook = panel.content;
    for (const cell of notebook.model?.cells ?? []) {
      applyMime(cell, notebook.codeMimetype);
    }
  });
}

/**
 * Watch every notebook the tracker knows, now and later, and fetch the
 * backends' grammars once; the open cells get theirs when the table arrives.
 */
export async function activateHighlighting(
  tracker: INotebookTracker,
  settings: ServerConnection.ISettings
): Promise<void> {
  tracker.forEach(watchPanel);
  tracker.widgetAdded.connect((_, panel) => watchPanel(panel));
  grammars = await fetchGrammars(settings);
  if (grammars !== null) {
    applyAll(tracker);
  }
}
