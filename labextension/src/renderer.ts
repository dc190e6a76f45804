/**
 * The mime renderer of `application/vnd.jupyter-ktune.editor+json`.
 *
 * It shows a compact note in the output ("2 compiler messages marked in the
 * editor") and puts the marks into the editor of the cell that owns the
 * output (found by DOM containment among the tracked notebooks' cells).
 * Whatever it puts in, it takes out: on detach and on dispose, which is what
 * happens when the output is cleared or the cell is run again. A bundle that
 * fails to parse shows its `[ktune]` error in the note and marks nothing; a
 * pinned comparison's difference that the editor refuses (the cell changed
 * since the breakdowns) says why in the note.
 */
import type { Cell } from '@jupyterlab/cells';
import type { CodeMirrorEditor } from '@jupyterlab/codemirror';
import type { INotebookTracker } from '@jupyterlab/notebook';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import type { EditorView } from '@codemirror/view';
import { EDITOR_MIME, type IEditorBundle, parseBundle, summaryText } from './bundle';
import { currentMarks, setMarks } from './marks';

/** The cell whose node contains this output node, in any tracked notebook. */
function owningCell(tracker: INotebookTracker, node: HTMLElement): Cell | null {
  let found: Cell | null = null;
  tracker.forEach(panel => {
    for (const cell of panel.content.widgets) {
      if (!found && cell.node.contains(node)) {
        found = cell;
      }
    }
  });
  return found;
}

/** The widget that renders one editor bundle. */
export class EditorMarksRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(private readonly _tracker: INotebookTracker) {
    super();
    this.addClass('jp-ktune-editor-note');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const parsed = parseBundle(model.data[EDITOR_MIME]);
    switch (parsed.kind) {
      case 'ok':
        this._bundle = parsed.bundle;
        this.node.textContent = summaryText(parsed.bundle);
        this.removeClass('jp-ktune-editor-note-error');
        break;
      case 'error':
        this._bundle = null;
        this.node.textContent = parsed.error;
        this.addClass('jp-ktune-editor-note-error');
        break;
      default: {
        const never: never = parsed;
        throw new Error(`[ktune] unhandled parse result ${String(never)}`);
      }
    }
    if (this.isAttached) {
      await this._apply();
    }
  }

  protected onAfterAttach(): void {
    void this._apply();
  }

  protected onBeforeDetach(): void {
    this._remove();
  }

  dispose(): void {
    this._remove();
    super.dispose();
  }

  private async _apply(): Promise<void> {
    this._remove();
    const bundle = this._bundle;
    const cell = owningCell(this._tracker, this.node);
    if (!bundle || !cell) {
      return;
    }
    await cell.ready;
    const editor = cell.editor as CodeMirrorEditor | null;
    if (this.isDisposed || !this.isAttached || !editor || !editor.editor) {
      return;
    }
    this._view = editor.editor;
    setMarks(this._view, bundle);
    const refused = currentMarks(this._view).refused;
    this.node.textContent = summaryText(bundle) + (refused ? ` (${refused})` : '');
    this._cell = cell;
    cell.addClass('jp-ktune-marked');
  }

  private _remove(): void {
    if (this._view) {
      setMarks(this._view, null);
      this._view = null;
    }
    if (this._cell) {
      this._cell.removeClass('jp-ktune-marked');
      this._cell = null;
    }
  }

  private _bundle: IEditorBundle | null = null;
  private _view: EditorView | null = null;
  private _cell: Cell | null = null;
}

/** The renderer factory, registered with the application's rendermime. */
export function editorMarksFactory(tracker: INotebookTracker): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [EDITOR_MIME],
    defaultRank: 40,
    createRenderer: () => new EditorMarksRenderer(tracker)
  };
}
