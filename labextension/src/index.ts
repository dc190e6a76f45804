import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

/**
 * The jupyter-ktune frontend plugin.
 *
 * For now it only activates. The `%%kernel` highlighting and diagnostics
 * plugins arrive with the JupyterLab-extension issue; keep this file tiny
 * (id, requires, activate) and put their logic in separate modules.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ktune:plugin',
  description: 'Frontend support for the jupyter_ktune %%kernel cell magic.',
  autoStart: true,
  activate: (_app: JupyterFrontEnd): void => {
    // Nothing to set up yet.
  }
};

export default plugin;
