/**
 * The renderer of `application/vnd.jupyter-ktune.panel+json`: the live panel when its widget
 * exists, the static snapshot otherwise.
 *
 * The panel's output carries three things: the widget view (the live panel), this MIME type
 * (`{"version": 1, "model_id": ...}`) and `text/html`, a static snapshot of the current result
 * (card and SVG figures). Registered on each notebook's own rendermime with a rank before the
 * widget view's, this renderer shows the snapshot at once, then asks the notebook's widget
 * manager (once it has restored the kernel's widgets) whether the model exists: if so it loads
 * BokehJS and puts the widget view in place of the snapshot; if not (a notebook reopened with
 * no kernel, or another kernel) the snapshot stays, with no "model not found" error.
 *
 * While live it copies the panel's hidden snapshot widget (`.ktune-snapshot-src`) into the
 * output's `text/html` whenever it changes, so the saved notebook shows the config the user
 * ended on. It also marks whatever gets the focus inside the live panel (a slider's handle, the
 * budget box) `data-lm-suppress-shortcuts`: Lumino then runs no keyboard shortcut for keys
 * pressed there, so the arrow keys move a focused slider instead of the notebook's cell
 * selection (Notebook 7's command mode took them). It must be the focused element itself:
 * Lumino stops its ancestor walk at the attribute, but a `:focus` selector matches below it.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import { MimeModel, type IRenderMimeRegistry } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Panel, type Widget } from '@lumino/widgets';
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ensureBokeh } from './bokeh';
import { Docking, type IRootModel } from './dock';

export const PANEL_MIME = 'application/vnd.jupyter-ktune.panel+json';
export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
/** Lower ranks win: ipywidgets registers its widget view at -10. */
export const PANEL_RANK = -20;
/** How long to wait for a widget manager that has not restored its widgets yet. */
const RESTORE_WAIT_MS = 60000;

interface IPanelData {
  version: number;
  model_id: string | null;
}

/** The part of ipywidgets' lab widget manager this renderer reads. */
interface IManagerLike {
  has_model(id: string): boolean;
  get_model(id: string): Promise<unknown> | undefined;
  restoredStatus?: boolean;
  restored?: { connect(fn: () => void): void; disconnect(fn: () => void): void };
}

function parse(data: unknown): IPanelData | null {
  const d = data as IPanelData | undefined;
  if (!d || typeof d !== 'object' || typeof d.model_id !== 'string' || !d.model_id) {
    return null;
  }
  return d;
}

function timeout<T>(ms: number, value: T): Promise<T> {
  return new Promise(resolve => setTimeout(() => resolve(value), ms));
}

/** The widget manager behind a widget-view renderer (ipywidgets 8 keeps it in `_manager`). */
async function managerOf(renderer: unknown): Promise<IManagerLike | null> {
  const delegate = (renderer as any)?._manager;
  if (!delegate || !delegate.promise) {
    return null;
  }
  return Promise.race([delegate.promise as Promise<IManagerLike>, timeout(RESTORE_WAIT_MS, null)]);
}

/** Whether the manager holds the model, after it has restored the kernel's widgets. */
async function hasModel(manager: IManagerLike, id: string): Promise<boolean> {
  if (manager.has_model(id)) {
    return true;
  }
  if (manager.restoredStatus === false && manager.restored) {
    await Promise.race([
      new Promise<void>(resolve => {
        const done = (): void => {
          manager.restored!.disconnect(done);
          resolve();
        };
        manager.restored!.connect(done);
      }),
      timeout(RESTORE_WAIT_MS, undefined)
    ]);
  }
  return manager.has_model(id);
}

export class PanelRenderer extends Panel implements IRenderMime.IRenderer {
  constructor(
    private readonly _app: JupyterFrontEnd,
    private readonly _notebook: NotebookPanel,
    private readonly _rendermime: IRenderMimeRegistry,
    private readonly _baseUrl: string
  ) {
    super();
    this.addClass('jp-ktune-panel');
    this.node.addEventListener('focusin', event => {
      const target = event.target as HTMLElement | null;
      if (this._live && target && target !== this.node) {
        target.setAttribute('data-lm-suppress-shortcuts', 'true');
      }
    });
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this._model = model;
    const data = parse(model.data[PANEL_MIME]);
    if (this._live && data && data.model_id === this._modelId) {
      return; // our own snapshot write-back, or an update of the same panel: keep the view
    }
    this._modelId = data ? data.model_id : null;
    await this._showStatic(model);
    if (data) {
      void this._goLive(data.model_id as string);
    }
  }

