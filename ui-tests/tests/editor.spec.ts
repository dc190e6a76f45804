/**
 * jupyter-ktune in the browser: %%kernel highlighting, compiler messages as
 * editor marks, the per-line gutter drawn from fixture data, and a pinned
 * comparison's per-line stall difference in the gutter.
 *
 * Screenshots go to test-results/screenshots/ (look at them).
 */
import { expect, galata, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';
import { settled } from './helpers';

const SHOTS = path.resolve(__dirname, '..', 'test-results', 'screenshots');
const NOTEBOOKS = path.resolve(__dirname, 'notebooks');
const QUICKSTART = path.resolve(__dirname, '..', '..', 'examples', 'quickstart.ipynb');

test.use({ autoGoto: true });
test.setTimeout(180 * 1000);

/** The mime type of a cell's model in the current notebook. */
async function cellMime(page: IJupyterLabPageFixture, index: number): Promise<string> {
  return page.evaluate(i => {
    const app = (window as any).jupyterapp;
    return app.shell.currentWidget.content.widgets[i].model.mimeType as string;
  }, index);
}

/** Index of the first cell whose source starts with `prefix`. */
async function cellIndex(page: IJupyterLabPageFixture, prefix: string): Promise<number> {
  return page.evaluate(p => {
    const app = (window as any).jupyterapp;
    const cells = app.shell.currentWidget.content.widgets as any[];
    return cells.findIndex(c => c.model.sharedModel.getSource().startsWith(p));
  }, prefix);
}

/** Replace `from` by `to` in a cell's source through its model (the whole source is set). */
async function replaceInCell(
  page: IJupyterLabPageFixture,
  index: number,
  from: string,
  to: string
): Promise<void> {
  await page.evaluate(
    ([i, a, b]) => {
      const app = (window as any).jupyterapp;
      const model = app.shell.currentWidget.content.widgets[i].model;
      const src = model.sharedModel.getSource() as string;
      model.sharedModel.setSource(src.replace(a, b));
    },
    [index, from, to] as [number, string, string]
  );
}

/** The computed colour of a token with this exact text, and of a theme variable. */
async function tokenColour(
  page: IJupyterLabPageFixture,
  index: number,
  text: string,
  variable: string
): Promise<{ token: string | null; expected: string }> {
  const input = await page.notebook.getCellInputLocator(index);
  return input!.evaluate(
    (node, args) => {
      const spans = Array.from(node.querySelectorAll('.cm-line span')) as HTMLElement[];
      const span = spans.find(s => s.textContent === args.text);
      const probe = document.createElement('span');
      probe.style.color = `var(${args.variable})`;
      node.appendChild(probe);
      const expected = getComputedStyle(probe).color;
      probe.remove();
      return { token: span ? getComputedStyle(span).color : null, expected };
    },
    { text, variable }
  );
}

test('quickstart: the %%kernel cell is C++, and its BLOCK slider re-runs the panel', async ({ page, tmpPath }) => {
  await page.contents.uploadFile(QUICKSTART, `${tmpPath}/quickstart.ipynb`);
  await page.notebook.openByPath(`${tmpPath}/quickstart.ipynb`);
  await page.notebook.activate('quickstart.ipynb');
  const k = await cellIndex(page, '%%kernel');
  expect(k).toBeGreaterThan(0);
  expect(await cellMime(page, k)).toBe('text/x-c++src');

  await page.notebook.run();
  // the kernel start set language_info; the cell must still be C++
  expect(await cellMime(page, k)).toBe('text/x-c++src');
  const template = await tokenColour(page, k, 'template', '--jp-mirror-editor-keyword-color');
  expect(template.token).toBe(template.expected);
  const input = (await page.notebook.getCellInputLocator(k))!;
  await input.scrollIntoViewIfNeeded();
  await input.screenshot({ path: `${SHOTS}/quickstart-kernel-input.png` });

  // the live panel: move the BLOCK slider one step (256 -> 512) and see the panel follow
  const output = (await page.notebook.getCellOutputLocator(k))!;
  const block = output.locator('.widget-slider', { hasText: 'BLOCK' }).first();
  await expect(block).toBeVisible();
  await expect(output).toContainText('BLOCK=256');
  await block.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/quickstart-panel-before.png` });
  await block.locator('.noUi-handle').focus();
  await page.keyboard.press('ArrowRight');
  await expect(block.locator('.widget-readout')).toHaveText(/^512\b/);
  await expect(output).toContainText('BLOCK=512', { timeout: 90 * 1000 });
  await page.screenshot({ path: `${SHOTS}/quickstart-panel-after.png` });
});

test('a compile error is marked on its cell line and cleared with the output', async ({
  page,
  tmpPath
}) => {
  await page.contents.uploadDirectory(NOTEBOOKS, tmpPath);
  await page.notebook.openByPath(`${tmpPath}/compile_error.ipynb`);
  await page.notebook.activate('compile_error.ipynb');
  await page.notebook.run();
  const k = await cellIndex(page, '%%kernel');
  const cell = (await page.notebook.getCellLocator(k))!;
  const marked = cell.locator('.jp-ktune-diag-line.jp-ktune-diag-error');
  await expect(marked).toHaveCount(1);
  await expect(marked).toHaveAttribute('data-ktune-line', '6');
  await expect(marked).toContainText('xx[i]');
  await expect(cell.locator('.jp-ktune-diag-mark')).toHaveAttribute('title', /identifier "xx" is undefined/);
  await expect(cell.locator('.jp-ktune-gutter .jp-ktune-gutter-dot')).toHaveCount(1);
  await expect(cell.locator('.jp-ktune-editor-note')).toHaveText(
    '1 compiler message marked in the editor'
  );
  await cell.scrollIntoViewIfNeeded();
  await cell.screenshot({ path: `${SHOTS}/compile-error-cell.png` });

  // hover the marked line: the card shows the message
  await cell.locator('.jp-ktune-diag-mark').hover({ position: { x: 8, y: 6 } });
  await expect(page.locator('.jp-ktune-hover-card')).toContainText('identifier "xx" is undefined');
  await page.screenshot({ path: `${SHOTS}/compile-error-hover.png` });

  // clearing the outputs removes the marks
  await page.notebook.selectCells(k);
  await page.menu.clickMenuItem('Edit>Clear Outputs of All Cells');
  await expect(cell.locator('.jp-ktune-diag-line')).toHaveCount(0);
  await expect(cell.locator('.jp-ktune-gutter-marker')).toHaveCount(0);
});

test('fixture data: gutter, hover card, Triton highlighting, nothing drawn without data', async ({
  page,
  tmpPath
}) => {
  const errors: string[] = [];
  // JupyterLab's own rejection when a per-comm-target subshell request (ipykernel 7) is
  // cancelled because its kernel connection went away: seen once in .ci/run, from
  // @jupyterlab/services, not from this extension, so it is not what this test guards
  const jupyterlabSubshellRace = /subshell creation failed: Error: Canceled future/;
  page.on('pageerror', e => {
    if (!jupyterlabSubshellRace.test(String(e))) {
      errors.push(String(e));
    }
  });
  page.on('console', m => {
    if (m.type() === 'error' && m.text().includes('ktune')) {
      errors.push(m.text());
    }
  });
  await page.contents.uploadDirectory(NOTEBOOKS, tmpPath);
  await page.notebook.openByPath(`${tmpPath}/editor_fixture.ipynb`);
  await page.notebook.activate('editor_fixture.ipynb');

  const cuda = (await page.notebook.getCellLocator(1))!;
  const markers = cuda.locator('.jp-ktune-gutter .jp-ktune-gutter-marker');
  await expect(markers).toHaveCount(4); // lines 3 (warning), 4, 5, 6
  await expect(cuda.locator('.jp-ktune-gutter-bar')).toHaveCount(3);
  await expect(cuda.locator('[data-ktune-samples="600"]')).toHaveAttribute(
    'title',
    /line 5: 600 samples \(60\.0% of the cell\)\nlong scoreboard: 420 \(70%\)/
  );
  await expect(cuda.locator('.jp-ktune-diag-line.jp-ktune-diag-warning')).toHaveAttribute(
    'data-ktune-line',
    '3'
  );
  await expect(cuda.locator('.jp-ktune-editor-note')).toHaveText(
    '1 compiler message and per-line samples for 3 lines marked in the editor'
  );
  expect(await cellMime(page, 1)).toBe('text/x-c++src');

  // hover card of line 5's stall reasons
  const line5 = cuda.locator('.cm-line').nth(4);
  await line5.hover({ position: { x: 30, y: 6 } });
  const card = page.locator('.jp-ktune-hover-card');
  await expect(card).toContainText('600 samples, 60.0% of the cell');
  await expect(card).toContainText('long scoreboard');
  await cuda.scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${SHOTS}/fixture-gutter-hover.png` });

  // Triton: Python; its empty bundle draws nothing
  const triton = (await page.notebook.getCellLocator(2))!;
  expect(await cellMime(page, 2)).toBe('text/x-ipython');
  await expect(triton.locator('.jp-ktune-gutter-marker')).toHaveCount(0);
  await expect(triton.locator('.jp-ktune-diag-line')).toHaveCount(0);
  await expect(triton.locator('.jp-ktune-editor-note')).toHaveText('nothing to mark in the editor');
  expect(await cellMime(page, 3)).toBe('text/x-ipython');

  // a kernel (re)start resets every cell's mime type; ours come back
  await page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    await app.shell.currentWidget.sessionContext.changeKernel({ name: 'python3' });
  });
  await page.waitForFunction(() => {
    const app = (window as any).jupyterapp;
    return app.shell.currentWidget.sessionContext.session?.kernel?.status === 'idle';
  });
  await page.waitForTimeout(500);
  expect(await cellMime(page, 1)).toBe('text/x-c++src');
  expect(await cellMime(page, 2)).toBe('text/x-ipython');

  // an edit above a mark moves it with its line
  await page.evaluate(() => {
    const app = (window as any).jupyterapp;
    const model = app.shell.currentWidget.content.widgets[1].model;
    const src = model.sharedModel.getSource() as string;
    const at = src.indexOf('\n') + 1;
    model.sharedModel.updateSource(at, at, '// an added line\n');
  });
  await expect(cuda.locator('.jp-ktune-diag-line.jp-ktune-diag-warning')).toHaveAttribute(
    'data-ktune-line',
    '4'
  );
  await expect(markers).toHaveCount(4);

  // replacing the whole source drops the marks (nothing piles up on line 1), and the
  // new first line re-highlights: cuda -> triton
  await replaceInCell(page, 1, '--backend cuda', '--backend triton');
  expect(await cellMime(page, 1)).toBe('text/x-ipython');
  await expect(markers).toHaveCount(0);
  await page.screenshot({ path: `${SHOTS}/fixture-after-kernel-change.png` });
  expect(errors).toEqual([]);
});

