/**
 * A notebook's backends are opened when its kernel starts (issue 33): the labextension sends
 * the notebook's %%kernel cells in a silent request, and the kernel's device worker imports
 * exactly those backends before any cell runs; a %%kernel cell typed later is sent the same
 * way. The setting `openAtKernelStart` (jupyter-ktune:prepare) turns both off.
 *
 * The fixture's first cell is a probe that runs no %%kernel cell: it prints what
 * `jupyter_ktune.prepare` opened and whether the worker has imported triton.
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';
import { NOTEBOOKS, openFixture, painted, settled, SHOTS } from './helpers';

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
  await painted(page);
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
    let printed = await probe(page);
    expect(printed).toContain('prepared: []');
    expect(printed).toContain('worker imported triton: False');
    // nor when a %%kernel cell is edited (the cells typed later are sent under the same setting)
    await page.notebook.setCell(
      2,
      'code',
      '%%kernel double --backend triton --inputs inputs --reference reference --out y\n# ktune:\n'
    );
    await page.waitForTimeout(4000);
    printed = await probe(page);
    expect(printed).toContain('prepared: []');
    expect(printed).toContain('worker imported triton: False');
  } finally {
    await saveSetting(page, '{}');
  }
});

test('a %%kernel cell typed in a new notebook opens its backend before it runs', async ({
  page,
  tmpPath
}) => {
  // a notebook with no %%kernel cell when its kernel starts: nothing is opened then
  await openFixture(page, tmpPath, 'prepare_typed_fixture.ipynb');
  await kernelIdle(page);
  await page.waitForTimeout(3000);
  expect(await probe(page)).toContain('prepared: []');
  // the user types the magic line and the first line of the body, and runs nothing
  await page.notebook.setCell(
    2,
    'code',
    '%%kernel double --backend triton --inputs inputs --reference reference --out y\n' +
      '# ktune: BLOCK in [64, 128]; grid = cdiv(n, BLOCK)\n'
  );
  await expect
    .poll(() => probe(page), { timeout: 120000, intervals: [2000] })
    .toContain('worker imported triton: True');
  expect(await probe(page)).toContain("prepared: ['triton']");
  await page.notebook.setCell(
    2,
    'code',
    [
      '%%kernel double --backend triton --inputs inputs --reference reference --out y --config BLOCK=64',
      '# ktune: BLOCK in [64, 128]; grid = cdiv(n, BLOCK)',
      '@triton.jit',
      'def double(x, y, n, BLOCK: tl.constexpr):',
      '    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)',
      '    tl.store(y + offs, 2.0 * tl.load(x + offs, mask=offs < n), mask=offs < n)'
    ].join('\n')
  );
  await page.notebook.runCell(1); // %load_ext, the inputs
  await page.notebook.runCell(2); // the typed cell: its panel, as usual
  await settled(page);
  await expect(page.locator('.ktune-badge').first()).toContainText('correct');
  await painted(page);
  await page.screenshot({ path: path.join(SHOTS, 'prepare-typed-cell-lab.png') });
});

test('in Notebook 7 too, a typed %%kernel cell opens its backend before it runs', async ({
  page,
  tmpPath,
  baseURL
}) => {
  await page.contents.uploadFile(
    path.join(NOTEBOOKS, 'prepare_typed_fixture.ipynb'),
    `${tmpPath}/typed7.ipynb`
  );
  const nb7 = await page.context().newPage();
  await nb7.setViewportSize({ width: 1280, height: 900 });
  await nb7.goto(`${baseURL}/notebooks/${tmpPath}/typed7.ipynb`);
  const cells = nb7.locator('.jp-Notebook .jp-Cell');
  await cells.first().waitFor({ timeout: 60000 });
  const probe7 = async (): Promise<string> => {
    await cells.nth(0).locator('.cm-content').click();
    await nb7.keyboard.press('Control+Enter'); // run the probe in place
    await nb7.waitForTimeout(1500);
    return (await cells.nth(0).locator('.jp-OutputArea-output').allInnerTexts()).join('');
  };
  await expect.poll(probe7, { timeout: 120000, intervals: [2000] }).toContain('prepared: []');
  await cells.nth(2).locator('.cm-content').click();
  await nb7.keyboard.type(
    '%%kernel double --backend triton --inputs inputs --reference reference --out y\n# ktune:'
  );
  await expect
    .poll(probe7, { timeout: 120000, intervals: [2000] })
    .toContain('worker imported triton: True');
  expect(await probe7()).toContain("prepared: ['triton']");
  await painted(nb7);
  await nb7.screenshot({ path: path.join(SHOTS, 'prepare-typed-cell-notebook7.png') });
  await nb7.close();
});
