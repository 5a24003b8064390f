import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import * as tendril from 'tendril';
import { ROOT } from './support/procs.js';

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const memberName = (line: string | undefined) =>
  /^ {4}(?:readonly |static |get |set |abstract )*([A-Za-z_$][\w$]*|\[[^\]]+\])/.exec(line ?? '')?.[1];

describe('package', () => {
  test('the README gives the demo and test commands, and CI runs exactly the test command', () => {
    const readme = read('README.md');
    const commands = [...readme.matchAll(/```sh\n([^\n]+)\n```/g)].map((m) => m[1]);
    assert.deepEqual(commands, ['npm install && npm run demo', 'npm install && npm test']);
    const ci = read('.ci/run')
      .split('\n')
      .filter((line) => line && !line.startsWith('#') && !line.startsWith('set ') && !line.startsWith('cd '));
    assert.deepEqual(ci, ['npm install && npm test']);
  });

  test('every error class is exported from the package', () => {
    for (const name of [
      'TendrilError',
      'CallError',
      'TimeoutError',
      'ChannelError',
      'ContextDisconnectedError',
      'BootstrapError',
      'ConnectTimeoutError',
      'MessageTooLargeError',
      'StreamError',
      'UnsupportedValueError',
    ]) {
      assert.equal(typeof (tendril as Record<string, unknown>)[name], 'function', name);
    }
  });

  test('the runtime exports are the documented values only: classes users construct, error classes, four functions', async () => {
    // Types (Context, Receiver, Command, Fleet, Listener...) are in etc/tendril.api.md; these are the values.
    const errors = Object.keys(tendril).filter((name) => name.endsWith('Error'));
    const others = Object.keys(tendril).filter((name) => !name.endsWith('Error'));
    assert.deepEqual(others.sort(), [
      'Channel',
      'ContextPool',
      'Router',
      'Select',
      'describeTarget',
      'escapeTerminalText',
      'joinListener',
      'serviceName',
    ]);
    assert.equal(errors.length, 36, errors.join(', '));
    for (const name of errors) assert.ok((tendril as Record<string, unknown>)[name] instanceof Function, name);
    assert.deepEqual(Object.keys(await import('tendril/child')).sort(), ['callSignal', 'serviceName', 'thisContext']);
  });

  test('every exported class and function carries its own name, as bundled', async () => {
    // esbuild renames some (a clash of names, a class that names itself: `class _Channel`); the build's
    // keepNames puts the names back, and errors' names and brands, and what util.inspect shows, rely on them.
    for (const [name, value] of Object.entries(tendril)) {
      if (typeof value === 'function') assert.equal(value.name, name);
    }
    const router = new tendril.Router();
    try {
      const context = await router.local();
      assert.equal(context.constructor.name, 'Context');
      const error = await context.call(() => Promise.reject(new Error('x'))).catch((e: unknown) => e);
      assert.equal((error as Error).name, 'CallError');
      assert.ok(error instanceof tendril.CallError);
    } finally {
      await router.shutdown();
    }
  });

  test('every exported declaration and public member has a doc comment', () => {
    const missing: string[] = [];
    // Every declaration file the package ships, in every folder: what the API report lists is
    // documented through these, and internal modules are read by contributors.
    const declarations = (readdirSync(join(ROOT, 'dist'), { recursive: true }) as string[])
      .filter((f) => f.endsWith('.d.ts'))
      .sort()
      .map((f): [string, string] => [dirname(f), basename(f)]);
    assert.ok(declarations.length > 100, `only ${declarations.length} declaration files under dist/`);
    for (const [dir, file] of declarations) {
      const lines = read(join('dist', dir, file)).split('\n');
      let inExported = false;
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i] as string;
        const previous = (lines[i - 1] ?? '').trim();
        const documented = previous.endsWith('*/');
        if (/^export (declare )?(class|function|const|interface|type(?= \w)|abstract class)\b/.test(line)) {
          inExported = /\{$/.test(line) && /(class|interface)\b/.test(line);
          if (!documented) missing.push(`${dir}/${file}: ${line.trim()}`);
        } else if (/^\}/.test(line)) {
          inExported = false;
        } else if (inExported && /^ {4}[A-Za-z[]/.test(line) && !/^ {4}(private|protected)\b/.test(line)) {
          // Overloads and getter/setter pairs share the first one's comment.
          const sameAsPrevious = memberName(line) !== undefined && memberName(line) === memberName(lines[i - 1]);
          if (!documented && !sameAsPrevious) missing.push(`${dir}/${file}: ${line.trim()}`);
        }
      }
    }
    assert.deepEqual(missing, [], missing.join('\n'));
  });
});
