/**
 * Loads an npm package the connection layer needs only sometimes (ssh2,
 * ssh-config). The specifier is a variable on purpose: an application
 * bundler that meets tendril leaves these packages (and ssh2's native
 * addons) alone, and a child that never connects over SSH is never sent
 * them.
 * @returns the package's exports (for CommonJS, `module.exports`).
 */
export async function importPackage<T>(name: string): Promise<T> {
  const namespace = (await import(/* webpackIgnore: true */ name)) as { default?: T };
  return (namespace.default ?? namespace) as T;
}
