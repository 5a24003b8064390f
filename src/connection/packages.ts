/**
 * Loads an npm package that tendril needs only sometimes (ssh2 for the
 * `ssh` method, esbuild for module analysis). The specifier is a variable
 * on purpose: an application bundler that meets tendril leaves these
 * packages (and ssh2's native addons) alone, and a child that never
 * connects over SSH is never sent ssh2.
 * @returns the package's exports (for CommonJS, `module.exports`).
 */
export async function importPackage<T>(name: string): Promise<T> {
  const namespace = (await import(/* webpackIgnore: true */ name)) as { default?: T };
  return (namespace.default ?? namespace) as T;
}
