/**
 * Open a notebook's backends as soon as its kernel starts.
 *
 * A first `%%kernel` cell used to pay its backend's imports and the device
 * context on its own clock (torch's import alone took 3.5-4.6 s on the GPU
 * host), since only the cell says which backend to open. The notebook says it
 * earlier: when a notebook's kernel starts or restarts (its first `idle` after
 * `starting`/`restarting`, or the first `idle` seen for a kernel already
 * running), this sends the notebook's `%%kernel` cells to the kernel in a
 * silent request (`prepareCode`), and `jupyter_ktune.prepare` opens exactly
 * their backends in the device worker while the user reads. Python kernels
 * only; nothing is sent for a notebook without `%%kernel` cells. The setting
 * `openAtKernelStart` (jupyter-ktune:prepare) turns it off.
 */
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import { kernelCellSources, prepareCode } from './kernelCell';

/** The settings plugin's id (its schema: `labextension/schema/prepare.json`). */
export const PREPARE_PLUGIN = 'jupyter-ktune:prepare';

/** The code cells' sources of a notebook panel. */
function codeSources(panel: NotebookPanel): string[] {
  const sources: string[] = [];
  for (const cell of panel.content.model?.cells ?? []) {
    if (cell.type === 'code') {
      sources.push(cell.sharedModel.getSource());
    }
  }
  return sources;
}

/** Send the notebook's `%%kernel` cells to its kernel, if it has any and runs Python. */
async function sendCells(panel: NotebookPanel): Promise<void> {
  const kernel = panel.sessionContext.session?.kernel;
  const cells = kernelCellSources(codeSources(panel));
  if (!kernel || cells.length === 0) {
    return;
  }
  const info = await kernel.info;
  if (info.language_info.name !== 'python') {
    return;
  }
  kernel.requestExecute({
    code: prepareCode(cells),
    silent: true,
    store_history: false,
    allow_stdin: false,
    stop_on_error: false
  });
}

/** Watch one notebook's kernel: send its cells at each start while `enabled()`. */
export function watchKernelStarts(panel: NotebookPanel, enabled: () => boolean): void {
  const context = panel.sessionContext;
  let armed = true; // the first idle after a start (or the first seen at all)
  context.kernelChanged.connect(() => {
    armed = true;
  });
  const onStatus = (status: string): void => {
    if (status === 'starting' || status === 'restarting' || status === 'autorestarting') {
      armed = true;
    } else if (status === 'idle' && armed) {
      armed = false;
      if (enabled()) {
        sendCells(panel).catch(reason =>
          console.warn(`jupyter-ktune: could not open the notebook's backends (${reason})`)
        );
      }
    }
  };
  context.statusChanged.connect((_, status) => onStatus(status));
  // a notebook restored before this plugin loaded may be idle already: no change will come
  void context.ready.then(() => onStatus(context.session?.kernel?.status ?? 'unknown'));
}

/** Watch every notebook the tracker has or gets, reading the setting as it changes. */
export async function activatePrepare(
  tracker: INotebookTracker,
  registry: ISettingRegistry | null
): Promise<void> {
  let enabled = true;
  tracker.forEach(panel => watchKernelStarts(panel, () => enabled));
  tracker.widgetAdded.connect((_, panel) => watchKernelStarts(panel, () => enabled));
  if (registry) {
    try {
      const settings = await registry.load(PREPARE_PLUGIN);
      const read = (): void => {
        enabled = settings.get('openAtKernelStart').composite !== false;
      };
      read();
      settings.changed.connect(read);
    } catch (reason) {
      console.warn(`jupyter-ktune: settings of ${PREPARE_PLUGIN} unread (${reason}); on`);
    }
  }
}
