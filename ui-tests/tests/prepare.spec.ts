/**
 * A notebook's backends are opened when its kernel starts (issue 33): the labextension sends
 * the notebook's %%kernel cells in a silent request, and the kernel's device worker imports
 * exactly those backends before any cell runs. The setting `openAtKernelStart`
 * (jupyter-ktune:prepare) turns it off.
 *
 * The fixture's first cell is a probe that runs no %%kernel cell: it prints what
 * `jupyter_ktune.prepare` opened and whether the worker has imported triton.
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';
import { openFixture, settled, SHOTS } from './helpers';

test.use({ autoGoto: true });
test.setTimeout(240 * 1000);

const FIXTURE = 'prepare_fixture.ipynb';
const PLUGIN = 'jupyter-ktune:prepare';

async function kernelIdle(page: IJupyterLabPageFixture): Promise<void> {
  await page.waitForFunction(
    () =>
      (window as any).jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status ===
      'idle',
    undefined,
    { timeout: 120000 }
  );
}

/** Run the probe cell; what it printed. */
async function probe(page: IJupyterLabPageFixture): Promise<string> {
  await page.notebook.runCell(0);
  return ((await page.notebook.getCellTextOutput(0)) ?? []).join('');
}

async function saveSetting(page: IJupyterLabPageFixture, raw: string): Promise<void> {
  await page.evaluate(
    ([id, text]) => (window as any).jupyterapp.serviceManager.settings.save(id, text),
    [PLUGIN, raw]
  );
}

test('opening a notebook opens its Triton backend before any cell runs', async ({
  page,
  tmpPath
}) => {
  await openFixture(page, tmpPath, FIXTURE);
  await kernelIdle(page);
  await expect
    .poll(() => probe(page), { timeout: 120000, intervals: [2000] })
    .toContain('worker imported triton: True');
  expect(await probe(page)).toContain("prepared: ['triton']");
  await page.notebook.runCell(1); // %load_ext, the inputs
  await page.notebook.runCell(2); // the %%kernel cell: its panel, as usual
  await settled(page);
  await expect(page.locator('.ktune-badge').first()).toContainText('correct');
  await page.screenshot({ path: path.join(SHOTS, 'prepare-first-cell-lab.png') });
});

test('with openAtKernelStart off, no backend is opened before a cell asks', async ({
  page,
  tmpPath
}) => {
  await saveSetting(page, JSON.stringify({ openAtKernelStart: false }));
  try {
    await page.reload(); // the plugin reads its setting at activation
    await openFixture(page, tmpPath, FIXTURE);
    await kernelIdle(page);
    await page.waitForTimeout(8000); // time enough for an opening that should not happen
    const printed = await probe(page);
    expect(printed).toContain('prepared: []');
    expect(printed).toContain('worker imported triton: False');
  } finally {
    await saveSetting(page, '{}');
  }
});
