/**
 * jupyter-ktune's JupyterLab plugins. This file only wires them; the logic
 * lives in `highlight.ts` (`%%kernel` highlighting), `renderer.ts` (the
 * editor-bundle renderer), `marks.ts` (the CodeMirror marks and gutter) and
 * `panel.ts` (the live panel, or its static snapshot without a kernel) and
 * `prepare.ts` (the notebook's backends opened when its kernel starts).
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { registerPanelRenderer } from './panel';

const highlight: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ktune:highlight',
  description: "Highlights %%kernel cells in their backend's language (the server's table).",
  autoStart: true,
  requires: [INotebookTracker],
  activate: async (app: JupyterFrontEnd, tracker: INotebookTracker): Promise<void> => {
    const { activateHighlighting } = await import('./highlight');
    // not awaited: the plugin is active while the table is on its way
    void activateHighlighting(tracker, app.serviceManager.serverSettings);
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

const panel: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ktune:panel',
  description: 'Shows the %%kernel panel live, or its static snapshot when its widget is gone.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker): void => {
    // no dynamic import here: the factory must be on a notebook's rendermime before its
    // outputs render, or they go to the widget view (with "model not found" and no kernel)
    const baseUrl = app.serviceManager.serverSettings.baseUrl;
    tracker.forEach(nb => registerPanelRenderer(app, nb, baseUrl));
    tracker.widgetAdded.connect((_t, nb) => registerPanelRenderer(app, nb, baseUrl));
  }
};

const prepare: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ktune:prepare',
  description: "Opens a notebook's %%kernel backends in the kernel's worker when it starts.",
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry],
  activate: async (
    _app: JupyterFrontEnd,
    tracker: INotebookTracker,
    registry: ISettingRegistry | null
  ): Promise<void> => {
    const { activatePrepare } = await import('./prepare');
    void activatePrepare(tracker, registry);
  }
};

export default [highlight, editorMarks, panel, prepare];