/**
 * ncu does not run on the CPU test machine, so the panel's breakdowns get their per-line samples
 * from a stand-in for `request_breakdown` (hand-made, by BLOCK; lines 9 and 10 of the fixture's
 * %%kernel cell); the breakdown button's run, the Pin, the slider and the gutter are the
 * extension's and the panel's own.
 */
const STAND_IN = `import jupyter_ktune, jupyter_ktune.ui.breakdown as bd
from jupyter_ktune.measure.breakdown import Breakdown
SAMPLES = {128: {9: {"samples": 600, "stalls": {"long_scoreboard": 420, "wait": 100}},
                 10: {"samples": 400, "stalls": {"math": 300}}},
           256: {9: {"samples": 200, "stalls": {"long_scoreboard": 100, "wait": 60}},
                 10: {"samples": 600, "stalls": {"math": 450}}}}
def stand_in(worker, spec, config, lines=False, timeout=180.0):
    if not lines:
        raise RuntimeError("no scope profiler on this CPU")
    return Breakdown.lines_only(spec.name, SAMPLES[config["BLOCK"]], "ncu (stand-in)")
bd.request_breakdown = stand_in
print(jupyter_ktune.__file__)`;

/** Put `source` in a cell through its model (typing it would auto-indent), and run it. */
async function runSource(page: IJupyterLabPageFixture, cell: number, source: string): Promise<void> {
  await page.evaluate(
    ([i, text]) => {
      const app = (window as any).jupyterapp;
      app.shell.currentWidget.content.widgets[i].model.sharedModel.setSource(text);
    },
    [cell, source] as [number, string]
  );
  await page.notebook.runCell(cell);
}

