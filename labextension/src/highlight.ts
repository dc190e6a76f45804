/**
 * `%%kernel` highlighting: a code cell whose first line is `%%kernel ...`
 * gets the language of its backend (`kernelCell.ts`: CUDA C++ for `cuda`,
 * Python for `triton` and `pallas`) by setting the cell model's mime type.
 *
 * The notebook resets every code cell's mime type to the kernel language when
 * `language_info` changes (kernel start or change, reload), so each cell is
 * watched: on every source change and every mime-type change the wanted mime
 * is applied again. A cell that stops being a `%%kernel` cell gets the
 * notebook's mime back, but only when the current mime is the one we set, so
 * other extensions' choices are left alone.
 */
import type { ICellModel } from '@jupyterlab/cells';
import type { INotebookTracker, Notebook, NotebookPanel } from '@jupyterlab/notebook';
import { mimeFor } from './kernelCell';

/** The mime each watched cell model was given by us (absent: none). */
const ours = new WeakMap<ICellModel, string>();
const watched = new WeakSet<ICellModel>();

/** Give one cell the mime its source asks for. */
export function applyMime(model: ICellModel, notebookMime: string): void {
  if (model.type !== 'code') {
    return;
  }
  const wanted = mimeFor(model.sharedModel.getSource());
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

/** Watch every notebook the tracker knows, now and later. */
export function activateHighlighting(tracker: INotebookTracker): void {
  tracker.forEach(watchPanel);
  tracker.widgetAdded.connect((_, panel) => watchPanel(panel));
}
