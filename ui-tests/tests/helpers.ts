/**
 * What the panel's browser tests share: waiting for results, opening a fixture notebook (in
 * JupyterLab, or running its first cells in Notebook 7), collecting console errors.
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';
import type { Page } from '@playwright/test';
import * as path from 'path';

export const SHOTS = path.resolve(__dirname, '..', 'test-results', 'screenshots');
export const NOTEBOOKS = path.resolve(__dirname, 'notebooks');

/** Wait until no panel badge says "running". */
export async function settled(page: Page): Promise<void> {
  await expect(page.locator('.ktune-badge').first()).toBeVisible({ timeout: 120000 });
  // a pending request's badge starts with "running"; a result's reason may contain the word
  await expect(page.locator('.ktune-badge', { hasText: /^\s*running\s/ })).toHaveCount(0, { timeout: 120000 });
}

/**
 * Wait until every Bokeh plot the page shows has drawn its data: each glyph holds as many rows
 * as its data source and no repaint is pending. The models (what ``figures`` reads) change
 * first and the canvas is painted on a later animation frame: on a loaded machine a
 * screenshot taken right after a model check showed the previous variant's drawing. Plots not
 * shown (in a hidden tab: Bokeh paints them once shown) are left out, as is a page without
 * Bokeh.
 */
export async function painted(page: Page): Promise<void> {
  await expect
    .poll(
      () =>
        page.evaluate(() => {
          const index = (window as any).Bokeh?.index;
          if (!index?.all_views) {
            return 'painted'; // no Bokeh in the page: nothing it could still draw
          }
          for (const view of index.all_views()) {
            if (!('_needs_paint' in view) || !view.el?.getClientRects().length) {
              continue; // not a plot, or one not shown (in a hidden tab: it paints when shown)
            }
            if (view._needs_paint) {
              return `${view.model?.title?.text}: repaint pending`;
            }
            for (const rv of view.renderer_views?.values?.() ?? []) {
              const data = rv.model?.data_source?.data;
              const size = rv.glyph?.data_size;
              if (data == null || size == null) {
                continue;
              }
              const cols = (data instanceof Map ? [...data.values()] : Object.values(data)) as any[];
              if (cols.length && cols[0].length !== size) {
                return `${view.model?.title?.text}: ${size} of ${cols[0].length} rows drawn`;
              }
            }
          }
          return 'painted';
        }),
      { message: 'every shown plot has drawn its data', timeout: 30000 }
    )
    .toBe('painted');
}

export async function openFixture(page: IJupyterLabPageFixture, tmpPath: string, file: string, from = NOTEBOOKS) {
  await page.contents.uploadFile(path.join(from, file), `${tmpPath}/${file}`);
  await page.notebook.openByPath(`${tmpPath}/${file}`);
  await page.notebook.activate(file);
}

/** Open a fixture in Notebook 7 (a page of its own) and run its first ``cells`` cells. */
export async function runInNotebook7(
  page: IJupyterLabPageFixture,
  tmpPath: string,
  baseURL: string | undefined,
  viewport: { width: number; height: number },
  file = 'panel_fixture.ipynb',
  cells = 2
): Promise<Page> {
  await page.contents.uploadFile(path.join(NOTEBOOKS, file), `${tmpPath}/nb7.ipynb`);
  const nb7 = await page.context().newPage();
  await nb7.setViewportSize(viewport);
  await nb7.goto(`${baseURL}/notebooks/${tmpPath}/nb7.ipynb`);
  await nb7.locator('.jp-Notebook .jp-Cell').first().waitFor({ timeout: 60000 });
  await nb7.locator('.jp-Notebook .jp-Cell').first().click();
  await nb7.waitForTimeout(3000); // kernel start
  for (let i = 0; i < cells; i++) {
    await nb7.keyboard.press('Shift+Enter');
  }
  await settled(nb7);
  return nb7;
}

/** The notebook at ``file`` as the server has it on disk (what a reload will show). */
export async function savedNotebook(page: Page, file: string): Promise<any> {
  return page.evaluate(async p => {
    const r = await fetch(`/api/contents/${p}?content=1`);
    return (await r.json()).content;
  }, file);
}

export function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', msg => {
    if (msg.type() === 'error') {
      errors.push(msg.text());
    }
  });
  page.on('pageerror', err => errors.push(String(err)));
  return errors;
}
