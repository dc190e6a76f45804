/**
 * What the panels' Bokeh figures hold in the page, read from BokehJS's own documents: the data
 * the browser draws, not the kernel's copy. Shared by the panel specs.
 */
import type { Page } from '@playwright/test';

export interface IFigure {
  /** the figure's title text ('?' without one) */
  title: string;
  /** rows of data over its renderers (each renderer's first column) */
  rows: number;
  visible: boolean;
  /** the data lies inside the axes: the histogram's bars, the history's points */
  inRange: boolean;
  /** the panel it belongs to (its ``ktune-panel-<id>`` tag; '?' without one) */
  panel: string;
}

/** Every figure of every Bokeh document in the page, in the order the documents hold them. */
export async function bokehFigures(page: Page): Promise<IFigure[]> {
  return page.evaluate(() => {
    const B = (window as any).Bokeh;
    const figs: IFigure[] = [];
    for (const doc of (B?.documents ?? []) as any[]) {
      for (const m of doc._all_models.values()) {
        if (m.type !== 'Figure' && m.constructor?.__name__ !== 'Figure') {
          continue;
        }
        const columns = (ds: any, k: string) => (ds?.data instanceof Map ? ds.data.get(k) : ds?.data?.[k]) as number[] | undefined;
        let rows = 0;
        let inRange = true;
        for (const r of m.renderers) {
          const ds = r.data_source;
          if (ds && ds.data) {
            const cols = (ds.data instanceof Map ? [...ds.data.values()] : Object.values(ds.data)) as any[];
            rows += cols.length ? cols[0].length : 0;
          }
          const [left, right, t] = [columns(ds, 'left'), columns(ds, 'right'), columns(ds, 't')];
          if (left && right && left.length) {
            inRange &&= m.x_range.start <= Math.min(...left) && Math.max(...right) <= m.x_range.end;
          }
          const ts = (t ? Array.from(t) : []).filter(v => Number.isFinite(v));
          if (columns(ds, 'i') && ts.length) {
            inRange &&= m.y_range.start <= Math.min(...ts) && Math.max(...ts) <= m.y_range.end;
          }
        }
        const panel = ((m.tags ?? []) as string[]).find(t => t.startsWith('ktune-panel-')) ?? '?';
        figs.push({ title: m.title ? m.title.text : '?', rows, visible: m.visible !== false, inRange, panel });
      }
    }
    return figs;
  });
}

/** The figures grouped by panel, the panels in the order their first figure was made. */
export async function figuresByPanel(page: Page): Promise<IFigure[][]> {
  const panels = new Map<string, IFigure[]>();
  for (const f of await bokehFigures(page)) {
    panels.set(f.panel, [...(panels.get(f.panel) ?? []), f]);
  }
  return [...panels.values()];
}

/** Rows of data by figure title (a later figure of the same title wins). */
export async function rowsByTitle(page: Page): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const f of await bokehFigures(page)) {
    out[f.title] = f.rows;
  }
  return out;
}
