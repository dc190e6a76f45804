/**
 * jupyter-ktune's JupyterLab plugins. This file only wires them; the logic
 * lives in `highlight.ts` (`%%kernel` highlighting), `renderer.ts` (the
 * editor-bundle renderer) and `marks.ts` (the CodeMirror marks and gutter).
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';

const highlight: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ktune:highlight',
  description: 'Highlights %%kernel cells as CUDA C++ or Python, by backend.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: async (_app: JupyterFrontEnd, tracker: INotebookTracker): Promise<void> => {
    const { activateHighlighting } = await import('./highlight');
    activateHighlighting(tracker);
  }
};

const editorMarks: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ktune:editor-marks',
  description: 'Shows %%kernel compiler messages and per-line samples in the cell editor.',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  activate: async (
    _app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry
  ): Promise<void> => {
    const { editorMarksFactory } = await import('./renderer');
    rendermime.addFactory(editorMarksFactory(tracker));
  }
};

export default [highlight, editorMarks];