  private async _showStatic(model: IRenderMime.IMimeModel): Promise<void> {
    this._clear();
    const html = model.data['text/html'];
    if (typeof html !== 'string') {
      return;
    }
    const renderer = this._rendermime.createRenderer('text/html');
    renderer.addClass('jp-ktune-panel-static');
    this.addWidget(renderer);
    await renderer.renderModel(
      new MimeModel({ data: { 'text/html': html }, trusted: model.trusted })
    );
  }

  private async _goLive(modelId: string): Promise<void> {
    const kernelReady = this._notebook.sessionContext.ready.then(
      () => !!this._notebook.sessionContext.session?.kernel
    );
    if (!(await Promise.race([kernelReady, timeout(RESTORE_WAIT_MS, false)]))) {
      return; // no kernel: the snapshot is what there is
    }
    if (!this._rendermime.getFactory(WIDGET_MIME)) {
      return;
    }
    const view = this._rendermime.createRenderer(WIDGET_MIME);
    const manager = await managerOf(view);
    if (!manager || !(await hasModel(manager, modelId)) || this.isDisposed) {
      view.dispose();
      return; // another kernel, or this one restarted: the widget is gone
    }
    if (modelId !== this._modelId) {
      view.dispose();
      return;
    }
    await ensureBokeh(this._baseUrl);
    const widgetData = { model_id: modelId, version_major: 2, version_minor: 0 };
    await view.renderModel(new MimeModel({ data: { [WIDGET_MIME]: widgetData }, trusted: true }));
    if (this.isDisposed || modelId !== this._modelId) {
      view.dispose();
      return;
    }
    this._clear();
    this._live = true;
    this.addWidget(view);
    this._watchSnapshot(view);
    const root = (await manager.get_model(modelId)) as IRootModel | undefined;
    if (root && !this.isDisposed && this._live && modelId === this._modelId) {
      this._docking = new Docking(this._app, this._notebook.id, this, view, root);
    }
  }

  /** Copy the hidden snapshot widget into the output's text/html whenever it changes. */
  private _watchSnapshot(view: Widget): void {
    const sync = (): void => {
      const src = view.node.querySelector('.ktune-snapshot-src .widget-html-content');
      const model = this._model as any;
      if (!src || !model || typeof model.setData !== 'function') {
        return;
      }
      const html = src.innerHTML;
      if (html && html !== model.data['text/html']) {
        model.setData({ data: { ...model.data, 'text/html': html } });
      }
    };
    this._observer = new MutationObserver(sync);
    this._observer.observe(view.node, { childList: true, subtree: true, characterData: true });
    sync();
  }

  private _clear(): void {
    this._docking?.dispose();
    this._docking = null;
    this._observer?.disconnect();
    this._observer = null;
    this._live = false;
    for (const w of [...this.widgets]) {
      w.dispose();
    }
  }

  dispose(): void {
    this._docking?.dispose();
    this._docking = null;
    this._observer?.disconnect();
    super.dispose();
  }

  private _model: IRenderMime.IMimeModel | null = null;
  private _modelId: string | null = null;
  private _live = false;
  private _observer: MutationObserver | null = null;
  private _docking: Docking | null = null;
}

/** Register the renderer on one notebook's rendermime (the one its widget manager uses). */
export function registerPanelRenderer(
  app: JupyterFrontEnd,
  notebook: NotebookPanel,
  baseUrl: string
): void {
  const rendermime = notebook.content.rendermime;
  rendermime.addFactory(
    {
      safe: true,
      mimeTypes: [PANEL_MIME],
      defaultRank: PANEL_RANK,
      createRenderer: () => new PanelRenderer(app, notebook, rendermime, baseUrl)
    },
    PANEL_RANK
  );
}
