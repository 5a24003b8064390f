// The test image with Python 3 added, so Mitogen (whose children are
// Python) can enter the same containers as tendril: the containers bench
// (bench/containers.ts) runs both in one container of this image. Built
// once from the test image (apt-get install python3 in a container with
// the host's network, from the archive the image's sources.list names),
// saved with `podman save` beside the test image's tarball in
// .cache/images/, and loaded into each bench's own store (about 3 s).
import { existsSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CONTAINER_LIMITS, nodeImageTarball, type PodmanBed } from '../../test/support/containers.js';

/** The image's name in the bed's store. */
export const PYTHON_IMAGE = 'localhost/tendril-bench-python:latest';

/**
 * Loads the image into `bed`'s store, building and caching it first when
 * the cache has none for the current test image (the cached archive is
 * named after the test image's tarball, so a new recipe rebuilds it).
 * Returns the image's name.
 * @throws Error quoting podman or apt-get when the image cannot be built or loaded.
 */
export function loadPythonImage(bed: PodmanBed): string {
  const base = nodeImageTarball();
  const archive = join(dirname(base), `${basename(base, '.tar')}-python3.tar`);
  if (!existsSync(archive)) {
    const builder = `tendril-bench-python-build-${process.pid}`;
    // Written beside its final name and renamed: another run building it at the same time never reads half a file.
    const partial = `${archive}.${process.pid}.partial`;
    try {
      bed.podman([
        'run',
        '--name',
        builder,
        '--network',
        'host',
        ...CONTAINER_LIMITS,
        bed.image,
        'sh',
        '-c',
        'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*',
      ]);
      bed.podman(['commit', '--quiet', builder, PYTHON_IMAGE]);
      bed.podman(['save', '--quiet', '--format', 'docker-archive', '--output', partial, PYTHON_IMAGE]);
      renameSync(partial, archive);
    } catch (error) {
      const stderr = String((error as { stderr?: string }).stderr ?? '').trim();
      throw new Error(`the bench's Python image could not be built: ${stderr || (error as Error).message}`);
    } finally {
      rmSync(partial, { force: true });
      bed.podman(['rm', '--force', '--ignore', builder]);
    }
    return PYTHON_IMAGE;
  }
  bed.podman(['load', '--quiet', '--input', archive]);
  return PYTHON_IMAGE;
}
