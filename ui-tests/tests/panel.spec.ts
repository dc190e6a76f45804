/**
 * The live panel as a user sees it: figures hold data on first render and after a reload.
 *
 * Screenshots go to test-results/screenshots/ (look at them).
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as path from 'path';

const SHOTS = path.resolve(__dirname, '..', 'test-results', 'screenshots');
const QUICKSTART = path.resolve(__dirname, '..', '..', 'examples', 'quickstart.ipynb');

test.use({ autoGoto: true, viewport: { width: 1600, height: 1000 } });
test.setTimeout(240 * 1000);

/** Rows of every ColumnDataSource in the page's Bokeh documents, by the figure title. */
async function figureRows(page: IJupyterLabPageFixture): Promise<Record<string, number>> {
  return page.evaluate(() => {
    const B = (window as any).Bokeh;
    const out: Record<string, number> = {};
    if (!B) {
      return out;
    }
    for (const doc of B.documents as any[]) {
      for (const m of doc._all_models.values()) {
        if (m.type === 'Figure' || (m.constructor && m.constructor.__name__ === 'Figure')) {
          const title = m.title ? m.title.text : '?';
          let rows = 0;
          for (const r of m.renderers) {
            const ds = r.data_source;
            if (ds && ds.data) {
              const cols = Object.values(ds.data) as any[];
              rows += cols.length ? cols[0].length : 0;
            }
          }
          out[title] = (out[title] ?? 0) + rows;
        }
      }
    }
    return out;
  });
}

test('first render: every panel figure of the quickstart holds data', async ({ page, tmpPath }) => {
  await page.contents.uploadFile(QUICKSTART, `${tmpPath}/quickstart.ipynb`);
  await page.notebook.openByPath(`${tmpPath}/quickstart.ipynb`);
  await page.notebook.activate('quickstart.ipynb');
  await page.notebook.run();
  await page.waitForTimeout(2000);
  const rows = await figureRows(page);
  console.log(JSON.stringify(rows));
  await page.screenshot({ path: `${SHOTS}/panel-first-render.png`, fullPage: true });
  await page.notebook.save();
  await page.evaluate(() => location.reload());
  await page.waitForSelector('.jp-Notebook .jp-OutputArea-output', { state: 'attached', timeout: 60000 });
  for (let i = 0; i < 12; i++) {
    await page.keyboard.press('ArrowDown');
  }
  await page.waitForTimeout(8000);
  console.log('after reload', JSON.stringify(await figureRows(page)));
  await page.screenshot({ path: `${SHOTS}/panel-after-reload.png`, fullPage: true });
});
