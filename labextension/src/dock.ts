/**
 * The panel docked beside the notebook: the panel's own live view, moved (not copied).
 *
 * The kernel side is one synced flag on the panel's root widget (`docked`, see
 * jupyter_ktune/ui/dock.py), set by the Dock button or `KernelPanel.dock()`. When it is set, the
 * output that shows the live panel moves its widget view into a tab split to the right of the
 * notebook (JupyterLab) or into the right side panel (Notebook 7) and keeps a one-line
 * placeholder; closing the tab moves the view back and clears the flag. Because it is the same
 * view, every slider move and sweep result updates the same Bokeh figures (a second view of a
 * jupyter_bokeh model starts from its first serialisation and drifts); because the flag is
 * widget state, a reload brings the dock back and a closed dock stays closed.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { Message } from '@lumino/messaging';
import { Panel, SplitPanel, Widget } from '@lumino/widgets';

/** The part of an ipywidgets model the dock reads and writes. */
export interface IRootModel {
  model_id: string;
  get(key: string): any;
  set(key: string, value: any): void;
  save_changes(): void;
  on(event: string, fn: () => void): void;
  off(event: string, fn: () => void): void;
}

/** Where the dock can go in this application: beside the notebook, or nowhere (and why). */
export function dockArea(app: JupyterFrontEnd): 'split' | 'right' | string {
  const shell = app.shell as any;
  if (shell && 'mode' in shell) {
    return 'split'; // JupyterLab's shell: a tab split to the right of the notebook
  }
  if (shell && typeof shell.expandRight === 'function') {
    return 'right'; // Notebook 7: its main area holds one document; the right side panel
  }
  return 'this application has no area beside the notebook to dock the panel into';
}

/** The width a docked panel needs so that its sliders, buttons and tabs are not cut. */
export const DOCK_MIN_PX = 560;

/**
 * The side panel's share of the horizontal split that holds it, widened to `DOCK_MIN_PX` (at
 * most 60 % of the split): Notebook 7 opens its right side panel at 1 / 3.5 of the window,
 * ~280 px at 1280, where the docked panel's sliders, buttons and tabs were cut at the right
 * edge. Found by walking up from the dock to the first horizontal split panel; the other
 * panes keep their pixel widths and the notebook takes the rest.
 */
export function widenSidePanel(dock: Widget): void {
  let child: Widget | null = dock;
  let split: any = dock.parent;
  while (split && !(split instanceof SplitPanel && split.orientation === 'horizontal')) {
    child = split;
    split = split.parent;
  }
  if (!split || !child) {
    return;
  }
  const total = split.node.clientWidth;
  const widths = split.widgets.map((w: Widget) => (w.isHidden ? 0 : w.node.offsetWidth));
  const at = split.widgets.indexOf(child);
  const want = Math.min(Math.max(DOCK_MIN_PX, widths[at]), Math.round(total * 0.6));
  if (total <= 0 || at < 0 || widths[at] >= want) {
    return;
  }
  let main = -1; // the widest other pane (the notebook) gives the width
  widths.forEach((w: number, i: number) => {
    if (i !== at && (main < 0 || w > widths[main])) {
      main = i;
    }
  });
  if (main < 0) {
    return;
  }
  widths[main] = Math.max(widths[main] - (want - widths[at]), 1);
  widths[at] = want;
  split.setRelativeSizes(widths);
}

/** One dock per panel model, whichever output of it docked first. */
const docks = new Map<string, DockPanel>();

/** The tab (or side panel) holding a docked panel's view. */
class DockPanel extends Panel {
  constructor(
    title: string,
    private readonly _onUserClose: () => void
  ) {
    super();
    this.addClass('jp-ktune-dock');
    this.title.label = title;
    this.title.caption = title;
    this.title.closable = true;
  }

  /** The user closed the tab: give the view back before the tab goes. */
  protected onCloseRequest(msg: Message): void {
    this._onUserClose();
    super.onCloseRequest(msg);
    this.dispose();
  }
}

/**
 * Keeps one output's live view docked while its model says so.
 *
 * `home` is the output's renderer (the view's parent when not docked); `placeholder` is what the
 * output shows while the view is away.
 */
export class Docking {
  constructor(
    private readonly _app: JupyterFrontEnd,
    private readonly _notebookId: string,
    private readonly _home: Panel,
    private readonly _view: Widget,
    private readonly _model: IRootModel
  ) {
    this._placeholder = new Widget();
    this._placeholder.addClass('jp-ktune-docked');
    this._model.on('change:docked', this._sync);
    this._sync();
  }

  private _sync = (): void => {
    if (this._model.get('docked')) {
      this._dock();
    } else {
      this._undock();
    }
  };

  private _dock(): void {
    const id = this._model.model_id;
    if (this._docked !== null || docks.has(id)) {
      return; // docked already, by this output or another view of the same panel
    }
    const area = dockArea(this._app);
    if (area !== 'split' && area !== 'right') {
      this._model.set('docked', false); // first: the change event clears the placeholder
      this._model.save_changes();
      this._say(`Dock: ${area}.`, false);
      return;
    }
    const dock = new DockPanel(this._model.get('dock_title') || 'ktune', () => this._closedByUser());
    dock.id = `ktune-dock-${id}`;
    docks.set(id, dock);
    this._docked = dock;
    dock.addWidget(this._view); // moves it: the same view, the same Bokeh documents
    this._home.addWidget(this._placeholder);
    this._say('Docked beside the notebook. ', true);
    if (area === 'split') {
      // the notebook stays the current document (Ctrl+S, the run commands act on it)
      const options = { mode: 'split-right', ref: this._notebookId, activate: false };
      this._app.shell.add(dock, 'main', options as any);
    } else {
      this._app.shell.add(dock, 'right', { rank: 0 });
      (this._app.shell as any).expandRight?.();
      this._app.shell.activateById(dock.id);
      widenSidePanel(dock);
    }
  }

  private _undock(): void {
    const dock = this._docked;
    if (dock === null) {
      this._placeholder.parent = null;
      return;
    }
    this._docked = null;
    docks.delete(this._model.model_id);
    this._placeholder.parent = null;
    this._home.addWidget(this._view); // back under its cell
    if (!dock.isDisposed) {
      dock.dispose();
    }
  }

  private _closedByUser(): void {
    this._undock();
    this._model.set('docked', false);
    this._model.save_changes();
  }

  /** One line in the output: where the panel is, or why it could not go there. */
  private _say(text: string, withUndock: boolean): void {
    const node = this._placeholder.node;
    node.textContent = text;
    if (withUndock) {
      const back = document.createElement('button');
      back.className = 'jp-ktune-undock jp-mod-styled';
      back.textContent = 'Bring it back here';
      back.onclick = () => {
        this._model.set('docked', false);
        this._model.save_changes();
        this._undock();
      };
      node.appendChild(back);
    } else if (!this._placeholder.parent) {
      this._home.insertWidget(0, this._placeholder);
    }
  }

  /** The output is going away (cell re-run, notebook closed): its dock goes with it. */
  dispose(): void {
    this._model.off('change:docked', this._sync);
    const dock = this._docked;
    this._docked = null;
    docks.delete(this._model.model_id);
    if (dock !== null && !dock.isDisposed) {
      dock.dispose();
    }
    this._placeholder.dispose();
  }

  private _placeholder: Widget;
  private _docked: DockPanel | null = null;
}
