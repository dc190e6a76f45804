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
 *
 * A new notebook has no `%%kernel` cell when its kernel starts: its first one
 * is typed, then run, and opened cold (fla's first cell waited 4.45 s from
 * its start in a new notebook, 1.46 s in one whose backends were opened
 * before, on an H100 host: bench/results/first_minute/2026-12-06-0934). So a
 * `%%kernel` cell typed or pasted while the kernel runs is sent too, half a
 * second after the notebook's last change, once per backend per kernel start:
 * its backend opens while the user writes the rest of the cell.
 */
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import { backendOf, kernelCellSources, prepareCode } from './kernelCell';

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

/** How long the notebook must be still before a typed `%%kernel` cell is sent. */
export const TYPED_CELL_DELAY_MS = 500;

/**
 * Send the notebook's `%%kernel` cells to its kernel, if it has any whose backend is not in
 * `sent` and it runs Python; the backends sent are added to `sent` ('' for the default: one
 * request per backend, not per keystroke).
 */
async function sendCells(
  panel: NotebookPanel,
  sent: Set<string>,
  typed = false
): Promise<void> {
  const kernel = panel.sessionContext.session?.kernel;
  // a typed cell's magic line is read once the body has begun (a line below it): a pause
  // inside `%%kernel name --backend cu` would open the default backend, then a wrong name
  const cells = kernelCellSources(codeSources(panel)).filter(cell => !typed || cell.includes('\n'));
  if (!kernel || cells.every(cell => sent.has(backendOf(cell, '') ?? ''))) {
    return;
  }
  cells.forEach(cell => sent.add(backendOf(cell, '') ?? ''));
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

/**
 * Watch one notebook's kernel: send its cells at each start while `enabled()`, and later a
 * `%%kernel` cell typed for a backend not sent since that start.
 */
export function watchKernelStarts(panel: NotebookPanel, enabled: () => boolean): void {
  const context = panel.sessionContext;
  let armed = true; // the first idle after a start (or the first seen at all)
  let sent = new Set<string>(); // the backends sent since the kernel's last start
  let typed: ReturnType<typeof setTimeout> | undefined;
  const send = (typedCell = false): void => {
    if (enabled()) {
      sendCells(panel, sent, typedCell).catch(reason =>
        console.warn(`jupyter-ktune: could not open the notebook's backends (${reason})`)
      );
    }
  };
  const restart = (): void => {
    armed = true;
    sent = new Set<string>();
  };
  context.kernelChanged.connect(restart);
  const onStatus = (status: string): void => {
    if (status === 'starting' || status === 'restarting' || status === 'autorestarting') {
      restart();
    } else if (status === 'idle' && armed) {
      armed = false;
      send();
    }
  };
  context.statusChanged.connect((_, status) => onStatus(status));
  // a notebook restored before this plugin loaded may be idle already: no change will come
  void context.ready.then(() => onStatus(context.session?.kernel?.status ?? 'unknown'));
  const onEdit = (): void => {
    if (typed !== undefined) {
      clearTimeout(typed);
    }
    typed = setTimeout(() => {
      typed = undefined;
      if (!armed) {
        send(true); // nothing goes before the start's own request
      }
    }, TYPED_CELL_DELAY_MS);
  };
  void panel.context.ready.then(() => panel.content.model?.contentChanged.connect(onEdit));
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
