/**
 * Loads BokehJS once per page from the jupyter server (`jupyter_ktune/server.py` serves the
 * installed bokeh package's own `bokeh.min.js`), so notebooks need not carry 1.3 MB of it.
 * jupyter_bokeh's widget view calls `window.Bokeh.require` when it renders: the panel renderer
 * awaits this before it shows the live widget.
 */

/** The route of the server extension, under the server's base URL. */
export const BOKEH_PATH = 'ktune/static/bokeh/bokeh.min.js';

let loading: Promise<boolean> | null = null;

/**
 * Resolve true once `window.Bokeh` exists (loaded here or by anyone else), false when the
 * script could not be loaded (the server extension is not enabled): the caller says so.
 */
export function ensureBokeh(baseUrl: string): Promise<boolean> {
  if ((window as any).Bokeh) {
    return Promise.resolve(true);
  }
  if (!loading) {
    loading = new Promise<boolean>(resolve => {
      const script = document.createElement('script');
      script.src = baseUrl.replace(/\/?$/, '/') + BOKEH_PATH;
      script.async = true;
      script.onload = () => resolve(Boolean((window as any).Bokeh));
      script.onerror = () => {
        loading = null; // a later render may try again
        resolve(false);
      };
      document.head.appendChild(script);
    });
  }
  return loading;
}
