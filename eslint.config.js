/**
 * ESLint for the labextension's TypeScript (labextension/src), run by tests/test_lint.py
 * beside `tsc --noEmit`: ESLint's and typescript-eslint's recommended rules, but `any`.
 * The code reaches untyped objects through `any` on purpose: the global Bokeh that the
 * server's script defines, the widget model's get/set, and the shell's private layout.
 * A name that starts with `_` is unused on purpose (a field taken out of an object with the
 * rest syntax, so that the rest lacks it).
 */
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');

module.exports = tseslint.config(
  { ignores: ['lib/', 'node_modules/', 'jupyter_ktune/', 'ui-tests/', 'coverage/'] },
  {
    files: ['labextension/src/**/*.ts', 'labextension/src/**/*.tsx'],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { varsIgnorePattern: '^_', argsIgnorePattern: '^_', ignoreRestSiblings: true }
      ]
    }
  }
);
