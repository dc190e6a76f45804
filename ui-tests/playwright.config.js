/**
 * Galata/Playwright configuration for jupyter-ktune's browser tests.
 *
 * The browser is Debian's chromium (`apt-get install -y chromium`), never a
 * Playwright download: install with PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 and
 * never run `playwright install`. Video is off (it would need Playwright's
 * own ffmpeg). KTUNE_UI_PORT picks the server's port (default 8888).
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.KTUNE_UI_PORT || '8888';
process.env.TARGET_URL = process.env.TARGET_URL || `http://127.0.0.1:${port}`;

module.exports = {
  ...baseConfig,
  reporter: [['list']],
  timeout: 120 * 1000,
  workers: 1,
  outputDir: 'test-results/artifacts',
  use: {
    ...baseConfig.use,
    baseURL: process.env.TARGET_URL,
    video: 'off',
    trace: 'off',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync'
      ]
    }
  },
  webServer: {
    command: 'jlpm start',
    url: `${process.env.TARGET_URL}/lab`,
    timeout: 120 * 1000,
    reuseExistingServer: false
  }
};