/** Run a breakdown of the panel's current config from a scratch cell (the button needs a GPU). */
async function breakdownFromCell(page: IJupyterLabPageFixture, cell: number): Promise<void> {
  await runSource(page, cell, 'p.breakdown.start().join(60); print(p.breakdown.last_config)');
}

test('Pin, a slider move, a breakdown of each: the gutter shows the per-line stall share difference', async ({
  page,
  tmpPath
}) => {
  const errors: string[] = [];
  page.on('pageerror', e => errors.push(String(e)));
  await page.contents.uploadDirectory(NOTEBOOKS, tmpPath);
  await page.notebook.openByPath(`${tmpPath}/panel_fixture.ipynb`);
  await page.notebook.activate('panel_fixture.ipynb');
  await page.notebook.runCell(0);
  await page.notebook.runCell(1);
  await settled(page);
  await runSource(page, 2, STAND_IN);
  const printed = ((await page.notebook.getCellTextOutput(2)) ?? []).join('');
  if (process.env.KTUNE_TEST_SOURCE === '1') {
    expect(printed).toContain(path.resolve(__dirname, '..', '..', 'jupyter_ktune'));
  }
  await page.notebook.addCell('code', '');
  const scratch = 3;

  const kernel = (await page.notebook.getCellLocator(1))!;
  const panel = kernel.locator('.jp-ktune-panel').first();
  const gutter = kernel.locator('.jp-ktune-gutter');
  await expect(panel.locator('.ktune-badge code.ktune-shown')).toContainText('BLOCK=128', { timeout: 60000 });

  // A: a breakdown of BLOCK=128, then Pin: its own samples, as bars
  await breakdownFromCell(page, scratch);
  await expect(gutter.locator('.jp-ktune-gutter-bar')).toHaveCount(2, { timeout: 30000 });
  await panel.locator('button', { hasText: /^\s*Pin\s*$/ }).click();
  await expect(panel.locator('button', { hasText: 'Re-pin' })).toBeVisible();

  // B: the slider moves to BLOCK=256; with no breakdown of B yet nothing is compared
  const handle = panel.locator('.ktune-slider', { hasText: 'BLOCK' }).locator('.noUi-handle');
  await handle.click();
  await page.keyboard.press('ArrowRight');
  await expect(panel.locator('.ktune-badge code.ktune-shown')).toContainText('BLOCK=256', { timeout: 60000 });
  await settled(page);
  await expect(gutter.locator('.jp-ktune-gutter-diff')).toHaveCount(0);
  await expect(gutter.locator('.jp-ktune-gutter-bar')).toHaveCount(2);
  await expect(kernel.locator('.jp-ktune-editor-note')).toContainText('(samples of BLOCK=128 ');

  // a breakdown of B: the gutter turns into the difference, B against A
  await breakdownFromCell(page, scratch);
  const diffs = gutter.locator('.jp-ktune-gutter-diff');
  await expect(diffs).toHaveCount(2, { timeout: 30000 });
  await expect(gutter.locator('.jp-ktune-gutter-bar')).toHaveCount(0);
  // line 9 fell from 60 % of A's samples to 25 % of B's; line 10 rose from 40 % to 75 %
  const better = gutter.locator('.jp-ktune-gutter-diff.jp-ktune-diff-better');
  const worse = gutter.locator('.jp-ktune-gutter-diff.jp-ktune-diff-worse');
  await expect(better).toHaveText('\u221235pp');
  await expect(worse).toHaveText('+35pp');
  const line9 = gutter.locator('[data-ktune-diff="\u221235pp"]');
  await expect(line9).toHaveAttribute('title', /^line 9: \u221235\.0pp of the cell's stall samples, B against A/);
  await expect(line9).toHaveAttribute('title', /A \(pinned\) BLOCK=128[^:\n]*: 60\.0% \(600 of 1000 samples\)/);
  await expect(line9).toHaveAttribute('title', /moved most: long scoreboard \u221229\.5pp/);
  await expect(line9).toHaveAttribute('title', /not of time/);
  await expect(kernel.locator('.jp-ktune-editor-note')).toContainText(
    'the per-line stall share difference of BLOCK=256'
  );
  // each on its own line: the rows of the gutter line up with the editor's lines 9 and 10
  const rowOf = async (loc: any) => Math.round((await loc.boundingBox())!.y);
  const lines = kernel.locator('.cm-line');
  expect(Math.abs((await rowOf(better)) - (await rowOf(lines.nth(8))))).toBeLessThan(12);
  expect(Math.abs((await rowOf(worse)) - (await rowOf(lines.nth(9))))).toBeLessThan(12);
  const input = (await page.notebook.getCellInputLocator(1))!;
  await input.scrollIntoViewIfNeeded();
  await input.screenshot({ path: `${SHOTS}/compare-gutter-diff.png` });
  await lines.nth(9).hover({ position: { x: 40, y: 6 } });
  await expect(page.locator('.jp-ktune-hover-card')).toContainText('B (current) BLOCK=256');
  await page.screenshot({ path: `${SHOTS}/compare-gutter-hover.png` });

  // unpin: the diff ends, B's own samples come back as bars
  await runSource(page, scratch, 'p.unpin()');
  await expect(diffs).toHaveCount(0, { timeout: 30000 });
  await expect(gutter.locator('.jp-ktune-gutter-bar')).toHaveCount(2);
  expect(errors).toEqual([]);
});

void galata;

/**
 * The grammars are the server's table (`GET ktune/backends`), not a map in the labextension:
 * served another table, the same cells follow it, a backend no TypeScript names included;
 * with no table (the route fails), `%%kernel` cells keep the notebook's language. The route
 * is answered by the browser here, before the page loads (the plugin asks once, at activation).
 */
test.describe("the editor's grammars are the server's table", () => {
  test.use({ autoGoto: false });
  const backendsUrl = /\/ktune\/backends(\?|$)/; // ServerConnection may add a query (no cache)

  async function openFixture(page: IJupyterLabPageFixture, tmpPath: string): Promise<void> {
    await page.goto();
    await page.contents.uploadDirectory(NOTEBOOKS, tmpPath);
    await page.notebook.openByPath(`${tmpPath}/editor_fixture.ipynb`);
    await page.notebook.activate('editor_fixture.ipynb');
  }

  test('another table: the cells follow it, a made-up backend included', async ({
    page,
    tmpPath
  }) => {
    const table = {
      default: 'cuda',
      backends: { cuda: 'text/x-csrc', triton: 'text/x-ipython', 'made-up': 'text/x-c++src' }
    };
    await page.route(backendsUrl, route => route.fulfill({ json: table }));
    await openFixture(page, tmpPath);
    expect(await cellMime(page, 1)).toBe('text/x-csrc'); // the table's, not C++
    await replaceInCell(page, 2, '--backend triton', '--backend made-up');
    expect(await cellMime(page, 2)).toBe('text/x-c++src');
  });

  test("no table: %%kernel cells keep the notebook's language", async ({ page, tmpPath }) => {
    await page.route(backendsUrl, route => route.fulfill({ status: 404, body: '' }));
    await openFixture(page, tmpPath);
    const notebookMime = await page.evaluate(
      () => (window as any).jupyterapp.shell.currentWidget.content.codeMimetype as string
    );
    expect(notebookMime).not.toBe('text/x-c++src');
    expect(await cellMime(page, 1)).toBe(notebookMime);
  });
});
